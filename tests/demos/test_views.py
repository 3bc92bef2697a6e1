"""Starting, reading and cancelling runs through Django's test client (no worker needed: the
task is only sent after a commit, which these non-transactional tests never make)."""

import json

import pytest
from django.test import Client, override_settings

from demos import events
from demos.models import Run
from demos.services import redis

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def start(client: Client, slug: str = "lifecycle", body=None, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body if body is not None else {"prompt": "Hi"})
    return client.post(f"/demos/{slug}/runs", data=data, content_type="application/json")


def test_start_returns_the_run_and_its_events_url(client):
    response = start(client, body={"prompt": "What is a token?", "max_tokens": 5})
    assert response.status_code == 201
    body = response.json()
    run = Run.objects.get(pk=body["run_id"])
    assert body["events_url"] == f"/demos/runs/{run.id}/events"
    assert run.state == "queued" and run.demo == "lifecycle"
    assert run.params["prompt"] == "What is a token?" and run.params["max_tokens"] == 5
    assert run.owner == f"session:{client.session.session_key}"


@pytest.mark.parametrize(("body", "field"), [
    ({"prompt": ""}, "prompt"),
    ({"prompt": "x" * 5000}, "prompt"),
    ({"max_tokens": 513}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 0}, "top_p"),
])
def test_bad_parameters_are_422_naming_the_field(client, body, field):
    response = start(client, body=body)
    assert response.status_code == 422
    assert response.json()["field"] == field
    assert field in response.json()["error"]
    assert not Run.objects.exists()


def test_a_body_that_is_not_json_is_422(client):
    response = start(client, raw=b"prompt=hello")
    assert response.status_code == 422
    assert response.json()["field"] == "body"


def test_unknown_demo_is_404(client):
    assert start(client, slug="nope").status_code == 404


def test_second_run_while_one_is_active_is_409_naming_it(client):
    first = start(client).json()["run_id"]
    response = start(client, slug="streaming")
    assert response.status_code == 409
    assert response.json()["active_run_id"] == first
    # The learner reads which demo holds the run and where it is, not a raw run id.
    body = response.json()
    assert first not in body["error"]
    assert "problem 1's lifecycle demo" in body["error"]
    assert body["active_demo"] == "lifecycle"
    assert body["active_demo_url"] == "/problems/1/#demo-lifecycle"


def test_hardware_not_measured_yet_is_not_an_error(client):
    """Page 06 asks for the worker's roofline on every load; before any measurement the answer
    is a 200 saying so, not a 404 in the console."""
    from demos.hardware import LATEST_KEY

    redis().delete(LATEST_KEY)
    response = client.get("/demos/hardware")
    assert response.status_code == 200
    assert response.json() == {"measured": False, "detail": "not measured yet"}


@override_settings(DEMO_MAX_QUEUED=1)
def test_full_queue_is_429_with_retry_after(client):
    assert start(client).status_code == 201
    other = Client()
    response = start(other)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response.json()["retry_after_s"] == int(response["Retry-After"])


def test_csrf_applies_to_starting_a_run():
    browser = Client(enforce_csrf_checks=True)
    assert start(browser).status_code == 403
    browser.get("/demos/lifecycle/")
    token = browser.cookies["csrftoken"].value
    response = browser.post("/demos/lifecycle/runs", data=json.dumps({"prompt": "Hi"}),
                            content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_a_run_is_visible_to_its_owner_only(client):
    run_id = start(client).json()["run_id"]
    mine = client.get(f"/demos/runs/{run_id}")
    assert mine.status_code == 200
    assert mine.json()["state"] == "queued" and mine.json()["run_id"] == run_id
    assert Client().get(f"/demos/runs/{run_id}").status_code == 404
    assert Client().post(f"/demos/runs/{run_id}/cancel").status_code == 404


def test_cancelling_a_queued_run_ends_it_and_tells_its_stream(client):
    run_id = start(client).json()["run_id"]
    response = client.post(f"/demos/runs/{run_id}/cancel")
    assert response.status_code == 202
    assert response.json()["state"] == "cancelled"
    published = events.events_read(redis(), run_id=run_id)
    assert [e.type for e in published] == ["cancelled"]
    assert start(client).status_code == 201  # no longer blocks a new run


def test_cancel_body_must_name_a_stream(client):
    run_id = start(client, slug="streaming").json()["run_id"]
    response = client.post(f"/demos/runs/{run_id}/cancel", data=json.dumps({"stream": "x"}),
                           content_type="application/json")
    assert response.status_code == 422 and response.json()["field"] == "stream"


def test_cancelling_one_stream_asks_the_worker_and_leaves_the_run(client):
    run_id = start(client, slug="streaming").json()["run_id"]
    Run.objects.filter(pk=run_id).update(state="running")
    events.heartbeat_beat(redis(), run_id=run_id, ttl_s=30)
    response = client.post(f"/demos/runs/{run_id}/cancel", data=json.dumps({"stream": 1}),
                           content_type="application/json")
    assert response.json()["state"] == "running"
    assert events.cancel_targets(redis(), run_id=run_id) == {"stream:1": "cancelled"}


def test_a_running_run_without_heartbeat_is_failed_with_a_message(client):
    run_id = start(client).json()["run_id"]
    Run.objects.filter(pk=run_id).update(state="running")
    body = client.get(f"/demos/runs/{run_id}").json()
    assert body["state"] == "failed"
    assert "worker" in body["error"]
    assert [e.type for e in events.events_read(redis(), run_id=run_id)] == ["failed"]


@override_settings(DEMO_QUEUE_TIMEOUT=0)
def test_a_run_no_worker_takes_up_fails(client):
    run_id = start(client).json()["run_id"]
    body = client.get(f"/demos/runs/{run_id}").json()
    assert body["state"] == "failed" and "No worker" in body["error"]


@pytest.mark.parametrize("slug", ["lifecycle", "streaming"])
def test_demo_page_renders_the_partial(client, slug):
    response = client.get(f"/demos/{slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="demo-run">Run</button>' in html
    assert "<noscript>" in html
    assert f'data-start-url="/demos/{slug}/runs"' in html


def test_unknown_demo_page_is_404(client):
    assert client.get("/demos/nope/").status_code == 404


def test_events_for_someone_elses_run_is_404(client):
    run_id = start(client).json()["run_id"]
    assert Client().get(f"/demos/runs/{run_id}/events").status_code == 404


def test_a_cookieless_read_creates_no_session(client):
    from django.contrib.sessions.models import Session

    run_id = start(client).json()["run_id"]
    before = Session.objects.count()
    for path in (f"/demos/runs/{run_id}", f"/demos/runs/{run_id}/events"):
        response = Client().get(path)
        assert response.status_code == 404
        assert "sessionid" not in response.cookies
    assert Client().post(f"/demos/runs/{run_id}/cancel").status_code == 404
    assert Session.objects.count() == before
