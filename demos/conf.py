"""The demos' limits, read from settings with defaults so no settings file has to change.

Each can be set in settings or the environment (same name). Units are in the names' docs.
"""

import os

from django.conf import settings

from plumbing.events import HEARTBEAT_TTL_S

_DEFAULTS: dict[str, int | float | str] = {
    # The queue: anonymous visitors and signed-in learners each have a share of their own, so
    # a flood of cookie-less requests cannot lock learners out.
    "DEMO_MAX_QUEUED": 8,  # anonymous visitors' runs waiting for a worker, site-wide, before 429
    "DEMO_MAX_QUEUED_ACCOUNTS": 8,  # signed-in learners' runs waiting, site-wide, before 429
    "DEMO_MAX_QUEUED_TOKENS": 8000,  # tokens of work (prompt + max_tokens, per stream) waiting,
    # per share of the engine queue, before 429
    # Engine runs and experiments wait in shares of their own (a backlog on the one-at-a-time
    # experiments queue must not close the chat demos). An experiment counts its work in the
    # tokens its engines compute; every demo's defaults fit (the largest, kv-bytes, 8,256), and
    # a run asking for more than the whole share is refused at once (422 naming the field).
    "DEMO_MAX_QUEUED_EXPERIMENT_TOKENS": 60000,
    # Experiments queued or running from one client address, whoever is signed in (accounts
    # are free: a dozen of them from one address held the queue shut).
    "DEMO_EXPERIMENTS_PER_ADDRESS": 2,
    "DEMO_ACTIVE_PER_ADDRESS": 2,  # anonymous runs queued or running from one client address
    "DEMO_STARTS_PER_MINUTE": 10,  # run starts per visitor (session or account) per minute
    "DEMO_ADDRESS_STARTS_PER_MINUTE": 20,  # anonymous run starts per client address per minute
    "DEMO_LOST_GRACE": 15,  # seconds before a queued run whose message is gone counts as lost
    "DEMO_SWEEP_INTERVAL": 30,  # seconds between sweeps of runs whose worker is gone (0: off)
    "DEMO_RUN_TIME_LIMIT": 90,  # seconds a run may take in the worker before it fails
    "DEMO_QUEUE_TIMEOUT": 600,  # seconds a run may wait for a worker before it fails
    "DEMO_EVENTS_TTL": 3600,  # seconds a run's event stream stays in Redis for replay
    "DEMO_HEARTBEAT_TTL": HEARTBEAT_TTL_S,  # seconds without a worker heartbeat: run dead
    "DEMO_SSE_PER_VISITOR": 8,  # event streams one visitor may hold open at once
    "DEMO_SSE_PER_RUN": 8,  # event streams following one run at once (4 per streaming demo)
    "DEMO_SSE_PER_PROCESS": 200,  # event streams one web process serves at once, before 503
    "DEMO_REDIS_POOL": 250,  # async Redis connections per web process, shared by its streams
    "DEMO_REDIS_POOL_TIMEOUT": 5,  # seconds a stream waits for a free connection in that pool
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
