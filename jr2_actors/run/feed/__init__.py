"""The run's feed: its lines (`lines.py`), the hub readers wait on (`hub.py`), their wire shape (`wire.py`)
and how a person reads them (`render.py`). The engine (`run/core.py`) makes the lines; the RunActor
publishes them to the hub; the API's event stream and the commands read them."""
