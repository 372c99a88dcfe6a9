"""The shell leans on two private hooks of pykka (shell/actor.py says why): the inbox chosen in
`_create_actor_inbox`, and the receive loop `_actor_loop_running`, copied to time each message; and the
store's `save` puts into an inbox what `ActorRef.ask` puts (pykka's private `Envelope`). pykka is
pinned to one minor version in setup.cfg; these tests fail when pykka's own copy of what the shell relies
on changes, so a pykka upgrade is a decision (re-copy the loop, or drop the metrics), never a surprise."""

from __future__ import annotations

import ast
import configparser
import hashlib
import importlib.metadata
import inspect
import queue
import textwrap
from collections.abc import Callable
from typing import Any

import pykka

from jr2_actors.shell import Shell
from jr2_actors.shell.mailbox import Mailbox
from tests.support.paths import ROOT

SETUP = ROOT / "setup.cfg"

# sha256 of each body's AST (docstring dropped: formatting and comments do not count), as of pykka 4.5.0.
PYKKA_SOURCES: dict[str, tuple[Callable[..., Any], str]] = {
    "Actor._actor_loop": (pykka.Actor._actor_loop,
                          "241d6d50de2714e212956ada12f15259942a78189c3d5608ecaac6021ca87640"),
    "Actor._actor_loop_running": (pykka.Actor._actor_loop_running,
                                  "f3e0b1d0cfce6b7d1580d13508fbb6644a3b7825e73d5f0ef3fe880dd738e289"),
    "Actor._actor_loop_teardown": (pykka.Actor._actor_loop_teardown,
                                   "0c9e021c2580eb083a02ff39d2d7e83a5808094f8183614c88393fb09ccfbc5f"),
    "ThreadingActor._create_actor_inbox": (pykka.ThreadingActor._create_actor_inbox,
                                           "6e04027cffc3ffc539de53c48f1251294d1ff750a4c379689b3d42eb66ec3f77"),
    # store.actor.save puts what an ask puts (an `Envelope` whose `reply_to` is answered), with its own answer.
    "ActorRef.ask": (pykka.ActorRef.ask, "77fd04506b912fee75f1caed8891625a31ae9d21aa140b9efbdc69d2857964e4"),
}


def _digest(function: Callable[..., Any]) -> str:
    node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    assert isinstance(node, ast.FunctionDef)
    if ast.get_docstring(node):
        node.body = node.body[1:]
    node.name = "_"  # what it is called here is not what it does
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()


def test_pykka_is_pinned_to_the_minor_version_the_shell_copied_from() -> None:
    config = configparser.ConfigParser()
    config.read(SETUP, encoding="utf-8")
    requires = [line.strip() for line in config["options"]["install_requires"].splitlines() if line.strip()]
    assert "pykka>=4.5,<4.6" in requires
    assert importlib.metadata.version("pykka").startswith("4.5.")


def test_the_private_hooks_the_shell_copies_are_as_they_were_copied() -> None:
    changed = [name for name, (function, digest) in PYKKA_SOURCES.items() if _digest(function) != digest]
    assert not changed, f"pykka changed {changed}: compare shell/actor.py's copy with it before re-pinning"


def test_the_shell_overrides_exactly_those_hooks() -> None:
    assert Shell._actor_loop_running is not pykka.Actor._actor_loop_running
    assert Shell._actor_loop is pykka.Actor._actor_loop  # pykka still runs setup → running → teardown
    assert isinstance(pykka.ThreadingActor._create_actor_inbox(), queue.Queue)  # what Mailbox stands in for
    assert isinstance(Shell._create_actor_inbox(), Mailbox)


def test_the_digest_sees_a_change_in_a_body() -> None:
    def loop(self: Any) -> None:
        """Doc."""
        while not self.stopped:
            self.take()

    def changed(self: Any) -> None:
        while not self.stopped:
            self.take()
            self.count += 1

    def reworded(self: Any) -> None:
        """Another doc."""
        while not self.stopped:  # a comment
            self.take()

    assert _digest(loop) != _digest(changed)
    assert _digest(loop) == _digest(reworded)  # a docstring or a comment is not a change
