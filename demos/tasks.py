"""The Celery task behind every live demo run: load the run, drive the engine, publish events.

Chat-like demos join the worker's shared engine (one per engine-queue worker process, loaded
when the worker starts); experiments build an engine of their own for the run. Importing this
module imports no torch (the web process imports it to queue runs).
"""

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from demos import events, services
from demos.conf import demo_setting
from demos.models import Run
from plumbing.events import RunHeartbeat

logger = logging.getLogger(__name__)

_TIME_LIMIT = int(demo_setting("DEMO_RUN_TIME_LIMIT"))


class _Heartbeat(RunHeartbeat):
    """A demo run's heartbeat (plumbing/events.py), at DEMO_HEARTBEAT_TTL."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id, ttl_s=int(demo_setting("DEMO_HEARTBEAT_TTL")))


@shared_task(name=services.RUN_EXECUTE_TASK, soft_time_limit=_TIME_LIMIT + 5,
             time_limit=_TIME_LIMIT + 20, acks_late=False)
def run_execute(run_id: str) -> str:
    """Execute one demo run by id; returns its final state."""
    from demos.runners import RunCancelled, RunContext, RunTimeLimit, runner_get
    from worker.demo_engine import engine_build, machine_measure, model_facts, serving_get

    run = Run.objects.filter(pk=run_id).first()
    if run is None or run.state != Run.State.QUEUED:
        return run.state if run else "missing"  # cancelled or failed before a worker took it
    client = services.redis()

    def publish(type: str, data: dict, stream: int | None = None) -> None:
        services.event_publish(run_id=run_id, type=type, data=data, stream=stream)

    runner = runner_get(run.demo)
    device = getattr(settings, "ENGINE_DEVICE", "cpu")
    with _Heartbeat(run_id):
        if not services.run_mark_running(run_id=run_id):
            return Run.objects.get(pk=run_id).state
        ctx = RunContext(
            publish=publish,
            cancel_targets=lambda: events.cancel_targets(client, run_id=run_id),
            time_limit_s=_TIME_LIMIT,
            pace_s=float(demo_setting("DEMO_STREAMING_STEP_DELAY"))
            if run.demo == "streaming" else 0.0,
            keep_file=lambda name, data: services.run_file_keep(run_id=run_id, name=name,
                                                                data=data),
        )
        engine_client = None
        try:
            if runner.engine == "shared":
                serving = serving_get(settings.ENGINE_MODEL, device=device)
                engine_client = serving.loop.client(owner=run.owner)
                ctx.started = time.perf_counter()  # time the run, not waiting for a load
                outcome = runner.run(client=engine_client, machine=serving.machine,
                                     params=run.params, ctx=ctx)
            else:
                engine = engine_build(settings.ENGINE_MODEL, device=device)
                facts = model_facts(engine)
                machine = {**machine_measure(device=device,
                                             working_set_bytes=facts["weight_bytes"]),
                           **facts, "model_path": settings.ENGINE_MODEL, "device": device}
                ctx.started = time.perf_counter()
                outcome = runner.run(engine=engine, machine=machine, params=run.params, ctx=ctx)
        except RunCancelled as cancelled:
            if services.run_mark_terminal(run_id=run_id, state=Run.State.CANCELLED,
                                          summary=cancelled.summary):
                publish("cancelled", cancelled.summary)
            return Run.State.CANCELLED
        except (RunTimeLimit, SoftTimeLimitExceeded) as exc:
            message = (f"This run stopped: {exc}." if isinstance(exc, RunTimeLimit) else
                       f"This run stopped: it passed its time limit of {_TIME_LIMIT} s.")
            services.run_fail(run_id=run_id, reason="time_limit", message=message)
            return Run.State.FAILED
        except Exception as exc:
            # Logged in full; the visitor reads a plain reason, never the exception's text.
            services.run_fail_unexpected(run_id=run_id, exc=exc)
            return Run.State.FAILED
        finally:
            if engine_client is not None:
                engine_client.close()  # whatever is still running returns its blocks
        if services.run_mark_terminal(run_id=run_id, state=outcome.state,
                                      summary=outcome.summary):
            publish(outcome.state, outcome.summary)
        return outcome.state
