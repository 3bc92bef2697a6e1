"""GET /healthz: 200 only when the database, Redis and a ready worker all answer.

Worker liveness comes from the heartbeat hashes the workers write (`course:worker:<hostname>`),
read with one SCAN: never a broker round trip per request, which once jammed the web process.
"""

import concurrent.futures
import http.client
import time

import pytest
from django.test import override_settings

from demos.services import redis
from tests.demos.conftest import asgi_server  # noqa: F401 (the fixture)
from worker.heartbeat import WORKER_KEY_PREFIX


@pytest.fixture
def no_worker_hashes():
    """Clear every worker's heartbeat hash (the suite's Redis is private), and after."""
    client = redis()
    keys = list(client.scan_iter(match=f"{WORKER_KEY_PREFIX}*"))
    if keys:
        client.delete(*keys)
    yield client
    keys = list(client.scan_iter(match=f"{WORKER_KEY_PREFIX}test-fake*"))
    if keys:
        client.delete(*keys)


def _fake_worker(client, name: str, *, ready: str = "1", age_s: float = 0.0) -> None:
    key = f"{WORKER_KEY_PREFIX}test-fake-{name}"
    client.hset(key, mapping={"engine_ready": ready, "queues": "celery", "model": "course-lm",
                              "updated_at": str(int(time.time() - age_s))})
    client.expire(key, 15)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.postgres
def test_healthz_ok_with_a_real_worker(client, celery_worker_process):
    deadline = time.monotonic() + 30  # the worker writes its heartbeat as it becomes ready
    while True:
        response = client.get("/healthz")
        if response.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["db"] == "ok" and body["redis"] == "ok" and body["workers"] >= 1
    assert "failed" not in body
    # The heartbeat the worker writes, in the layout shared with the engine side.
    keys = list(redis().scan_iter(match=f"{WORKER_KEY_PREFIX}*"))
    fields = redis().hgetall(keys[0])
    assert set(fields) >= {"engine_ready", "queues", "model", "updated_at"}
    assert 0 < redis().ttl(keys[0]) <= 15


@pytest.mark.django_db
def test_healthz_names_redis_when_it_does_not_answer(client):
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["db"] == "ok"
    assert body["redis"].startswith("error")
    assert "127.0.0.1" not in body["redis"]
    assert body["failed"] == ["redis", "workers"]


@pytest.mark.django_db
def test_healthz_names_workers_when_none_is_ready(client, no_worker_hashes):
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"db": "ok", "redis": "ok", "workers": 0, "failed": ["workers"]}


@pytest.mark.django_db
def test_healthz_counts_ready_heartbeats_only(client, no_worker_hashes):
    _fake_worker(no_worker_hashes, "a")
    _fake_worker(no_worker_hashes, "b")
    _fake_worker(no_worker_hashes, "loading", ready="0")
    _fake_worker(no_worker_hashes, "stale", age_s=60)  # a hash whose writer stopped beating
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"db": "ok", "redis": "ok", "workers": 2}


@pytest.mark.django_db
def test_healthz_never_asks_the_broker(client, no_worker_hashes, monkeypatch):
    from worker.celery import app

    def refuse(*args, **kwargs):
        raise AssertionError("healthz made a broker round trip")

    monkeypatch.setattr(app.control, "ping", refuse)
    monkeypatch.setattr(app.control, "inspect", refuse)
    _fake_worker(no_worker_hashes, "a")
    assert client.get("/healthz").status_code == 200


def _get(port: int, path: str, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_many_concurrent_healthz_do_not_jam_the_web_process(asgi_server):  # noqa: F811
    # Forty at once used to exhaust the broker's connection pool (one control.ping each); from
    # then on every /healthz hung. Each must answer, and so must the next one.
    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        statuses = list(pool.map(lambda _: _get(asgi_server, "/healthz", 30), range(40)))
    assert set(statuses) <= {200, 503}, statuses
    for _ in range(3):
        assert _get(asgi_server, "/healthz", 10) in (200, 503)


def test_healthz_rejects_post(client):
    assert client.post("/healthz").status_code == 405
