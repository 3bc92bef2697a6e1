"""Where a worker's measurements are kept in Redis, for the pages to read: its roofline
(problem 12; worker/hardware.py measures it) under `course:hardware:latest` and
`course:hardware:<hostname>`, and the shared engine's last load (problem 20), each for a day.
Plain redis-py; the workers write here, the demos read (demos/hardware.py asks for a new
measurement).
"""

import json

LATEST_KEY = "course:hardware:latest"
HOST_KEY = "course:hardware:{hostname}"
LOCK_KEY = "course:hardware:lock"
TTL_S = 24 * 3600
LOCK_S = 600


def hardware_store(client, measurement: dict) -> None:  # noqa: ANN001 (a redis client)
    """Keep `measurement` as the latest and as its host's, for a day."""
    text = json.dumps(measurement)
    pipe = client.pipeline(transaction=False)
    pipe.set(LATEST_KEY, text, ex=TTL_S)
    pipe.set(HOST_KEY.format(hostname=measurement.get("hostname", "unknown")), text, ex=TTL_S)
    pipe.execute()


def hardware_latest(client) -> dict | None:  # noqa: ANN001
    """The latest measurement, or None when no worker stored one in the last day."""
    text = client.get(LATEST_KEY)
    return json.loads(text) if text else None


# The shared engine's last load (problem 20 sets it beside a large model's cold start): each
# engine worker stores how long reading its model and warming it up took, when it loads.
ENGINE_LOAD_KEY = "course:engine-load:latest"


def engine_load_store(client, measurement: dict) -> None:  # noqa: ANN001
    """Keep the shared engine's load `measurement` (model, device, file_bytes,
    load_seconds, warmup_seconds, hostname) as the latest, for a day."""
    client.set(ENGINE_LOAD_KEY, json.dumps(measurement), ex=TTL_S)


def engine_load_latest(client) -> dict | None:  # noqa: ANN001
    """The latest engine load a worker stored in the last day, or None."""
    text = client.get(ENGINE_LOAD_KEY)
    return json.loads(text) if text else None
