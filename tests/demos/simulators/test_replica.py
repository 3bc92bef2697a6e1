"""The replica simulator (demos/simulators/replica.py): what it serves at no load, below
capacity and past it, and that it conserves tokens."""

import pytest

from demos.simulators.replica import ReplicaModel, loads_sweep, run

# A toy replica: 1 GB of weights read per step at 1 TB/s (1 ms), 1 kB of KV per token, 1 GFLOP
# per token at 1 PFLOP/s, room for a million tokens of KV.
TOY = ReplicaModel(weights_read=1e9, kv_token=1e3, linear_flops=1e9, head_flops=0.0,
                   pair_flops=0.0, bandwidth=1e12, decode_flops_rate=1e15,
                   prefill_flops_rate=1e15, kv_capacity_tokens=1e6)


def test_a_step_is_the_roofline_of_what_it_carries():
    """10 decoding at 1,000 tokens each: (1 GB + 10 MB) ÷ 1 TB/s = 1.01 ms against 10 GFLOP ÷
    1 PFLOP/s = 10 µs; add 2,000 prefill tokens (2 TFLOP, 2 ms) and compute binds at 2.01 ms."""
    assert TOY.step_seconds(decoding=10, context_sum=10_000, prefill_tokens=0,
                            prefill_pairs=0) == pytest.approx(1.01e-3)
    assert TOY.step_seconds(decoding=10, context_sum=10_000, prefill_tokens=2_000,
                            prefill_pairs=0) == pytest.approx(2.01e-3)


def test_no_load_serves_nothing():
    out = run(replica=TOY, batch=16, input_tokens=100, cached_tokens=0, output_tokens=50,
              arrival_rate=0.0, seconds=30, chunk_tokens=512, seed=0)
    assert out["input"] == 0 and out["output"] == 0 and out["steps"] == 0


def test_below_capacity_it_serves_what_arrives():
    """At 2 requests/s of 100 + 50 tokens over 60 s (after the warm-up), about 120 requests:
    about 6,000 output and 12,000 input tokens; every answer's first token is out within a few
    steps."""
    out = run(replica=TOY, batch=64, input_tokens=100, cached_tokens=0, output_tokens=50,
              arrival_rate=2.0, seconds=60, chunk_tokens=512, seed=0)
    assert out["output"] / out["seconds"] == pytest.approx(100, rel=0.25)
    assert out["input"] / out["seconds"] == pytest.approx(200, rel=0.25)
    assert out["ttft_p99"] < 0.05 and not out["cut_short"]


def test_past_capacity_queues_grow_and_throughput_stops_rising():
    """Batch 4 with 1 ms steps serves at most ~4,000 tokens/s: 200 requests/s of 50 output tokens
    (10,000 tokens/s) must queue."""
    loads = loads_sweep(replica=TOY, batch=4, input_tokens=100, cached_tokens=0,
                        output_tokens=50, capacity_rps=100.0, loads=(0.5, 2.0), seconds=20,
                        chunk_tokens=512, seed=1)
    light, heavy = loads
    assert heavy["output"] / heavy["seconds"] < 4_500
    assert heavy["ttft_p99"] > 10 * light["ttft_p99"]
    assert heavy["mean_batch"] == pytest.approx(4, abs=0.5)


def test_the_same_seed_gives_the_same_run_and_cached_tokens_are_skipped():
    a = run(replica=TOY, batch=32, input_tokens=1_000, cached_tokens=900, output_tokens=20,
            arrival_rate=5.0, seconds=20, chunk_tokens=64, seed=3)
    b = run(replica=TOY, batch=32, input_tokens=1_000, cached_tokens=900, output_tokens=20,
            arrival_rate=5.0, seconds=20, chunk_tokens=64, seed=3)
    assert a == b
    # 100 computed tokens in chunks of 64: two steps of prefill before the first token.
    assert a["ttft_p50"] >= 2e-3
