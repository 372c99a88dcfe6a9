"""An Agent seat's Turns: one Turn read from the Harness stream (pure core) and its actor."""
