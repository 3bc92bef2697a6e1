"""The Celery app, configured from Django settings under the CELERY_ namespace.

Two kinds of worker, by the queues they consume (README, "Running at scale"):
- the engine queue (settings.ENGINE_QUEUE): `--pool threads`, many tasks at once, one shared
  engine per process that every chat-like request joins (worker/engine_loop.py);
- the experiments queue (settings.EXPERIMENT_QUEUE): controlled experiments that build engines
  of their own, one at a time, so they never hold up a learner's request.

Importing this module imports no torch: a worker on the engine queue loads its engine in a
thread once it has started (`worker_serving_setup` below), and says when it is ready.
"""

import logging
import os
import threading
from pathlib import Path

from celery import Celery
from celery.signals import celeryd_after_setup, worker_shutdown

# As for the web server: production unless told otherwise (it then needs SECRET_KEY);
# `make run` and the tests name their settings explicitly.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.production")

logger = logging.getLogger(__name__)

app = Celery("course")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker", "demos"])

_beat = None  # this process's worker.heartbeat.WorkerBeat


@celeryd_after_setup.connect
def worker_serving_setup(sender: str, instance, **kwargs) -> None:  # noqa: ANN001, ANN003
    """Start the heartbeat and, on the engine queue, load the shared engine in a thread."""
    global _beat
    from django.conf import settings

    from plumbing.events import redis_client
    from worker.heartbeat import WorkerBeat

    consume_from = instance.app.amqp.queues.consume_from
    queues = sorted(consume_from) if consume_from else [settings.CELERY_TASK_DEFAULT_QUEUE]
    shared = settings.ENGINE_QUEUE in queues
    pool = getattr(instance.pool_cls, "__module__", str(instance.pool_cls))
    if shared and "prefork" in pool:
        logger.warning("the engine queue wants --pool threads: with prefork, each child "
                       "process loads an engine of its own and requests cannot share steps")
        shared = False  # each child loads lazily on its first task

    def publish(client) -> None:  # noqa: ANN001
        from worker import demo_engine
        from worker.engine_metrics import metrics_publish

        if demo_engine._serving is not None:
            metrics_publish(client, hostname=sender,
                            text=demo_engine._serving.metrics.text())

    _beat = WorkerBeat(client_factory=lambda: redis_client(settings.REDIS_URL), hostname=sender,
                       queues=queues, model=settings.ENGINE_MODEL,
                       publish=publish if shared else None).start()
    if not shared:
        _beat.ready()
        return

    def load() -> None:
        from worker.demo_engine import serving_start

        try:
            serving = serving_start(settings.ENGINE_MODEL, device=settings.ENGINE_DEVICE)
        except Exception:
            logger.exception("the shared engine failed to load: this worker stays not ready")
            return
        _beat.ready(kernels=serving.loop.client(owner="heartbeat").stats()["cpu_kernels"])
        try:
            from plumbing.hardware import engine_load_store

            m = serving.machine
            engine_load_store(redis_client(settings.REDIS_URL), {
                "hostname": sender, "model": Path(settings.ENGINE_MODEL).name,
                "device": m.get("device", "cpu"), "file_bytes": m.get("file_bytes", 0),
                "load_seconds": m.get("load_seconds", 0.0),
                "warmup_seconds": m.get("warmup_seconds", 0.0)})
        except Exception:  # Redis briefly away: the page says no load was measured
            logger.warning("could not store the engine's load time", exc_info=True)

    threading.Thread(target=load, daemon=True, name="engine-load").start()


@worker_shutdown.connect
def worker_serving_stop(**kwargs) -> None:  # noqa: ANN003
    if _beat is not None:
        _beat.stop()
