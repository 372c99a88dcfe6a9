"""The "which clients, which versions" table of docs/fake-cluster.md, produced from the suite itself:

    python -m tests.conformance.table

prints it for the clients installed here (paste it between the markers in the doc). A test checks the
doc's table names every client the suite covers, with the checks it runs and the gaps it states.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from tests.conformance.checks import CHECKS
from tests.conformance.clients import CLIENTS, NOT_OFFERED, version_of

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"
OPERATOR_CHECK = "operator: create, field and delete handlers behind its finalizer; its Events"
HEADER = ("| Client | Version the suite ran | Required (setup.cfg `test`) | Checks it passes | Not offered by the "
          "client |\n|---|---|---|---|---|")


def required(package: str) -> str:
    if package == "kubectl":
        return "on PATH, else skipped"
    for line in SETUP_CFG.read_text().splitlines():
        m = re.match(rf"\s+{re.escape(package)}\s*(>=.*)$", line)
        if m:
            return m.group(1)
    return "?"


def rows() -> list[tuple[str, str, str, str, str]]:
    out = []
    for client in CLIENTS:
        ran = [c for c in CHECKS if (client.name, c) not in NOT_OFFERED]
        gaps = [f"{c} ({why})" for (n, c), why in NOT_OFFERED.items() if n == client.name]
        out.append((client.name, version_of(client), required(client.package), ", ".join(ran),
                    "; ".join(gaps) or "—"))
    out.append(("kopf", metadata.version("kopf"), required("kopf"), OPERATOR_CHECK, "—"))
    return out


def render() -> str:
    return "\n".join([HEADER, *(f"| {' | '.join(f'`{r[0]}`' if i == 0 else r[i] for i in range(5))} |"
                                for r in rows())])


if __name__ == "__main__":
    print(render())
