"""A worker that dies mid-run leaves the run failed with a message, not running forever.

A shared-engine worker of its own, on a queue of its own, is SIGKILLed (its whole process
group) once the run has streamed a token.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from django.test import override_settings

from demos import events
from demos.models import Run
from demos.services import redis
from tests.conftest import ROOT, _test_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

QUEUE = f"demos-kill-test-{os.getpid()}"


@pytest.fixture
def doomed_worker():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.test",
           "DATABASE_URL": _test_database_url(), "DEMO_HEARTBEAT_TTL": "2",
           "ENGINE_QUEUE": QUEUE}
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery", "worker", "--loglevel", "WARNING",
         "--concurrency", "4", "--pool", "threads", "--without-gossip", "--without-mingle",
         "-Q", QUEUE, "--hostname", f"doomed-{os.getpid()}@%h"],
        cwd=ROOT, env=env, start_new_session=True)
    yield process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    # A killed worker's heartbeat hash would count for 15 s more: later tests expect one.
    for key in redis().scan_iter(match=f"course:worker:doomed-{os.getpid()}@*"):
        redis().delete(key)


def run_state_wait(client, run_id: str, *, timeout: float) -> dict:
    """Poll the run through the web view (which notices a dead worker) until it ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/demos/runs/{run_id}").json()
        if body["state"] not in ("queued", "running"):
            return body
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} still {body['state']} after {timeout} s")


def test_a_killed_worker_leaves_the_run_failed(client, doomed_worker):
    # In this process, so the run goes to the doomed worker's queue.
    with override_settings(DEMO_QUEUE=QUEUE):
        response = client.post("/demos/streaming/runs", content_type="application/json",
                               data=json.dumps({"prompt": "Hello", "max_tokens": 400}))
    assert response.status_code == 201, response.content
    run_id = response.json()["run_id"]
    deadline = time.monotonic() + 120  # the worker first starts and loads the model
    while time.monotonic() < deadline:
        if any(e.type == "token" for e in events.events_read(redis(), run_id=run_id)):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the doomed worker never streamed a token")
    os.killpg(doomed_worker.pid, signal.SIGKILL)
    doomed_worker.wait()

    state = run_state_wait(client, run_id, timeout=60)
    assert state["state"] == "failed"
    assert "stopped unexpectedly" in state["error"]
    assert events.events_read(redis(), run_id=run_id)[-1].type == "failed"
    # The visitor is free to start another run.
    assert Run.objects.get(pk=run_id).state == "failed"
    assert not Run.objects.filter(owner=Run.objects.get(pk=run_id).owner,
                                  state__in=Run.ACTIVE_STATES).exists()
