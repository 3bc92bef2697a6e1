"""A run queued before any worker is up waits for one, and finishes once a worker starts:
a worker still starting is no reason to fail a run (issue 10, item 15)."""

import json
import os
import subprocess
import sys
import time

import pytest
from django.test import override_settings

from demos.services import runs_sweep
from tests.conftest import ROOT, _test_database_url, process_stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]

QUEUE = f"demos-late-worker-{os.getpid()}"


def test_a_run_queued_before_the_worker_starts_waits_for_it(client):
    with override_settings(DEMO_QUEUE=QUEUE, DEMO_LOST_GRACE=0):
        response = client.post("/demos/lifecycle/runs", content_type="application/json",
                               data=json.dumps({"prompt": "Hi", "max_tokens": 3,
                                                "temperature": 0}))
        assert response.status_code == 201, response.content
        run_id = response.json()["run_id"]
        time.sleep(0.5)
        runs_sweep()  # no worker anywhere on this queue yet: the run must stay queued
        assert client.get(f"/demos/runs/{run_id}").json()["state"] == "queued"

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.test",
           "DATABASE_URL": _test_database_url()}
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery", "worker", "--loglevel", "WARNING",
         "--concurrency", "1", "--pool", "prefork", "--without-gossip", "--without-mingle",
         "-Q", QUEUE, "--hostname", f"late-{os.getpid()}@%h"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120  # a deadline, not a timing: the worker starts, loads
        while time.monotonic() < deadline:
            body = client.get(f"/demos/runs/{run_id}").json()
            if body["state"] not in ("queued", "running"):
                break
            time.sleep(0.3)
        assert body["state"] == "finished", body
        assert body["summary"]["usage"]["completion_tokens"] >= 1
    finally:
        process_stop(worker)
