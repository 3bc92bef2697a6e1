"""The worker's measured roofline (problem 12's demo): where a measurement is kept, and asking a
worker for a new one.

A worker measures itself (worker/hardware.py, task `worker.hardware_measure`) and stores the
result in Redis under `course:hardware:latest` and `course:hardware:<hostname>` for a day. The
page reads the latest; asking for a new one is refused while one was asked for in the last ten
minutes (a lock that also covers one still running). Plain redis-py and Celery; no torch.
"""

import json

from django.conf import settings

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


def hardware_measure_request(client) -> int:  # noqa: ANN001
    """Queue a measurement on the experiments queue and return 0, or return the seconds until
    one may be asked for again (one was asked for in the last LOCK_S seconds)."""
    from worker.tasks import hardware_measure_task  # importing the task module imports no torch

    if not client.set(LOCK_KEY, "1", nx=True, ex=LOCK_S):
        return max(1, int(client.ttl(LOCK_KEY)))
    try:
        hardware_measure_task.apply_async(queue=settings.EXPERIMENT_QUEUE, retry=False)
    except Exception:
        client.delete(LOCK_KEY)  # not sent: let the next press try again
        raise
    return 0


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
