"""The worker's measured roofline (problem 12's demo): asking a worker for a new one; where a
measurement is kept lives in plumbing/hardware.py (the worker writes it there), re-exported here
for the pages.

A worker measures itself (worker/hardware.py, task `worker.hardware_measure`) and stores the
result in Redis under `course:hardware:latest` and `course:hardware:<hostname>` for a day. The
page reads the latest; asking for a new one is refused while one was asked for in the last ten
minutes (a lock that also covers one still running). Plain redis-py and Celery; no torch.
"""

from django.conf import settings

from plumbing.hardware import (
    ENGINE_LOAD_KEY,
    HOST_KEY,
    LATEST_KEY,
    LOCK_KEY,
    LOCK_S,
    TTL_S,
    engine_load_latest,
    engine_load_store,
    hardware_latest,
    hardware_store,
)

__all__ = ["ENGINE_LOAD_KEY", "HOST_KEY", "LATEST_KEY", "LOCK_KEY", "LOCK_S", "TTL_S",
           "engine_load_latest", "engine_load_store", "hardware_latest",
           "hardware_measure_request", "hardware_store"]


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
