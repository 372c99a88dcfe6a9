"""A Lease renewal's merge patch, the client's side of it: `KubeClient.merge_patch` (urllib3 straight on the
pool requests uses, `kube/direct.py`) against the same PATCH sent through `requests.Session.request` (the
client's ordinary path, `KubeClient._json`), alternated round by round against one in-process fake cluster.
Figures are the calling thread's CPU (`time.thread_time`) per patch, so the fake's own work is not in them.
"a lighter call for the Lease patch where it pays".

    python bench/lease_patch.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import Row, emit
from jr2_actors.fake.cluster import FakeCluster
from jr2_actors.kube.client import MERGE_PATCH_CONTENT_TYPE, KubeClient
from jr2_actors.kube.kinds import SANDBOX
from jr2_actors.workspace.manifest import lease_patch

NAME = "ws-bench-lease"


def per_call_ms(send: Callable[[], object], calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        send()
    return (time.thread_time() - started) / calls * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="patches per side and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    with FakeCluster() as cluster:
        client: KubeClient = cluster.client()
        made = client.create(SANDBOX, {"metadata": {"name": NAME}, "spec": {"image": "jr2-sandbox:dev", "port": 8080}})
        uid = made["metadata"]["uid"]
        path = SANDBOX.path(cluster.access().namespace, NAME)

        def direct() -> object:
            return client.merge_patch(SANDBOX, NAME, lease_patch(time.time(), uid))

        def session() -> object:
            with client.writes:
                return client._json("PATCH", path, body=lease_patch(time.time(), uid),
                                    content_type=MERGE_PATCH_CONTENT_TYPE, verb="patch")

        per_call_ms(direct, 50), per_call_ms(session, 50)  # warm both: connections made, code paths hot
        ours, base = [], []
        for _ in range(args.rounds):
            base.append(per_call_ms(session, args.calls))
            ours.append(per_call_ms(direct, args.calls))
        client.close()
    o, b = statistics.median(ours), statistics.median(base)
    print(f"{'figure':44}{'ours':>10}{'baseline':>10}{'ratio':>8}")
    print(f"{'Lease patch, client CPU ms (median of rounds)':44}{o:10.3f}{b:10.3f}{o / b:8.2f}")
    print(f"rounds: direct {[round(x, 3) for x in ours]} ms, requests {[round(x, 3) for x in base]} ms")
    emit("lease_patch", [Row("Lease merge patch: client CPU per call (direct vs requests' Session.request)",
                             o, b, "ms", "< 1")])


if __name__ == "__main__":
    main()
