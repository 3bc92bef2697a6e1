"""Runs: services that write (start, cancel, state changes) and selectors that read.

Views and the Celery task only call these. Every state change is a conditional UPDATE from an
active state, so a late worker cannot overwrite a run the web side already failed, or back.

What keeps the queue usable under abuse and faults:
- one active run per visitor, held by a partial unique index (demos/models.py);
- run starts limited per visitor and, for anonymous visitors, per client address (per minute,
  and runs active at once), since dropping cookies makes a new visitor every time;
- four shares of the queue (anonymous visitors and signed-in learners, each on the engine
  queue and on the experiments queue), each capped by runs and by tokens of work, and a cap on
  experiments per client address whoever is signed in; a run asking for more work than a
  whole share is refused at once (WorkTooLarge, naming the parameter to lower);
- a run whose message cannot be sent fails at once (the view answers 503); a run whose message
  was lost (Redis restarted), that waited past the queue timeout, or whose worker died is ended
  by `runs_sweep`, which the web processes run every DEMO_SWEEP_INTERVAL seconds.
"""

import ipaddress
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.http import HttpRequest
from django.utils import timezone

from demos import events
from demos.conf import demo_setting
from demos.models import Run
from demos.params import RunParams
from demos.runners import runner_queue
from demos.schema import SchemaParams

logger = logging.getLogger(__name__)


class RunConflict(Exception):
    """The visitor already has a run queued or running."""

    def __init__(self, active: Run) -> None:
        super().__init__(f"run {active.id} is still {active.state}")
        self.active = active


class QueueFull(Exception):
    """Too many runs, or too many tokens of work, are waiting for a worker in this share."""

    def __init__(self, retry_after_s: int, message: str = "The demo queue is full") -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.message = message


class WorkTooLarge(Exception):
    """The run asks for more work than its share of the queue can ever hold: lower `field`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class RateLimited(Exception):
    """This visitor or address started too many runs; `message` says which limit."""

    def __init__(self, retry_after_s: int, message: str) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.message = message


class EnqueueFailed(Exception):
    """The run's message could not be sent to the workers; the run is failed already."""


@dataclass(frozen=True)
class CancelTarget:
    stream: int | None = None  # None: the whole run
    reason: str = "cancelled"  # "cancelled" (a button) or "disconnected" (the client left)


def redis() -> "events.redis.Redis":
    return events.redis_client(settings.REDIS_URL)


def run_owner_for_request(request: HttpRequest, *, create: bool = True) -> str | None:
    """Who owns runs started by this request: the account, else the session.

    Only a request that starts something creates a session (`create`); one that only reads
    gets None when it has none, so a cookie-less GET never writes a session row.
    """
    if request.user.is_authenticated:
        return f"user:{request.user.pk}"
    if not request.session.session_key:
        if not create:
            return None
        request.session.save()
    return f"session:{request.session.session_key}"


def client_address_for_request(request: HttpRequest) -> str | None:
    """The client's IP address: REMOTE_ADDR, or behind TRUSTED_PROXY_COUNT proxies the entry
    that many from the right of X-Forwarded-For (what the nearest trusted proxy saw)."""
    proxies = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0))
    candidate = request.META.get("REMOTE_ADDR", "")
    if proxies > 0:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
                if h.strip()]
        if len(hops) >= proxies:
            candidate = hops[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return None


def run_get_for_owner(*, run_id: str, owner: str | None) -> Run | None:
    """The run if it exists and belongs to `owner`; checks the worker is still alive."""
    if owner is None:
        return None
    run = Run.objects.filter(pk=run_id, owner=owner).first()
    return run_liveness_check(run=run) if run else None


def run_active_for_owner(*, owner: str) -> Run | None:
    for run in Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES):
        run = run_liveness_check(run=run)
        if run.is_active:
            return run
    return None


def _queue_timeout() -> timedelta:
    return timedelta(seconds=int(demo_setting("DEMO_QUEUE_TIMEOUT")))


def _share_filter(anonymous: bool) -> dict:
    return {"owner__startswith": "session:" if anonymous else "user:"}


def _is_experiment(demo: str) -> bool:
    from demos.params import DEMO_SLUGS

    return demo not in DEMO_SLUGS and runner_queue(demo) == settings.EXPERIMENT_QUEUE


def demos_on_queue(*, experiments: bool) -> list[str]:
    """The demos whose runs wait on the experiments queue (or on the engine queue)."""
    from demos.params import DEMO_SLUGS
    from demos.runners import RUNNERS

    return [d for d in (*DEMO_SLUGS, *RUNNERS) if _is_experiment(d) == experiments]


def share_token_limit(*, experiments: bool) -> int:
    return int(demo_setting("DEMO_MAX_QUEUED_EXPERIMENT_TOKENS" if experiments
                            else "DEMO_MAX_QUEUED_TOKENS"))


def run_work_fit_check(*, demo: str, params: "RunParams | SchemaParams", work: int) -> None:
    """WorkTooLarge when `work` alone passes its share's token limit: such a run could never
    start (kv-bytes' defaults asked for 8,256 against 8,000 and were told to retry forever).
    Names the parameter whose lowest value frees the most work."""
    limit = share_token_limit(experiments=_is_experiment(demo))
    if work <= limit:
        return
    field = "max_tokens"
    if isinstance(params, SchemaParams):
        from demos.runners import runner_get

        schema = runner_get(demo).params
        savings = {}
        for spec in schema.specs:
            if spec.kind == "whole" and spec.minimum is not None:
                lowered = {**params.values, spec.name: int(spec.minimum)}
                savings[spec.name] = work - int(schema.work(lowered))
            elif spec.kind == "choices" and len(params.values[spec.name]) > 1:
                lowered = {**params.values, spec.name: params.values[spec.name][:1]}
                savings[spec.name] = work - int(schema.work(lowered))
        if savings:
            field = max(savings, key=savings.get)
    raise WorkTooLarge(field, f"asks for {work:,} tokens of work and this demo's share of the "
                       f"queue holds at most {limit:,}; lower {field}")


def run_queued_load(*, anonymous: bool, experiments: bool = False) -> tuple[int, int]:
    """(runs, tokens of work) waiting in one share of the queue; runs past the queue timeout
    no longer count (the sweeper ends them)."""
    waiting = Run.objects.filter(state=Run.State.QUEUED, **_share_filter(anonymous),
                                 demo__in=demos_on_queue(experiments=experiments),
                                 created_at__gte=timezone.now() - _queue_timeout())
    totals = waiting.aggregate(tokens=Sum("work_tokens"))
    return waiting.count(), int(totals["tokens"] or 0)


def run_queued_count() -> int:
    """Runs waiting for a worker, both shares, not counting those past the queue timeout."""
    return Run.objects.filter(state=Run.State.QUEUED,
                              created_at__gte=timezone.now() - _queue_timeout()).count()


def run_work_tokens(*, demo: str, params: "RunParams | SchemaParams",
                    prompt_tokens: int) -> int:
    """Tokens a run asks the engine for: its prompt and max_tokens, for every stream it runs;
    for a demo with a schema of its own, what its schema counts."""
    if isinstance(params, SchemaParams):
        return params.work_tokens
    from demos.runners.streaming import streaming_prompts  # plain Python, no torch

    streams = len(streaming_prompts(params.prompt)) if demo == "streaming" else 1
    return streams * (prompt_tokens + params.max_tokens)


def _starts_count(scope: str, limit: int) -> int:
    """Count one run start against `scope` in this minute; the seconds left in it when over
    `limit`, else 0."""
    now = time.time()
    window = int(now // 60)
    key = f"ratelimit:runs:{scope}:{window}"
    pipe = redis().pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, 61)
    count, _ = pipe.execute()
    return max(1, int(60 - now % 60)) if count > limit else 0


def _limits_check(*, owner: str, client_addr: str | None, demo: str = "") -> None:
    retry = _starts_count(f"owner:{owner}", int(demo_setting("DEMO_STARTS_PER_MINUTE")))
    if retry:
        raise RateLimited(retry, "You have started too many runs in the last minute; try "
                          f"again in {retry} s.")
    if client_addr is not None and demo and _is_experiment(demo):
        running = Run.objects.filter(client_addr=client_addr, state__in=Run.ACTIVE_STATES,
                                     demo__in=demos_on_queue(experiments=True)).count()
        if running >= int(demo_setting("DEMO_EXPERIMENTS_PER_ADDRESS")):
            raise RateLimited(max(5, int(demo_setting("DEMO_RUN_TIME_LIMIT")) // 4),
                              "Too many experiments from your address are waiting or running; "
                              "wait for one to end.")
    if not owner.startswith("session:") or client_addr is None:
        return  # signed-in learners are limited per account, not per shared address
    active = Run.objects.filter(client_addr=client_addr, state__in=Run.ACTIVE_STATES,
                                owner__startswith="session:").count()
    if active >= int(demo_setting("DEMO_ACTIVE_PER_ADDRESS")):
        raise RateLimited(max(5, int(demo_setting("DEMO_RUN_TIME_LIMIT")) // 4),
                          "Too many runs from your address are waiting or running; wait for "
                          "one to end, or sign in to get runs of your own.")
    retry = _starts_count(f"addr:{client_addr}",
                          int(demo_setting("DEMO_ADDRESS_STARTS_PER_MINUTE")))
    if retry:
        raise RateLimited(retry, "Too many runs were started from your address in the last "
                          f"minute; try again in {retry} s, or sign in.")


def _queue_check(*, anonymous: bool, work_tokens: int, experiments: bool = False) -> None:
    limit = int(demo_setting("DEMO_MAX_QUEUED" if anonymous else "DEMO_MAX_QUEUED_ACCOUNTS"))
    token_limit = share_token_limit(experiments=experiments)
    retry = max(5, int(demo_setting("DEMO_RUN_TIME_LIMIT")) // 4)
    runs, tokens = run_queued_load(anonymous=anonymous, experiments=experiments)
    if runs >= limit or tokens + work_tokens > token_limit:
        runs_sweep()  # runs whose worker is gone must not hold the queue shut
        runs, tokens = run_queued_load(anonymous=anonymous, experiments=experiments)
    # A slot frees sooner on average than a run's time limit.
    if runs >= limit:
        raise QueueFull(retry, f"The demo queue is full; try again in {retry} s.")
    if tokens + work_tokens > token_limit:
        raise QueueFull(retry, f"The demo queue holds {tokens:,} tokens of work and this run "
                        f"asks for {work_tokens:,} more (the limit is {token_limit:,}); try "
                        f"again in {retry} s, or ask for fewer tokens.")


RUN_EXECUTE_TASK = "demos.run_execute"  # demos/tasks.py's task, sent by name


def enqueued_key(run_id: str) -> str:
    return f"run:{run_id}:enqueued"


def run_enqueued_mark(*, run_id: str) -> None:
    """Note beside the broker's messages that this run was sent: if Redis restarts without
    them, the note is gone too, and the sweeper knows the run will never be taken up."""
    ttl = int(demo_setting("DEMO_QUEUE_TIMEOUT")) + 60
    redis().set(enqueued_key(run_id), "1", ex=ttl)


def _enqueue(run: Run) -> None:
    # Sent by name: demos/tasks.py imports this module, and this one does not import it back.
    from worker.celery import app

    # Chat-like demos go to the shared-engine workers, experiments to their own queue.
    queue = str(demo_setting("DEMO_QUEUE")) or runner_queue(run.demo)
    run_enqueued_mark(run_id=str(run.id))
    # retry=False: a broker that is down answers now, not after Celery's retries.
    app.send_task(RUN_EXECUTE_TASK, args=[str(run.id)], queue=queue, retry=False)


def run_start(*, owner: str, demo: str, params: "RunParams | SchemaParams",
              client_addr: str | None = None, prompt_tokens: int = 0) -> Run:
    """Create a run and queue its task after the commit.

    Raises WorkTooLarge, RunConflict, RateLimited, QueueFull, or EnqueueFailed (the run is
    then failed).
    """
    work = run_work_tokens(demo=demo, params=params, prompt_tokens=prompt_tokens)
    run_work_fit_check(demo=demo, params=params, work=work)
    active = run_active_for_owner(owner=owner)
    if active is not None:
        raise RunConflict(active)
    # The per-address counts are checked and taken (the row inserted) under one lock per
    # address, so parallel starts from one address cannot all pass a check before any of
    # them has inserted its run (the owner's one active run is a unique index already).
    lock = redis().lock(f"lock:runstart:{client_addr or owner}", timeout=30,
                        blocking_timeout=30)
    if not lock.acquire():
        raise RateLimited(2, "Too many runs are starting from your address at once; try "
                          "again in 2 s.")
    try:
        return _run_start_locked(owner=owner, demo=demo, params=params,
                                 client_addr=client_addr, work=work)
    finally:
        try:
            lock.release()
        except Exception:  # expired meanwhile: the next start takes it afresh
            logger.warning("the run-start lock for %s had expired", client_addr or owner)


def _run_start_locked(*, owner: str, demo: str, params: "RunParams | SchemaParams",
                      client_addr: str | None, work: int) -> Run:
    # A parallel start of the same owner that held the lock before us has its run by now.
    active = Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES).first()
    if active is not None:
        raise RunConflict(active)
    _limits_check(owner=owner, client_addr=client_addr, demo=demo)
    _queue_check(anonymous=owner.startswith("session:"), work_tokens=work,
                 experiments=_is_experiment(demo))
    failure: list[BaseException] = []

    def send() -> None:
        try:
            _enqueue(run)
        except Exception as exc:  # kombu and redis raise several kinds; all mean "not sent"
            failure.append(exc)

    try:
        with transaction.atomic():
            run = Run.objects.create(owner=owner, demo=demo, params=params.as_dict(),
                                     client_addr=client_addr, work_tokens=work)
            # After the commit: the worker must find the row when the task arrives.
            transaction.on_commit(send)
    except IntegrityError:
        # A parallel request of the same visitor created its run between our check and here.
        active = Run.objects.filter(owner=owner, state__in=Run.ACTIVE_STATES).first()
        if active is None:
            raise
        raise RunConflict(active) from None
    if failure:
        logger.error("could not queue run %s", run.id, exc_info=failure[0])
        run_fail(run_id=str(run.id), reason="enqueue_failed",
                 message="The demo could not be queued: the service that hands runs to the "
                 "workers did not answer. Please try again in a minute.")
        raise EnqueueFailed(str(run.id))
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


def _worker_lost_message() -> str:
    return ("The worker running this demo stopped unexpectedly (its heartbeat is gone). "
            "Please run it again.")


def _queue_timeout_message() -> str:
    return "No worker took this run up in time. Is a Celery worker running?"


# The marker is written right after the run's row commits; a queued run older than this without
# it was lost.
ENQUEUED_MARK_GRACE = timedelta(seconds=3)


def _lost_message() -> str:
    return ("This run was lost before a worker took it up (the message store restarted). "
            "Please run it again.")


def run_liveness_check(*, run: Run) -> Run:
    """Fail a run whose worker died (heartbeat gone) or that no worker took up in time."""
    now = timezone.now()
    if run.state == Run.State.RUNNING:
        if not events.heartbeat_alive(redis(), run_id=str(run.id)):
            run_fail(run_id=str(run.id), message=_worker_lost_message(), reason="worker_lost",
                     from_states=(Run.State.RUNNING,))
            run.refresh_from_db()
    elif run.state == Run.State.QUEUED:
        if now - run.created_at > _queue_timeout():
            run_fail(run_id=str(run.id), message=_queue_timeout_message(),
                     reason="queue_timeout", from_states=(Run.State.QUEUED,))
            run.refresh_from_db()
        elif (now - run.created_at > ENQUEUED_MARK_GRACE
              and not redis().exists(enqueued_key(str(run.id)))):
            # Its message went with a Redis restart: no worker will ever take it up. Said
            # here, the owner's next start is not refused for the sweep's next pass (about
            # 40 s blocked after a restart).
            run_fail(run_id=str(run.id), reason="lost", from_states=(Run.State.QUEUED,),
                     message=_lost_message())
            run.refresh_from_db()
    return run


def runs_sweep() -> dict[str, int]:
    """End every run whose worker is gone: queued past the queue timeout, queued but its
    message lost (the marker beside it in Redis is gone), or running with no heartbeat.

    A queued run merely waiting (no worker up yet, or all busy) is left alone. Returns how
    many runs it ended, by reason.
    """
    now = timezone.now()
    ended = {"queue_timeout": 0, "lost": 0, "worker_lost": 0}
    client = redis()
    for run in Run.objects.filter(state=Run.State.QUEUED, created_at__lt=now - _queue_timeout()):
        ended["queue_timeout"] += run_fail(run_id=str(run.id), message=_queue_timeout_message(),
                                           reason="queue_timeout",
                                           from_states=(Run.State.QUEUED,))
    grace = timedelta(seconds=float(demo_setting("DEMO_LOST_GRACE")))
    waiting = list(Run.objects.filter(state=Run.State.QUEUED, created_at__lt=now - grace)
                   .values_list("id", flat=True))
    if waiting:
        pipe = client.pipeline(transaction=False)
        for run_id in waiting:
            pipe.exists(enqueued_key(str(run_id)))
        for run_id, marked in zip(waiting, pipe.execute(), strict=True):
            if not marked:
                ended["lost"] += run_fail(
                    run_id=str(run_id), reason="lost", from_states=(Run.State.QUEUED,),
                    message=_lost_message())
    running = list(Run.objects.filter(state=Run.State.RUNNING).values_list("id", flat=True))
    if running:
        pipe = client.pipeline(transaction=False)
        for run_id in running:
            pipe.exists(events.heartbeat_key(str(run_id)))
        for run_id, alive in zip(running, pipe.execute(), strict=True):
            if not alive:
                ended["worker_lost"] += run_fail(run_id=str(run_id), reason="worker_lost",
                                                 message=_worker_lost_message(),
                                                 from_states=(Run.State.RUNNING,))
    if any(ended.values()):
        logger.info("swept runs whose worker is gone: %s", ended)
    return ended


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


def run_fail(*, run_id: str, message: str, reason: str = "error", summary: dict | None = None,
             from_states: tuple = Run.ACTIVE_STATES) -> bool:
    """End the run as failed with a message for the visitor, and tell its event stream.

    The summary always says why (`reason`, a word for programs; `message`, for people), so a
    failed run never ends with an empty summary.
    """
    message = message.strip() or "The demo failed for a reason it did not name."
    summary = {"reason": reason, "message": message, **(summary or {})}
    changed = run_mark_terminal(run_id=run_id, state=Run.State.FAILED, summary=summary,
                                error=message, from_states=from_states)
    if changed:
        try:
            event_publish(run_id=run_id, type="failed", data={"message": message,
                                                              "reason": reason})
        except Exception:  # Redis away: the row says failed, the relay reports it from there
            logger.warning("could not publish the failure of run %s", run_id, exc_info=True)
    return changed


def run_fail_unexpected(*, run_id: str, exc: BaseException) -> bool:
    """End a run that an unexpected exception stopped: the details go to the log, the visitor
    reads a plain sentence that still says what kind of trouble it was (never the exception's
    own text, which can hold addresses and internals)."""
    import redis as redis_lib

    logger.error("run %s failed", run_id, exc_info=exc)
    if isinstance(exc, redis_lib.RedisError):
        reason, what = "redis", "the worker lost contact with the demos' message store"
    elif isinstance(exc, MemoryError):
        reason, what = "error", "the worker ran out of memory"
    else:
        reason, what = "error", "the worker hit an internal error (it has been logged)"
    return run_fail(run_id=run_id, reason=reason,
                    message=f"The demo stopped: {what}. Please run it again.")


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


# Files a run may keep for its owner (a profiler trace): name → content type. Kept in Redis
# beside the run's events, for as long as they are.
RUN_FILES = {"trace.json.gz": "application/gzip"}
RUN_FILE_MAX_BYTES = 8 * 2**20


def run_file_key(run_id: str, name: str) -> str:
    return f"run:{run_id}:file:{name}"


def run_file_keep(*, run_id: str, name: str, data: bytes) -> str | None:
    """Keep `data` as the run's file `name` for DEMO_EVENTS_TTL seconds; its download URL, or
    None when the name is not one a run may keep or the file is over RUN_FILE_MAX_BYTES."""
    from django.urls import reverse

    if name not in RUN_FILES or len(data) > RUN_FILE_MAX_BYTES:
        return None
    _redis_bytes().set(run_file_key(run_id, name), data,
                       ex=int(demo_setting("DEMO_EVENTS_TTL")))
    return reverse("demos:run_file", args=[run_id, name])


def run_file_get(*, run_id: str, name: str) -> bytes | None:
    """The run's kept file, or None (never kept, or expired)."""
    if name not in RUN_FILES:
        return None
    return _redis_bytes().get(run_file_key(run_id, name))


_BYTES_CLIENTS: dict[str, object] = {}


def _redis_bytes():
    """A client that hands back bytes as bytes (the shared one decodes text); one per URL."""
    import redis as redis_lib

    url = settings.REDIS_URL
    if url not in _BYTES_CLIENTS:
        _BYTES_CLIENTS[url] = redis_lib.Redis.from_url(url, socket_connect_timeout=5)
    return _BYTES_CLIENTS[url]
