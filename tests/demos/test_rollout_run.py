"""Problem 19's and 20's worker side end to end: a real worker process, real Redis, the SSE relay
under real uvicorn."""

import pytest

from tests.demos.conftest import run_wait_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_rollout_runs_to_finished_with_its_events_in_order(site, celery_worker_process):
    """A faithful INT8 copy passes the offline gate and meets traffic; half its requests made to
    fail, the error gate rolls it back after a few waves."""
    status, started = site.request("POST", "/demos/rollout/runs",
                                   {"candidate": "int8", "requests": 16,
                                    "canary_percent": 50, "inject_error_rate": 0.5})
    assert status == 201, started
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    types = [e.type for e in seen]
    assert types[-1] == "finished", seen[-1].data
    assert types[:4] == ["started", "version_loaded", "version_loaded", "evaluated"]
    assert set(types[4:-3]) == {"window"} and types[-3:] == ["gate", "plot", "finished"]
    finished = seen[-1].data
    assert finished["decision"] == "rollback" and finished["rule"] == "errors"
    assert finished["candidate"] == "int8"
    state = run_wait_state(site, started["run_id"], {"finished"})
    assert state["demo"] == "rollout" and state["params"]["requests"] == 16


def test_a_draft_candidate_is_stopped_before_any_traffic(site, celery_worker_process):
    status, started = site.request("POST", "/demos/rollout/runs",
                                   {"candidate": "draft", "requests": 16,
                                    "canary_percent": 50})
    assert status == 201, started
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    assert [e.type for e in seen] == ["started", "version_loaded", "version_loaded",
                                      "evaluated", "gate", "plot", "finished"]
    finished = seen[-1].data
    assert finished["decision"] == "rollback" and finished["rule"] == "quality"
    assert finished["requests"] == {"current": 0, "candidate": 0}


def test_rollout_parameters_are_checked(site):
    status, body = site.request("POST", "/demos/rollout/runs", {"canary_percent": 99})
    assert status == 422 and body["field"] == "canary_percent"


def test_the_worker_reports_how_long_its_engine_took_to_load(site, celery_worker_process):
    from demos.hardware import engine_load_latest
    from demos.services import redis

    measured = engine_load_latest(redis())
    assert measured is not None
    assert measured["file_bytes"] > 0 and measured["load_seconds"] > 0
    assert measured["model"] == "course-lm"
