"""Where a test file lives: `tests/<family>/`, one folder per family of the package (docs/architecture.md's
layout map), plus the tiers that are not a family (conformance, real, outside).

`family_of("test_store_faults.py")` is `"store"`: the longest prefix of `PREFIXES` that the file's name
starts with. `python -m tests.support.families` prints a `git mv` line for every test file still flat in
tests/ (a branch that added one before the folders existed), so placing them after a merge is one paste;
`python -m tests.support.families --docs FILE...` rewrites each `tests/test_x.py` a document names to the
file's folder.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent

# One folder per family of jr2_actors/ (commands/ and cli.py are `cli`; orchestrator.py, revival.py and
# telemetry.py are `orchestrator`), and four that hold what no single family owns: `deploy` (manifests/, the
# Dockerfile, the CRDs), `fuzz` (every parser of outside input at once), `house` (rules over the whole
# repository: layout, imports, machines, metric names, this suite's own shape), `testing` (the virtual clock
# other teams' suites use).
FAMILIES = frozenset({
    "agent", "api", "cli", "console", "deploy", "fake", "fuzz", "harness", "house", "kube", "net", "orchestrator",
    "run", "shell", "sim", "store", "testing", "values", "watch", "workspace",
})
# Folders that are not families and keep their own rules: the client conformance matrix, the real-cluster
# tier, the outside suite (written from README.md and docs alone, so it imports nothing of tests/).
TIERS = frozenset({"conformance", "real", "outside"})

# A test file's name → its family; the longest prefix that matches wins (`test_rbac_log` before `test_rbac`).
PREFIXES: dict[str, str] = {
    "test_agent": "agent", "test_seat": "agent", "test_turn": "agent", "test_stop_quiet": "agent",
    "test_stop_shut_pool": "agent",
    "test_api": "api", "test_sse": "api", "test_admission": "api", "test_idempotent": "api",
    "test_health": "api",
    "test_cli": "cli", "test_serve": "cli",
    "test_stop_exit": "cli", "test_demo": "cli", "test_top": "cli", "test_readme_demo": "cli",
    "test_manifests": "deploy", "test_dockerfile": "deploy", "test_crd": "deploy", "test_rbac_log": "deploy",
    "test_fake": "fake", "test_rbac": "fake", "test_fixture": "fake", "test_readme_embedding": "fake",
    "test_fuzz": "fuzz", "test_hostile": "fuzz",
    "test_harness": "harness", "test_briefing": "harness", "test_pick_briefing": "harness",
    "test_memory_kills": "harness", "test_tokens": "harness", "test_restart": "harness",
    "test_layout": "house", "test_import_graph": "house", "test_machines": "house",
    "test_metric_names": "house", "test_bench": "house", "test_suite": "house", "test_contributing": "house",
    "test_docs": "house",
    "test_console": "console",
    "test_import_contracts": "house", "test_library_guards": "house", "test_size_budget": "house",
    "test_client": "kube", "test_access": "kube", "test_frames": "kube", "test_chunk": "kube",
    "test_kube": "kube",
    "test_net": "net",
    "test_orchestrator": "orchestrator", "test_runs_on_fake": "orchestrator", "test_thread_budget": "orchestrator",
    "test_stop_budget": "orchestrator",
    "test_stop_late": "orchestrator", "test_stop_together": "orchestrator", "test_revival": "orchestrator",
    "test_telemetry": "orchestrator",
    "test_run": "run", "test_feed": "run", "test_notices": "run", "test_readlog": "run", "test_restore": "run",
    "test_stream": "run", "test_supervision": "run",
    "test_shell": "shell", "test_log": "shell", "test_metrics": "shell", "test_last_answer": "shell",
    "test_take_order": "shell", "test_actor": "shell", "test_mailbox": "shell",
    "test_sim": "sim",
    "test_store": "store", "test_sweep": "store",
    "test_virtual": "testing", "test_testing": "testing",
    "test_values": "values", "test_sizes": "values", "test_workflow": "values",
    "test_watch": "watch", "test_identity": "watch", "test_sandbox": "watch",
    "test_workspace": "workspace", "test_lease": "workspace", "test_renewal": "workspace",
    "test_wait_reasons": "workspace",
}


def family_of(name: str) -> str | None:
    """The family a test file named `name` (`test_x.py` or `test_x`) belongs in; None: no prefix says."""
    stem = name.removesuffix(".py")
    best = max((p for p in PREFIXES if stem.startswith(p)), key=len, default=None)
    return None if best is None else PREFIXES[best]


def flat_test_files(tests: Path = TESTS) -> list[Path]:
    """Test files directly in tests/, where none belongs."""
    return sorted(tests.glob("test_*.py"))


FLAT_MENTION = re.compile(r"\btests/(test_\w+\.py)")


def placed_mentions(text: str) -> str:
    """`text` with each `tests/test_x.py` it names rewritten to `tests/<family>/test_x.py` (a name no prefix
    places is left as it is)."""
    def placed(match: re.Match[str]) -> str:
        family = family_of(match.group(1))
        return match.group(0) if family is None else f"tests/{family}/{match.group(1)}"
    return FLAT_MENTION.sub(placed, text)


def main(argv: list[str]) -> int:
    """A `git mv` line for each flat test file (or each file named), from the repository's root; with
    `--docs`, each file named has its mentions of flat test files rewritten in place."""
    if argv[:1] == ["--docs"]:
        for name in argv[1:]:
            doc = Path(name)
            doc.write_text(placed_mentions(doc.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    paths = [Path(a) for a in argv] or flat_test_files()
    unknown = 0
    for path in paths:
        family = family_of(path.name)
        if family is None:
            print(f"# {path.name}: no prefix names its family; pick one of {', '.join(sorted(FAMILIES))}",
                  file=sys.stderr)
            unknown += 1
            continue
        print(f"git mv tests/{path.name} tests/{family}/{path.name}")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
