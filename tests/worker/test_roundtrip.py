"""A real task through a real Redis to a real worker process and back (no eager mode)."""

import pytest
from django.conf import settings

from worker.celery import app
from worker.tasks import worker_describe


def test_celery_is_not_in_eager_mode():
    assert not app.conf.task_always_eager


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_task_round_trip_through_redis(celery_worker_process):
    result = worker_describe.delay()
    described = result.get(timeout=60)
    assert described["torch"].startswith("2.13.0")
    assert described["engine_model"] == settings.ENGINE_MODEL
    assert app.conf.broker_url == settings.REDIS_URL
