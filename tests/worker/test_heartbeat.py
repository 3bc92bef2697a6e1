"""Worker readiness in Redis: the hash layout /healthz reads, and its expiry."""

import time

from demos.services import redis
from worker.heartbeat import (
    WorkerBeat,
    worker_key,
    worker_status_write,
    workers_ready,
    workers_status,
)


def test_a_worker_counts_as_ready_only_once_its_engine_is_loaded():
    client = redis()
    host = f"beat-test-{time.monotonic_ns()}@vm"
    before = workers_ready(client)
    beat = WorkerBeat(client_factory=redis, hostname=host, queues=["engine"],
                      model="/models/x").start()
    try:
        fields = workers_status(client)[host]
        assert fields["engine_ready"] == "0" and fields["queues"] == "engine"
        assert fields["model"] == "/models/x" and int(fields["updated_at"]) > 0
        assert 0 < client.ttl(worker_key(host)) <= 15
        assert workers_ready(client) == before
        beat.ready()
        assert workers_ready(client) == before + 1
    finally:
        beat.stop()
    assert host not in workers_status(client)  # a clean stop removes it at once


def test_a_silent_worker_expires():
    client = redis()
    host = f"beat-expiry-{time.monotonic_ns()}@vm"
    worker_status_write(client, hostname=host, engine_ready=True, queues=["engine"],
                        model="m", ttl_s=1)
    assert host in workers_status(client)
    time.sleep(1.2)
    assert host not in workers_status(client)
