"""What is shown of the runs: `GET /runs`'s table of live lines (`table.py`), RunStatus and the listing
lines (`wire.py`), and how a person reads them (`render.py`). The RunActor tells its row after each step;
the API and the commands read them."""
