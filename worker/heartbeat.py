"""Each worker says in Redis that it is alive and whether it can serve yet.

One hash per worker process, `course:worker:<hostname>`, with fields
- `engine_ready`: "1" once the worker can take its queue's work (for the engine queue: its
  shared engine is loaded and warmed up), "0" before;
- `queues`: the queues it consumes, comma-separated;
- `model`: the model directory it serves;
- `kernels`: which build of the fused CPU kernels its engine runs (or why PyTorch's ops run),
  "" before its engine has loaded or on a worker without one;
- `updated_at`: unix seconds of the last refresh.
The hash lives 15 s and is refreshed every 5 s, so a killed worker drops out within 15 s.
`/healthz` counts the ready ones with one SCAN instead of pinging every worker per request.

No torch and no Django: the web process imports `workers_ready` from here.
"""

import logging
import threading
import time
from collections.abc import Callable

import redis

logger = logging.getLogger(__name__)

WORKER_KEY_PREFIX = "course:worker:"
WORKER_TTL_S = 15
WORKER_REFRESH_S = 5


def worker_key(hostname: str) -> str:
    return f"{WORKER_KEY_PREFIX}{hostname}"


def worker_status_write(client: redis.Redis, *, hostname: str, engine_ready: bool,
                        queues: list[str], model: str, kernels: str = "",
                        ttl_s: int = WORKER_TTL_S) -> None:
    key = worker_key(hostname)
    pipe = client.pipeline(transaction=False)
    pipe.hset(key, mapping={"engine_ready": "1" if engine_ready else "0",
                            "queues": ",".join(queues), "model": model, "kernels": kernels,
                            "updated_at": str(int(time.time()))})
    pipe.expire(key, ttl_s)
    pipe.execute()


def worker_status_delete(client: redis.Redis, *, hostname: str) -> None:
    client.delete(worker_key(hostname))


def workers_status(client: redis.Redis) -> dict[str, dict[str, str]]:
    """Every live worker's hash, by hostname."""
    keys = list(client.scan_iter(match=f"{WORKER_KEY_PREFIX}*", count=100))
    if not keys:
        return {}
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    out = {}
    for key, fields in zip(keys, pipe.execute(), strict=True):
        key = key.decode() if isinstance(key, bytes) else key
        if fields:
            out[key.removeprefix(WORKER_KEY_PREFIX)] = {
                (k.decode() if isinstance(k, bytes) else k):
                (v.decode() if isinstance(v, bytes) else v) for k, v in fields.items()}
    return out


def workers_ready(client: redis.Redis, *, now: float | None = None) -> int:
    """How many workers are up with their engine loaded: ready, and refreshed within the TTL
    (the key's expiry ends a silent worker anyway; this also ignores a clock-stale hash)."""
    now = time.time() if now is None else now
    ready = 0
    for fields in workers_status(client).values():
        try:
            fresh = now - float(fields.get("updated_at") or 0) <= WORKER_TTL_S
        except ValueError:
            fresh = False
        ready += fields.get("engine_ready") == "1" and fresh
    return ready


class WorkerBeat:
    """A thread that refreshes the worker's hash every 5 s and, when given `publish`, calls it
    every second (the engine's metrics)."""

    def __init__(self, *, client_factory: Callable[[], redis.Redis], hostname: str,
                 queues: list[str], model: str,
                 publish: Callable[[redis.Redis], None] | None = None) -> None:
        self.client_factory, self.hostname = client_factory, hostname
        self.queues, self.model, self.publish = queues, model, publish
        self.engine_ready = False
        self.kernels = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="worker-beat")

    def start(self) -> "WorkerBeat":
        self._write()
        self._thread.start()
        return self

    def ready(self, *, kernels: str = "") -> None:
        """The worker can serve now: say so at once, not at the next refresh (with the
        kernel build its engine loaded)."""
        self.engine_ready, self.kernels = True, kernels
        self._write()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            worker_status_delete(self.client_factory(), hostname=self.hostname)
        except redis.RedisError:
            pass

    def _write(self) -> None:
        worker_status_write(self.client_factory(), hostname=self.hostname,
                            engine_ready=self.engine_ready, queues=self.queues, model=self.model,
                            kernels=self.kernels)

    def _loop(self) -> None:
        last_status = time.monotonic()
        while not self._stop.wait(1.0):
            try:
                client = self.client_factory()
                if self.publish is not None:
                    self.publish(client)
                if time.monotonic() - last_status >= WORKER_REFRESH_S:
                    self._write()
                    last_status = time.monotonic()
            except Exception:  # Redis briefly away: the next beat tries again
                logger.warning("worker heartbeat failed", exc_info=True)
