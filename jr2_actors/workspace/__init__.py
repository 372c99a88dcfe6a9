"""A Workspace, placing to teardown (ADR-0064): its pure core, its actor, and what is written for it."""
