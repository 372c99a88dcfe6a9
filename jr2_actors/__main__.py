from jr2_actors.cli import entry

entry()
