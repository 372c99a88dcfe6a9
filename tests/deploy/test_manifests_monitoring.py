"""manifests/monitoring/: the alerts the operations guide explains, shipped as a PrometheusRule, kept out of
the base (which must apply without that CRD); among them, the state volume's, which fire before it fills."""

from __future__ import annotations

import re

import yaml

from jr2_actors.api import budget
from tests.support.metric_names import NAMES, OPERATIONS
from tests.support.paths import MANIFESTS

# The families' metrics, and serve's own admission budget's (api/budget.py), which /metrics serves beside them.
SERVED = NAMES | {value for name, value in vars(budget).items() if name.isupper() and isinstance(value, str)
                  and value.startswith("jr2_")}

RULE = MANIFESTS / "monitoring" / "prometheusrule.yaml"


def rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULE.read_text(encoding="utf-8"))
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def test_the_rule_is_the_guides_list_and_not_in_the_base() -> None:
    guide = OPERATIONS.read_text(encoding="utf-8")
    block = guide[guide.index("### The alerts to set"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert rules() == [rule for group in yaml.safe_load(block)["groups"] for rule in group["rules"]]
    base = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))
    assert "monitoring" not in base["resources"]
    kustomization = yaml.safe_load((RULE.parent / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["resources"] == ["prometheusrule.yaml"]


def test_every_metric_an_alert_reads_is_one_the_orchestrator_serves() -> None:
    for rule in rules():
        for name in re.findall(r"\bjr2_[a-z0-9_]+", str(rule["expr"])):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in SERVED or name in SERVED, f"{rule['alert']}: {name} is no metric of ours"


def test_the_state_volume_is_alerted_before_it_fills() -> None:
    by_name = {str(rule["alert"]): str(rule["expr"]) for rule in rules()}
    assert "predict_linear(jr2_store_volume_available_bytes" in by_name["Jr2StateVolumeFillingUp"]
    assert "jr2_store_volume_capacity_bytes" in by_name["Jr2StateVolumeLow"]


def test_the_claim_is_what_the_sizing_formula_gives_for_its_stated_rate() -> None:
    claim = next(d for d in yaml.safe_load_all((MANIFESTS / "orchestrator" / "pvc.yaml").read_text(encoding="utf-8"))
                 if d)
    size = claim["spec"]["resources"]["requests"]["storage"]
    assert re.fullmatch(r"[0-9]+Gi", size)
    runs_a_second, week, bytes_a_run = 1.5, 7 * 24 * 3600, 1070  # the guide's stated figures
    assert 2 * runs_a_second * week * bytes_a_run + 256 * 2**20 <= int(size[:-2]) * 2**30
    assert "2 × (runs a second × 604,800 s × bytes a finished run) + 256 MiB" in OPERATIONS.read_text(encoding="utf-8")

