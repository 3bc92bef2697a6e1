"""COURSE.md's worked example (problem 1, "for scale"): Llama 3 8B in BF16 on one H100 SXM.

Two counts stand side by side. The rule of thumb takes every one of the 8.03×10⁹ parameters as
a matmul weight for every token; the refined count leaves out the embedding (a gather, not a
matmul: 128,256 × 4,096 = 525,336,576 parameters), multiplies the output head (the same size,
untied) only at the last position in prefill, and reads non-embedding weights + head in decode.
Non-embedding parameters: 8,030,261,248 − 2 × 525,336,576 = 6,979,588,096.
"""

import pytest

from problems.arithmetic import decode, kv_cache, prefill, weights_bytes

NON_EMBEDDING = 6_979_588_096
HEAD = 128_256 * 4_096


def test_prefill_of_1000_tokens_rule_of_thumb_and_refined() -> None:
    """Rule of thumb: 2 × 8.03×10⁹ × 1,000 = 1.61×10¹³ FLOP.
    Refined: 2 × 6,979,588,096 × 1,000 = 1.396×10¹³ (linear)
           + 2 × 525,336,576 × 1 = 1.05×10⁹ (head, last position)
           + 524,288 FLOP per pair × 1,000 × 1,001 ÷ 2 = 2.62×10¹¹ (attention)
           = 1.42×10¹³ FLOP, 89% of the rule of thumb."""
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    assert result["rule_of_thumb_flops"] == 2 * 8_030_261_248 * 1000
    assert round(result["rule_of_thumb_flops"] / 1e13, 1) == 1.6
    assert result["head_flops"] == 2 * HEAD
    assert result["linear_flops"] == 2 * NON_EMBEDDING * 1000 + 2 * HEAD
    assert result["flops"] == pytest.approx(1.3959e13 + 1.0507e9 + 2.6241e11, rel=1e-4)
    assert round(result["flops"] / 1e13, 1) == 1.4


def test_prefill_at_half_the_dense_bf16_peak_is_compute_bound() -> None:
    """At 50% of 989.5 TFLOP/s = 494.75 TFLOP/s: rule of thumb 1.606×10¹³ ÷ 4.9475×10¹⁴ =
    32.5 ms; refined 1.4223×10¹³ ÷ 4.9475×10¹⁴ = 28.7 ms. The weight reads, 15.0 GB at
    3.35 TB/s = 4.5 ms, are the smaller side, so the bound is compute."""
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    assert round(result["rule_of_thumb_seconds"] * 1e3) == 32
    assert result["compute_seconds"] == pytest.approx(0.02875, abs=0.00005)
    assert result["memory_seconds"] == pytest.approx(0.00452, abs=0.00001)
    assert result["bound"] == "compute"
    assert result["seconds"] == result["compute_seconds"]


def test_weights_are_about_16_gb() -> None:
    """8,030,261,248 parameters × 2 B = 16,060,522,496 B ≈ 16 GB (14.96 GiB, which is what vLLM
    logs as 'model weights take 14.96GiB' for this model)."""
    result = weights_bytes(model="llama-3-8b", dtype="bf16")
    assert result["params"] == 8_030_261_248
    assert result["bytes"] == 16_060_522_496
    assert round(result["bytes"] / 2**30, 2) == 14.96


def test_one_decode_step_reads_15_gb_not_16() -> None:
    """Read per step: (6,979,588,096 non-embedding + 525,336,576 head) × 2 B = 15,009,849,344 B
    ≈ 15 GB → 15.01 GB ÷ 3.35 TB/s = 4.48 ms. The rule of thumb, 16.06 GB, gives 4.79 ms."""
    result = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=300)
    assert result["weight_bytes_per_step"] == (NON_EMBEDDING + HEAD) * 2 == 15_009_849_344
    assert round(result["weights_floor_seconds"] * 1e3, 1) == 4.5
    assert round(result["rule_of_thumb_floor_seconds"] * 1e3, 1) == 4.8
    assert result["bound"] == "memory"
    assert result["step_seconds"] >= result["weights_floor_seconds"]


def test_300_output_tokens_take_299_decode_steps() -> None:
    """The first token comes from prefill, so 300 tokens need 299 steps: 299 × 4.48 ms = 1.34 s
    at the weight floor; with the KV read as it grows (1,000 → 1,298 tokens, mean 1,149 ×
    131,072 B = 0.151 GB more per step) the mean step is 4.53 ms and the loop 1.35 s."""
    result = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=300)
    assert result["decode_steps"] == 299
    assert round(299 * result["weights_floor_seconds"], 2) == 1.34
    mean_step = (15_009_849_344 + 1149 * 131_072) / 3.35e12
    assert result["total_seconds"] == pytest.approx(299 * mean_step)


def test_kv_for_1300_tokens_is_about_0_17_gb() -> None:
    """32 layers × 2 (K and V) × 8 KV heads × 128 head_dim × 2 B = 131,072 B per token;
    × 1,300 tokens = 170,393,600 B ≈ 0.17 GB."""
    result = kv_cache(model="llama-3-8b", tokens=1300, dtype="bf16")
    assert result["bytes_per_token"] == 32 * 2 * 8 * 128 * 2 == 131_072
    assert round(result["total_bytes"] / 1e9, 2) == 0.17
