"""A run's events in Redis: one stream per run for replay and live relay, plus control keys.

Keys, all expiring:
- run:<id>:events     a Redis Stream; each entry has `type`, `data` (JSON) and, for the
                      streaming demo, `stream` (which of the side-by-side requests it is about)
- run:<id>:cancel     a set of cancel requests: "all|<reason>" or "stream:<n>|<reason>"
- run:<id>:heartbeat  refreshed by the worker while it holds the run; gone means it died

Plain redis-py: the worker, the web views and tests share it (`redis()` and the heartbeat read
Django's settings, nothing else of Django).
"""

import json
import logging
import os
import threading
from dataclasses import dataclass
from functools import cache

import redis

logger = logging.getLogger(__name__)

# How long the web relay's XREAD waits for new entries (ms): the most a client's disconnect can
# go unnoticed before the relay asks the worker to cancel (the streaming demo predicts with it).
XREAD_BLOCK_MS = 1000

TERMINAL_TYPES = frozenset({"finished", "failed", "cancelled"})
# The end of one request's own stream in a multi-request run (the run itself goes on).
STREAM_END_TYPES = frozenset({"done", "aborted"})
# How often a worker asks Redis whether its run was cancelled (seconds): a disconnect or a
# cancel button reaches the engine within this, without a round trip per token.
CANCEL_POLL_S = 0.02
# How long a worker waits for its next engine event before checking cancel and time again.
EVENT_WAIT_S = 0.05
# Seconds without a worker's heartbeat before its run counts as dead (DEMO_HEARTBEAT_TTL).
HEARTBEAT_TTL_S = 10


def events_key(run_id: str) -> str:
    return f"run:{run_id}:events"


def cancel_key(run_id: str) -> str:
    return f"run:{run_id}:cancel"


def heartbeat_key(run_id: str) -> str:
    return f"run:{run_id}:heartbeat"


@cache
def redis_client(url: str) -> redis.Redis:
    """One pooled client per URL per process (the pool is thread-safe)."""
    return redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=5)


def redis_shared() -> redis.Redis:
    """The project's Redis (settings.REDIS_URL), one pooled client per process."""
    from django.conf import settings

    return redis_client(settings.REDIS_URL)


@dataclass(frozen=True)
class Event:
    id: str  # the Redis Stream entry id, also the SSE `id:` so reconnects resume
    type: str
    data: dict
    stream: int | None = None

    @classmethod
    def from_entry(cls, entry_id: str, fields: dict[str, str]) -> "Event":
        stream = fields.get("stream")
        return cls(id=entry_id, type=fields["type"], data=json.loads(fields.get("data", "{}")),
                   stream=int(stream) if stream not in (None, "") else None)

    def sse(self) -> str:
        """The event as one Server-Sent Events message."""
        data = dict(self.data)
        if self.stream is not None:
            data.setdefault("stream", self.stream)
        return f"id: {self.id}\nevent: {self.type}\ndata: {json.dumps(data)}\n\n"


def event_publish(client: redis.Redis, *, run_id: str, type: str, data: dict,
                  stream: int | None = None, ttl_s: int = 3600) -> str:
    """Append one event to the run's stream and push its expiry back; returns the entry id."""
    fields = {"type": type, "data": json.dumps(data)}
    if stream is not None:
        fields["stream"] = str(stream)
    pipe = client.pipeline(transaction=False)
    pipe.xadd(events_key(run_id), fields, maxlen=20_000, approximate=True)
    pipe.expire(events_key(run_id), ttl_s)
    entry_id, _ = pipe.execute()
    return entry_id


def events_read(client: redis.Redis, *, run_id: str, after: str = "0-0") -> list[Event]:
    """Every event published so far after entry id `after` (no waiting)."""
    entries = client.xrange(events_key(run_id), min=f"({after}" if after != "0-0" else "-")
    return [Event.from_entry(entry_id, fields) for entry_id, fields in entries]


def cancel_request(client: redis.Redis, *, run_id: str, stream: int | None = None,
                   reason: str = "cancelled", ttl_s: int = 3600) -> None:
    """Ask the worker to stop the whole run, or one of its streams; it checks every step."""
    target = "all" if stream is None else f"stream:{stream}"
    pipe = client.pipeline(transaction=False)
    pipe.sadd(cancel_key(run_id), f"{target}|{reason}")
    pipe.expire(cancel_key(run_id), ttl_s)
    pipe.execute()


def cancel_targets(client: redis.Redis, *, run_id: str) -> dict[str, str]:
    """What has been asked to stop: {"all" or "stream:<n>": reason}."""
    targets: dict[str, str] = {}
    for member in client.smembers(cancel_key(run_id)):
        target, _, reason = member.partition("|")
        targets.setdefault(target, reason or "cancelled")
    return targets


def heartbeat_beat(client: redis.Redis, *, run_id: str, ttl_s: int) -> None:
    client.set(heartbeat_key(run_id), "1", ex=ttl_s)


def heartbeat_alive(client: redis.Redis, *, run_id: str) -> bool:
    return bool(client.exists(heartbeat_key(run_id)))


def heartbeat_ttl_s() -> int:
    """DEMO_HEARTBEAT_TTL from settings or the environment, else HEARTBEAT_TTL_S."""
    from django.conf import settings

    value = getattr(settings, "DEMO_HEARTBEAT_TTL", None)
    if value is None:
        value = os.environ.get("DEMO_HEARTBEAT_TTL", HEARTBEAT_TTL_S)
    return int(value)


class RunHeartbeat:
    """Refreshes a run's heartbeat key from a thread while a worker holds the run, so a
    SIGKILLed worker's run is seen as dead within the TTL even while the engine is busy
    loading or stepping."""

    def __init__(self, run_id: str, *, ttl_s: int | None = None) -> None:
        self.run_id = run_id
        self.ttl_s = heartbeat_ttl_s() if ttl_s is None else ttl_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"heartbeat-{run_id}")

    def _loop(self) -> None:
        client = redis_shared()
        while not self._stop.is_set():
            try:
                heartbeat_beat(client, run_id=self.run_id, ttl_s=self.ttl_s)
            except Exception:  # Redis briefly unreachable: the next beat tries again
                logger.warning("heartbeat for run %s failed", self.run_id, exc_info=True)
            self._stop.wait(max(0.5, self.ttl_s / 4))

    def __enter__(self) -> "RunHeartbeat":
        heartbeat_beat(redis_shared(), run_id=self.run_id, ttl_s=self.ttl_s)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        redis_shared().delete(heartbeat_key(self.run_id))
