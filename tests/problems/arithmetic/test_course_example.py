"""COURSE.md's worked example (problem 1, "for scale"): Llama 3 8B in BF16 on one H100 SXM.

The steps use the architecture's 8.03×10⁹ parameters (the COURSE headline rounds to 8×10⁹);
both give the stated figures, which these tests check at the precision the prose states them.
"""

import pytest

from problems.arithmetic import decode, kv_cache, prefill, weights_bytes


def test_prefill_of_1000_tokens_is_about_1_6e13_flops() -> None:
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    assert round(result["flops"] / 1e13, 1) == 1.6
    # The 2·N·T term alone, with the COURSE's round 8×10⁹ and with the exact 8.03×10⁹.
    assert round(2 * 8e9 * 1000 / 1e13, 1) == 1.6
    assert round(result["linear_flops"] / 1e13, 1) == 1.6


def test_prefill_takes_about_32_ms_at_half_the_dense_bf16_peak() -> None:
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    # 2·N·T at 50% of 989.5 TFLOP/s: 32.5 ms (32.3 ms with N = 8×10⁹).
    assert round(result["linear_seconds"] * 1e3) == 32
    assert round(2 * 8e9 * 1000 / (0.5 * 989.5e12) * 1e3) == 32
    # Causal attention adds 1.6% at this length: 33.0 ms in all.
    assert result["seconds"] == pytest.approx(0.0330, abs=0.0005)


def test_weights_are_about_16_gb() -> None:
    result = weights_bytes(model="llama-3-8b", dtype="bf16")
    assert result["params"] == 8_030_261_248
    assert round(result["bytes"] / 1e9) == 16


def test_one_decode_step_is_at_least_4_8_ms() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=300)
    weights_only = result["weight_bytes_per_step"] / 3.35e12
    assert round(weights_only * 1e3, 1) == 4.8
    assert result["step_seconds"] >= weights_only
    assert result["bound"] == "memory"


def test_300_output_tokens_take_about_1_4_s() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=300)
    # The COURSE counts the weights alone: 300 × 4.79 ms = 1.44 s.
    assert round(300 * result["weights_floor_seconds"], 1) == 1.4
    # Reading the growing KV (1,000 to 1,299 tokens) as well adds under 1%: 1.45 s.
    assert result["total_seconds"] == pytest.approx(1.45, abs=0.005)


def test_kv_for_1300_tokens_is_about_0_17_gb() -> None:
    result = kv_cache(model="llama-3-8b", tokens=1300, dtype="bf16")
    # 32 layers × 2 (K and V) × 8 KV heads × 128 head_dim × 2 bytes.
    assert result["bytes_per_token"] == 32 * 2 * 8 * 128 * 2 == 131_072
    assert round(result["total_bytes"] / 1e9, 2) == 0.17
