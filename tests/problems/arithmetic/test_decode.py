"""One decode step, tokens/s and a whole answer."""

import pytest

from problems.arithmetic import ArithmeticInputError, decode
from problems.arithmetic.catalog import MODELS
from problems.arithmetic.decode import experts_touched

WEIGHTS_READ = 15_009_849_344  # (6,979,588,096 non-embedding + 525,336,576 head) × 2 B


def test_step_reads_weights_plus_every_sequences_kv() -> None:
    """8 sequences × 2,000 tokens × 131,072 B = 2.10 GB of KV on top of the 15.01 GB of
    non-embedding weights and output head (the embedding table is only gathered from)."""
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=8, context_tokens=2000)
    assert result["kv_bytes_per_step"] == 8 * 2000 * 131_072
    assert result["bytes_per_step"] == WEIGHTS_READ + 8 * 2000 * 131_072
    assert result["memory_seconds"] == pytest.approx(result["bytes_per_step"] / 3.35e12)


def test_a_hundred_users_at_1150_tokens_double_the_step() -> None:
    """100 × 1,150 × 131,072 B = 15.07 GB of KV, about the 15.01 GB of weights, so the step is
    (15.01 + 15.07) GB ÷ 3.35 TB/s = 8.98 ms, twice the 4.48 ms weight floor, with the
    weights' share of the bytes at 50%."""
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=100, context_tokens=1150)
    assert result["kv_bytes_per_step"] == pytest.approx(15.07e9, rel=0.001)
    assert result["weight_share"] == pytest.approx(0.5, abs=0.005)
    assert result["step_seconds"] == pytest.approx(2 * result["weights_floor_seconds"], rel=0.01)


def test_aggregate_tokens_per_second_is_batch_over_step_time() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=16, context_tokens=100)
    assert result["tokens_per_second"] == pytest.approx(16 / result["step_seconds"])
    assert result["tokens_per_second_per_sequence"] == pytest.approx(1 / result["step_seconds"])


def test_kv_dtype_defaults_to_the_models_precision_not_the_weights() -> None:
    """FP8 or INT4 weights leave the activations, and so the cache, in BF16: 1,000 tokens ×
    131,072 B. An FP8 KV cache, asked for, halves it to 65,536 B per token."""
    for weights in ("fp8", "int4"):
        default = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, dtype=weights)
        assert default["kv_bytes_per_step"] == 1000 * 131_072
    fp8_kv = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, dtype="fp8",
                    kv_dtype="fp8")
    assert fp8_kv["kv_bytes_per_step"] == 1000 * 65_536


def test_a_weight_only_format_is_refused_as_a_kv_format() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        decode(model="llama-3-8b", gpu="h100-sxm", kv_dtype="int4")
    assert error.value.field == "kv_dtype"


def test_moe_batch_one_reads_the_active_experts_and_large_batches_read_them_all() -> None:
    mixtral = MODELS["mixtral-8x7b"]
    assert experts_touched(model=mixtral, batch=1) == pytest.approx(2)
    assert experts_touched(model=mixtral, batch=64) == pytest.approx(8, rel=1e-6)
    one = decode(model="mixtral-8x7b", gpu="h100-sxm", batch=1)
    # Mixtral paper: 12.9B active parameters; less the 131M-parameter embedding (gathered,
    # not read whole): 12.75×10⁹ × 2 B = 25.5 GB per step in BF16.
    assert one["weight_bytes_per_step"] == pytest.approx(2 * (12_879_925_248 - 131_072_000))


def test_huge_batches_become_compute_bound() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=4096, context_tokens=1)
    assert result["bound"] == "compute"
    assert result["step_seconds"] == result["compute_seconds"]


def test_the_compute_bound_crossover_on_an_h100() -> None:
    """Context 1: each sequence costs 2 × 7.505×10⁹ FLOP ÷ 989.5 TFLOP/s = 15.17 µs of compute
    and adds 131,072 B (0.04 µs) of KV; the 15.01 GB of weights take 4.48 ms. Compute
    overtakes at 4.48 ms ÷ (15.17 − 0.04) µs ≈ 296 sequences: "roughly 300 tokens per step".
    At 1,000 tokens of context each sequence brings 131 MB of KV for 1.6×10¹⁰ FLOP, 122 FLOP/B,
    below the 295 FLOP/B ridge: the step never turns compute-bound."""
    short = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1)
    assert 290 <= short["crossover_batch"] <= 300
    assert decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000)[
        "crossover_batch"] == 0


def test_an_answer_of_n_tokens_is_n_minus_one_decode_steps() -> None:
    """The first token comes out of prefill: a one-token answer pays no decode step, and a
    1,001-token answer pays 1,000 steps whose KV grows 1,000 → 1,999 tokens (mean 1,499.5)."""
    one = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=1)
    assert one["decode_steps"] == 0 and one["total_seconds"] == 0
    long = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=1001)
    mean_step = (WEIGHTS_READ + 1499.5 * 131_072) / 3.35e12
    assert long["decode_steps"] == 1000
    assert long["total_seconds"] == pytest.approx(1000 * mean_step)


def test_fits_in_memory_counts_all_weights_the_final_kv_and_the_reserve() -> None:
    """Usable on an H100: CUDA's 79.22 GiB = 85,061,827,297 B × 0.9 = 76.56 GB (nvidia-smi's
    81,559 MiB would give 76.97 GB, 0.41 GB too many). Llama 3 8B: 16.06 GB + 170 MB KV +
    3.3 GB reserve = 19.5 GB fits. Llama 3.1 405B in BF16 is ~812 GB: nothing holds it. Mixtral
    in BF16 holds 46.7×10⁹ × 2 B = 93.4 GB (every expert) and does not fit, even though a
    batch-1 step reads only ~25.5 GB."""
    fine = decode(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=1000)
    assert fine["fits_in_memory"] and fine["memory_usable_bytes"] == pytest.approx(
        85_061_827_297 * 0.9)
    assert not decode(model="llama-3.1-405b", gpu="b200")["fits_in_memory"]
    mixtral = decode(model="mixtral-8x7b", gpu="h100-sxm")
    assert not mixtral["fits_in_memory"]
    assert mixtral["memory_needed_bytes"] > 93.4e9
    assert any(s.label.endswith("does not fit") for s in mixtral.steps)


def test_the_largest_batch_that_fits_is_reported() -> None:
    """(76.56 GB − 16.06 GB − 3.3 GB) ÷ (1,299 tokens × 131,072 B = 170.3 MB) = ⌊335.9⌋ = 335
    sequences (338 when the budget was taken from nvidia-smi's total)."""
    result = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=300)
    room = 85_061_827_297 * 0.9 - 16_060_522_496 - 3.3e9
    assert result["largest_batch"] == int(room // (1299 * 131_072)) == 335


def test_the_moe_rule_of_thumb_reads_the_active_parameters_once() -> None:
    """Mixtral 8x7B at batch 1: the rule of thumb reads every parameter a token uses, the
    12,879,925,248 active ones (shared weights, 2 of 8 experts, embedding and head), × 2 B =
    25.76 GB, 7.69 ms at 3.35 TB/s. Not all 46.7B (93.4 GB, 27.9 ms): a token never touches the
    six experts it was not routed to."""
    result = decode(model="mixtral-8x7b", gpu="h100-sxm")
    assert result["rule_of_thumb_weight_bytes"] == 2 * 12_879_925_248
    assert result["rule_of_thumb_floor_seconds"] == pytest.approx(25_759_850_496 / 3.35e12)
    assert result.steps[0].label == "Rule of thumb: every active parameter once"
    dense = decode(model="llama-3-8b", gpu="h100-sxm")
    assert dense["rule_of_thumb_weight_bytes"] == 2 * 8_030_261_248


def test_int8_rates_are_named_in_ops_wherever_a_step_shows_them() -> None:
    """INT8 W8A8 runs on the integer tensor cores, rated in TOPS (1,979 dense on an H100), so
    every rate and intensity shown for it says OPS or OP/B, never FLOP/s or FLOP/B."""
    from problems.arithmetic import chunked_prefill, prefix_cache, roofline_decode

    results = (
        decode(model="llama-3-8b", gpu="h100-sxm", dtype="int8", batch=64),
        chunked_prefill(model="llama-3-8b", gpu="h100-sxm", dtype="int8", prompt_tokens=4000),
        prefix_cache(model="llama-3-8b", gpu="h100-sxm", dtype="int8", prompt_tokens=3000,
                     prefix_tokens=2000),
        roofline_decode(model="llama-3-8b", gpu="h100-sxm", dtype="int8", batch=400),
    )
    for result in results:
        shown = " ".join(f"{s.expression} {s.display}" for s in result.steps)
        assert "PFLOP/s" not in shown and "TFLOP/s" not in shown, shown
        assert "TOPS" in shown or "POPS" in shown
    assert "OP/B" in " ".join(s.display for s in results[-1].steps)
    assert "FLOP/B" not in " ".join(s.expression for s in results[-1].steps)


def test_the_moe_rule_of_thumb_at_a_batch_reads_the_experts_the_batch_uses() -> None:
    """Mixtral 8x7B, 2 of 8 experts per token: at batch 100 the rule of thumb cannot read only
    one sequence's 12.9B active parameters when the step really reads 93.1 GB; 100 × 2 routings
    cover all 8 experts, so it reads all 46,702,792,704 parameters (93.4 GB). At batch 2 it
    reads up to 4 experts per layer: 12,879,925,248 + 2 × 176,160,768 × 32 = 24,154,214,400."""
    wide = decode(model="mixtral-8x7b", gpu="h100-sxm", batch=100, context_tokens=1000)
    assert wide["rule_of_thumb_weight_bytes"] == 2 * 46_702_792_704
    assert wide.steps[0].label == "Rule of thumb: every parameter the batch uses once"
    assert "active" not in wide.steps[0].expression
    two = decode(model="mixtral-8x7b", gpu="h100-sxm", batch=2, context_tokens=1000)
    assert two["rule_of_thumb_weight_bytes"] == 2 * (12_879_925_248 + 2 * 176_160_768 * 32)
    dense = decode(model="llama-3-8b", gpu="h100-sxm", batch=100, context_tokens=1000)
    assert dense["rule_of_thumb_weight_bytes"] == 2 * 8_030_261_248
