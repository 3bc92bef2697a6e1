"""Each worker's liveness, written where the web side can read it cheaply: a Redis hash
`course:worker:<hostname>` refreshed every BEAT_S seconds, expiring after TTL_S.

Fields: `engine_ready` ("1" when this worker takes runs now, "0" while it cannot yet),
`queues` (comma-separated), `model` (the ENGINE_MODEL directory's name), `updated_at`
(unix seconds). /healthz counts the ready ones (course/health.py); a worker that dies simply
stops beating and its hash expires. Started in the worker's main process once it consumes.

No torch here: this runs in the worker's main process, beside the pool.
"""

import logging
import threading
import time
from pathlib import Path

import redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "course:worker:"
BEAT_S = 5
TTL_S = 15

# Today the engine loads inside the first run (its time counted there), so a worker that
# consumes takes runs: ready. An engine loaded ahead of runs would start this at False and
# call heartbeat_engine_ready(True) once it has loaded.
_state = {"engine_ready": True}
_started: dict[str, "WorkerHeartbeat"] = {}


def heartbeat_key(hostname: str) -> str:
    return f"{KEY_PREFIX}{hostname}"


def heartbeat_engine_ready(ready: bool) -> None:
    """Say whether this worker's engine takes runs now; the next beat (within BEAT_S) says so."""
    _state["engine_ready"] = ready
    for beat in _started.values():
        beat.wake()


class WorkerHeartbeat:
    """A daemon thread that writes this worker's hash every BEAT_S seconds until stopped."""

    def __init__(self, *, url: str, hostname: str, queues: list[str], model: str) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)
        self.key = heartbeat_key(hostname)
        self.fields = {"queues": ",".join(queues), "model": Path(model).name}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="worker-heartbeat")

    def beat(self) -> None:
        mapping = {**self.fields, "engine_ready": "1" if _state["engine_ready"] else "0",
                   "updated_at": str(int(time.time()))}
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.key, mapping=mapping)
        pipe.expire(self.key, TTL_S)
        pipe.execute()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
            except (redis.RedisError, OSError):  # Redis away for a moment: beat again later
                logger.warning("worker heartbeat to Redis failed", exc_info=True)
            self._wake.wait(BEAT_S)
            self._wake.clear()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> "WorkerHeartbeat":
        try:
            self.beat()  # at once, so /healthz sees the worker as soon as it consumes
        except (redis.RedisError, OSError):
            logger.warning("worker heartbeat to Redis failed", exc_info=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        try:
            self.client.delete(self.key)  # gone at once, not TTL_S later
        except (redis.RedisError, OSError):
            pass


def heartbeat_start(*, url: str, hostname: str, queues: list[str], model: str) -> None:
    if hostname not in _started:
        _started[hostname] = WorkerHeartbeat(url=url, hostname=hostname, queues=queues,
                                             model=model).start()


def heartbeat_stop() -> None:
    while _started:
        _started.popitem()[1].stop()
