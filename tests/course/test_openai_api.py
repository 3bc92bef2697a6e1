"""The OpenAI-compatible API: its parsing, then the official `openai` client against uvicorn and
a real worker (streaming and not, errors, limits, and a disconnect that frees the blocks)."""

import time

import pytest
from django.conf import settings

from course.openai_api import ApiError, model_id, request_parse
from tests.demos.conftest import asgi_server  # noqa: F401  (the uvicorn fixture)

MODEL = "course-lm"


# Parsing (no server) -------------------------------------------------------------------------


def test_a_chat_body_becomes_the_worker_payload():
    payload = request_parse({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}],
                             "max_tokens": 8, "temperature": 0, "stop": "\n", "seed": 3,
                             "stream": True, "stream_options": {"include_usage": True}},
                            chat=True)
    assert payload["messages"] == [{"role": "user", "content": "Hi"}]
    assert (payload["max_tokens"], payload["temperature"], payload["stop"], payload["seed"]) == (
        8, 0.0, ["\n"], 3)
    assert payload["stream"] and payload["include_usage"] and payload["prompt"] is None
    assert model_id() == MODEL


@pytest.mark.parametrize(("body", "param", "status"), [
    ({"model": "gpt-4", "prompt": "x"}, "model", 404),
    ({"model": MODEL, "prompt": ""}, "prompt", 400),
    ({"model": MODEL, "prompt": "x", "max_tokens": 0}, "max_tokens", 400),
    ({"model": MODEL, "prompt": "x", "max_tokens": 10**6}, "max_tokens", 400),
    ({"model": MODEL, "prompt": "x", "temperature": 3}, "temperature", 400),
    ({"model": MODEL, "prompt": "x", "top_p": 0}, "top_p", 400),
    ({"model": MODEL, "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop", 400),
    ({"model": MODEL, "prompt": "x", "seed": "one"}, "seed", 400),
    ({"model": MODEL, "prompt": "x", "n": 65}, "n", 400),
    ({"model": MODEL, "prompt": "x", "n": 0}, "n", 400),
    ({"model": MODEL, "prompt": "x", "n": 2, "best_of": 3}, "best_of", 400),
    ({"model": MODEL, "prompt": "x", "logprobs": 6}, "logprobs", 400),
    ({"model": MODEL, "prompt": "x", "logprobs": True}, "logprobs", 400),
    ({"model": MODEL, "prompt": "x", "echo": True}, "echo", 400),
    ({"model": MODEL, "prompt": "x", "suffix": "end"}, "suffix", 400),
    ({"model": MODEL, "prompt": "x", "logit_bias": {"5": 10}}, "logit_bias", 400),
    ({"model": MODEL, "prompt": "x", "top_k": -2}, "top_k", 400),
    ({"model": MODEL, "prompt": "x", "top_k": 1.5}, "top_k", 400),
    ({"model": MODEL, "prompt": "x", "presence_penalty": 2.5}, "presence_penalty", 400),
    ({"model": MODEL, "prompt": "x", "frequency_penalty": "high"}, "frequency_penalty", 400),
    ({"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}},
     "stream_options", 400),
])
def test_bad_completion_input_names_its_field(body, param, status):
    with pytest.raises(ApiError) as caught:
        request_parse(body, chat=False)
    assert (caught.value.param, caught.value.status) == (param, status)


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"parallel_tool_calls": True}, "parallel_tool_calls"),
    ({"top_logprobs": 3}, "top_logprobs"),  # without logprobs: true
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
])
def test_chat_parameters_this_engine_cannot_honour_are_refused(extra, param):
    """Accepted and ignored before: a client asking for tools or JSON output got plain text
    and no sign that its request was not honoured."""
    with pytest.raises(ApiError) as caught:
        request_parse({"model": MODEL, "messages": [{"role": "user", "content": "x"}], **extra},
                      chat=True)
    assert (caught.value.param, caught.value.status) == (param, 400)
    assert param in caught.value.message


def test_the_sampling_parameters_reach_the_worker():
    payload = request_parse({"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                             "n": 3, "top_k": -1, "presence_penalty": 0.5,
                             "frequency_penalty": -1, "logprobs": True, "top_logprobs": 2,
                             "response_format": {"type": "text"}, "tool_choice": "none"},
                            chat=True)
    assert (payload["n"], payload["top_k"], payload["presence_penalty"],
            payload["frequency_penalty"], payload["logprobs"]) == (3, 0, 0.5, -1.0, 2)
    assert not payload["max_tokens_given"]
    completion = request_parse({"model": MODEL, "prompt": "x", "logprobs": 0, "top_k": 5,
                                "max_tokens": 9}, chat=False)
    assert (completion["logprobs"], completion["top_k"], completion["max_tokens_given"]) == (
        0, 5, True)


@pytest.mark.parametrize("messages", [[], [{"role": "robot", "content": "x"}],
                                      [{"role": "user", "content": 3}], "hello"])
def test_bad_messages_are_refused(messages):
    with pytest.raises(ApiError) as caught:
        request_parse({"model": MODEL, "messages": messages}, chat=True)
    assert caught.value.status == 400 and caught.value.param.startswith("messages")


# Live: the openai client, uvicorn and a real worker ---------------------------------------------


@pytest.fixture
def api_key(django_user_model):
    from course.api_keys import api_key_create

    user = django_user_model.objects.create_user(username=f"api-{time.monotonic_ns()}",
                                                 password="a-long-password-1")
    key, raw = api_key_create(user=user, name="tests")
    return key, raw


@pytest.fixture
def openai_client(asgi_server, celery_worker_process, api_key):  # noqa: F811
    from openai import OpenAI

    return OpenAI(base_url=f"http://127.0.0.1:{asgi_server}/v1", api_key=api_key[1],
                  max_retries=0, timeout=60)


def _stream_events(request_id: str) -> list:
    from demos import events
    from demos.services import redis

    return events.events_read(redis(), run_id=f"v1-{request_id}")


def _wait_for(predicate, *, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("the condition never held")


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_models_chat_and_completions_with_the_openai_client(openai_client):
    assert [m.id for m in openai_client.models.list().data] == [MODEL]
    messages = [{"role": "user", "content": "What is a KV cache?"}]
    whole = openai_client.chat.completions.create(model=MODEL, messages=messages,
                                                  max_tokens=12, temperature=0)
    choice = whole.choices[0]
    assert whole.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.message.content and choice.finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens <= 12
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    # The same greedy request, streamed: role chunk first, then text, finish, usage, [DONE].
    chunks = list(openai_client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == choice.finish_reason and not any(finishes[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(c.usage is None for c in chunks[:-1])

    completion = openai_client.completions.create(model=MODEL, prompt="Prefill is",
                                                  max_tokens=6, temperature=0, seed=1)
    assert completion.object == "text_completion" and completion.usage.completion_tokens <= 6
    streamed = "".join(c.choices[0].text for c in openai_client.completions.create(
        model=MODEL, prompt="Prefill is", max_tokens=6, temperature=0, stream=True))
    assert streamed == completion.choices[0].text

    stopped = openai_client.completions.create(model=MODEL, prompt="Prefill is", max_tokens=40,
                                               temperature=0, stop=[" "])
    assert " " not in stopped.choices[0].text


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_errors_come_in_openai_shape(openai_client, asgi_server):  # noqa: F811
    import openai

    with pytest.raises(openai.BadRequestError) as bad:
        openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], temperature=5)
    assert bad.value.status_code == 400 and bad.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        openai_client.completions.create(model="gpt-4o", prompt="x")
    # A prompt longer than the engine's context: refused by the worker, still a 400.
    with pytest.raises(openai.BadRequestError) as long:
        openai_client.completions.create(model=MODEL, prompt="token " * 5000, max_tokens=1)
    assert "max_model_len" in long.value.body["message"]
    stranger = openai.OpenAI(base_url=f"http://127.0.0.1:{asgi_server}/v1",
                             api_key="sk-course-not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        stranger.models.list()
    assert denied.value.status_code == 401 and denied.value.body["code"] == "invalid_api_key"


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_key_over_its_limits_gets_429_with_retry_after(openai_client, api_key):
    import openai

    from course.api_keys import _keys
    from demos.services import redis

    key, _ = api_key
    requests_key, tokens_key, amounts_key, _ = _keys(key.user_id)
    now = time.time()
    redis().zadd(requests_key, {f"filler-{i}": now for i in range(
        settings.API_KEY_REQUESTS_PER_MINUTE)})
    with pytest.raises(openai.RateLimitError) as limited:
        openai_client.completions.create(model=MODEL, prompt="x", max_tokens=1)
    retry_after = int(limited.value.response.headers["Retry-After"])
    assert 1 <= retry_after <= 60 and limited.value.body["type"] == "requests"
    redis().delete(requests_key)
    redis().zadd(tokens_key, {"filler": now})
    redis().hset(amounts_key, "filler", settings.API_KEY_TOKENS_PER_MINUTE)
    with pytest.raises(openai.RateLimitError) as spent:
        openai_client.completions.create(model=MODEL, prompt="x", max_tokens=1)
    assert spent.value.body["type"] == "tokens"
    for name in (tokens_key, amounts_key):
        redis().delete(name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_tokens_spent_count_against_the_key(openai_client, api_key):
    """The reservation (prompt bytes + 8, then prompt tokens + max_tokens) becomes the usage
    when the request ends: the account holds exactly what it used."""
    from course.api_keys import _keys
    from demos.services import redis

    key, _ = api_key
    _, _, amounts_key, inflight_key = _keys(key.user_id)
    out = openai_client.completions.create(model=MODEL, prompt="Decode is", max_tokens=5,
                                           temperature=0)
    spent = sum(int(v) for v in redis().hvals(amounts_key))
    assert spent == out.usage.total_tokens
    assert redis().zcard(inflight_key) == 0  # its seat is free again


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_client_that_disconnects_frees_its_blocks_at_once(openai_client, api_key):
    import openai

    # As long an answer as the context allows (some 1.5 s on an idle machine), on a connection
    # of the client's own, which it closes as it leaves, as a client process that exits would.
    # (Closing only the stream once left the socket open until the whole answer was written.)
    leaving = openai.OpenAI(base_url=openai_client.base_url, api_key=openai_client.api_key,
                            max_retries=0, timeout=60)
    stream = leaving.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me about GPUs."}],
        max_tokens=960, stream=True, extra_body={"ignore_eos": True})
    first = next(iter(stream))
    request_id = first.id.removeprefix("chatcmpl-")
    stream.close()  # the client goes away mid-answer
    leaving.close()
    events = _wait_for(lambda: [e for e in _stream_events(request_id)
                                if e.type in ("aborted", "done")])
    assert events[0].type == "aborted" and events[0].data["blocks_freed"] >= 1
    delivered = sum(e.data["tokens"] for e in _stream_events(request_id) if e.type == "delta")
    assert delivered < 960
    # The account is charged what was produced before the client left, not the whole
    # reservation (prompt + 960), and its seat is free again.
    from course.api_keys import _keys
    from demos.services import redis as redis_client

    _, _, amounts_key, inflight_key = _keys(api_key[0].user_id)
    _wait_for(lambda: redis_client().zcard(inflight_key) == 0 or None)
    prompt = next(e.data["prompt_tokens"] for e in _stream_events(request_id)
                  if e.type == "accepted")
    charged = int(redis_client().hget(amounts_key, request_id))
    assert prompt <= charged <= prompt + delivered < prompt + 960

    # Without streaming too: the client gives up waiting, the request is aborted.
    from demos import events as run_events
    from demos.services import redis

    before = set(redis().scan_iter(match="run:v1-*:events"))
    # It gives up long before a 1,000-token answer could be written (some 1.4 s on an idle
    # machine), on a connection of its own that it closes at once, as a client process that
    # exits would. (A timed-out connection left to the garbage collector was once closed only
    # after the answer had ended: no server can see a disconnect that has not happened.)
    impatient = openai.OpenAI(base_url=openai_client.base_url, api_key=openai_client.api_key,
                              timeout=0.3, max_retries=0)
    try:
        with pytest.raises(openai.APITimeoutError):
            impatient.completions.create(model=MODEL, prompt="GPUs", max_tokens=1000,
                                         extra_body={"ignore_eos": True})
    finally:
        impatient.close()
    new = _wait_for(lambda: set(redis().scan_iter(match="run:v1-*:events")) - before)
    run_id = next(iter(new)).removeprefix("run:").removesuffix(":events")
    ended = _wait_for(lambda: [e for e in run_events.events_read(redis(), run_id=run_id)
                               if e.type in ("aborted", "done")])
    assert ended[0].type == "aborted" and ended[0].data["blocks_freed"] >= 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_the_contract_holds_with_the_openai_client(openai_client):
    """n, logprobs, the penalties and top_k are honoured; what cannot be is refused with 400."""
    import re

    import openai

    messages = [{"role": "user", "content": "What is a KV cache?"}]
    # A prompt of some 900 tokens and max_tokens 500 pass the context of 1,024: refused,
    # naming both numbers (it was cut short to about 120 tokens with finish_reason "length").
    with pytest.raises(openai.BadRequestError) as long:
        openai_client.completions.create(model=MODEL, prompt="token " * 900, max_tokens=500)
    message = long.value.body["message"]
    prompt_tokens = int(re.search(r"prompt's (\d+) tokens", message).group(1))
    assert 800 < prompt_tokens < 1024 and "max_tokens 500" in message and "1024" in message
    assert long.value.body["param"] == "max_tokens"
    # Left out, max_tokens is whatever fits (OpenAI's default of 16 here).
    fits = openai_client.completions.create(model=MODEL, prompt="token " * 900)
    assert fits.usage.completion_tokens <= 16

    # n = 2 with a seed: two samples, each sample i the same streamed as whole.
    whole = openai_client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, n=2, seed=5, temperature=1.0,
        logprobs=True, top_logprobs=2, presence_penalty=0.5, frequency_penalty=0.5,
        extra_body={"top_k": 40})
    assert [c.index for c in whole.choices] == [0, 1]
    assert whole.usage.completion_tokens == sum(
        len(c.logprobs.content) for c in whole.choices)
    for choice in whole.choices:
        assert "".join(t.token for t in choice.logprobs.content)  # each token's own text
        assert all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in choice.logprobs.content)
    chunks = list(openai_client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, n=2, seed=5, temperature=1.0,
        presence_penalty=0.5, frequency_penalty=0.5, extra_body={"top_k": 40}, stream=True))
    for choice in whole.choices:
        mine = [c.choices[0] for c in chunks if c.choices[0].index == choice.index]
        assert mine[0].delta.role == "assistant"
        assert "".join(c.delta.content or "" for c in mine) == choice.message.content
        assert mine[-1].finish_reason == choice.finish_reason
    completion = openai_client.completions.create(model=MODEL, prompt="Prefill is",
                                                  max_tokens=5, temperature=0, logprobs=3)
    lp = completion.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    # Greedy: each chosen token is the likeliest of its alternatives.
    assert all(max(top.values()) == pytest.approx(chosen)
               for top, chosen in zip(lp.top_logprobs, lp.token_logprobs, strict=True))

    # More samples than the engine's max_num_seqs (32) could ever run side by side.
    with pytest.raises(openai.BadRequestError) as crowd:
        openai_client.completions.create(model=MODEL, prompt="x", max_tokens=1, n=40)
    assert crowd.value.body["param"] == "n" and "max_num_seqs" in crowd.value.body["message"]
    for extra, param in (({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
                         ({"response_format": {"type": "json_object"}}, "response_format"),
                         ({"stream_options": {"include_usage": True}}, "stream_options")):
        with pytest.raises(openai.BadRequestError) as refused:
            openai_client.chat.completions.create(model=MODEL, messages=messages, **extra)
        assert refused.value.body["param"] == param


def test_a_stream_that_fails_still_ends_with_done():
    """A worker error mid-stream: the error chunk, then `data: [DONE]`, as every stream ends
    (the client otherwise waits for an end that never comes)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from course.openai_api import _stream
    from demos.events import Event

    class FailingRelay:
        ended = False

        async def next_events(self, timeout_s: float) -> list:  # noqa: ARG002
            return [Event(id="2-0", type="error", data={"message": "the engine failed"})]

        async def close(self) -> None:
            pass

    async def main() -> list[str]:
        early = [Event(id="1-0", type="delta", data={"text": "Hi", "tokens": 1, "index": 0})]
        return [c async for c in _stream(FailingRelay(), early, meta={}, chat=False,
                                         include_usage=False)]

    with ThreadPoolExecutor(1) as pool:
        chunks = pool.submit(asyncio.run, main()).result(timeout=10)
    assert '"Hi"' in chunks[0] and "the engine failed" in chunks[1]
    assert chunks[-1] == "data: [DONE]\n\n" and len(chunks) == 3


# Keys: the account page and the operator's command ----------------------------------------------


@pytest.mark.django_db
def test_account_page_makes_a_key_shows_it_once_and_revokes_it(client, django_user_model):
    from course.api_keys import api_key_authenticate
    from course.models import ApiKey

    user = django_user_model.objects.create_user(username="ada", password="a-long-password-1")
    assert client.get("/account/").status_code == 302  # signed-in learners only
    client.force_login(user)
    response = client.post("/account/", {"name": "laptop"})
    assert response.status_code == 200
    raw = response.context["new_key"]
    assert raw.startswith("sk-course-") and raw in response.content.decode()
    key = ApiKey.objects.get(user=user)
    assert key.key_hash != raw and raw not in key.key_hash  # only a hash is kept
    assert api_key_authenticate(raw=raw) == key
    page = client.get("/account/").content.decode()
    assert raw not in page and key.prefix in page  # shown once
    assert client.post("/account/", {"name": ""}).status_code == 400
    client.post(f"/account/keys/{key.pk}/revoke")
    assert api_key_authenticate(raw=raw) is None
    # Someone else's key cannot be revoked from this account.
    other = django_user_model.objects.create_user(username="bob", password="a-long-password-1")
    from course.api_keys import api_key_create

    theirs, their_raw = api_key_create(user=other, name="theirs")
    client.post(f"/account/keys/{theirs.pk}/revoke")
    assert api_key_authenticate(raw=their_raw) == theirs


@pytest.mark.django_db
def test_manage_apikey_create_prints_the_key_alone_on_its_last_line(django_user_model):
    from io import StringIO

    from django.core.management import call_command

    from course.api_keys import api_key_authenticate

    django_user_model.objects.create_user(username="operator-test", password="x-long-pass-1")
    out, err = StringIO(), StringIO()
    call_command("apikey", "create", "--user", "operator-test", stdout=out, stderr=err)
    raw = out.getvalue().strip().splitlines()[-1]
    assert raw.startswith("sk-course-") and api_key_authenticate(raw=raw) is not None
    listed = StringIO()
    call_command("apikey", "list", "--user", "operator-test", stdout=listed)
    assert "active" in listed.getvalue()


def test_the_relay_honours_a_cancellation_its_redis_read_swallowed():
    """Under load, the cancellation Django sends when a client leaves was sometimes lost inside
    the Redis client's read, and the stream ran on to its end with nobody listening. The relay
    checks its task after every read and stops."""
    import asyncio

    from course.openai_api import _Relay

    class SwallowingRedis:
        reads = 0

        async def xread(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.reads += 1
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass  # what a read that loses the cancellation does
            return []

    async def main() -> int:
        relay = _Relay("unit")
        relay.client = SwallowingRedis()
        task = asyncio.create_task(relay.next_events(timeout_s=5))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=1)  # not the 5 s the reads would run for
        return relay.client.reads

    # A thread of its own: other tests in this process may leave an event loop running here.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, main()).result(timeout=10) == 1
