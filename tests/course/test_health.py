"""GET /healthz: 200 only when the database, Redis and a live worker all answer."""

import pytest
from django.test import override_settings


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.postgres
def test_healthz_ok_with_a_real_worker(client, celery_worker_process):
    response = client.get("/healthz")
    assert response.status_code == 200, response.content
    assert response.json() == {"db": "ok", "redis": "ok", "workers": 1}


@pytest.mark.django_db
def test_healthz_names_redis_when_it_does_not_answer(client):
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["db"] == "ok"
    assert body["redis"].startswith("error")
    assert body["failed"] == ["redis", "workers"]


@pytest.mark.django_db
def test_healthz_names_workers_when_none_answers(client, monkeypatch):
    from course import health

    monkeypatch.setattr(health, "workers_ready", lambda client: 0)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"db": "ok", "redis": "ok", "workers": 0, "failed": ["workers"]}


def test_healthz_rejects_post(client):
    assert client.post("/healthz").status_code == 405
