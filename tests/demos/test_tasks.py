"""The run task itself, called in this process: the time limit ends a run failed, with a
message, and leaves the engine clean for the next run."""

import pytest

from demos import events, tasks
from demos.models import Run
from demos.services import redis

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_a_run_over_its_time_limit_fails_with_a_message(monkeypatch):
    from django.conf import settings

    from worker.demo_engine import engine_get

    run = Run.objects.create(demo="lifecycle", owner="session:x",
                             params={"prompt": "Hi", "max_tokens": 4, "temperature": 0,
                                     "top_p": 1.0})
    monkeypatch.setattr(tasks, "_TIME_LIMIT", 0)
    assert tasks.run_execute.run(str(run.id)) == "failed"
    run.refresh_from_db()
    assert run.state == "failed" and "time limit of 0 s" in run.error
    published = [e.type for e in events.events_read(redis(), run_id=str(run.id))]
    assert published[0] == "tokenized" and published[-1] == "failed"
    engine, _ = engine_get(settings.ENGINE_MODEL)
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
    assert not engine.has_unfinished()


def test_a_run_no_longer_queued_is_left_alone():
    run = Run.objects.create(demo="lifecycle", owner="session:x", state="cancelled",
                             params={"prompt": "Hi"})
    assert tasks.run_execute.run(str(run.id)) == "cancelled"
    assert events.events_read(redis(), run_id=str(run.id)) == []
