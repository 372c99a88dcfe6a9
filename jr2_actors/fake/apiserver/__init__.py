"""The fake API server: its object store, selectors, discovery, and the actor with its HTTP listener."""
