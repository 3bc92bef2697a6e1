"""Prefill FLOPs and time."""

import pytest

from problems.arithmetic import ArithmeticInputError, prefill
from problems.arithmetic.catalog import MODELS
from problems.arithmetic.compute import attention_flops_per_token_pair


def test_linear_flops_are_two_per_non_embedding_parameter_per_token() -> None:
    """Kaplan et al. (arXiv:2001.08361) count 2N FLOPs per token with N the non-embedding
    parameters: 2 × 6,979,588,096 × 1,000, plus the head (2 × 128,256 × 4,096) once for the
    last position. The rule of thumb with every parameter is kept beside it."""
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000)
    assert result["linear_flops"] == 2 * 6_979_588_096 * 1000 + 2 * 128_256 * 4_096
    assert result["rule_of_thumb_flops"] == 2 * 8_030_261_248 * 1000


def test_attention_term_is_causal_and_quadratic() -> None:
    # Per layer and head, scores and weighted values cost 2·d each per (query, key) pair;
    # causal masking leaves T(T+1)/2 pairs.
    pair = attention_flops_per_token_pair(MODELS["llama-3-8b"])
    assert pair == 32 * 32 * 2 * (128 + 128)
    short = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000)["attention_flops"]
    long = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=2000)["attention_flops"]
    assert long / short == pytest.approx(4, rel=0.001)


def test_moe_prefill_uses_active_parameters() -> None:
    """Mixtral: 12.9B active of 46.7B (arXiv:2401.04088); without its 32,000 × 4,096 embedding
    and head (131M each) about 12.62B multiply each token: 2 × 12.62×10⁹ × 100."""
    result = prefill(model="mixtral-8x7b", gpu="h100-sxm", prompt_tokens=100)
    active_body = 12_879_925_248 - 2 * 32_000 * 4_096
    assert result["linear_flops"] == pytest.approx(2 * active_body * 100 + 2 * 32_000 * 4_096)
    assert result["rule_of_thumb_flops"] == pytest.approx(2 * 12.9e9 * 100, rel=0.01)


def test_time_uses_the_dense_not_the_sparse_peak() -> None:
    # H100 SXM datasheet: BF16 1,979 TFLOPS "with sparsity"; dense is half, 989.5.
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=1.0)
    assert result["peak_flops"] == 989.5e12
    assert result["compute_seconds"] == pytest.approx(result["flops"] / 989.5e12)
    assert result["seconds"] == max(result["compute_seconds"], result["memory_seconds"])


def test_a_20_token_prompt_cannot_beat_reading_the_weights() -> None:
    """20 tokens: compute 2.80×10¹¹ FLOP ÷ 494.75 TFLOP/s = 0.57 ms, but the pass still reads
    15.01 GB of weights (+ 20 × 131,072 B of KV and 20 × 8,192 B of embedding rows) at
    3.35 TB/s = 4.48 ms. The prefill floor is the memory side: 4.48 ms, memory-bound."""
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=20, mfu=0.5)
    assert result["compute_seconds"] == pytest.approx(0.000567, abs=0.000005)
    expected = (15_009_849_344 + 20 * 131_072 + 20 * 4_096 * 2) / 3.35e12
    assert result["memory_seconds"] == pytest.approx(expected)
    assert result["seconds"] == result["memory_seconds"]
    assert result["bound"] == "memory"
    assert any(s.label == "Prefill floor (memory-bound)" for s in result.steps)


def test_dense_bf16_on_h100_turns_compute_bound_at_about_300_tokens() -> None:
    """At 100% of both peaks: 15.01 GB ÷ 3.35 TB/s = 4.48 ms of weight reads; each token adds
    2 × 6.98×10⁹ FLOP ÷ 989.5 TFLOP/s = 14.1 µs of compute, so about 4.48 ms ÷ 14.1 µs ≈ 317
    tokens (the ridge, 989.5 ÷ 3.35 = 295 FLOP/B, scaled by what is read and multiplied).
    At 50% MFU compute takes twice as long per token, so the crossover halves (~159)."""
    full = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=1.0)
    assert 290 <= full["crossover_tokens"] <= 330
    half = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    assert half["crossover_tokens"] == pytest.approx(full["crossover_tokens"] / 2, abs=2)


def test_int4_weight_only_prefill_runs_at_the_bf16_rate_and_says_so() -> None:
    """INT4 (AWQ/GPTQ) weights are dequantized for a BF16 matmul: the peak is 989.5 TFLOP/s,
    not an INT4 rate, and the step names it."""
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, dtype="int4")
    assert result["peak_flops"] == 989.5e12
    peak = next(s for s in result.steps if s.label == "Peak for this format")
    assert "weight-only" in peak.expression and "BF16" in peak.expression


def test_int8_peaks_are_operations_and_mxfp4_falls_back_on_hopper() -> None:
    """INT8 W8A8 runs on integer tensor cores: 1,979 TOPS dense on an H100 (3,958 sparse).
    MXFP4 on an H100 (no FP4 tensor cores) runs weight-only at the BF16 rate; on a B200 at
    the FP4 rate, 9 PFLOP/s dense."""
    int8 = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, dtype="int8")
    assert next(s for s in int8.steps if s.label == "Peak for this format").display == (
        "1,979 TOPS")
    assert prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10,
                   dtype="mxfp4")["peak_flops"] == 989.5e12
    assert prefill(model="llama-3-8b", gpu="b200", prompt_tokens=10,
                   dtype="mxfp4")["peak_flops"] == 9e15


def test_prompts_past_the_context_window_are_refused() -> None:
    """Llama 3 8B's config.json: max_position_embeddings 8,192; Llama 3.1 8B's: 131,072."""
    with pytest.raises(ArithmeticInputError) as error:
        prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8193)
    assert error.value.field == "prompt_tokens"
    assert prefill(model="llama-3.1-8b", gpu="h100-sxm", prompt_tokens=100_000)["seconds"] > 0


def test_nvfp4_on_an_h100_runs_weight_only_at_the_bf16_rate() -> None:
    # No FP4 tensor cores on Hopper: vLLM runs NVFP4 checkpoints there through its FP4 Marlin
    # kernel, weights dequantized to BF16 (vLLM pull request 18000).
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10, dtype="nvfp4")
    assert result["peak_flops"] == 989.5e12
    assert prefill(model="llama-3-8b", gpu="b200", prompt_tokens=10,
                   dtype="nvfp4")["peak_flops"] == 9e15


def test_fp8_on_an_a100_runs_weight_only_at_the_bf16_rate() -> None:
    # A100 datasheet: no FP8 tensor cores (introduced with Hopper and Ada). vLLM runs FP8
    # checkpoints there weight-only (W8A16) through FP8 Marlin, so prefill runs at the BF16 rate.
    result = prefill(model="llama-3-8b", gpu="a100-80gb-sxm", prompt_tokens=10, dtype="fp8")
    assert result["peak_flops"] == 312e12
    assert prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10,
                   dtype="fp8")["peak_flops"] == 1_979e12


def test_fp8_e5m2_weights_on_an_a100_are_refused_naming_the_dtype() -> None:
    # FP8 Marlin, the weight-only path above, decodes E4M3 codes only: no engine runs E5M2
    # weights on an A100, so the format is refused on its field rather than given a rate.
    with pytest.raises(ArithmeticInputError) as error:
        prefill(model="llama-3-8b", gpu="a100-80gb-sxm", prompt_tokens=10, dtype="fp8-e5m2")
    assert error.value.field == "dtype"
    assert prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10,
                   dtype="fp8-e5m2")["peak_flops"] == 1_979e12


@pytest.mark.parametrize("mfu", [0, -0.5, 1.5, float("inf")])
def test_mfu_must_be_a_fraction(mfu: float) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10, mfu=mfu)
    assert error.value.field == "mfu"


def test_mla_attention_flops_use_its_own_head_dims() -> None:
    # DeepSeek-V3 config.json: queries and keys are 128 + 64 = 192 wide, values 128, 128 heads.
    pair = attention_flops_per_token_pair(MODELS["deepseek-v3"])
    assert pair == 61 * 128 * 2 * (192 + 128)


def test_peaks_and_refusals_name_the_vendors_matrix_units() -> None:
    """The MI300X's dense FP8 peak, 2,614.9 TFLOP/s, is a Matrix Core peak; asked for NVFP4
    natively it has no FP4 Matrix Cores (tensor cores are NVIDIA's)."""
    from problems.arithmetic.catalog import DTYPES, gpu_get
    from problems.arithmetic.compute import native_peak_get, peak_describe

    mi300x = gpu_get("mi300x")
    assert peak_describe(gpu=mi300x, dtype=DTYPES["fp8"]) == (
        "2.615 PFLOP/s dense FP8 Matrix Core peak")
    assert "vector ALUs, no Matrix Cores" in peak_describe(gpu=mi300x, dtype=DTYPES["fp32"])
    with pytest.raises(ArithmeticInputError) as error:
        native_peak_get(gpu=mi300x, dtype=DTYPES["nvfp4"])
    assert "has no FP4 Matrix Cores for NVFP4" in str(error.value)
    assert "tensor" not in str(error.value)
    assert peak_describe(gpu=gpu_get("h100-sxm"), dtype=DTYPES["fp8"]) == (
        "1.979 PFLOP/s dense FP8 tensor-core peak")
