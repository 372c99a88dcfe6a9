"""Build the real control plane (realcluster/main.go: etcd + kube-apiserver in one binary), cached.

The binary lives outside the checkout, in `$JR2_REALCLUSTER_CACHE` (default `~/.cache/jr2-realcluster`),
under a key that hashes go.mod, go.sum and main.go (and the Go release and platform): a build happens only
when one of them changes, and a cache hit costs three file reads. Go's own module and build caches are
Go's defaults (`go env GOMODCACHE GOCACHE`), outside the checkout too; `-mod=readonly` keeps `go build`
from writing go.mod or go.sum, so a build leaves `git status` clean.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent
KEYED = ("go.mod", "go.sum", "main.go")
BINARY = "realcluster"


class GoMissing(RuntimeError):
    """No `go` on PATH: the real control plane cannot be built here."""


class BuildFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Built:
    path: Path
    seconds: float  # the build's wall time; 0.0 on a cache hit
    cached: bool


def cache_root() -> Path:
    env = os.environ.get("JR2_REALCLUSTER_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jr2-realcluster"


def go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise GoMissing("go is not on PATH: the real control plane (realcluster/) cannot be built")
    return go


def _go_version(go: str) -> str:
    out = subprocess.run([go, "env", "GOVERSION", "GOOS", "GOARCH"], capture_output=True, text=True,
                         check=True, timeout=60)
    return " ".join(out.stdout.split())


def key(go: str) -> str:
    digest = hashlib.sha256(_go_version(go).encode() + b"\0" + _ldflags().encode())
    for name in KEYED:
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def release() -> str:
    """The k8s.io/kubernetes release go.mod requires (v1.37.2)."""
    found = re.search(r"^\tk8s\.io/kubernetes (v\S+)$", (SOURCE / "go.mod").read_text(), re.M)
    if found is None:
        raise BuildFailed("realcluster/go.mod requires no k8s.io/kubernetes release")
    return found.group(1)


def _ldflags() -> str:
    """Stamp the release as Kubernetes' own build does (hack/lib/version.sh), so /version and every client's
    skew check see v1.37.x, not `v0.0.0-master`; -s -w drop the symbol tables (a third of the size)."""
    version = release()
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = " ".join(f"-X {pkg}.{name}={value}" for pkg in ("k8s.io/component-base/version",
                                                              "k8s.io/client-go/pkg/version")
                     for name, value in (("gitVersion", version), ("gitMajor", major), ("gitMinor", minor),
                                         ("gitTreeState", "clean")))
    return f"-s -w {stamp}"


def build(*, quiet: bool = False) -> Built:
    """The binary for this source, built if the cache has none. Concurrent callers (two pytest sessions,
    CI's step and a test) wait on one lock: one builds, the others then find it."""
    go = go_binary()
    root = cache_root()
    target = root / key(go) / BINARY
    if target.exists():
        return Built(target, 0.0, True)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return Built(target, 0.0, True)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{BINARY}.partial-{os.getpid()}")
        env = dict(os.environ, CGO_ENABLED="0")
        # Two parallel compiles unless the caller says otherwise: CI's machine has two cores, shared.
        env.setdefault("GOFLAGS", "-p=2")
        cmd = [go, "build", "-mod=readonly", "-trimpath", "-buildvcs=false", f"-ldflags={_ldflags()}",
               "-o", str(partial), "."]
        if not quiet:
            print(f"realcluster: building kube-apiserver and etcd into {target.parent} (cold: minutes)",
                  file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            done = subprocess.run(cmd, cwd=SOURCE, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise BuildFailed(f"go build failed ({done.returncode}):\n{done.stderr[-4000:]}")
            os.replace(partial, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        seconds = time.monotonic() - started
        _prune(root, keep=target.parent)
        return Built(target, seconds, False)


def _prune(root: Path, *, keep: Path) -> None:
    """Drop binaries built from other sources (each is ~100 MB); Go's own caches are Go's to trim."""
    for entry in root.iterdir():
        if entry.is_dir() and entry != keep and (entry / BINARY).exists():
            shutil.rmtree(entry, ignore_errors=True)
