"""Every /v1 answer is an OpenAI-style JSON body with the right status, whatever the input and
whatever is down (issue 33): through Django's test client and the real Redis, no worker."""

import json

import pytest
from django.test import Client

from course.json_input import JsonInputError, json_strict_loads

MODEL = "course-lm"


def _error(response) -> dict:  # noqa: ANN001
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = json.loads(response.content)
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.fixture
def raw_key(django_user_model):
    from course.api_keys import api_key_create

    user = django_user_model.objects.create_user(username="v1-inputs", password="pw-long-1234")
    return api_key_create(user=user, name="tests")[1]


@pytest.fixture
def api(raw_key):
    from demos.services import redis

    for key in redis().scan_iter(match="course:ratelimit:*"):
        redis().delete(key)
    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {raw_key}")


def _post(client: Client, body: bytes | str, path: str = "/v1/completions"):  # noqa: ANN202
    return client.generic("POST", path, body, content_type="application/json")


# The parser itself -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "words"), [
    ('{"prompt": "\\ud800"}', "lone surrogate"),        # a lone high surrogate
    ('{"\\udfff": 1}', "lone surrogate"),               # in a key
    ('{"seed": ' + "9" * 5000 + "}", "5,000 digits"),   # Python's int() refuses past 4,300
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),   # the C parser recurses
    ("[" * 40 + "]" * 40, "nested deeper than 32"),     # within Python's limit, past ours
    (b'{"prompt": "\xff"}', "not valid UTF-8"),
    ("{", "not valid JSON"),
])
def test_the_strict_parser_refuses_what_would_break_later(text, words):
    with pytest.raises(JsonInputError) as refused:
        json_strict_loads(text)
    assert words in refused.value.message


def test_the_strict_parser_keeps_real_unicode_and_a_surrogate_pair():
    """"\\ud83d\\ude00" is a valid pair: one emoji, U+1F600."""
    assert json_strict_loads('{"p": "\\ud83d\\ude00 é"}') == {"p": "\U0001F600 é"}


# /v1 bodies ------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("body", [
    '{"model": "course-lm", "prompt": "x", "seed": ' + "1" * 5000 + "}",
    '{"model": "course-lm", "prompt": ' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"model": "course-lm", "prompt": "a\\ud800b"}',
    '{"model": "course-lm", "messages": [{"role": "user", "content": "\\udc00"}]}',
    "not json",
])
def test_bad_bodies_are_400_json_before_anything_else(api, body):
    """Before: the long integer and the nesting answered 500 (ValueError, RecursionError), the
    surrogate reached the worker and the client waited 30 s for a 503."""
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    response = _post(api, body, path)
    assert response.status_code == 400
    assert _error(response)["code"] == "invalid_json"


@pytest.mark.django_db
def test_a_body_past_the_limits_is_413_json(api, settings):
    """2.6 MB is past Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): it answered an HTML 400."""
    body = json.dumps({"model": MODEL, "prompt": "x" * 2_600_000})
    response = _post(api, body)
    assert response.status_code == 413 and _error(response)["code"] == "request_too_large"
    settings.API_MAX_BODY_BYTES = 1000
    response = _post(api, json.dumps({"model": MODEL, "prompt": "x" * 2000}))
    assert response.status_code == 413


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/completions", {"model": MODEL, "prompt": "x" * 64_001}),
    ("/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "system", "content": "y" * 32_000}, {"role": "user", "content": "z" * 32_001}]}),
])
def test_a_prompt_past_the_character_cap_is_refused_in_the_web(api, path, body):
    """64,001 characters: no prompt past 16 × 1,024 = 16,384 characters fits the shipped
    model's context (its longest token is 16 characters); the web refuses it before any
    tokenizer or worker sees it (a 2.4 MB prompt stalled the shared engine for 24 s)."""
    response = _post(api, json.dumps(body), path)
    error = _error(response)
    assert response.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["param"] == ("prompt" if "prompt" in body else "messages")
    assert "64,001" in error["message"] and "64,000" in error["message"]


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/v1/embeddings"), ("POST", "/v1/responses"), ("GET", "/v1/models/"),
    ("GET", "/v1/"), ("GET", "/v1"),
])
def test_unknown_routes_are_404_json(api, method, path):
    response = api.generic(method, path)
    assert response.status_code == 404 and _error(response)["code"] in ("unknown_url", None)


@pytest.mark.django_db
def test_redis_down_is_503_json_with_retry_after(api, settings):
    """With Redis not answering /v1 answered 500 (the demo views answered JSON 503)."""
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    for response in (api.get("/v1/models"),
                     _post(api, json.dumps({"model": MODEL, "prompt": "hello"}))):
        assert response.status_code == 503, response.content
        assert _error(response)["type"] == "server_error"
        assert int(response["Retry-After"]) >= 1


@pytest.mark.django_db
def test_an_unexpected_exception_is_a_500_json_not_html(api, monkeypatch):
    import course.openai_api

    def broken(body, *, chat):  # noqa: ANN001
        raise RuntimeError("a bug")

    monkeypatch.setattr(course.openai_api, "request_parse", broken)
    response = _post(api, json.dumps({"model": MODEL, "prompt": "x"}))
    assert response.status_code == 500 and _error(response)["type"] == "server_error"
    assert "a bug" not in response.content.decode()


@pytest.mark.django_db
def test_a_host_django_refuses_is_a_400_json_under_v1(api, settings):
    settings.ALLOWED_HOSTS = ["course.example"]
    response = api.get("/v1/models", HTTP_HOST="evil.example")
    assert response.status_code == 400
    _error(response)
    # Outside /v1 Django's own page stays.
    assert not api.get("/", HTTP_HOST="evil.example")["Content-Type"].startswith(
        "application/json")


@pytest.mark.django_db
def test_demo_bodies_refuse_invalid_unicode_at_parse_time(client):
    """The demos' JSON bodies go through the same parser: a lone surrogate is a 422 naming the
    body, never a prompt that the tokenizer or Redis chokes on later."""
    response = client.post("/demos/lifecycle/runs", '{"prompt": "hi \\ud800"}',
                           content_type="application/json")
    assert response.status_code == 422, response.content
    assert response.json()["field"] == "body" and "surrogate" in response.json()["error"]


def test_a_stream_whose_worker_dies_ends_with_an_error_event_at_once():
    """A worker killed mid-answer: the stream waited 60 s of silence for a 503. Now the relay
    sees the worker's heartbeat expire and ends the stream with an error event (here a 1 s
    heartbeat, checked every 3 s: well within 10 s)."""
    import asyncio
    import time
    import uuid

    from course.openai_api import _Relay, _stream
    from demos import events
    from demos.services import redis

    request_id = uuid.uuid4().hex
    run_id = f"v1-{request_id}"
    events.event_publish(redis(), run_id=run_id, type="accepted", data={"prompt_tokens": 3})
    events.heartbeat_beat(redis(), run_id=run_id, ttl_s=1)

    async def follow() -> list[str]:
        from course.openai_api import _accepted

        relay = _Relay(request_id)
        _, early = await _accepted(relay)
        return [chunk async for chunk in _stream(relay, early, meta={"id": "x"}, chat=False,
                                                 include_usage=False)]

    started = time.monotonic()
    chunks = asyncio.run(follow())
    assert time.monotonic() - started < 10
    # The error chunk, then `data: [DONE]` as every stream ends.
    assert chunks[-1] == "data: [DONE]\n\n"
    last = json.loads(chunks[-2].removeprefix("data: "))
    assert last["error"]["code"] == "worker_lost"
