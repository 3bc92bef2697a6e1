"""Runs end to end: a real worker process, real Redis, and the SSE relay under real uvicorn.

The streaming demo decodes with ignore_eos and a pause between steps, so a run lasts long
enough to cancel or cut once its first token is seen; nothing here asserts a duration.
"""

import pytest

from tests.demos.conftest import run_wait_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow,
              pytest.mark.postgres]

LIFECYCLE_ORDER = ["tokenized", "queued", "admitted", "prefill", "token"]


def run_start(site, slug: str, **params) -> dict:
    status, body = site.request("POST", f"/demos/{slug}/runs", {"prompt": "What is a token?",
                                                                 "temperature": 0, **params})
    assert status == 201, body
    return body


def test_lifecycle_streams_each_stage_in_order_then_replays_late(site, celery_worker_process):
    started = run_start(site, "lifecycle", max_tokens=6)
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    types = [e.type for e in seen]
    assert types[-1] == "finished", seen[-1].data
    body = types[:-1]
    # tokenized, queued, admitted, prefill, then one token event per token made, each step
    # after its token saying how many sequences (and visitors) it carried.
    assert body[:5] == LIFECYCLE_ORDER
    assert set(body[4:]) == {"token", "step"}
    finished = seen[-1].data
    tokens = [e for e in seen if e.type == "token"]
    assert len(tokens) == finished["usage"]["completion_tokens"] <= 6
    assert [e.data["index"] for e in tokens] == list(range(len(tokens)))
    assert all(e.data["num_seqs"] >= 1 for e in seen if e.type == "step")
    tokenized = seen[0].data
    assert tokenized["token_count"] == len(tokenized["token_ids"]) == len(tokenized["pieces"])
    assert finished["usage"]["prompt_tokens"] == tokenized["token_count"]
    assert seen[2].data["blocks"] >= 1
    # Every token but the last sampled one had its K and V in a block of 16 tokens.
    assert finished["blocks_freed"] == -(-(finished["usage"]["total_tokens"] - 1) // 16)
    assert finished["blocks_freed"] >= seen[2].data["blocks"]
    assert finished["kv_blocks_free"] == finished["kv_blocks_total"]
    assert finished["finish_reason"] in ("stop", "length")
    assert finished["estimate"]["available"] and finished["estimate"]["tpot_ms"] > 0
    assert [s["stage"] for s in finished["timeline"]][:3] == ["tokenize", "queue", "prefill"]
    # Every event carries an id, and the run is finished in the database before the event.
    assert all(e.id for e in seen)
    state = run_wait_state(site, started["run_id"], {"finished"})
    assert state["summary"]["usage"] == finished["usage"]

    # A late connection gets the same events again; Last-Event-ID resumes after one.
    late = site.events_open(started["events_url"])
    replay = late.until(lambda e: e.type == "finished")
    late.close()
    assert [(e.id, e.type) for e in replay] == [(e.id, e.type) for e in seen]
    resumed = site.events_open(started["events_url"], last_event_id=seen[3].id)
    rest = resumed.until(lambda e: e.type == "finished")
    resumed.close()
    assert [e.id for e in rest] == [e.id for e in seen[4:]]


def test_cancel_frees_the_blocks_and_ends_cancelled(site, celery_worker_process):
    started = run_start(site, "streaming", max_tokens=400)
    reader = site.events_open(started["events_url"])
    before = reader.until(lambda e: e.type == "token")
    assert before[-1].type == "token", [e.type for e in before]
    status, _ = site.request("POST", started["events_url"].replace("events", "cancel"), {})
    assert status == 202
    after = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    end = after[-1]
    assert end.type == "cancelled", end.data
    assert end.data["reason"] == "cancelled"
    assert end.data["blocks_freed"] >= 3  # each of the three streams held at least one
    assert end.data["kv_blocks_free"] == end.data["kv_blocks_total"]
    assert run_wait_state(site, started["run_id"], {"cancelled"})["summary"]["blocks_freed"] >= 3


def test_client_disconnect_cancels_the_run(site, celery_worker_process):
    started = run_start(site, "streaming", max_tokens=400)
    reader = site.events_open(started["events_url"])
    reader.until(lambda e: e.type == "token")
    reader.close()  # the client goes away mid-stream
    state = run_wait_state(site, started["run_id"], {"cancelled", "finished", "failed"})
    assert state["state"] == "cancelled"
    assert state["summary"]["reason"] == "disconnected"
    assert state["summary"]["blocks_freed"] >= 3
    assert state["summary"]["kv_blocks_free"] == state["summary"]["kv_blocks_total"]


def test_cutting_one_stream_aborts_it_and_the_others_finish(site, celery_worker_process):
    started = run_start(site, "streaming", max_tokens=48)
    run = site.events_open(started["events_url"])
    one = site.events_open(started["events_url"] + "?stream=1")
    first = one.until(lambda e: e.type == "token")
    assert first[-1].type == "token" and first[-1].data["stream"] == 1
    one.close()  # cut stream 1 only
    seen = run.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    run.close()
    assert seen[-1].type == "finished", seen[-1].data
    aborted = [e for e in seen if e.type == "aborted"]
    assert [(e.data["stream"], e.data["reason"]) for e in aborted] == [(1, "disconnected")]
    assert aborted[0].data["blocks_freed"] >= 1
    done = sorted(e.data["stream"] for e in seen if e.type == "done")
    assert done == [0, 2]
    streams = {s["stream"]: s for s in seen[-1].data["streams"]}
    assert streams[1]["state"] == "aborted" and streams[1]["completion_tokens"] < 48
    assert streams[0]["completion_tokens"] == streams[2]["completion_tokens"] == 48
    # Stream 1 sends nothing after its abort; the free blocks rose at the abort.
    after_abort = seen[seen.index(aborted[0]) + 1:]
    assert not [e for e in after_abort if e.type == "token" and e.data.get("stream") == 1]
    steps_before = [e for e in seen[:seen.index(aborted[0])] if e.type == "step"]
    assert aborted[0].data["kv_blocks_free"] > steps_before[-1].data["kv_blocks_free"]


def test_a_run_whose_events_expired_still_ends_its_stream(site, celery_worker_process):
    from demos import events
    from demos.services import redis

    started = run_start(site, "lifecycle", max_tokens=1)
    state = run_wait_state(site, started["run_id"], {"finished", "failed", "cancelled"})
    redis().delete(events.events_key(started["run_id"]))  # as if its TTL had passed
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    assert [e.type for e in seen] == [state["state"]]
    assert seen[0].data["state"] == state["state"]


def test_leaving_while_still_queued_ends_the_run(site, client):
    import json

    from django.test import override_settings

    from tests.demos.conftest import SiteClient

    # Queued where no worker listens; then the same visitor watches it over uvicorn and leaves.
    with override_settings(DEMO_QUEUE="demos-nobody-listens"):
        response = client.post("/demos/lifecycle/runs", content_type="application/json",
                               data=json.dumps({"prompt": "Hi"}))
    assert response.status_code == 201
    visitor = SiteClient(port=site.port, cookies={"sessionid": client.cookies["sessionid"].value})
    reader = visitor.events_open(response.json()["events_url"])
    reader.close()
    state = run_wait_state(visitor, response.json()["run_id"], {"cancelled"}, timeout=30)
    assert state["summary"]["reason"] == "disconnected"
