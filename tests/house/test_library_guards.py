"""cheroot and urllib3 are pinned and guarded as pykka is (tests/test_shell_pykka.py): the API's listener
(api/server.py) and the Cut's pools (net/cut.py, harness/pools.py) override their methods and lean on
their private parts. Each is pinned to one minor version in setup.cfg, and these tests fail when upstream's
copy of what we override or call changes, so an upgrade is a decision (re-read each named method against
our override, then update its digest and the pin), never a surprise."""

from __future__ import annotations

import ast
import configparser
import hashlib
import importlib
import importlib.metadata
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jr2_actors.api import server
from jr2_actors.harness import pools
from jr2_actors.net import cut

SETUP = Path(__file__).resolve().parents[2] / "setup.cfg"
PINS = {"cheroot": ("cheroot>=11.1,<11.2", "11.1."), "urllib3": ("urllib3>=2.8,<2.9", "2.8.")}
OURS = (server, cut, pools)  # the modules that subclass the two libraries' classes

# sha256 (its first 16 hex digits) of each upstream body's AST (docstring dropped: formatting and comments do
# not count), as of cheroot 11.1.2 and urllib3 2.8.0. Every method our subclasses override is here (the test below finds
# them), and so is each private method whose behaviour an override relies on.
UPSTREAM: dict[str, str] = {
    # api/server.py: the gate in front of cheroot's workers
    "cheroot.wsgi.Server.__init__": "e91e7e728c71b8f3",
    "cheroot.server.HTTPServer.stop": "ff4ec195488b0080",
    "cheroot.server.HTTPServer.error_log": "dda77836187ef524",
    "cheroot.server.HTTPServer.process_conn": "d5952070bb4b1c42",
    "cheroot.server.HTTPServer.put_conn": "8265f5edc7ef588d",
    # `_Writer` and `_Reader` call past these two to their bases' `__init__`
    "cheroot.makefile.StreamWriter.__init__": "949fa80eea4ecf6f",
    "cheroot.makefile.StreamWriter.write": "a5faf959bc26b103",
    "cheroot.makefile.StreamReader.__init__": "a6bc8a95872e0062",
    "cheroot.server.HTTPConnection.__init__": "9bc8e2baaedc16cd",
    "cheroot.server.HTTPConnection.close": "64a771e05800a623",
    "cheroot.server.HTTPRequest.respond": "15801388f0397c9b",
    "cheroot.server.HTTPRequest.send_headers": "8998b01b6e2ef046",
    "cheroot.wsgi.Gateway.__init__": "bc477ad88e047095",
    # a parked connection's `last_used` is set so that cheroot's expiry closes it at the head's deadline
    "cheroot.connections.ConnectionManager._expire": "6166fe162216ff55",
    # net/cut.py and harness/pools.py: the pools whose connections a Cut owns
    "urllib3.connection.HTTPConnection.connect": "092be738319b1bf9",
    "urllib3.connection.HTTPSConnection.connect": "8e5499c8d48e32f3",
    "urllib3.connectionpool.HTTPConnectionPool._get_conn": "d3c2c28d66ed525f",
    "urllib3.connectionpool.HTTPConnectionPool._put_conn": "4ba9f7144ef4b411",
    "urllib3.poolmanager.PoolManager.__init__": "be437b00bff1fa7a",
    "urllib3.poolmanager.PoolManager.connection_from_pool_key": "c376d53c2df2cd65",
    "urllib3.poolmanager.PoolManager.clear": "fc77030bcec67073",
    # called by harness/pools.py's `_Manager` to make each pool
    "urllib3.poolmanager.PoolManager._new_pool": "032fe616eea3016a",
}


def _upstream(name: str) -> Callable[..., Any]:
    module, cls, attr = name.rsplit(".", 2)
    found: Callable[..., Any] = getattr(getattr(importlib.import_module(module), cls), attr)
    return found


def _digest(function: Callable[..., Any]) -> str:
    node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    assert isinstance(node, ast.FunctionDef)
    if ast.get_docstring(node):
        node.body = node.body[1:]
    node.name = "_"  # what it is called here is not what it does
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:16]


def _overridden() -> set[str]:
    """Every upstream method (as `module.Class.name`, where upstream defines it) that a class of ours overrides."""
    found: set[str] = set()
    for module in OURS:
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            upstream = [b for b in cls.__mro__ if b.__module__.split(".")[0] in PINS]
            mine = [b for b in cls.__mro__ if b.__module__.startswith("jr2_actors.")]  # a mixin's methods too
            for name, value in ((n, v) for b in mine for n, v in vars(b).items()):
                if not callable(value) or inspect.isclass(value) or (name.startswith("__") and name != "__init__"):
                    continue
                home = next((b for b in upstream if name in vars(b)), None)
                if home is not None:
                    found.add(f"{home.__module__}.{home.__qualname__}.{name}")
    return found


@pytest.mark.parametrize("library", sorted(PINS))
def test_the_library_is_pinned_to_the_minor_version_the_overrides_were_read_against(library: str) -> None:
    config = configparser.ConfigParser()
    config.read(SETUP, encoding="utf-8")
    requires = [line.split("#")[0].strip() for line in config["options"]["install_requires"].splitlines()]
    pin, installed = PINS[library]
    assert pin in requires, f"setup.cfg must pin {pin}"
    assert importlib.metadata.version(library).startswith(installed)


def test_every_overridden_upstream_method_is_guarded() -> None:
    missing = _overridden() - set(UPSTREAM)
    assert not missing, f"an override of {sorted(missing)}: add its upstream digest to UPSTREAM"


def test_the_upstream_methods_we_override_are_as_we_read_them() -> None:
    changed = [name for name, digest in UPSTREAM.items() if _digest(_upstream(name)) != digest]
    assert not changed, (f"upstream changed {changed}: re-read each against our override (api/server.py, "
                         "net/cut.py, harness/pools.py) before updating its digest here and the pin in setup.cfg")


def test_one_pool_behaviour_serves_both_schemes() -> None:
    assert cut.CutHTTPPool._get_conn is cut.CutHTTPSPool._get_conn is cut.CutPool._get_conn
    assert cut.CutHTTPPool._put_conn is cut.CutHTTPSPool._put_conn is cut.CutPool._put_conn
    assert cut.CutHTTPPool.ConnectionCls.connect is cut.CutHTTPSPool.ConnectionCls.connect


def test_the_digest_sees_a_change_in_a_body() -> None:
    def put(self: Any, conn: Any) -> None:
        """Doc."""
        self.pool.put(conn, block=False)

    def changed(self: Any, conn: Any) -> None:
        self.pool.put(conn, block=True)

    def reworded(self: Any, conn: Any) -> None:
        """Another doc; and a comment."""
        self.pool.put(conn, block=False)  # the same body

    assert _digest(put) != _digest(changed)
    assert _digest(put) == _digest(reworded)
