"""The Orchestrator's own HTTP surface (CONTRACTS.md §4): the WSGI application and its server."""
