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
    small = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=100,
                       draft_host_ms=0)
    large = itl_levers(model="llama-3-8b", gpu="h100-sxm", batch=512, context_tokens=100,
                       draft_host_ms=0)

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


def _p9(**over: object) -> object:
    return itl_levers(**{**dict(model="llama-3-8b", gpu="h100-sxm", mfu=0.5), **over})


def test_steady_prefills_raise_the_mean_tpot_and_disaggregation_removes_it() -> None:
    """Review P9-E4. Llama 3 8B on an H100, 64 slots, 1,500-token prompts, 500-token answers,
    11.49 ms decode-only TPOT. The step carrying one whole prefill is 36.1 ms longer than a
    decode step (the decoders ride it), and the replica admits 64 ÷ 500 prefills per decode
    step: mean TPOT = 11.49 + 64 × 36.1 ÷ 500 = 16.1 ms, 1.40× (the review's 17.1 ms charges
    the whole 43.5 ms prefill). Prefill's share is 1 − 11.49/16.1 = 28.7%; disaggregated, the
    decode pool keeps 11.49 ms and needs 64 ÷ (500 × 11.49 ms) × 36.1 ms = 0.40 prefill GPUs
    per decode GPU."""
    r = _p9(prompt_tokens=1_500, answer_tokens=500)
    stall = r["prefill_stall_total_seconds"]
    assert stall == pytest.approx(0.0361, abs=5e-4)
    assert r["mean_tpot_whole_seconds"] == pytest.approx(r["tpot_seconds"] + 64 * stall / 500)
    assert r["mean_tpot_whole_seconds"] == pytest.approx(0.0161, abs=2e-4)
    assert r["prefill_share_whole"] == pytest.approx(1 - r["tpot_seconds"]
                                                     / r["mean_tpot_whole_seconds"])
    assert r["prefill_gpus_per_decode_gpu"] == pytest.approx(
        64 / (500 * r["tpot_seconds"]) * stall)
    assert r["mean_tpot_chunked_seconds"] < r["mean_tpot_whole_seconds"]


def test_speculation_meets_the_target_per_pass_and_pays_host_time_per_draft() -> None:
    """Review P9-M1 and P9-M2. γ = 4, c = 0.05, 2 ms of host a pass. At batch 1 the pass was
    verify + 4 × 0.05 × plain + 2 ms; each draft step now adds 0.5 ms of host too: 2 ms more a
    pass, so TPOT rises by 2 ms ÷ 2.77 = 0.72 ms (2.69 → 3.42 ms; batch 64: 5.15 → 5.87 ms).
    With the 15 ms target held for the whole pass (a refused first guess leaves a user waiting
    all of it), the largest batch is 56 with draft host time and about 68 without, not the
    206–217 the mean allows."""
    rows = {x["id"]: x for x in _p9(batch=1)["levers"]}
    free = {x["id"]: x for x in _p9(batch=1, draft_host_ms=0)["levers"]}
    tokens = rows["speculative"]["tokens_per_step"]
    assert rows["speculative"]["tpot_seconds"] - free["speculative"]["tpot_seconds"] == \
        pytest.approx(4 * 0.0005 / tokens)
    assert free["speculative"]["tpot_seconds"] == pytest.approx(0.00269, abs=5e-5)
    assert rows["speculative"]["tpot_seconds"] == pytest.approx(0.00342, abs=5e-5)
    spec = {x["id"]: x for x in _p9(tpot_target_ms=15)["levers"]}["speculative"]
    assert spec["batch_at_target"] == 56 and spec["batch_at_target_mean"] == 206
    assert spec["gap_seconds"] == pytest.approx(spec["tpot_seconds"] * spec["tokens_per_step"])
    spec_free = {x["id"]: x for x in _p9(draft_host_ms=0, tpot_target_ms=15)["levers"]}[
        "speculative"]
    assert spec_free["batch_at_target"] in range(66, 70)


def test_weight_only_formats_do_not_help_a_compute_bound_step() -> None:
    """Review P9-M3. 200-token contexts at batch 256 with a 40 ms target: the step is
    compute-bound (7.82 ms of compute against 6.48 ms of reads). FP8 (W8A8) doubles the matmul
    rate: 62,162 against 31,095 tokens/s per GPU at the target, "2× more". INT4 (weight-only,
    BF16 matmuls) and an FP8 KV cache give exactly the baseline's 31,095: "no gain"."""
    inputs = dict(context_tokens=200, batch=256, tpot_target_ms=40)
    r = _p9(**inputs)
    assert r["gpu_step_bound"] == "compute"
    rows = {x["id"]: x for x in r["levers"]}
    assert rows["weights"]["per_gpu_at_target"] == pytest.approx(62_162, rel=1e-3)
    assert rows["weights"]["effect"] == "moves the curve: 2× more tokens/s per GPU at the target"
    assert "faster matmuls" in rows["weights"]["name"]
    assert rows["kv"]["effect"].startswith("no gain at the target: the step is compute-bound")
    rows = {x["id"]: x for x in _p9(**inputs, lever_dtype="int4")["levers"]}
    assert rows["weights"]["per_gpu_at_target"] == rows["baseline"]["per_gpu_at_target"]
    assert "weight-only" in rows["weights"]["name"]
    assert "does not raise the compute rate" in rows["weights"]["effect"]
    assert rows["speculative"]["effect"].startswith("lowers tokens/s per GPU")
