"""The Harness: its tokens, the Orchestrator's calls to it, and the Briefing's words."""
