"""Problem 9's arithmetic: the TPOT–throughput levers, against figures worked by hand."""

import math

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.itl import expected_tokens, itl_levers, tp_allreduce_seconds, tpot_curves


def test_expected_tokens_by_hand() -> None:
    assert expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)  # 3.3616
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens(1.0, 4) == 5


def test_tp_allreduce_by_hand() -> None:
    """32 layers, hidden 4,096, 64 tokens, TP2 on 450 GB/s one way, 10 µs each: 2 × 32 ×
    (2 × 1/2 × 64 × 4,096 × 2 B) = 33,554,432 B → 74.565 µs, plus 64 × 10 µs."""
    t = tp_allreduce_seconds(layers=32, hidden=4096, tokens=64, tp=2,
                             link_bytes_per_second=450e9, latency_seconds=10e-6)
    assert t == pytest.approx(33_554_432 / 450e9 + 64 * 10e-6)
    assert tp_allreduce_seconds(layers=32, hidden=4096, tokens=64, tp=1,
                                link_bytes_per_second=450e9, latency_seconds=10e-6) == 0


def test_batch_one_step_is_the_weight_read() -> None:
    """Llama 3 8B BF16 on an H100 SXM, batch 1, 1 token of context, no host: the step reads
    the non-embedding weights and the head, 2 B each, at 3.35 TB/s."""
    r = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=1, host_ms=0)
    non_embedding = 8_030_261_248 - 128_256 * 4096  # the embedding is only gathered from
    assert r["gpu_step_bound"] == "memory"
    assert r["weights_bytes"] == pytest.approx(non_embedding * 2)
    assert r["gpu_step_seconds"] == pytest.approx((non_embedding * 2 + 131_072) / 3.35e12)
    assert r["tpot_seconds"] == r["gpu_step_seconds"]


def test_levers_move_the_way_they_should() -> None:
    r = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=64, context_tokens=2000,
                   host_ms=2.0)
    rows = {x["id"]: x for x in r["levers"]}
    base = rows["baseline"]["tpot_seconds"]
    for lever in ("weights", "kv", "tp", "overlap", "speculative"):
        assert rows[lever]["tpot_seconds"] < base, lever
    # Hiding the host: the step costs max(GPU, host) instead of their sum.
    assert rows["overlap"]["tpot_seconds"] == pytest.approx(r["gpu_step_seconds"])
    assert base == pytest.approx(r["gpu_step_seconds"] + 2e-3)
    # Tensor parallelism lowers TPOT but costs throughput per GPU here.
    assert rows["tp"]["tokens_per_second_per_gpu"] < rows["baseline"][
        "tokens_per_second_per_gpu"]
    # An FP8 KV cache doubles the batch memory holds (to within rounding).
    assert rows["kv"]["batch_max_memory"] == pytest.approx(
        2 * rows["baseline"]["batch_max_memory"], abs=1)
    # Chunking caps the spike without removing the prefill work.
    assert r["spike_chunked_seconds"] < r["spike_unchunked_seconds"]
    assert r["chunks"] == math.ceil(8000 / 512)


def test_the_batch_at_the_target_meets_it_and_the_next_does_not() -> None:
    r = itl_levers(model="llama-3-8b", gpu="h100-sxm", tpot_target_ms=15)
    b = r["batch_at_target"]
    assert r["levers"][0]["limit_at_target"] == "target"
    assert itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=b)["tpot_seconds"] <= 0.015
    assert itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=b + 1)["tpot_seconds"] > 0.015


def test_speculation_gain_fades_with_the_batch() -> None:
    small = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=100)
    large = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=512, context_tokens=100)

    def gain(r):
        rows = {x["id"]: x for x in r["levers"]}
        return rows["baseline"]["tpot_seconds"] / rows["speculative"]["tpot_seconds"]

    assert gain(small) > 2 > gain(large)


def test_curves_stop_where_memory_ends() -> None:
    curves = tpot_curves(inputs=dict(model="llama-3-8b", gpu="h100-sxm"),
                         batches=[1, 64, 100_000])
    assert [b for b, _, _ in curves["baseline"]] == [1, 64]


def test_bad_inputs_name_their_field() -> None:
    with pytest.raises(ArithmeticInputError) as e:
        itl_levers(model="llama-3-8b", gpu="h100-sxm", tp=3)
    assert e.value.field == "tp"
    with pytest.raises(ArithmeticInputError) as e:
        itl_levers(model="llama-3-8b", gpu="h100-sxm", acceptance=1.5)
    assert e.value.field == "acceptance"


def test_each_spike_names_its_own_bound() -> None:
    """Review: the unchunked spike once carried the chunks' bound. 8,000 tokens in one step
    are compute-bound; a 16-token chunk beside 64 decoders (80 tokens) is memory-bound."""
    r = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=64, context_tokens=2000,
                   prompt_tokens=8000, chunk_tokens=16, mfu=0.5)
    whole = next(s for s in r.steps if s.label.startswith("Spike: a prompt"))
    chunk = next(s for s in r.steps if s.label.startswith("Spike with"))
    assert "(compute-bound)" in whole.expression
    assert "(memory-bound)" in chunk.expression
