"""The commands of `jr2-actors`, one module each; `cli.py` builds the parser and dispatches."""
