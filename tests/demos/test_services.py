"""The run services under abuse and faults: the queue cannot be filled by one address nor
wedged by runs that never reach a worker, and one active run per visitor holds under races."""

import concurrent.futures
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from kombu.exceptions import OperationalError

from demos import events, services
from demos.models import Run
from demos.params import RunParams
from demos.services import redis
from tests.demos.conftest import run_wait_state

PARAMS = RunParams(prompt="Hi", max_tokens=8, temperature=0.0, top_p=1.0)


def start(client: Client, slug: str = "lifecycle", body=None, **extra):
    return client.post(f"/demos/{slug}/runs", data=json.dumps(body or {"prompt": "Hi"}),
                       content_type="application/json", **extra)


# ---- item 2: a run that never reaches a worker ----------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_an_enqueue_failure_fails_the_run_and_answers_503(client, monkeypatch):
    from worker.celery import app

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 10.1.2.3:6379. Connection refused.")

    monkeypatch.setattr(app, "send_task", broker_down)  # the run is sent by the task's name
    response = start(client)
    assert response.status_code == 503
    body = response.json()
    assert "try again" in body["error"] and "10.1.2.3" not in body["error"]
    run = Run.objects.get()
    assert run.state == "failed" and run.error and "10.1.2.3" not in run.error
    assert run.summary["reason"] == "enqueue_failed"
    monkeypatch.undo()
    with override_settings(DEMO_QUEUE="demos-nobody-listens"):
        assert start(client).status_code == 201  # the failed run holds nothing


@pytest.mark.django_db
@override_settings(DEMO_MAX_QUEUED=2, DEMO_QUEUE_TIMEOUT=60)
def test_stale_queued_runs_leave_the_count():
    for n in range(2):
        run = Run.objects.create(owner=f"session:old{n}", demo="lifecycle", params={})
        Run.objects.filter(pk=run.pk).update(
            created_at=timezone.now() - timezone.timedelta(seconds=61))
    # Both are past the queue timeout: they no longer hold the queue shut.
    run = services.run_start(owner="session:new", demo="lifecycle", params=PARAMS)
    assert run.state == "queued"


@pytest.mark.django_db
@override_settings(DEMO_QUEUE_TIMEOUT=60, DEMO_LOST_GRACE=5)
def test_the_sweeper_ends_runs_whose_worker_is_gone():
    old = timezone.now() - timezone.timedelta(seconds=61)
    waited = Run.objects.create(owner="session:a", demo="lifecycle", params={})
    lost = Run.objects.create(owner="session:b", demo="lifecycle", params={})
    Run.objects.create(owner="session:c", demo="lifecycle", params={}, state="running")
    waiting = Run.objects.create(owner="session:d", demo="lifecycle", params={})
    alive = Run.objects.create(owner="session:e", demo="lifecycle", params={}, state="running")
    Run.objects.filter(pk=waited.pk).update(created_at=old)
    # `lost` was queued 10 s ago, but its message went with a Redis restart (no marker);
    # `waiting` was queued as long ago and its message is still there.
    ten_ago = timezone.now() - timezone.timedelta(seconds=10)
    Run.objects.filter(pk__in=[lost.pk, waiting.pk]).update(created_at=ten_ago)
    services.run_enqueued_mark(run_id=str(waiting.id))
    events.heartbeat_beat(redis(), run_id=str(alive.id), ttl_s=30)

    swept = services.runs_sweep()

    states = {r.owner: r for r in Run.objects.all()}
    assert states["session:a"].state == "failed" and "No worker" in states["session:a"].error
    assert states["session:b"].state == "failed"
    assert states["session:b"].summary["reason"] == "lost"
    assert states["session:c"].state == "failed"
    assert states["session:c"].summary["reason"] == "worker_lost"
    assert states["session:d"].state == "queued"
    assert states["session:e"].state == "running"
    assert swept == {"queue_timeout": 1, "lost": 1, "worker_lost": 1}


@pytest.mark.django_db
def test_a_run_queued_while_no_worker_is_up_waits_for_one():
    # Item 15: a worker still starting (no heartbeat hash yet) is no reason to fail a run.
    keys = list(redis().scan_iter(match="course:worker:*"))
    if keys:
        redis().delete(*keys)
    run = services.run_start(owner="session:early", demo="lifecycle", params=PARAMS)
    services.run_enqueued_mark(run_id=str(run.id))
    services.runs_sweep()
    run.refresh_from_db()
    assert run.state == "queued"


# ---- item 3: no one fills the queue --------------------------------------------------------

@pytest.mark.django_db
def test_cookieless_posts_from_one_address_cannot_fill_the_queue():
    statuses = [start(Client(), REMOTE_ADDR="203.0.113.7").status_code for _ in range(10)]
    assert statuses.count(201) <= 2, statuses
    assert set(statuses[2:]) == {429}
    refused = start(Client(), REMOTE_ADDR="203.0.113.7")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "address" in refused.json()["error"]
    # Another visitor elsewhere still gets a run.
    assert start(Client(), REMOTE_ADDR="198.51.100.1").status_code == 201


@pytest.mark.django_db
def test_run_starts_are_limited_per_address_per_minute():
    statuses = []
    for _ in range(25):
        visitor = Client()
        response = start(visitor, REMOTE_ADDR="203.0.113.9")
        statuses.append(response.status_code)
        if response.status_code == 201:  # ends at once, so only the rate limit can refuse
            visitor.post(f"/demos/runs/{response.json()['run_id']}/cancel")
    assert 201 in statuses and statuses[-1] == 429
    assert statuses.count(201) <= 20


@pytest.mark.django_db
@override_settings(DEMO_MAX_QUEUED=3)
def test_signed_in_learners_have_their_own_share_of_the_queue():
    for n in range(3):
        assert start(Client(), REMOTE_ADDR=f"198.51.100.{n + 10}").status_code == 201
    assert start(Client(), REMOTE_ADDR="198.51.100.99").status_code == 429
    learner = Client()
    learner.force_login(User.objects.create_user("ada", password="x" * 12))
    assert start(learner, REMOTE_ADDR="198.51.100.99").status_code == 201


@pytest.mark.django_db
@override_settings(DEMO_MAX_QUEUED_TOKENS=1200)
def test_the_queue_is_capped_by_work_not_only_by_runs():
    big = {"prompt": "Hi", "max_tokens": 512}
    assert start(Client(), body=big, REMOTE_ADDR="198.51.100.1").status_code == 201
    # Three streams of about 300 tokens each: room for it alone, not beside the first run.
    response = start(Client(), "streaming", body={"prompt": "Hi", "max_tokens": 300},
                     REMOTE_ADDR="198.51.100.2")
    assert response.status_code == 429
    assert "tokens" in response.json()["error"]
    # Three streams of 512: more than the whole share, so never, whatever waits: 422.
    response = start(Client(), "streaming", body=big, REMOTE_ADDR="198.51.100.4")
    assert response.status_code == 422 and response.json()["field"] == "max_tokens"
    small = {"prompt": "Hi", "max_tokens": 16}
    assert start(Client(), body=small, REMOTE_ADDR="198.51.100.3").status_code == 201


# ---- item 4: one active run per visitor, enforced by the database ---------------------------

@pytest.mark.django_db
def test_the_database_refuses_a_second_active_run_for_one_owner(monkeypatch):
    first = services.run_start(owner="session:same", demo="lifecycle", params=PARAMS)
    # As if a parallel request had checked before the first one's row existed.
    monkeypatch.setattr(services, "run_active_for_owner", lambda owner: None)
    with pytest.raises(services.RunConflict) as conflict:
        services.run_start(owner="session:same", demo="streaming", params=PARAMS)
    assert conflict.value.active.id == first.id
    assert Run.objects.filter(owner="session:same").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_parallel_starts_from_one_session_make_one_run(site):
    # Under uvicorn, as a browser would: six POSTs at once with one session cookie.
    status, first = site.request("POST", "/demos/lifecycle/runs", {"prompt": "Hi"})
    assert status == 201, first
    site.request("POST", f"/demos/runs/{first['run_id']}/cancel", {})  # now it has a session
    # A worker may have taken it up already: then the cancel lands a step later.
    run_wait_state(site, first["run_id"], {"cancelled", "finished", "failed"})
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(lambda _: site.request("POST", "/demos/lifecycle/runs",
                                                       {"prompt": "Hi"}), range(6)))
    statuses = sorted(status for status, _ in replies)
    # One active run at a time, not one run in all: the starts queue on a lock, and a short run
    # can finish before the last of them gets it (on an idle machine the 64-token lifecycle run
    # takes well under a second). Every start is either refused for an active run or began
    # after the previous one had ended.
    assert statuses[0] == 201 and set(statuses) <= {201, 409}, replies
    created = [body["run_id"] for status, body in replies if status == 201]
    for run_id in created:
        site.request("POST", f"/demos/runs/{run_id}/cancel", {})
        run_wait_state(site, run_id, {"cancelled", "finished", "failed"})
    runs = sorted(Run.objects.filter(pk__in=created), key=lambda r: r.created_at)
    assert len(runs) == len(created)
    for earlier, later in zip(runs, runs[1:], strict=False):
        assert earlier.finished_at is not None and earlier.finished_at <= later.created_at, (
            f"runs {earlier.id} and {later.id} of one session were active at once")
