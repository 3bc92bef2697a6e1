"""The demos' limits, read from settings with defaults so no settings file has to change.

Each can be set in settings or the environment (same name). Units are in the names' docs.
"""

import os

from django.conf import settings

_DEFAULTS: dict[str, int | float | str] = {
    "DEMO_MAX_QUEUED": 8,  # runs waiting for a worker, site-wide, before 429
    "DEMO_RUN_TIME_LIMIT": 90,  # seconds a run may take in the worker before it fails
    "DEMO_QUEUE_TIMEOUT": 600,  # seconds a run may wait for a worker before it fails
    "DEMO_EVENTS_TTL": 3600,  # seconds a run's event stream stays in Redis for replay
    "DEMO_HEARTBEAT_TTL": 10,  # seconds without a worker heartbeat before a run is dead
    "DEMO_SSE_PING": 5,  # seconds between keep-alive comments on an idle event stream
    "DEMO_STREAMING_STEP_DELAY": 0.04,  # seconds between one stream's tokens (streaming demo)
    "DEMO_QUEUE": "",  # Celery queue for every run; empty: ENGINE_QUEUE or EXPERIMENT_QUEUE
}


def demo_setting(name: str) -> int | float | str:
    """A demo limit: settings.<name>, else the environment, else the default."""
    default = _DEFAULTS[name]
    if hasattr(settings, name):
        return getattr(settings, name)
    raw = os.environ.get(name)
    if raw is None:
        return default
    return type(default)(raw)
