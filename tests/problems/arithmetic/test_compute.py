"""Prefill FLOPs and time."""

import pytest

from problems.arithmetic import ArithmeticInputError, prefill
from problems.arithmetic.catalog import MODELS
from problems.arithmetic.compute import attention_flops_per_token_pair


def test_linear_flops_are_two_per_parameter_per_token() -> None:
    # Kaplan et al., "Scaling Laws for Neural Language Models" (arXiv:2001.08361), Table 1:
    # a forward pass costs about 2N FLOPs per token.
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000)
    assert result["linear_flops"] == 2 * 8_030_261_248 * 1000


def test_attention_term_is_causal_and_quadratic() -> None:
    # Per layer and head, scores and weighted values cost 2·d each per (query, key) pair;
    # causal masking leaves T(T+1)/2 pairs.
    pair = attention_flops_per_token_pair(MODELS["llama-3-8b"])
    assert pair == 32 * 32 * 2 * (128 + 128)
    short = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000)["attention_flops"]
    long = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=2000)["attention_flops"]
    assert long / short == pytest.approx(4, rel=0.001)


def test_moe_prefill_uses_active_parameters() -> None:
    # Mixtral: 12.9B active of 46.7B (arXiv:2401.04088).
    result = prefill(model="mixtral-8x7b", gpu="h100-sxm", prompt_tokens=100)
    assert result["linear_flops"] == pytest.approx(2 * 12.9e9 * 100, rel=0.01)


def test_time_uses_the_dense_not_the_sparse_peak() -> None:
    # H100 SXM datasheet: BF16 1,979 TFLOPS "with sparsity"; dense is half, 989.5.
    result = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=1.0)
    assert result["peak_flops"] == 989.5e12
    assert result["seconds"] == pytest.approx(result["flops"] / 989.5e12)


def test_fp8_on_an_a100_is_refused_naming_the_dtype() -> None:
    # A100 datasheet: no FP8 tensor cores (introduced with Hopper).
    with pytest.raises(ArithmeticInputError) as error:
        prefill(model="llama-3-8b", gpu="a100-80gb-sxm", prompt_tokens=10, dtype="fp8")
    assert error.value.field == "dtype"


@pytest.mark.parametrize("mfu", [0, -0.5, 1.5, float("inf")])
def test_mfu_must_be_a_fraction(mfu: float) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10, mfu=mfu)
    assert error.value.field == "mfu"


def test_mla_attention_flops_use_its_own_head_dims() -> None:
    # DeepSeek-V3 config.json: queries and keys are 128 + 64 = 192 wide, values 128, 128 heads.
    pair = attention_flops_per_token_pair(MODELS["deepseek-v3"])
    assert pair == 61 * 128 * 2 * (192 + 128)
