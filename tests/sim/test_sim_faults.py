"""The simulation plays the cluster's faults through the fake's own levers (`cluster.faults`)."""

from __future__ import annotations

from jr2_actors.fake.faults import Faults
from jr2_actors.sim.runner import cluster_lever
from jr2_actors.sim.schedule import FAULT_KINDS, Fault, draw
from tests.support.paths import DOCS

# the store, a cancel and the process are the sim's own, not the cluster's
SIM_OWN = {"cancel", "store-unwritable", "restart-clean", "restart-crash"}


def test_every_fault_kind_is_a_lever_of_the_fake_or_one_of_the_sims_own() -> None:
    played = {kind for kind in FAULT_KINDS if cluster_lever(_any_fault(kind), "sbx") is not None}
    assert played | SIM_OWN == set(FAULT_KINDS)
    assert not played & SIM_OWN


def test_each_drawn_cluster_fault_is_a_call_the_fakes_schedule_reader_accepts() -> None:
    seen = set()
    for seed in range(1, 60):
        for fault in draw(seed).faults:
            lever = cluster_lever(fault, "jr2-r1-w1")
            if lever is None:
                continue
            name, params = lever
            calls = Faults.load([{"at": fault.at, "fault": name, **params}])  # refuses a wrong name or parameter
            assert calls[0].name == name
            seen.add(fault.kind)
    assert len(seen) >= 10  # the seeds drew most kinds, so the check above covered them


def _any_fault(kind: str) -> Fault:
    for seed in range(1, 400):
        for fault in draw(seed).faults:
            if fault.kind == kind:
                return fault
    raise AssertionError(f"no seed drew {kind}")


def test_the_table_of_faults_in_docs_reliability_names_the_lever_each_kind_is_played_with() -> None:
    import re

    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    named = dict(re.findall(r"^\| `([a-z-]+)` \|.*\| `cluster\.faults\.([a-z_]+)` \|$", text, re.MULTILINE))
    played = {kind: lever[0] for kind in FAULT_KINDS if (lever := cluster_lever(_any_fault(kind), "sbx"))}
    assert named == played
