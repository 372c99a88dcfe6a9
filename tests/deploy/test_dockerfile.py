"""The Dockerfile, linted for issue 12's rules (no engine builds it here; docs/operations.md says how):
python:3.11-slim, multi-stage, a numeric non-root uid, no build tools or pip cache in the final stage,
`jr2-actors serve` as the entry point — and a .dockerignore that keeps what the build copies."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.manifests import one
from tests.support.paths import MANIFESTS

ROOT = MANIFESTS.parent
BASE_IMAGE = "python:3.11-slim"
ENTRYPOINT = ["jr2-actors", "serve"]
# What installs software or builds it: none of it may run in the final stage.
INSTALLERS = re.compile(r"\b(apt-get\s+install|apt\s+install|apk\s+add|dnf\s+install|yum\s+install|"
                        r"pip3?\s+install|-m\s+pip\s+install|curl|wget)\b")
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|cc|make|build-essential|git|cargo|rustc)\b")
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSWORD|SIGNING|_KEY\b", re.IGNORECASE)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int  # -1 before the first FROM


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    out: list[Instruction] = []
    stage, pending = -1, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line, pending = pending + line, ""
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append(Instruction(keyword, args.strip(), stage))
    return out


def problems(text: str, *, uid: int | None = None) -> list[str]:
    """Every rule of issue 12 the Dockerfile breaks; [] when it keeps them all."""
    found: list[str] = []
    steps = instructions(text)
    args = dict(a.args.split("=", 1) for a in (s for s in steps if s.keyword == "ARG" and s.stage == -1)
                if "=" in a.args)
    froms = [s for s in steps if s.keyword == "FROM"]
    if len(froms) < 2:
        found.append("not multi-stage: the final stage must not be the one that builds")
    for step in froms:
        image = step.args.split()[0]
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), image)
        if image != BASE_IMAGE:
            found.append(f"FROM {image}: every stage is {BASE_IMAGE}")
    last = max((s.stage for s in steps), default=-1)
    final = [s for s in steps if s.stage == last]
    users = [s.args for s in final if s.keyword == "USER"]
    if not users:
        found.append("the final stage sets no USER: it would run as root")
    else:
        user, _, group = users[-1].partition(":")
        if not user.isdigit() or int(user) == 0 or (group and (not group.isdigit() or int(group) == 0)):
            found.append(f"USER {users[-1]}: a numeric non-root uid (and gid), so runAsNonRoot can check it")
        elif uid is not None and int(user) != uid:
            found.append(f"USER {user}: the Deployment runs as {uid}")
    for step in final:
        if step.keyword == "RUN" and (INSTALLERS.search(step.args) or BUILD_TOOLS.search(step.args)):
            found.append(f"RUN {step.args[:60]}: installs or builds in the final stage")
        if step.keyword == "COPY" and "--from=" not in step.args:
            found.append(f"COPY {step.args}: the final stage copies only what the build stage made")
    for step in steps:
        if step.keyword == "ADD":
            found.append(f"ADD {step.args}: COPY says what it does (ADD fetches and unpacks)")
        names = [token.split("=", 1)[0] for token in shlex.split(step.args)] if step.keyword in ("ENV", "ARG") else []
        for name in names:
            if SECRET_NAMES.search(name):
                found.append(f"{step.keyword} {name}: a secret never goes in the image")
        if step.keyword == "RUN" and re.search(r"\bpip3?\s+install\b|-m\s+pip\s+install\b", step.args) \
                and "--no-cache-dir" not in step.args and not any(
                    s.keyword == "ENV" and "PIP_NO_CACHE_DIR=1" in s.args and s.stage == step.stage for s in steps):
            found.append(f"RUN {step.args[:60]}: pip keeps its cache")
    entry = [s for s in final if s.keyword == "ENTRYPOINT"]
    try:
        form = json.loads(entry[-1].args) if entry else None
    except ValueError:
        form = None
    if form != ENTRYPOINT:
        found.append(f"ENTRYPOINT must be the exec form {json.dumps(ENTRYPOINT)} (SIGTERM reaches serve)")
    return found


DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def deployment_uid() -> int:
    return int(one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"])


def test_the_dockerfile_keeps_every_rule() -> None:
    assert problems(DOCKERFILE, uid=deployment_uid()) == []


@pytest.mark.parametrize(("change", "words"), [
    (lambda t: t.replace("USER 10001:10001\n", ""), "sets no USER"),
    (lambda t: t.replace("USER 10001:10001", "USER root"), "numeric non-root"),
    (lambda t: t.replace("USER 10001:10001", "USER 0"), "numeric non-root"),
    (lambda t: t.replace("USER 10001:10001", "USER jr2"), "numeric non-root"),
    (lambda t: t.replace("USER 10001:10001", "USER 10002"), "the Deployment runs as 10001"),
    (lambda t: t.replace("COPY --from=build /opt/jr2 /opt/jr2",
                         "RUN apt-get update && apt-get install -y gcc"), "installs or builds"),
    (lambda t: t.replace("COPY --from=build /opt/jr2 /opt/jr2", "RUN pip install --no-cache-dir jr2-actors"),
     "installs or builds"),
    (lambda t: t.replace("COPY --from=build /opt/jr2 /opt/jr2", "COPY jr2_actors /opt/jr2"), "copies only"),
    (lambda t: t.replace('ENTRYPOINT ["jr2-actors", "serve"]', "ENTRYPOINT jr2-actors serve"), "exec form"),
    (lambda t: t.replace('ENTRYPOINT ["jr2-actors", "serve"]', 'CMD ["jr2-actors", "serve"]'), "exec form"),
    (lambda t: t.replace("ARG PYTHON_IMAGE=python:3.11-slim", "ARG PYTHON_IMAGE=python:3.12"), "every stage"),
    (lambda t: t.split("FROM ${PYTHON_IMAGE}\n")[0].replace(" AS build", ""), "not multi-stage"),
    (lambda t: t.replace("--no-cache-dir ", "").replace("ENV PIP_NO_CACHE_DIR=1 \\\n   ", "ENV"), "cache"),
    (lambda t: t.replace("    HOME=/tmp", "    HOME=/tmp \\\n    JR2_SIGNING_KEY=abc"), "a secret never"),
    (lambda t: t + "ADD https://example.test/x.tar.gz /x\n", "ADD"),
])
def test_the_lint_catches_each_broken_rule(change: object, words: str) -> None:
    assert callable(change)
    broken = change(DOCKERFILE)
    assert broken != DOCKERFILE, "the change did not apply"
    found = problems(broken, uid=deployment_uid())
    assert any(words in p for p in found), found


def test_continuations_and_comments_are_read_as_one_instruction() -> None:
    steps = instructions("FROM a AS b\nRUN one \\\n  # a comment\n  two\nFROM c\nUSER 1\n")
    assert [(s.keyword, s.args, s.stage) for s in steps] == [("FROM", "a AS b", 0), ("RUN", "one two", 0),
                                                             ("FROM", "c", 1), ("USER", "1", 1)]


# -- .dockerignore --------------------------------------------------------------------------------------

def ignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _regex(glob: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex: `**` crosses directories, `*` and `?` do not."""
    out = ""
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(glob[i], re.escape(glob[i]))
            i += 1
    return re.compile(out + r"\Z")


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path, or a directory above it, decides (`!` keeps)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        regex = _regex(pattern.lstrip("!"))
        if any(regex.match(p) for p in prefixes):
            result = not pattern.startswith("!")
    return result


def copied_sources() -> list[str]:
    sources = []
    for step in instructions(DOCKERFILE):
        if step.keyword == "COPY" and "--from=" not in step.args:
            sources.extend(shlex.split(step.args)[:-1])
    return sources


def test_the_build_context_keeps_what_the_build_copies() -> None:
    patterns = ignore_patterns()
    sources = copied_sources()
    assert {"jr2_actors", "manifests/crds", "setup.cfg"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not ignored(source, patterns), f"{source} is copied but .dockerignore leaves it out"
    for shipped in sorted((ROOT / "manifests" / "crds").glob("*.yaml")):
        assert not ignored(str(shipped.relative_to(ROOT)), patterns)


@pytest.mark.parametrize("path", [".git", "tests/test_dockerfile.py", "jr2_actors/__pycache__/x.pyc",
                                  "state.db", "state.db-wal", "history.db", ".venv/bin/python",
                                  "manifests/overlays/x.yaml"])
def test_the_build_context_leaves_out_what_the_image_never_needs(path: str) -> None:
    assert ignored(path, ignore_patterns())


def test_the_ignore_matcher_honours_negation() -> None:
    assert not ignored("docs/keep.md", ["docs", "!docs/keep.md"])
    assert ignored("docs/other.md", ["docs", "!docs/keep.md"])


def test_the_image_exposes_the_port_the_deployment_listens_on() -> None:
    ports = [s.args for s in instructions(DOCKERFILE) if s.keyword == "EXPOSE"]
    container = one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert ports == [" ".join(str(p["containerPort"]) for p in container["ports"])]  # the API's and the probes'
    assert Path("/var/lib/jr2") == Path(next(s.args for s in instructions(DOCKERFILE)
                                             if s.keyword == "WORKDIR" and s.stage == 1))
