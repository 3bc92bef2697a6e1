"""GET /healthz: the database, Redis and at least one ready worker, or 503 naming what failed.

Worker liveness is read from the heartbeat hashes the workers write themselves (see
worker/heartbeat.py): `course:worker:<hostname>` with `engine_ready` ("0"/"1"), `queues`
(comma-separated), `model` and `updated_at` (unix seconds), expiring 15 s after the last beat.
One SCAN and one pipelined read per request, on a client with short timeouts: never a broker
round trip (a `control.ping` per request once exhausted the broker's pool and jammed the site).
"""

import logging
from functools import cache

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from worker.heartbeat import workers_ready

logger = logging.getLogger(__name__)



@cache
def _health_redis(url: str) -> redis.Redis:
    # Short timeouts: a health check that hangs is worse than one that says "error".
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=1,
                                socket_connect_timeout=1)


def _database_ok() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any driver error means "not ok", reported by name
        logger.warning("healthz: the database did not answer", exc_info=True)
        return f"error: {exc.__class__.__name__}"


def workers_ready_count(client: redis.Redis, *, now: float | None = None) -> int:
    """How many workers' heartbeats say their engine is ready, fresh within the TTL."""
    return workers_ready(client, now=now)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db = _database_ok()
    try:
        workers = workers_ready_count(_health_redis(settings.REDIS_URL))
        redis_state = "ok"
    except (redis.RedisError, OSError) as exc:
        logger.warning("healthz: Redis did not answer", exc_info=True)
        workers, redis_state = 0, f"error: {exc.__class__.__name__}"
    body: dict = {"db": db, "redis": redis_state, "workers": workers}
    failed = [name for name, state in (("db", db), ("redis", redis_state)) if state != "ok"]
    if workers < 1:
        failed.append("workers")
    if failed:
        body["failed"] = failed
    return JsonResponse(body, status=503 if failed else 200)
