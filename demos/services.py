"""Runs: services that write (start, cancel, state changes) and selectors that read.

Views and the Celery task only call these. Every state change is a conditional UPDATE from an
active state, so a late worker cannot overwrite a run the web side already failed, or back.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from demos import events
from demos.conf import demo_setting
from demos.models import Run
from demos.params import RunParams
from demos.runners import runner_queue


class RunConflict(Exception):
    """The visitor already has a run queued or running."""

    def __init__(self, active: Run) -> None:
        super().__init__(f"run {active.id} is still {active.state}")
        self.active = active


class QueueFull(Exception):
    """Too many runs are waiting for a worker, site-wide."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__("the demo queue is full")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class CancelTarget:
    stream: int | None = None  # None: the whole run
    reason: str = "cancelled"  # "cancelled" (a button) or "disconnected" (the client left)


def redis() -> "events.redis.Redis":
    return events.redis_client(settings.REDIS_URL)


def run_owner_for_request(request: HttpRequest) -> str:
    """Who owns runs started by this request: the account, else the session (created if new)."""
    if request.user.is_authenticated:
        return f"user:{request.user.pk}"
    if not request.session.session_key:
        request.session.save()
    return f"session:{request.session.session_key}"


def run_get_for_owner(*, run_id: str, owner: str) -> Run | None:
    """The run if it exists and belongs to `owner`; checks the worker is still alive."""
    run = Run.objects.filter(pk=run_id, owner=owner).first()
    return run_liveness_check(run=run) if run else None


def run_active_for_owner(*, owner: str) -> Run | None:
    for run in Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES):
        run = run_liveness_check(run=run)
        if run.is_active:
            return run
    return None


def run_queued_count() -> int:
    return Run.objects.filter(state=Run.State.QUEUED).count()


def run_start(*, owner: str, demo: str, params: RunParams) -> Run:
    """Create a run and queue its task after the commit. Raises RunConflict or QueueFull."""
    from demos.tasks import run_execute  # the task module imports no torch at import time

    active = run_active_for_owner(owner=owner)
    if active is not None:
        raise RunConflict(active)
    if run_queued_count() >= int(demo_setting("DEMO_MAX_QUEUED")):
        # A run takes at most the time limit; a slot frees sooner on average.
        raise QueueFull(retry_after_s=max(5, int(demo_setting("DEMO_RUN_TIME_LIMIT")) // 4))
    with transaction.atomic():
        run = Run.objects.create(owner=owner, demo=demo, params=params.as_dict())
        # Chat-like demos go to the shared-engine workers, experiments to their own queue.
        queue = str(demo_setting("DEMO_QUEUE")) or runner_queue(demo)
        # delay_on_commit with a queue: the worker must find the row when the task arrives.
        run_execute.apply_async_on_commit(args=[str(run.id)], queue=queue)
    return run


def run_cancel(*, run: Run, target: CancelTarget = CancelTarget()) -> Run:
    """Ask the worker to stop the run (or one stream of it). A queued run ends at once."""
    if not run.is_active:
        return run
    events.cancel_request(redis(), run_id=str(run.id), stream=target.stream,
                          reason=target.reason, ttl_s=int(demo_setting("DEMO_EVENTS_TTL")))
    if target.stream is None and run.state == Run.State.QUEUED:
        # Nothing holds it yet: end it here; the task sees the state and does nothing.
        if run_mark_terminal(run_id=str(run.id), state=Run.State.CANCELLED,
                             from_states=(Run.State.QUEUED,),
                             summary={"reason": target.reason, "blocks_freed": 0}):
            event_publish(run_id=str(run.id), type="cancelled",
                          data={"reason": target.reason, "blocks_freed": 0})
    run.refresh_from_db()
    return run


def run_liveness_check(*, run: Run) -> Run:
    """Fail a run whose worker died (heartbeat gone) or that no worker took up in time."""
    now = timezone.now()
    if run.state == Run.State.RUNNING:
        if not events.heartbeat_alive(redis(), run_id=str(run.id)):
            run_fail(run_id=str(run.id), message="The worker running this demo stopped "
                     "unexpectedly (its heartbeat is gone). Please run it again.")
            run.refresh_from_db()
    elif run.state == Run.State.QUEUED:
        waited = now - run.created_at
        if waited > timedelta(seconds=int(demo_setting("DEMO_QUEUE_TIMEOUT"))):
            run_fail(run_id=str(run.id), message="No worker took this run up in time. "
                     "Is a Celery worker running?", from_states=(Run.State.QUEUED,))
            run.refresh_from_db()
    return run


def event_publish(*, run_id: str, type: str, data: dict, stream: int | None = None) -> str:
    return events.event_publish(redis(), run_id=run_id, type=type, data=data, stream=stream,
                                ttl_s=int(demo_setting("DEMO_EVENTS_TTL")))


def run_mark_running(*, run_id: str) -> bool:
    """queued → running; False when the run is no longer queued (cancelled, failed)."""
    return bool(Run.objects.filter(pk=run_id, state=Run.State.QUEUED)
                .update(state=Run.State.RUNNING, started_at=timezone.now()))


def run_mark_terminal(*, run_id: str, state: str, summary: dict | None = None,
                      error: str = "", from_states: tuple = Run.ACTIVE_STATES) -> bool:
    """Active → finished/failed/cancelled; False when another party ended it first."""
    changes = {"state": state, "finished_at": timezone.now(), "error": error}
    if summary is not None:
        changes["summary"] = summary
    return bool(Run.objects.filter(pk=run_id, state__in=from_states).update(**changes))


def run_fail(*, run_id: str, message: str, summary: dict | None = None,
             from_states: tuple = Run.ACTIVE_STATES) -> bool:
    """End the run as failed with a message for the visitor, and tell its event stream."""
    changed = run_mark_terminal(run_id=run_id, state=Run.State.FAILED, summary=summary,
                                error=message, from_states=from_states)
    if changed:
        event_publish(run_id=run_id, type="failed", data={"message": message})
    return changed


def run_as_json(run: Run) -> dict:
    return {
        "run_id": str(run.id),
        "demo": run.demo,
        "state": run.state,
        "params": run.params,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "summary": run.summary,
        "error": run.error,
    }
