"""The one Sandbox watch of the process (ADR-0063): its pure core, its actor, identity and the typed view."""
