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


def test_fp8_halves_the_body_but_keeps_the_embedding_and_head_in_bf16() -> None:
    """Llama 3 70B: body 68,452,360,192 × 1 B + 2 × 1,050,673,152 × 2 B (embedding and head
    in BF16) = 72.66 GB against 141.1 GB in BF16: 48.5% saved, not 50%. The floor speedup
    follows the bytes read per step (body + head; the embedding is only gathered):
    (68.45 + 1.05) × 2 GB ÷ (68.45 + 2 × 1.05) GB = 139.0 ÷ 70.55 = 1.97×.
    141.1 GB + 3.3 GB reserve does not fit the H100's 76.97 GB usable; 72.66 GB + 3.3 GB does."""
    result = quantization(model="llama-3-70b", gpu="h100-sxm", to_dtype="fp8")
    assert result["weights_bytes_after"] == pytest.approx(72.65e9, rel=0.001)
    assert result["fraction_saved"] == pytest.approx(0.4851, abs=0.0005)
    assert result["floor_speedup"] == pytest.approx(1.97, abs=0.005)
    assert result["fits_before"] is False and result["fits_after"] is True


def test_bf16_70b_does_not_fit_one_h200_and_says_so() -> None:
    """141.1 GB of weights + 3.3 GB reserve against 143,771 MiB × 0.9 = 135.7 GB usable: the
    H200's "141 GB" label is not room for 141 GB of weights plus anything else."""
    result = quantization(model="llama-3-70b", gpu="h200", to_dtype="fp8")
    assert result["fits_before"] is False and result["fits_after"] is True
    labels = [s.label for s in result.steps]
    assert "Memory needed in BF16: does not fit" in labels
    assert "Memory needed in FP8 (E4M3): fits" in labels


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
    """Mixtral on EP 8 (one expert per GPU): a token's 2 experts sit on 2 distinct GPUs, each
    remote with chance 7/8 → 1.75 GPUs; dispatch + combine × 4,096 × 2 B × 32 MoE layers."""
    result = moe_all_to_all(model="mixtral-8x7b", ep=8)
    assert result["remote_gpus"] == pytest.approx(1.75)
    assert result["bytes_per_token"] == pytest.approx(2 * 1.75 * 4096 * 2 * 32)
    assert moe_all_to_all(model="mixtral-8x7b", ep=1)["bytes_per_token"] == 0


def test_all_to_all_sends_one_copy_per_destination_gpu() -> None:
    """DeepSeek-V3 on EP 8: 32 experts per GPU; a GPU escapes a token's 8 choices with chance
    C(224, 8) ÷ C(256, 8) = 0.3382, so 7 × 0.6618 = 4.63 other GPUs get one copy each, not
    8 × 7/8 = 7 (one per expert). With FP8 dispatch (1 B) and BF16 combine (2 B):
    4.63 × 7,168 × 3 B × 58 MoE layers = 5.78 MB per token."""
    bf16 = moe_all_to_all(model="deepseek-v3", ep=8)
    assert bf16["remote_gpus"] == pytest.approx(7 * (1 - math.comb(224, 8) / math.comb(256, 8)))
    assert bf16["remote_gpus"] == pytest.approx(4.63, abs=0.01)
    fp8 = moe_all_to_all(model="deepseek-v3", ep=8, dispatch_dtype="fp8")
    assert fp8["bytes_per_token"] == pytest.approx(bf16["remote_gpus"] * 7168 * 3 * 58)
    assert fp8["bytes_per_token"] < bf16["bytes_per_token"] < bf16["per_expert_bytes_per_token"]


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


def test_cost_names_the_tokens_it_counts() -> None:
    """Output only: $2.50 ÷ (2,500 × 3,600) × 10⁶ = $0.278 per million output tokens, input
    free. Priced separately with 25,000 prompt tokens/s: $2.50 ÷ (25,000 × 3,600) × 10⁶ =
    $0.0278 per million input tokens."""
    alone = cost_per_million(gpu="h100-sxm", tokens_per_second=2500, price_per_hour=2.5)
    assert alone["tokens_counted"] == "output only"
    both = cost_per_million(gpu="h100-sxm", tokens_per_second=2500, price_per_hour=2.5,
                            input_tokens_per_second=25_000)
    assert both["tokens_counted"] == "input and output priced separately"
    assert both["dollars_per_million_input_tokens"] == pytest.approx(2.5 / (25_000 * 3600) * 1e6)


def test_capacity_sizes_by_prompt_and_output_and_reports_utilisation() -> None:
    """1M users × 5 requests ÷ 86,400 s = 57.87 requests/s average, 173.6 at 3× peak. Each
    request takes 1,000 ÷ 20,000 + 300 ÷ 2,500 = 0.05 + 0.12 = 0.17 GPU-seconds, so the peak
    needs 173.6 × 0.17 = 29.5 busy GPUs, ÷ 0.7 → 43 GPUs. Averaged over the day they are
    57.87 × 0.17 ÷ 43 = 22.9% busy. Peak-sized all day: 43 × $2.50 × 730 h = $78,475; scaled
    with the load: 57.87 × 0.17 ÷ 0.7 = 14.05 GPUs on average → $25,646."""
    result = capacity_plan(daily_users=1_000_000, requests_per_user=5, output_tokens=300,
                           tokens_per_second_per_gpu=2500, gpu="h100-sxm", price_per_hour=2.5,
                           input_tokens=1000, input_tokens_per_second_per_gpu=20_000)
    average = 1_000_000 * 5 / 86_400
    assert result["gpu_seconds_per_request"] == pytest.approx(0.17)
    assert result["gpus"] == math.ceil(average * 3 * 0.17 / 0.7) == 43
    assert result["average_utilization"] == pytest.approx(average * 0.17 / 43)
    assert result["monthly_cost"] == pytest.approx(43 * 2.5 * 730)
    assert result["monthly_cost_scaled"] == pytest.approx(average * 0.17 / 0.7 * 2.5 * 730)


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


def test_the_decode_floor_is_a_roofline_bound_and_int4_saves_no_time_once_compute_binds() -> None:
    """Llama 3 70B on an H200, 256 sequences at 1 token of context. FLOPs per step:
    256 × (2 × (68,452,360,192 + 1,050,673,152) + 2,621,440) = 3.5586×10¹³ FLOP, which at the
    989.5 TFLOP/s BF16 peak take 35.96 ms, more than the 139.09 GB of BF16 reads take at
    4.8 TB/s (28.98 ms): compute-bound. INT4 (weight-only, multiplied in BF16) cuts the reads to
    68,452,360,192 × 0.5195 B + 2 × 1,050,673,152 B (head in BF16) + 83.9 MB of KV = 37.75 GB,
    7.86 ms, but the matmuls still take 35.96 ms: a 1.00× floor speedup. FP8 runs at the FP8
    peak (1,979 TFLOP/s), 17.98 ms: 2.00×."""
    int4 = quantization(model="llama-3-70b", gpu="h200", to_dtype="int4", batch=256)
    assert int4["floor_seconds_before"] == pytest.approx(3.5586224e13 / 989.5e12, rel=1e-6)
    assert int4["floor_bound_before"] == "compute" and int4["floor_bound_after"] == "compute"
    assert int4["floor_speedup"] == pytest.approx(1.0)
    fp8 = quantization(model="llama-3-70b", gpu="h200", to_dtype="fp8", batch=256)
    assert fp8["floor_seconds_after"] == pytest.approx(3.5586224e13 / 1979e12, rel=1e-6)
    assert fp8["floor_speedup"] == pytest.approx(2.0)
    # At one sequence the reads decide it, as before: memory-bound on both sides.
    one = quantization(model="llama-3-70b", gpu="h200", to_dtype="int4")
    assert one["floor_bound_after"] == "memory"
    assert one["floor_seconds_after"] == pytest.approx(
        (68_452_360_192 * 0.51953125 + 2 * 1_050_673_152 + 327_680) / 4.8e12, rel=1e-6)


def test_an_unknown_format_is_refused_on_its_own_field() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        quantization(model="llama-3-8b", gpu="a100-80gb-sxm", to_dtype="fp3")
    assert error.value.field == "to_dtype"


def test_fp8_on_an_a100_is_weight_only_fewer_bytes_at_the_bf16_rate() -> None:
    """No FP8 tensor cores on an A100: FP8 runs W8A16 (vLLM's FP8 Marlin). At batch 1 the floor
    is the bytes: (6,979,588,096 + 2 × 525,336,576 + 131,072) ÷ 2,039e9 = 3.93840 ms."""
    result = quantization(model="llama-3-8b", gpu="a100-80gb-sxm", to_dtype="fp8")
    assert result["floor_bound_after"] == "memory"
    assert result["floor_seconds_after"] * 1e3 == pytest.approx(3.93840, rel=1e-5)
