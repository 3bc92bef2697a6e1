"""Bad input and faults on the run endpoints: every one a JSON 4xx naming the field, or a JSON
503 when Redis is away; never a 500, never internal error text (addresses, drivers) shown."""

import asyncio
import json

import pytest
from django.test import Client, override_settings

from demos.models import Run
from demos.relay import run_events_relay

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

DEAD_REDIS = "redis://127.0.0.1:1/0"
HUGE = "1" * 5000  # past Python's 4,300-digit limit on int(str)
BIG = "9" * 4000  # within it, but no float holds it


def start(client: Client, slug: str = "lifecycle", raw: bytes = b'{"prompt": "Hi"}'):
    return client.post(f"/demos/{slug}/runs", data=raw, content_type="application/json")


def assert_json_error(response, status: int, field: str | None) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"]
    if field:
        assert body["field"] == field
    return body


# ---- item 6: 500s on bad input --------------------------------------------------------------

@pytest.mark.parametrize("number", [HUGE, BIG, "-" + HUGE])
@pytest.mark.parametrize("field", ["max_tokens", "temperature", "top_p"])
def test_an_enormous_number_in_a_run_body_is_422_naming_its_field(client, field, number):
    raw = f'{{"prompt": "Hi", "{field}": {number}}}'.encode()
    assert_json_error(start(client, raw=raw), 422, field)
    assert not Run.objects.exists()


@pytest.mark.parametrize("number", [HUGE, BIG])
def test_an_enormous_stream_number_in_a_cancel_body_is_422(client, number):
    run_id = start(client, "streaming").json()["run_id"]
    response = client.post(f"/demos/runs/{run_id}/cancel", data=f'{{"stream": {number}}}',
                           content_type="application/json")
    assert_json_error(response, 422, "stream")


@pytest.mark.parametrize("value", ["²", "١", "1e3", "-1", "99"])
def test_a_stream_that_is_not_a_plain_number_is_422(client, value):
    run_id = start(client, "streaming").json()["run_id"]
    response = client.post(f"/demos/runs/{run_id}/cancel", data={"stream": value})
    assert_json_error(response, 422, "stream")
    events = client.get(f"/demos/runs/{run_id}/events", {"stream": value})
    body = assert_json_error(events, 422, "stream")
    assert "literal" not in body["error"]  # no Python exception text


@pytest.mark.parametrize("prompt", ["a\x00b", "\x00"])
def test_a_nul_character_in_a_prompt_is_422(client, prompt):
    raw = json.dumps({"prompt": prompt}).encode()
    assert_json_error(start(client, raw=raw), 422, "prompt")


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_over_the_size_limit_is_a_json_413(client):
    raw = json.dumps({"prompt": "x" * 2000}).encode()
    assert_json_error(start(client, raw=raw), 413, "body")
    run_id = start(client).json()["run_id"]
    response = client.post(f"/demos/runs/{run_id}/cancel", data=raw,
                           content_type="application/json")
    assert_json_error(response, 413, "body")


# ---- items 7 and 10: Redis down --------------------------------------------------------------

def test_viewing_and_cancelling_a_run_with_redis_down_is_a_json_503(client):
    run_id = start(client).json()["run_id"]
    Run.objects.filter(pk=run_id).update(state="running")
    with override_settings(REDIS_URL=DEAD_REDIS):
        for response in (client.get(f"/demos/runs/{run_id}"),
                         client.post(f"/demos/runs/{run_id}/cancel")):
            body = assert_json_error(response, 503, None)
            assert "127.0.0.1" not in body["error"] and "Error" not in body["error"]
            assert int(response["Retry-After"]) > 0


def test_starting_a_run_with_redis_down_is_a_json_503(client):
    with override_settings(REDIS_URL=DEAD_REDIS):
        body = assert_json_error(start(Client()), 503, None)
    assert "127.0.0.1" not in body["error"]


def test_the_event_stream_says_redis_is_away_before_closing(client):
    run_id = start(client).json()["run_id"]

    async def collect() -> list[str]:
        return [chunk async for chunk in run_events_relay(run_id=run_id)]

    with override_settings(REDIS_URL=DEAD_REDIS):
        chunks = asyncio.run(collect())
    text = "".join(chunks)
    assert "event: unavailable" in text
    data = json.loads(text.split("event: unavailable\ndata: ", 1)[1].split("\n", 1)[0])
    assert data["message"] and "127.0.0.1" not in data["message"]
    # The browser is asked to wait longer before it tries again, not every 2 s.
    assert "retry: 2000" not in text.split("event: unavailable")[1]
