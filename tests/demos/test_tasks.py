"""The run task itself, called in this process: the time limit ends a run failed, with a
message, and leaves the shared engine clean for the next run; an experiment gets an engine of
its own."""

import time

import pytest
import redis as redis_lib

from demos import events, tasks
from demos.models import Run
from demos.services import redis

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_a_run_over_its_time_limit_fails_with_a_message(monkeypatch):
    from django.conf import settings

    from worker.demo_engine import serving_get

    run = Run.objects.create(demo="lifecycle", owner="session:x",
                             params={"prompt": "Hi", "max_tokens": 4, "temperature": 0,
                                     "top_p": 1.0})
    monkeypatch.setattr(tasks, "_TIME_LIMIT", 0)
    assert tasks.run_execute.run(str(run.id)) == "failed"
    run.refresh_from_db()
    assert run.state == "failed" and "time limit of 0 s" in run.error
    published = [e.type for e in events.events_read(redis(), run_id=str(run.id))]
    assert published[0] == "tokenized" and published[-1] == "failed"
    serving = serving_get(settings.ENGINE_MODEL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stats = serving.loop.client(owner="probe").stats()
        if stats["kv_blocks_free"] == stats["kv_blocks_total"]:
            break
        time.sleep(0.01)
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
    assert not serving.loop.clients


def test_a_run_no_longer_queued_is_left_alone():
    run = Run.objects.create(demo="lifecycle", owner="session:x", state="cancelled",
                             params={"prompt": "Hi"})
    assert tasks.run_execute.run(str(run.id)) == "cancelled"
    assert events.events_read(redis(), run_id=str(run.id)) == []


@pytest.mark.parametrize("exc", [AssertionError(), TimeoutError(),
                                 redis_lib.ConnectionError("Error 111 connecting to "
                                                           "10.9.8.7:6379. Connection refused.")])
def test_an_unexpected_failure_says_why_in_plain_words_and_logs_the_rest(monkeypatch, caplog,
                                                                          exc):
    from demos import runners
    from demos.runners import runner_register

    def runner(**kwargs):
        raise exc

    monkeypatch.setitem(runners.RUNNERS, "test-failing", None)
    runner_register("test-failing", runner, engine="shared")
    run = Run.objects.create(demo="test-failing", owner="session:x",
                             params={"prompt": "Hi", "max_tokens": 4, "temperature": 0,
                                     "top_p": 1.0})
    assert tasks.run_execute.run(str(run.id)) == "failed"
    run.refresh_from_db()
    # Items 10 and 15: the visitor reads why, never the internal text; the log has it all.
    assert run.error and run.summary["message"] == run.error
    assert not run.error.rstrip().endswith(":") and "again" in run.error
    assert run.summary["reason"] in ("error", "redis")
    assert "10.9.8.7" not in run.error and "Error 111" not in run.error
    failed = events.events_read(redis(), run_id=str(run.id))[-1]
    assert failed.type == "failed" and failed.data["message"] == run.error
    assert any(r.exc_info and r.exc_info[1] is exc for r in caplog.records)


def test_an_experiment_runs_on_an_engine_of_its_own(monkeypatch):
    """A runner registered as "own" gets a fresh engine, not the shared one, and its queue is
    the experiments queue."""
    from django.conf import settings

    from demos import runners
    from demos.runners import RunOutcome, runner_queue, runner_register
    from worker.demo_engine import serving_get

    seen = {}

    def experiment(*, engine, machine, params, ctx):
        from worker.engine import SamplingParams

        seen["engine"] = engine
        out = engine.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=3,
                                                          ignore_eos=True))
        ctx.publish("measured", {"tokens": len(out[0].token_ids)})
        return RunOutcome(state="finished", summary={"tokens": len(out[0].token_ids)})

    monkeypatch.setitem(runners.RUNNERS, "test-experiment", None)
    runner_register("test-experiment", experiment, engine="own")
    assert runner_queue("test-experiment") == settings.EXPERIMENT_QUEUE
    assert runner_queue("lifecycle") == settings.ENGINE_QUEUE
    run = Run.objects.create(demo="test-experiment", owner="session:x", params={})
    assert tasks.run_execute.run(str(run.id)) == "finished"
    run.refresh_from_db()
    assert run.summary == {"tokens": 3}
    assert seen["engine"] is not serving_get(settings.ENGINE_MODEL).loop.engine
    published = [e.type for e in events.events_read(redis(), run_id=str(run.id))]
    assert published == ["measured", "finished"]
