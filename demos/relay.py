"""The SSE relay: a run's Redis Stream, replayed from the start (or from Last-Event-ID) and then
followed live with XREAD BLOCK, written out as Server-Sent Events.

When the client goes away before the end (uvicorn reports the disconnect and Django cancels the
response's generator), the relay asks the worker to cancel: the whole run, or only the one
stream this connection followed.
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

import redis
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings

from demos import events, services
from demos.conf import demo_setting
from demos.models import Run

logger = logging.getLogger(__name__)


def _run_state_after_idle(run_id: str) -> Run | None:
    run = Run.objects.filter(pk=run_id).first()
    return services.run_liveness_check(run=run) if run else None


def _queued_run_cancel(run_id: str) -> None:
    run = Run.objects.filter(pk=run_id, state=Run.State.QUEUED).first()
    if run is not None:
        services.run_cancel(run=run, target=services.CancelTarget(reason="disconnected"))


def _cancel_pending() -> bool:
    """True when this task has been asked to stop (the client went away) even if the awaited
    call swallowed the CancelledError: redis-py can, when the cancel lands mid-read."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


# How long one XREAD waits for new entries (ms): the most a disconnect can go unnoticed.
XREAD_BLOCK_MS = 1000


def _should_end(event: events.Event, stream: int | None) -> bool:
    if event.type in events.TERMINAL_TYPES:
        return True
    return stream is not None and event.stream == stream and event.type in events.STREAM_END_TYPES


async def run_events_relay(*, run_id: str, stream: int | None = None,
                           last_id: str = "0-0") -> AsyncIterator[str]:
    """SSE text for run `run_id` (only stream `stream`'s events plus the run's own when set)."""
    ping_s = float(demo_setting("DEMO_SSE_PING"))
    # The socket must outwait XREAD BLOCK, or an idle stream reads as a timeout.
    client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True,
                                     socket_timeout=XREAD_BLOCK_MS / 1000 + 10)
    key = events.events_key(run_id)
    ended = False
    try:
        yield "retry: 2000\n\n"  # how long a browser waits before reconnecting
        last_write = time.monotonic()
        while not ended:
            try:
                reply = await client.xread({key: last_id}, block=XREAD_BLOCK_MS, count=200)
            except redis.RedisError:
                # Redis hiccup: end this response without cancelling; the browser reconnects
                # with Last-Event-ID and the relay resumes where it stopped.
                logger.warning("relay for run %s lost Redis", run_id, exc_info=True)
                ended = True
                break
            if _cancel_pending():
                raise asyncio.CancelledError
            entries = reply[0][1] if reply else []
            if not entries:
                if time.monotonic() - last_write < ping_s:
                    continue
                run = await sync_to_async(_run_state_after_idle)(run_id)
                if run is not None and not run.is_active:
                    # Ended without a terminal event we can still read (expired stream): say so.
                    reply = await client.xread({key: last_id}, count=200)
                    if not reply:
                        data = {"state": run.state, "message": run.error, **run.summary}
                        yield f"event: {run.state}\ndata: {json.dumps(data)}\n\n"
                        ended = True
                    continue
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
                continue
            for entry_id, fields in entries:
                last_id = entry_id
                event = events.Event.from_entry(entry_id, fields)
                if stream is not None and event.stream not in (None, stream):
                    continue
                yield event.sse()
                last_write = time.monotonic()
                if _should_end(event, stream):
                    ended = True
                    break
    finally:
        if not ended:
            # Cancelled by a disconnect (or a server shutdown): stop the work it was watching.
            # A plain client call: this connection's own may be mid-command after the cancel.
            try:
                events.cancel_request(events.redis_client(settings.REDIS_URL), run_id=run_id,
                                      stream=stream, reason="disconnected",
                                      ttl_s=int(demo_setting("DEMO_EVENTS_TTL")))
            except redis.RedisError:
                logger.warning("could not cancel run %s after its client left", run_id)
            if stream is None:
                # A run still queued has no worker to see the flag yet: end it here too, so
                # the visitor's next "Run" is not refused as a second active run.
                try:
                    await sync_to_async(_queued_run_cancel)(run_id)
                except BaseException:  # cancelled again mid-shutdown: the flag above stands
                    logger.warning("could not end queued run %s", run_id, exc_info=True)
        try:
            await client.aclose()
        except Exception:  # the connection may be half-closed by the cancellation
            pass

