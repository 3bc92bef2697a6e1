"""A run's events and control keys in the suite's real Redis."""

import os
import uuid

import redis

from demos import events


def client() -> redis.Redis:
    return events.redis_client(os.environ["REDIS_URL"])


def test_published_events_replay_in_order_with_their_stream():
    run_id = str(uuid.uuid4())
    ids = [events.event_publish(client(), run_id=run_id, type=t, data={"n": n}, stream=s)
           for n, (t, s) in enumerate([("queued", None), ("token", 1), ("finished", None)])]
    replay = events.events_read(client(), run_id=run_id)
    assert [e.id for e in replay] == ids
    assert [(e.type, e.stream, e.data["n"]) for e in replay] == [
        ("queued", None, 0), ("token", 1, 1), ("finished", None, 2)]
    assert [e.type for e in events.events_read(client(), run_id=run_id, after=ids[0])] == [
        "token", "finished"]
    assert 0 < client().ttl(events.events_key(run_id)) <= 3600


def test_sse_text_carries_id_type_and_stream():
    event = events.Event(id="5-0", type="token", data={"text": "hi"}, stream=2)
    assert event.sse() == 'id: 5-0\nevent: token\ndata: {"text": "hi", "stream": 2}\n\n'


def test_cancel_targets_keep_the_first_reason_per_target():
    run_id = str(uuid.uuid4())
    assert events.cancel_targets(client(), run_id=run_id) == {}
    events.cancel_request(client(), run_id=run_id, stream=1, reason="disconnected")
    events.cancel_request(client(), run_id=run_id, reason="cancelled")
    assert events.cancel_targets(client(), run_id=run_id) == {
        "stream:1": "disconnected", "all": "cancelled"}


def test_heartbeat_expires():
    run_id = str(uuid.uuid4())
    assert not events.heartbeat_alive(client(), run_id=run_id)
    events.heartbeat_beat(client(), run_id=run_id, ttl_s=30)
    assert events.heartbeat_alive(client(), run_id=run_id)
    client().delete(events.heartbeat_key(run_id))
    assert not events.heartbeat_alive(client(), run_id=run_id)
