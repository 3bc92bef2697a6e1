"""Worker readiness in Redis: the hash layout /healthz reads, and its expiry."""

import time

import pytest

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
        assert fields["kernels"] == ""
        beat.ready(kernels="C kernels (AVX-512, OpenMP, -march=native; cpu_fused-x.so)")
        assert workers_ready(client) == before + 1
        assert workers_status(client)[host]["kernels"].startswith("C kernels (AVX-512")
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


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_real_workers_heartbeat_names_its_kernel_build(celery_worker_process):
    """The build the worker's engine loaded (a fallback one runs several times slower) shows
    where an operator looks: the engine's stats and this hash."""
    import shutil

    kernels = [f["kernels"] for f in workers_status(redis()).values()
               if f.get("engine_ready") == "1" and "engine" in f["queues"].split(",")]
    assert kernels
    if any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
        assert any(k.startswith("C kernels (") and "cpu_fused-" in k for k in kernels), kernels
    else:
        assert any("PyTorch ops" in k for k in kernels), kernels
