"""The SSE relay: a run's Redis Stream, replayed from the start (or from Last-Event-ID) and then
followed live with XREAD BLOCK, written out as Server-Sent Events.

When the client goes away before the end (uvicorn reports the disconnect and Django cancels the
response's generator), the relay asks the worker to cancel: the whole run, or only the one
stream this connection followed.

Bounded: streams are capped per visitor and per run (counted in Redis, so across processes)
and per process; every stream of a process shares one Redis pool of DEMO_REDIS_POOL
connections that waits up to DEMO_REDIS_POOL_TIMEOUT seconds for a free one. When Redis does
not answer, the stream sends an `unavailable` event with a plain message and ends.
"""

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

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


XREAD_BLOCK_MS = events.XREAD_BLOCK_MS  # the most a disconnect can go unnoticed (ms)
XREAD_COUNT = 200  # events one read takes at most
# After a read that found events, a stream waits this long before reading again, so a run
# producing tokens quickly is read in batches (about 100 streams slowed the web process).
COALESCE_S = 0.05
# A stream's place in the per-visitor and per-run counts is refreshed this often (s) and
# dropped when older than STREAM_STALE_S (a process that died without cleaning up).
STREAM_REFRESH_S = 5
STREAM_STALE_S = 30

UNAVAILABLE_MESSAGE = ("Lost contact with the live demos' message store; the run may still "
                       "finish. Reload the page in a minute to see how it ended.")

_open_streams = 0  # in this process
_pools: dict[tuple[str, int], aioredis.Redis] = {}


def relay_redis() -> aioredis.Redis:
    """This process's shared async Redis client for the event loop running now: one bounded
    pool that waits for a free connection instead of opening one per stream."""
    loop = asyncio.get_running_loop()
    key = (settings.REDIS_URL, id(loop))
    client = _pools.get(key)
    if client is None:
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL, decode_responses=True,
            max_connections=int(demo_setting("DEMO_REDIS_POOL")),
            timeout=float(demo_setting("DEMO_REDIS_POOL_TIMEOUT")),
            # The socket must outwait XREAD BLOCK, or an idle stream reads as a timeout.
            socket_timeout=XREAD_BLOCK_MS / 1000 + 10, socket_connect_timeout=3)
        client = _pools[key] = aioredis.Redis(connection_pool=pool)
    return client


def _owner_key(owner: str) -> str:
    return f"sse:owner:{owner}"


def _run_key(run_id: str) -> str:
    return f"sse:run:{run_id}"


@dataclass(frozen=True)
class StreamSlot:
    """One open event stream's place in the per-visitor and per-run counts."""

    owner: str
    run_id: str
    member: str


class StreamRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def stream_slot_take(*, owner: str, run_id: str) -> StreamSlot:
    """A place for one more stream, or StreamRefused (429 for a visitor or run over its cap,
    503 for a process at its own). RedisError when Redis does not answer."""
    if _open_streams >= int(demo_setting("DEMO_SSE_PER_PROCESS")):
        raise StreamRefused(503, "This server is following as many live demos as it can; "
                            "try again in a minute.")
    client = relay_redis()
    slot = StreamSlot(owner=owner, run_id=run_id, member=uuid.uuid4().hex)
    # The checks and the take are one step: the per-run cap accepted 113 streams against 104
    # when parallel requests all counted before any of them took its place.
    refused = await client.eval(_SLOT_TAKE, 2, _run_key(run_id), _owner_key(owner),
                                time.time(), STREAM_STALE_S,
                                int(demo_setting("DEMO_SSE_PER_RUN")),
                                int(demo_setting("DEMO_SSE_PER_VISITOR")), slot.member)
    if refused == "run":
        raise StreamRefused(429, "Too many connections are following this run; close another "
                            "tab showing it.")
    if refused == "owner":
        raise StreamRefused(429, "You are following too many live demos at once; close "
                            "another tab showing one.")
    return slot


# Drop stale places, refuse at either cap, else take a place in both counts.
_SLOT_TAKE = """
local now, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - stale)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - stale)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 'run' end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 'owner' end
for i = 1, 2 do
  redis.call('ZADD', KEYS[i], now, ARGV[5])
  redis.call('EXPIRE', KEYS[i], stale * 2)
end
return ''
"""


async def _slot_refresh(client: aioredis.Redis, slot: StreamSlot) -> None:
    pipe = client.pipeline(transaction=False)
    for key in (_owner_key(slot.owner), _run_key(slot.run_id)):
        pipe.zadd(key, {slot.member: time.time()})
        pipe.expire(key, STREAM_STALE_S * 2)
    await pipe.execute()


async def _slot_release(client: aioredis.Redis, slot: StreamSlot) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.zrem(_owner_key(slot.owner), slot.member)
    pipe.zrem(_run_key(slot.run_id), slot.member)
    await pipe.execute()


def _unavailable_sse() -> str:
    # A longer retry first: the browser should not hammer a server whose Redis is away.
    return (f"retry: 15000\n\nevent: unavailable\n"
            f"data: {json.dumps({'message': UNAVAILABLE_MESSAGE})}\n\n")


def _should_end(type: str, event_stream: int | None, stream: int | None) -> bool:
    if type in events.TERMINAL_TYPES:
        return True
    return stream is not None and event_stream == stream and type in events.STREAM_END_TYPES


def entry_sse(entry_id: str, fields: dict[str, str]) -> tuple[str, str, int | None]:
    """(SSE text, type, stream) for one stream entry, without parsing its JSON: the same text
    as events.Event.from_entry(...).sse(), where a relay following a run re-parsed and
    re-serialised every event for every stream (about 100 streams slowed /healthz to a 726 ms
    median). A stream number goes first in the object, so a `stream` the data already holds
    comes later and wins, as setdefault would have it."""
    raw = fields.get("stream")
    stream = int(raw) if raw not in (None, "") else None
    data = fields.get("data", "{}")
    if stream is not None:
        rest = data.strip()[1:].lstrip()
        data = f'{{"stream": {stream}' + ("}" if rest.startswith("}") else f", {rest}")
    return f"id: {entry_id}\nevent: {fields['type']}\ndata: {data}\n\n", fields["type"], stream


async def run_events_relay(*, run_id: str, stream: int | None = None, last_id: str = "0-0",
                           slot: StreamSlot | None = None) -> AsyncIterator[str]:
    """SSE text for run `run_id` (only stream `stream`'s events plus the run's own when set).

    `slot` (from stream_slot_take) is refreshed while the stream lives and released at its end.
    """
    global _open_streams
    ping_s = float(demo_setting("DEMO_SSE_PING"))
    key = events.events_key(run_id)
    ended = False
    _open_streams += 1
    try:
        client = relay_redis()
        yield "retry: 2000\n\n"  # how long a browser waits before reconnecting
        last_write = last_refresh = time.monotonic()
        while not ended:
            try:
                if slot is not None and time.monotonic() - last_refresh > STREAM_REFRESH_S:
                    await _slot_refresh(client, slot)
                    last_refresh = time.monotonic()
                reply = await client.xread({key: last_id}, block=XREAD_BLOCK_MS,
                                          count=XREAD_COUNT)
            except redis.RedisError:
                # Redis away: say so (the page shows it) and end without cancelling the run.
                logger.warning("relay for run %s lost Redis", run_id, exc_info=True)
                ended = True
                yield _unavailable_sse()
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
                text, type, event_stream = entry_sse(entry_id, fields)
                if stream is not None and event_stream not in (None, stream):
                    continue
                yield text
                last_write = time.monotonic()
                if _should_end(type, event_stream, stream):
                    ended = True
                    break
            if not ended and len(entries) < XREAD_COUNT:
                # Let a few more events gather before the next read: one read per batch,
                # not one per token, for every stream of a busy run.
                await asyncio.sleep(COALESCE_S)
    finally:
        _open_streams -= 1
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
        if slot is not None:
            try:
                await asyncio.shield(_slot_release(relay_redis(), slot))
            except BaseException:  # Redis away or cancelled: the place goes stale on its own
                logger.warning("could not release the stream place of run %s", run_id)
