"""Every metric name the package defines: each family's `metrics.py` names its metrics in upper-case
constants starting `jr2_` (tests/house/test_metric_names.py holds that each is defined once)."""

from __future__ import annotations

from types import ModuleType

from jr2_actors.agent import metrics as harness_metrics
from jr2_actors.kube import metrics as kube_metrics
from jr2_actors.run import metrics as run_metrics
from jr2_actors.shell import metrics as shell_metrics
from jr2_actors.store import metrics as store_metrics
from jr2_actors.watch import metrics as watch_metrics
from jr2_actors.workspace import metrics as workspace_metrics
from tests.support.paths import DOCS

OPERATIONS = DOCS / "operations.md"
FAMILIES = (shell_metrics, watch_metrics, workspace_metrics, store_metrics, kube_metrics, harness_metrics,
            run_metrics)


def names_of(module: ModuleType) -> list[str]:
    return [value for name, value in vars(module).items()
            if name.isupper() and isinstance(value, str) and value.startswith("jr2_")]


NAMES = {name for module in FAMILIES for name in names_of(module)}
