"""jr2_actors: the jr2 Orchestrator's cluster-facing core, built from threaded pykka actors."""

__version__ = "0.1.0"
