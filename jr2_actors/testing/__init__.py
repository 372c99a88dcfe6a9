"""What other teams' tests use to drive jr2-actors (as `trio.testing` is trio's): never imported by the
product (tests/test_import_graph.py, the `import-linter` contracts).

- `jr2_actors.testing.clock`: `VirtualClock`, a `Clock` that moves only when a test tells it to, with
  `Stalled` and `NeverIdle`, what its waits raise; `jr2_actors.testing.activity`: what it hears of the
  work under way.
- `jr2_actors.testing.pytest_plugin`: the `jr2_fake_cluster` and `jr2_orchestrator` fixtures (installed as
  the `jr2_fake_cluster` pytest plugin), `time="virtual"` among their options.

docs/testing.md shows them in use.
"""
