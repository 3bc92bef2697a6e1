"""Quantization, MoE parallelism and cost."""

import math

import pytest

from problems.arithmetic import (
    ArithmeticInputError,
    capacity_plan,
    cost_per_million,
    moe_all_to_all,
    moe_memory,
    quantization,
)


def test_fp8_halves_the_weights_and_the_weight_bound_floor() -> None:
    result = quantization(model="llama-3-70b", gpu="h100-sxm", to_dtype="fp8")
    assert result["fraction_saved"] == pytest.approx(0.5)
    assert result["floor_speedup"] == pytest.approx(2, rel=0.001)
    # 141 GB in BF16 does not fit one 80 GB H100; 70.6 GB in FP8 does.
    assert result["fits_before"] is False and result["fits_after"] is True


def test_quantization_buys_less_when_the_kv_dominates() -> None:
    long = quantization(
        model="llama-3-8b", gpu="h100-sxm", to_dtype="int4", batch=64, context_tokens=8000
    )
    short = quantization(model="llama-3-8b", gpu="h100-sxm", to_dtype="int4")
    assert long["floor_speedup"] < 1.2 < 3 < short["floor_speedup"]


def test_expert_parallel_keeps_the_non_expert_weights_whole() -> None:
    # DeepSeek-V3: 671B total; ~17B outside the routed experts (attention, shared experts,
    # 3 dense layers, embeddings).
    result = moe_memory(model="deepseek-v3", gpus=8, dtype="fp8")
    assert result["total_bytes"] == pytest.approx(671e9, rel=0.005)
    assert result["ep_bytes_per_gpu"] == pytest.approx(
        result["non_expert_bytes"] + result["expert_bytes"] / 8
    )
    assert result["ep_bytes_per_gpu"] > result["tp_bytes_per_gpu"]


def test_experts_must_split_evenly() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        moe_memory(model="mixtral-8x7b", gpus=3)
    assert error.value.field == "gpus"


def test_all_to_all_bytes_per_token() -> None:
    # Mixtral: 2 experts, hidden 4096, 32 MoE layers, BF16; EP 8 → 7/8 of experts remote.
    result = moe_all_to_all(model="mixtral-8x7b", ep=8)
    assert result["bytes_per_token"] == pytest.approx(2 * 2 * 4096 * 2 * 32 * 7 / 8)
    assert moe_all_to_all(model="mixtral-8x7b", ep=1)["bytes_per_token"] == 0


def test_dense_model_has_no_all_to_all() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        moe_all_to_all(model="llama-3-8b", ep=2)
    assert error.value.field == "model"


def test_cost_per_million_tokens() -> None:
    # $2.50/h ÷ (2,500 tokens/s × 3,600 s) × 10⁶ = $0.2778.
    result = cost_per_million(gpu="h100-sxm", tokens_per_second=2500, price_per_hour=2.5)
    assert result["dollars_per_million_tokens"] == pytest.approx(2.5 / (2500 * 3600) * 1e6)


def test_cost_defaults_to_the_assumed_price() -> None:
    from problems.arithmetic import GPUS

    result = cost_per_million(gpu="l4", tokens_per_second=100)
    assert result["price_per_hour"] == GPUS["l4"].price_per_hour_assumed


def test_capacity_plan() -> None:
    result = capacity_plan(
        daily_users=1_000_000,
        requests_per_user=5,
        output_tokens=300,
        tokens_per_second_per_gpu=2500,
        gpu="h100-sxm",
        price_per_hour=2.5,
    )
    peak_rps = 1_000_000 * 5 / 86_400 * 3
    assert result["peak_requests_per_second"] == pytest.approx(peak_rps)
    assert result["gpus"] == math.ceil(peak_rps * 300 / (2500 * 0.7))
    assert result["monthly_cost"] == pytest.approx(result["gpus"] * 2.5 * 730)
