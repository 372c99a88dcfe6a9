"""A run: its workflow engine (pure), its notice ledger (pure), and the RunActor that drives them."""
