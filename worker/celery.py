"""The Celery app, configured from Django settings under the CELERY_ namespace.

Start a worker with `celery -A worker.celery worker`. Importing this module imports no torch:
the engine loads lazily inside the tasks that need it, once per worker process.
"""

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutting_down

# As for the web server: production unless told otherwise (it then needs SECRET_KEY);
# `make run` and the tests name their settings explicitly.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.production")

app = Celery("course")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker", "demos"])


@worker_ready.connect
def _heartbeat_start(sender, **kwargs) -> None:
    """Once this worker consumes, write its liveness hash for /healthz (worker/heartbeat.py)."""
    from django.conf import settings

    from worker.heartbeat import heartbeat_start

    queues = sorted(q.name for q in sender.app.amqp.queues.consume_from.values())
    heartbeat_start(url=settings.REDIS_URL, hostname=sender.hostname, queues=queues,
                    model=settings.ENGINE_MODEL)


@worker_shutting_down.connect
def _heartbeat_stop(**kwargs) -> None:
    from worker.heartbeat import heartbeat_stop

    heartbeat_stop()
