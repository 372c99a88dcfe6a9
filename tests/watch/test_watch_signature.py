"""The de-duplication signature, read straight from each frame's object, decides what is delivered; the typed
view is built only for a frame that is."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from jr2_actors.kube.frames import WatchEvent
from jr2_actors.watch import deliveries as deliveries_module
from jr2_actors.watch.core import Registered, WatchCore, deliveries
from jr2_actors.watch.deliveries import SandboxGone, SandboxSeen
from jr2_actors.watch.identity import SandboxKey
from jr2_actors.watch.sandbox import SandboxView, view
from jr2_actors.watch.stream import FrameReceived, Listed, Started, WatchOpened
from tests.support.sandboxes import sandbox

A = SandboxKey("run-a", "F-1")


class Watch:
    """One core, started and watching, registered for A; what it delivered."""

    def __init__(self) -> None:
        self.core = WatchCore()
        for step in (Registered(A), Started(), Listed([], "1"), WatchOpened(1)):
            self.core.step(step, 0.0)
        self.delivered: list[Any] = []

    def frame(self, obj: dict[str, Any]) -> None:
        step = self.core.step(FrameReceived(1, WatchEvent("MODIFIED", obj, obj["metadata"]["resourceVersion"])), 1.0)
        self.delivered += deliveries(step)


def edited(obj: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    edit(out)
    return out


BASE = sandbox("run-a", rv=6, phase="Ready", scheduled="Scheduled", waiting="ImagePullBackOff")

# Each changes what the signature does not cover, and keeps the resourceVersion: a repeat of the same version.
OUTSIDE: dict[str, Callable[[dict[str, Any]], None]] = {
    "endpoint": lambda o: o["status"].update(endpoint="10.0.0.9:8080"),
    "node": lambda o: o["status"].update(node="n-2"),
    "podUID": lambda o: o["status"].update(podUID="p-2"),
    "restart count": lambda o: o["status"].update(harness={"restartCount": 3}),
    "a condition's message": lambda o: o["status"]["conditions"][0].update(message="placed on n-2"),
    "a condition other than Scheduled": lambda o: o["status"]["conditions"].append(
        {"type": "Ready", "status": "False", "reason": "Starting"}),
    "a waiting container's message": lambda o: o["status"]["waiting"][0].update(message="back-off 10s"),
    "an annotation": lambda o: o["metadata"]["annotations"].update({"jr2.dev/keepalive": "2026-12-05T02:00:00Z"}),
    "the spec": lambda o: o["spec"].update(port=9090),
}

# Each changes one field the signature covers (a newer version: an older one is dropped as older).
COVERED: dict[str, Callable[[dict[str, Any]], None]] = {
    "resourceVersion": lambda o: o["metadata"].update(resourceVersion="7"),
    "phase": lambda o: o["status"].update(phase="Lost"),
    "the Scheduled condition's reason": lambda o: o["status"]["conditions"][0].update(reason="Unschedulable"),
    "a waiting reason": lambda o: o["status"]["waiting"][0].update(reason="CrashLoopBackOff"),
    "a second waiting container": lambda o: o["status"]["waiting"].append({"container": "x", "reason": "Err"}),
}


def seen_after(change: dict[str, Any]) -> list[Any]:
    w = Watch()
    w.frame(BASE)
    w.delivered.clear()
    w.frame(change)
    return w.delivered


@pytest.mark.parametrize("what", OUTSIDE)
def test_a_frame_differing_only_outside_the_signature_is_not_delivered(what: str) -> None:
    assert seen_after(edited(BASE, OUTSIDE[what])) == []


@pytest.mark.parametrize("what", COVERED)
def test_a_frame_differing_in_a_covered_field_is_delivered(what: str) -> None:
    changed = edited(BASE, COVERED[what])
    (seen,) = seen_after(changed)
    assert isinstance(seen, SandboxSeen) and seen.sandbox == view(changed)


def test_a_new_uid_under_the_same_key_is_the_old_ones_end_and_the_new_ones_start() -> None:
    changed = edited(BASE, lambda o: o["metadata"].update(uid="uid-2"))
    gone, seen = seen_after(changed)
    assert isinstance(gone, SandboxGone) and gone.reason == "replaced" and gone.uid == BASE["metadata"]["uid"]
    assert isinstance(seen, SandboxSeen) and seen.sandbox.uid == "uid-2"


def test_the_typed_view_is_built_only_for_a_frame_that_is_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def counting(obj: Mapping[str, Any]) -> SandboxView:
        built.append(obj["metadata"]["resourceVersion"])
        return view(obj)

    monkeypatch.setattr(deliveries_module, "view", counting)
    w = Watch()
    w.frame(BASE)
    for edit in OUTSIDE.values():  # repeats of version 6, each with something outside the signature changed
        w.frame(edited(BASE, edit))
    w.frame(edited(BASE, lambda o: o["metadata"].update(resourceVersion="5")))  # older
    w.frame(edited(BASE, COVERED["phase"]))
    assert [type(x).__name__ for x in w.delivered] == ["SandboxSeen", "SandboxSeen"]
    assert built == ["6", "6"]  # the first frame and the phase change; no view for the eleven dropped
