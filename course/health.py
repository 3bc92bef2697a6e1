"""GET /healthz: the database, Redis and at least one Celery worker ready to serve (its engine
loaded), or 503 naming what failed."""

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from worker.heartbeat import workers_ready


def _database_ok() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # any driver error means "not ok", reported by name
        return f"error: {exc.__class__.__name__}"


def _redis_ok() -> str:
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1,
                                      socket_connect_timeout=1)
        client.ping()
        return "ok"
    except (redis.RedisError, OSError) as exc:
        return f"error: {exc.__class__.__name__}"


def _live_workers() -> int:
    """Workers whose heartbeat hash says they are up and their engine is loaded
    (worker/heartbeat.py): one SCAN, no round trip to every worker."""
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1,
                                      socket_connect_timeout=1)
        return workers_ready(client)
    except (redis.RedisError, OSError):
        return 0


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db = _database_ok()
    redis_state = _redis_ok()
    workers = _live_workers() if redis_state == "ok" else 0
    body: dict = {"db": db, "redis": redis_state, "workers": workers}
    failed = [name for name, state in (("db", db), ("redis", redis_state)) if state != "ok"]
    if workers < 1:
        failed.append("workers")
    if failed:
        body["failed"] = failed
    return JsonResponse(body, status=503 if failed else 200)
