"""The run store (ADR-0065): sqlite in WAL, one row per run, and the actor that alone writes it."""
