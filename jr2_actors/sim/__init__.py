"""The whole-system simulation (part B): the orchestrator and the fake cluster in one process,
seeded schedules of runs and faults, and the invariants every schedule must keep (docs/reliability.md)."""
