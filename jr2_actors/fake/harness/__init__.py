"""The fake Harness: its pure model (conversations, scripted Turns) and the actor with its listener."""
