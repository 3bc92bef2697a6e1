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

Errors use OpenAI's body, {"error": {"message", "type", "param", "code"}}, with its status
codes: 400 bad input, 401 no or bad key, 404 unknown model, 429 over a limit (Retry-After).
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
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from course import api_keys
from demos import events

logger = logging.getLogger(__name__)

# How long the web waits for a worker to take a request up, and for each next event, seconds.
ACCEPT_TIMEOUT_S = 30
EVENT_TIMEOUT_S = 60
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


async def _key_for(request: HttpRequest):  # noqa: ANN202
    header = request.headers.get("Authorization", "")
    raw = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
    key = await sync_to_async(api_keys.api_key_authenticate)(raw=raw) if raw else None
    if key is None:
        raise ApiError(401, "Incorrect or missing API key. Make one at /account/ and send it as "
                       "'Authorization: Bearer <key>'.", code="invalid_api_key")
    try:
        await sync_to_async(api_keys.api_key_rate_check)(_redis(), key_id=key.pk)
    except api_keys.RateLimited as limited:
        raise ApiError(429, f"Rate limit reached for this key: {limited.limit} "
                       f"{limited.kind} per minute. Try again in {limited.retry_after_s} s.",
                       kind=limited.kind, code="rate_limit_exceeded",
                       headers={"Retry-After": str(limited.retry_after_s)}) from None
    return key


# The relay -------------------------------------------------------------------------------------


class _Relay:
    """Reads one request's events from Redis; cancels it if the reader stops early."""

    def __init__(self, request_id: str) -> None:
        self.run_id = f"v1-{request_id}"
        self.key = events.events_key(self.run_id)
        self.last_id = "0-0"
        self.ended = False
        self.client = aioredis.Redis.from_url(settings.REDIS_URL, decode_responses=True,
                                              socket_timeout=15)

    async def next_events(self, timeout_s: float) -> list[events.Event]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
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
                    out.append(events.Event.from_entry(entry_id, fields))
                return out
        raise ApiError(503, "no worker answered in time; is an engine worker running?",
                       kind="server_error", code="worker_timeout")

    async def close(self) -> None:
        if not self.ended:
            # The client went away (or we gave up): the worker aborts the request at once.
            try:
                events.cancel_request(_redis(), run_id=self.run_id, reason="disconnected",
                                      ttl_s=600)
            except redis.RedisError:
                logger.warning("could not cancel %s after its client left", self.run_id)
        try:
            await self.client.aclose()
        except Exception:  # half-closed by a cancellation
            pass


def _dispatch(payload: dict, *, request_id: str, key) -> None:  # noqa: ANN001
    from worker.celery import app

    worker_payload = {k: payload[k] for k in (
        "messages", "prompt", "max_tokens", "max_tokens_given", "max_tokens_name", "temperature",
        "top_p", "top_k", "n", "logprobs", "presence_penalty", "frequency_penalty", "stop",
        "seed", "ignore_eos")}
    worker_payload.update(owner=f"key:{key.pk}", cache_salt=f"key:{key.pk}")
    app.send_task("worker.v1_generate", args=[request_id, worker_payload],
                  queue=settings.ENGINE_QUEUE)


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
                return int(event.data["prompt_tokens"]), batch[i + 1:]


def _spend(key_id: int, usage: dict) -> None:
    api_keys.api_key_tokens_spend(_redis(), key_id=key_id, tokens=int(usage["total_tokens"]))


async def _complete(request: HttpRequest, *, chat: bool) -> HttpResponse:
    if request.method != "POST":
        return ApiError(405, "use POST", kind="invalid_request_error").response()
    try:
        try:
            body = json.loads(request.body or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ApiError(400, "the body must be JSON") from None
        key = await _key_for(request)
        payload = request_parse(body, chat=chat)
        request_id = uuid.uuid4().hex
        relay = _Relay(request_id)
        await sync_to_async(_dispatch)(payload, request_id=request_id, key=key)
        try:
            prompt_tokens, early = await _accepted(relay)
        except BaseException:
            await relay.close()
            raise
    except ApiError as error:
        return error.response()
    meta = {"id": ("chatcmpl-" if chat else "cmpl-") + request_id, "created": int(time.time()),
            "model": model_id()}
    if payload["stream"]:
        response = StreamingHttpResponse(
            _stream(relay, early, meta=meta, chat=chat, include_usage=payload["include_usage"],
                    key_id=key.pk, n=payload["n"], logprobs=payload["logprobs"] is not None),
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
        await sync_to_async(_spend)(key.pk, done.data["usage"])
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
                  key_id: int, n: int = 1, logprobs: bool = False):
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
                    await sync_to_async(_spend)(key_id, usage)
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
    finally:
        await relay.close()


# Views -----------------------------------------------------------------------------------------


async def models_list(request: HttpRequest) -> JsonResponse:
    if request.method != "GET":
        return ApiError(405, "use GET").response()
    try:
        await _key_for(request)
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


urlpatterns = [
    path("models", models_list, name="v1_models"),
    path("completions", completions, name="v1_completions"),
    path("chat/completions", chat_completions, name="v1_chat_completions"),
]
