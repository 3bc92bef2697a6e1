"""The OpenAI-compatible API at /v1, served by the workers' shared engines.

    GET  /v1/models
    POST /v1/completions          {"model", "prompt", "max_tokens", "stream", ...}
    POST /v1/chat/completions     {"model", "messages", "max_tokens", "stream", ...}

Every call needs `Authorization: Bearer <key>` (a key from /account/ or `manage.py apikey`).
The web process checks the request, counts it against the key's limits, and sends it to the
engine queue (worker.v1_generate); the worker adds it to its shared engine, next to the demo
runs, and publishes what each step produced to a Redis stream that this module relays, as
Server-Sent Events chunks (`stream: true`) or as one JSON body. A client that goes away
mid-answer sets the request's cancel flag, and the worker aborts it at once (its KV blocks
return). Each key's prompts are cached apart: the prefix cache is salted per key.

Sampling: temperature, top_p, seed, stop, n (samples share the prompt's KV blocks), the
presence and frequency penalties, logprobs (chat: logprobs/top_logprobs; completions: logprobs
0-5), and vLLM's extensions `top_k` and `ignore_eos` (keep going to max_tokens), sent as
`extra_body` by the OpenAI client. A prompt whose tokens plus max_tokens pass the model's
context is refused with 400 (naming both), not cut short. Tools, response_format, logit_bias,
echo and suffix are refused with 400 naming the parameter: this engine cannot honour them.

Every answer under /v1, errors included, is JSON; errors use OpenAI's body,
{"error": {"message", "type", "param", "code"}}, with its status codes: 400 bad input (not JSON,
invalid Unicode, numbers too long, nesting too deep, a prompt past API_MAX_PROMPT_CHARS), 401
no or bad key, 404 unknown model or route, 405 wrong method, 413 a body past
API_MAX_BODY_BYTES, 429 over a limit (Retry-After), 503 Redis or the workers not answering
(Retry-After). `course.middleware.v1_json_errors` turns whatever else Django would answer in
HTML (a 500, a bad Host header) into the same body.

Limits count per account (course/api_keys.py): requests and tokens over a sliding minute, and
requests running at once; the tokens a request may use (its prompt, bounded by the model's
context, and max_tokens) are reserved before it is sent to a worker, and what it did not use
is refunded when it ends. The engine serves owners fairly: the request's owner is its account.
"""

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path

import redis
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from course import api_keys
from course.json_input import JsonInputError, json_strict_loads
from demos import events

logger = logging.getLogger(__name__)

# How long the web waits for a worker to take a request up, and for each next event, seconds.
ACCEPT_TIMEOUT_S = 30
EVENT_TIMEOUT_S = 60
# What a client is told to wait when Redis (the broker and the event bus) does not answer.
UNAVAILABLE_RETRY_S = 5
# While no event comes, how often the relay checks that the worker's heartbeat is still there.
HEARTBEAT_CHECK_S = 3
_ROLES = ("system", "user", "assistant")
N_MAX = 64  # samples of one prompt (the engine's own limit; max_num_seqs may lower it)
# OpenAI parameters this engine cannot honour, each with the values that ask for nothing:
# refused with a 400 naming them rather than silently ignored.
_UNSUPPORTED = (
    ("tools", ([],)), ("tool_choice", ("none",)), ("functions", ([],)),
    ("function_call", ("none",)), ("parallel_tool_calls", ()),
    ("response_format", ({"type": "text"},)), ("logit_bias", ({},)), ("echo", (False,)),
    ("suffix", ("",)), ("audio", ()), ("modalities", (["text"],)), ("prediction", ()),
    ("web_search_options", ()), ("reasoning_effort", ()),
)


def model_id() -> str:
    """The served model's id: its directory's name (the web never loads the model)."""
    return Path(settings.ENGINE_MODEL).name


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, kind: str = "invalid_request_error",
                 headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.kind, self.headers = kind, headers or {}

    def response(self) -> JsonResponse:
        response = JsonResponse({"error": {"message": self.message, "type": self.kind,
                                           "param": self.param, "code": self.code}},
                                status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


def unavailable(what: str = "the service that hands requests to the workers") -> ApiError:
    return ApiError(503, f"{what} is not answering; try again in {UNAVAILABLE_RETRY_S} s.",
                    kind="server_error", code="service_unavailable",
                    headers={"Retry-After": str(UNAVAILABLE_RETRY_S)})


def body_parse(request: HttpRequest) -> object:
    """The request's JSON body, or ApiError: 413 past API_MAX_BODY_BYTES, 400 for anything
    course.json_input refuses (not JSON, invalid Unicode, too deep, numbers too long)."""
    limit = settings.API_MAX_BODY_BYTES
    too_big = ApiError(413, f"the body is over the limit of {limit:,} bytes",
                       code="request_too_large")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "Content-Length must be a whole number") from None
    if declared > limit:
        raise too_big
    try:
        # At most one byte past the limit: a body sent without a Content-Length (chunked) is
        # never read whole into memory to find out it is too big.
        raw = request.read(limit + 1)
    except RequestDataTooBig:
        raise too_big from None
    if len(raw) > limit:
        raise too_big
    try:
        return json_strict_loads(raw or b"null")
    except JsonInputError as exc:
        raise ApiError(400, exc.message, code="invalid_json") from None


# Parsing ---------------------------------------------------------------------------------------


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, f"{name} must be a number", param=name)
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be between {low:g} and {high:g}", param=name)
    return float(value)


def request_parse(body: dict, *, chat: bool) -> dict:
    """The worker's payload for a /v1 body, or ApiError naming the bad field."""
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    if body.get("model") != model_id():
        raise ApiError(404, f"The model {body.get('model')!r} does not exist; this server "
                       f"serves {model_id()!r}.", param="model", code="model_not_found")
    messages = prompt = None
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list", param="messages")
        clean = []
        for i, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):  # content parts: only text ones
                if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                    raise ApiError(400, f"messages[{i}].content: only text parts are supported",
                                   param=f"messages[{i}].content")
                content = "".join(str(p.get("text", "")) for p in content)
            if not isinstance(message, dict) or message.get("role") not in _ROLES:
                raise ApiError(400, f"messages[{i}].role must be one of {', '.join(_ROLES)}",
                               param=f"messages[{i}].role")
            if not isinstance(content, str):
                raise ApiError(400, f"messages[{i}].content must be a string",
                               param=f"messages[{i}].content")
            clean.append({"role": message["role"], "content": content})
        messages = clean
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise ApiError(400, "prompt must be a non-empty string", param="prompt")
    # Before anything counts tokens: a prompt this long can never fit the model's context.
    chars = len(prompt) if prompt is not None else sum(len(m["content"]) for m in messages)
    if chars > settings.API_MAX_PROMPT_CHARS:
        name = "messages" if chat else "prompt"
        raise ApiError(400, f"{name} holds {chars:,} characters; the limit is "
                       f"{settings.API_MAX_PROMPT_CHARS:,}", param=name,
                       code="context_length_exceeded")
    for name, neutral in _UNSUPPORTED:
        if body.get(name) not in (None, *neutral):
            raise ApiError(400, f"{name} is not supported by this server", param=name)
    n = body.get("n", 1) if body.get("n") is not None else 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= N_MAX:
        raise ApiError(400, f"n must be an integer from 1 to {N_MAX}", param="n")
    if body.get("best_of") not in (None, n):
        raise ApiError(400, "best_of must equal n here (the server returns every sample)",
                       param="best_of")
    logprobs = _logprobs(body, chat=chat)
    limit = settings.API_MAX_TOKENS
    max_name = "max_completion_tokens" if chat and "max_completion_tokens" in body \
        else "max_tokens"
    max_tokens = body.get(max_name)
    max_tokens_given = max_tokens is not None
    if max_tokens is None:
        max_tokens = min(limit, 256) if chat else 16  # OpenAI's completions default is 16
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or \
            not 1 <= max_tokens <= limit:
        raise ApiError(400, f"{max_name} must be an integer from 1 to {limit}", param=max_name)
    stop = body.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > 4 or \
            not all(isinstance(s, str) and s for s in stop):
        raise ApiError(400, "stop must be a string or a list of up to 4 non-empty strings",
                       param="stop")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ApiError(400, "seed must be an integer", param="seed")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", param="stream")
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(400, "stream_options is only allowed when stream is true",
                       param="stream_options")
    options = options or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", param="stream_options")
    # vLLM's extension: keep going past end-of-sequence up to max_tokens (benchmarks use it).
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise ApiError(400, "ignore_eos must be true or false", param="ignore_eos")
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0:
        raise ApiError(400, "top_p must be above 0", param="top_p")
    # vLLM's extension: keep only the k most likely tokens; -1 (vLLM's off) or 0 for all.
    top_k = body.get("top_k")
    top_k = 0 if top_k is None else top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < -1:
        raise ApiError(400, "top_k must be an integer: -1 or 0 for no cut, or k >= 1",
                       param="top_k")
    return {
        "messages": messages, "prompt": prompt, "max_tokens": max_tokens,
        "max_tokens_given": max_tokens_given, "max_tokens_name": max_name,
        "temperature": _number(body, "temperature", 1.0, 0.0, 2.0), "top_p": top_p,
        "top_k": max(top_k, 0), "n": n, "logprobs": logprobs,
        "presence_penalty": _number(body, "presence_penalty", 0.0, -2.0, 2.0),
        "frequency_penalty": _number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        "stop": stop, "seed": seed, "stream": stream, "ignore_eos": ignore_eos,
        "include_usage": bool(options.get("include_usage")),
    }


def _logprobs(body: dict, *, chat: bool) -> int | None:
    """How many alternatives each token's logprobs carry (None: no logprobs). Chat asks with
    `logprobs: true` and `top_logprobs` (0 to 20); completions with `logprobs` (0 to 5)."""
    if chat:
        wanted = body.get("logprobs")
        if wanted not in (None, True, False):
            raise ApiError(400, "logprobs must be true or false", param="logprobs")
        top = body.get("top_logprobs")
        if top is None:
            return 0 if wanted else None
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20:
            raise ApiError(400, "top_logprobs must be an integer from 0 to 20",
                           param="top_logprobs")
        if not wanted:
            raise ApiError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
        return top
    wanted = body.get("logprobs")
    if wanted is None:
        return None
    if isinstance(wanted, bool) or not isinstance(wanted, int) or not 0 <= wanted <= 5:
        raise ApiError(400, "logprobs must be an integer from 0 to 5", param="logprobs")
    return wanted


# Authentication and limits ---------------------------------------------------------------------


def _redis() -> redis.Redis:
    return events.redis_client(settings.REDIS_URL)


def _auth_failures_key(address: str | None) -> str:
    return f"course:ratelimit:authfail:{address or 'unknown'}:{int(time.time() // 60)}"


def _key_lookup(request: HttpRequest):  # noqa: ANN202
    """The request's active key, or ApiError: 401, or 429 once this address has failed
    API_AUTH_FAILURES_PER_MINUTE lookups this minute (guessing keys gets nowhere anyway, but
    each guess costs a database query)."""
    from demos.services import client_address_for_request

    failures_key = _auth_failures_key(client_address_for_request(request))
    client = _redis()
    if int(client.get(failures_key) or 0) >= settings.API_AUTH_FAILURES_PER_MINUTE:
        retry = max(1, int(60 - time.time() % 60))
        raise ApiError(429, f"Too many requests with a wrong key from your address; try again "
                       f"in {retry} s.", kind="requests", code="rate_limit_exceeded",
                       headers={"Retry-After": str(retry)})
    header = request.headers.get("Authorization", "")
    raw = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
    key = api_keys.api_key_authenticate(raw=raw) if raw else None
    if key is None:
        pipe = client.pipeline(transaction=False)
        pipe.incr(failures_key)
        pipe.expire(failures_key, 61)
        pipe.execute()
        raise ApiError(401, "Incorrect or missing API key. Make one at /account/ and send it as "
                       "'Authorization: Bearer <key>'.", code="invalid_api_key")
    return key


def _limited(limited: api_keys.RateLimited) -> ApiError:
    what = (f"{limited.limit} requests running at once" if limited.kind == "concurrent" else
            f"{limited.limit:,} {limited.kind} per minute")
    return ApiError(429, f"Rate limit reached for this account: {what}. Try again in "
                    f"{limited.retry_after_s} s.", kind=limited.kind,
                    code="rate_limit_exceeded",
                    headers={"Retry-After": str(limited.retry_after_s)})


async def _key_for(request: HttpRequest, *, request_id: str | None = None,
                   reserve_tokens: int = 0):  # noqa: ANN202
    """Authenticate, then admit one request against the account's limits (with a seat and a
    token reservation when it is a completion, `request_id`)."""
    key = await sync_to_async(_key_lookup)(request)
    try:
        await sync_to_async(api_keys.api_key_admit)(
            _redis(), user_id=key.user_id, request_id=request_id or uuid.uuid4().hex,
            reserve_tokens=reserve_tokens, seat=request_id is not None)
    except api_keys.RateLimited as limited:
        raise _limited(limited) from None
    return key


def _reservation(payload: dict) -> int:
    """The most tokens a request can use, before the worker counts its prompt: its prompt's
    UTF-8 bytes (no byte-level token is shorter than a byte; a chat template adds a few per
    message) bounded by the model's context, plus max_tokens; never past the token limit."""
    from demos.params import prompt_context_tokens

    if payload["prompt"] is not None:
        prompt = len(payload["prompt"].encode()) + 8
    else:
        prompt = sum(len(m["content"].encode()) + 8 for m in payload["messages"])
    context = prompt_context_tokens(settings.ENGINE_MODEL)
    if context:
        prompt = min(prompt, context)
    return min(prompt + payload["max_tokens"], settings.API_KEY_TOKENS_PER_MINUTE)


# The relay -------------------------------------------------------------------------------------


class _Relay:
    """Reads one request's events from Redis; cancels it if the reader stops early."""

    def __init__(self, request_id: str, *, user_id: int | None = None) -> None:
        self.request_id, self.user_id = request_id, user_id
        self.run_id = f"v1-{request_id}"
        self.key = events.events_key(self.run_id)
        self.last_id = "0-0"
        self.ended = False
        # What the request used, for the account's token limit when it ends.
        self.prompt_tokens: int | None = None
        self.produced = 0
        self.total_tokens: int | None = None
        self.accepted = False  # from then on the worker's heartbeat says it is alive
        self.client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True,
                                              socket_timeout=15)

    async def next_events(self, timeout_s: float) -> list[events.Event]:
        deadline = time.monotonic() + timeout_s
        checked = time.monotonic()
        while time.monotonic() < deadline:
            if self.accepted and time.monotonic() - checked > HEARTBEAT_CHECK_S:
                checked = time.monotonic()
                if not await self.client.exists(events.heartbeat_key(self.run_id)):
                    # The worker died mid-answer (its heartbeat expired): say so now, not
                    # after EVENT_TIMEOUT_S of silence.
                    self.ended = True
                    raise ApiError(503, "the worker serving this request stopped; try again",
                                   kind="server_error", code="worker_lost",
                                   headers={"Retry-After": str(UNAVAILABLE_RETRY_S)})
            reply = await self.client.xread({self.key: self.last_id}, block=1000, count=100)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The client left while the Redis client was reading, and the cancellation
                # did not come out of that read (seen under load: the stream then ran to its
                # end with nobody listening). Honour it here.
                raise asyncio.CancelledError
            if reply:
                out = []
                for entry_id, fields in reply[0][1]:
                    self.last_id = entry_id
                    event = events.Event.from_entry(entry_id, fields)
                    if event.type == "delta":
                        self.produced += int(event.data.get("tokens", 0))
                    elif event.type == "done":
                        self.total_tokens = int(event.data["usage"]["total_tokens"])
                    out.append(event)
                return out
        raise ApiError(503, "no worker answered in time; is an engine worker running?",
                       kind="server_error", code="worker_timeout",
                       headers={"Retry-After": str(UNAVAILABLE_RETRY_S)})

    async def close(self) -> None:
        if not self.ended:
            # The client went away (or we gave up): the worker aborts the request at once.
            try:
                events.cancel_request(_redis(), run_id=self.run_id, reason="disconnected",
                                      ttl_s=600)
            except redis.RedisError:
                logger.warning("could not cancel %s after its client left", self.run_id)
        self.settle()
        try:
            await self.client.aclose()
        except Exception:  # half-closed by a cancellation
            pass


    def settle(self) -> None:
        """Free the request's seat and charge what it used: its usage when it finished; its
        prompt and the tokens produced so far when the client left; nothing when no worker
        took it up."""
        if self.user_id is None:
            return
        used = self.total_tokens
        if used is None:
            used = (self.prompt_tokens or 0) + self.produced
        try:
            api_keys.api_key_settle(_redis(), user_id=self.user_id,
                                    request_id=self.request_id, tokens=used)
        except redis.RedisError:  # the seat expires by itself (api_keys.SEAT_TTL_S)
            logger.warning("could not settle %s's tokens", self.run_id)
        self.user_id = None


def _dispatch(payload: dict, *, request_id: str, key) -> None:  # noqa: ANN001
    from worker.celery import app

    worker_payload = {k: payload[k] for k in (
        "messages", "prompt", "max_tokens", "max_tokens_given", "max_tokens_name", "temperature",
        "top_p", "top_k", "n", "logprobs", "presence_penalty", "frequency_penalty", "stop",
        "seed", "ignore_eos")}
    # The engine's fair policy shares it by owner: one account, however many keys, is one.
    worker_payload.update(owner=f"user:{key.user_id}", cache_salt=f"key:{key.pk}")
    try:
        # retry=False: a broker that is down answers now, not after Celery's retries.
        app.send_task("worker.v1_generate", args=[request_id, worker_payload],
                      queue=settings.ENGINE_QUEUE, retry=False)
    except Exception as exc:  # kombu and redis raise several kinds; all mean "not sent"
        logger.warning("could not send /v1 request %s: %r", request_id, exc)
        raise unavailable() from None


async def _accepted(relay: _Relay) -> tuple[int, list[events.Event]]:
    """Wait for the worker to take the request: its prompt token count and any events that
    came with it; ApiError for a prompt the engine refused."""
    while True:
        for i, event in enumerate(batch := await relay.next_events(ACCEPT_TIMEOUT_S)):
            if event.type == "error":
                relay.ended = True
                raise ApiError(event.data.get("status", 400), event.data["message"],
                               param=event.data.get("param"))
            if event.type == "accepted":
                relay.accepted = True
                relay.prompt_tokens = int(event.data["prompt_tokens"])
                return relay.prompt_tokens, batch[i + 1:]


def _reserve(relay: _Relay, tokens: int) -> None:
    api_keys.api_key_tokens_reserve(_redis(), user_id=relay.user_id,
                                    request_id=relay.request_id, tokens=tokens)


async def _complete(request: HttpRequest, *, chat: bool) -> HttpResponse:
    if request.method != "POST":
        return ApiError(405, "use POST", kind="invalid_request_error").response()
    try:
        body = body_parse(request)
        payload = request_parse(body, chat=chat)
        request_id = uuid.uuid4().hex
        key = await _key_for(request, request_id=request_id,
                             reserve_tokens=_reservation(payload))
        relay = _Relay(request_id, user_id=key.user_id)
        try:
            await sync_to_async(_dispatch)(payload, request_id=request_id, key=key)
            prompt_tokens, early = await _accepted(relay)
            await sync_to_async(_reserve)(relay, prompt_tokens + payload["max_tokens"])
        except redis.RedisError:
            relay.ended = True  # nothing to cancel: the worker cannot be told anything
            await relay.close()
            raise unavailable() from None
        except BaseException:
            await relay.close()
            raise
    except redis.RedisError:
        return unavailable().response()
    except ApiError as error:
        return error.response()
    meta = {"id": ("chatcmpl-" if chat else "cmpl-") + request_id, "created": int(time.time()),
            "model": model_id()}
    if payload["stream"]:
        response = StreamingHttpResponse(
            _stream(relay, early, meta=meta, chat=chat, include_usage=payload["include_usage"],
                    n=payload["n"], logprobs=payload["logprobs"] is not None),
            content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    try:
        texts: dict[int, list[str]] = {i: [] for i in range(payload["n"])}
        logprobs: dict[int, list[dict]] = {i: [] for i in range(payload["n"])}
        done = None
        batch = early
        while done is None:
            for event in batch:
                if event.type == "delta":
                    index = int(event.data.get("index", 0))
                    texts[index].append(event.data["text"])
                    logprobs[index] += event.data.get("logprobs", [])
                elif event.type in ("done", "error", "aborted"):
                    done = event
            if done is None:
                batch = await relay.next_events(EVENT_TIMEOUT_S)
        relay.ended = True
        if done.type != "done":
            raise ApiError(done.data.get("status", 500), done.data.get("message", "aborted"),
                           kind="server_error")
    except redis.RedisError:
        return unavailable().response()
    except ApiError as error:
        return error.response()
    finally:
        await relay.close()  # also when the client left mid-wait (the view is cancelled)
    choices = []
    for index in range(payload["n"]):
        content = "".join(texts[index])
        finish = _finishes(done.data)[index]
        lp = (_logprobs_body(logprobs[index], chat=chat)
              if payload["logprobs"] is not None else None)
        choices.append({"index": index, "message": {"role": "assistant", "content": content},
                        "logprobs": lp, "finish_reason": finish} if chat else
                       {"index": index, "text": content, "logprobs": lp,
                        "finish_reason": finish})
    return JsonResponse({**meta, "object": "chat.completion" if chat else "text_completion",
                         "choices": choices, "usage": done.data["usage"]})


def _finishes(done: dict) -> list[str]:
    return done.get("finish_reasons") or [done["finish_reason"]]


def _logprobs_body(entries: list[dict], *, chat: bool, offset: int = 0) -> dict:
    """OpenAI's logprobs object for some tokens (from the worker's {token, logprob, top}):
    chat's `content` list, or completions' parallel lists (text_offset counts each token's
    own text from `offset`)."""
    if chat:
        def item(token: str, logprob: float) -> dict:
            return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

        return {"content": [{**item(e["token"], e["logprob"]),
                             "top_logprobs": [item(t, lp) for t, lp in e["top"]]}
                            for e in entries]}
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e["token"])
    return {"tokens": [e["token"] for e in entries],
            "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [dict(e["top"]) for e in entries], "text_offset": offsets}


async def _stream(relay: _Relay, early: list, *, meta: dict, chat: bool, include_usage: bool,
                  n: int = 1, logprobs: bool = False):
    """SSE chunks: (chat) a role chunk per sample first, text deltas, a finish chunk per
    sample; the usage chunk when asked; `data: [DONE]`, after an error too."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    offsets = [0] * n  # completions' text_offset, per sample

    def chunk(delta: dict | None, text: str = "", finish: str | None = None, index: int = 0,
              lp: list | None = None) -> str:
        lp_body = None
        if logprobs and lp is not None:
            lp_body = _logprobs_body(lp, chat=chat, offset=offsets[index])
            if not chat:
                offsets[index] += sum(len(e["token"]) for e in lp)
        choice = ({"index": index, "delta": delta or {}, "logprobs": lp_body,
                   "finish_reason": finish}
                  if chat else {"index": index, "text": text, "logprobs": lp_body,
                                "finish_reason": finish})
        body = {**meta, "object": kind, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body)}\n\n"

    try:
        if chat:
            for index in range(n):
                yield chunk({"role": "assistant", "content": ""}, index=index)
        batch = early
        while True:
            for event in batch:
                if event.type == "delta":
                    text, index = event.data["text"], int(event.data.get("index", 0))
                    yield chunk({"content": text}, text, index=index,
                                lp=event.data.get("logprobs", []))
                elif event.type == "done":
                    relay.ended = True
                    for index, finish in enumerate(_finishes(event.data)):
                        yield chunk({}, "", finish, index=index)
                    usage = event.data["usage"]
                    if include_usage:
                        last = {**meta, "object": kind, "choices": [], "usage": usage}
                        yield f"data: {json.dumps(last)}\n\n"
                    yield "data: [DONE]\n\n"
                    return
                elif event.type in ("error", "aborted"):
                    relay.ended = True
                    error = {"message": event.data.get("message", "aborted"),
                             "type": "server_error", "param": None, "code": None}
                    yield f"data: {json.dumps({'error': error})}\n\n"
                    yield "data: [DONE]\n\n"  # the stream still ends as every stream does
                    return
            batch = await relay.next_events(EVENT_TIMEOUT_S)
    except ApiError as error:
        body = {"error": {"message": error.message, "type": error.kind, "param": None,
                          "code": error.code}}
        yield f"data: {json.dumps(body)}\n\n"
        yield "data: [DONE]\n\n"
    except asyncio.CancelledError:
        raise  # the client left: close() below cancels the request in the worker
    except Exception as exc:  # Redis lost mid-stream, or a bug: the stream still ends in words
        logger.warning("/v1 stream %s ended by %r", relay.run_id, exc)
        error = unavailable("the event bus") if isinstance(exc, redis.RedisError) else ApiError(
            500, "the server hit an internal error (it has been logged)", kind="server_error")
        body = {"error": {"message": error.message, "type": error.kind, "param": None,
                          "code": error.code}}
        yield f"data: {json.dumps(body)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        await relay.close()


# Views -----------------------------------------------------------------------------------------


async def models_list(request: HttpRequest) -> JsonResponse:
    if request.method != "GET":
        return ApiError(405, "use GET").response()
    try:
        await _key_for(request)
    except redis.RedisError:
        return unavailable().response()
    except ApiError as error:
        return error.response()
    return JsonResponse({"object": "list", "data": [
        {"id": model_id(), "object": "model", "created": 0, "owned_by": "course"}]})


@csrf_exempt
async def completions(request: HttpRequest) -> HttpResponse:
    return await _complete(request, chat=False)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await _complete(request, chat=True)


@csrf_exempt
async def unknown_route(request: HttpRequest, rest: str = "") -> JsonResponse:
    return ApiError(404, f"Unknown route: {request.method} /v1/{rest}. This server serves "
                    "/v1/models, /v1/completions and /v1/chat/completions.",
                    code="unknown_url").response()


urlpatterns = [
    path("models", models_list, name="v1_models"),
    path("completions", completions, name="v1_completions"),
    path("chat/completions", chat_completions, name="v1_chat_completions"),
    re_path(r"^(?P<rest>.*)$", unknown_route, name="v1_unknown"),
]
