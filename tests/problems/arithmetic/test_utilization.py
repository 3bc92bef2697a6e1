"""A decode step split into kernel groups, and busy against efficient (problems 13 and 14).

Llama 3 8B (config.json: 32 layers, hidden 4,096, 32 heads, 8 KV heads of 128, FFN 14,336,
vocab 128,256, untied head) on an H100 SXM (3.35 TB/s, 989.5 TFLOP/s dense BF16), BF16:
- attention projections per layer: 4,096² (q) + 2 × 4,096 × 1,024 (k, v) + 4,096² (o) =
  41,943,040; × 32 = 1,342,177,280 → 2,684,354,560 B;
- MLP: 3 × 4,096 × 14,336 × 32 = 5,637,144,576 → 11,274,289,152 B;
- head: 128,256 × 4,096 = 525,336,576 → 1,050,673,152 B;
- norms: (2 × 32 + 1) × 4,096 = 266,240 → 532,480 B;
- KV per token: 2 × 32 × 8 × 128 × 2 B = 131,072 B; attention 32 × 32 × 2 × 256 = 524,288
  FLOP per (query, key) pair.
"""

import pytest

from problems.arithmetic import decode
from problems.arithmetic.catalog import MODELS
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.utilization import (
    decode_groups_model,
    decode_step_breakdown,
    gpu_utilization,
    utilization_point_model,
)

BW = 3.35e12
PEAK = 989.5e12


def test_the_default_step_by_kernel_group() -> None:
    """Batch 64 × 1,000 tokens: KV 64 × 1,000 × 131,072 = 8,388,608,000 B; the step reads
    2,684,354,560 + 11,274,289,152 + 1,050,673,152 + 532,480 + 8,388,608,000 = 23,398,457,344 B
    in 6.984614 ms (every group memory-bound: the MLP's 7.2×10¹¹ FLOP take 0.729 ms, its bytes
    3.365 ms). KV intensity 33,554,432,000 ÷ 8,388,608,000 = 4 FLOP/B. 10 × 32 + 3 = 323
    kernels (review P0607-14: two add-and-norms, four matmuls, RoPE, the KV write, attention
    and silu_and_mul a layer, not 11 with separate adds)."""
    r = decode_step_breakdown(model="llama-3-8b", gpu="h100-sxm", batch=64, context_tokens=1000)
    assert r["attn_proj_bytes"] == 2_684_354_560
    assert r["mlp_bytes"] == 11_274_289_152
    assert r["lm_head_bytes"] == 1_050_673_152
    assert r["norms_bytes"] == 532_480
    assert r["kv_bytes"] == 8_388_608_000
    assert r["step_bytes"] == 23_398_457_344
    assert r["step_seconds"] == pytest.approx(6.984614e-3, rel=1e-6)
    assert r["kv_intensity"] == 4
    assert r["kernels_floor"] == 323
    assert {r[f"{g}_bound"] for g in ("attn_proj", "mlp", "lm_head", "norms", "kv")} == {
        "memory"}
    # Shares: 0.801300 / 3.365459 / 0.313634 / 2.504062 ms of 6.984614 ms.
    assert r["mlp_share"] == pytest.approx(0.48184, abs=1e-5)
    assert r["kv_share"] == pytest.approx(0.35851, abs=1e-5)
    assert r["attn_proj_share"] == pytest.approx(0.11472, abs=1e-5)
    assert r["lm_head_share"] == pytest.approx(0.044904, abs=1e-6)
    assert r["fits"]


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b", "qwen2.5-7b", "deepseek-v3"])
@pytest.mark.parametrize("batch", [1, 64])
def test_the_groups_read_what_decode_reads(model, batch) -> None:
    """The groups' bytes add up to decode()'s bytes per step (dense and MoE, tied or not), and
    while every group is memory-bound the summed floors equal decode()'s step time."""
    r = decode_step_breakdown(model=model, gpu="h200", batch=batch, context_tokens=100)
    d = decode(model=model, gpu="h200", batch=batch, context_tokens=100)
    assert r["step_bytes"] == pytest.approx(d["bytes_per_step"], rel=1e-12)
    assert r["step_flops"] == pytest.approx(d["flops_per_step"], rel=1e-12)
    if r["step_bound"] == "memory":
        assert r["step_seconds"] == pytest.approx(d["step_seconds"], rel=1e-12)


def test_batch_one_is_mostly_the_mlp() -> None:
    """Batch 1: 15,009,849,344 B of weights + 131,072,000 B of KV = 15,140,921,344 B, 4.519678
    ms; shares MLP 3.365459 ÷ 4.519678 = 74.46%, attention projections 17.73%, head 6.94%, KV
    0.87%."""
    r = decode_step_breakdown(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=1000)
    assert r["step_bytes"] == 15_140_921_344
    assert r["step_seconds"] == pytest.approx(4.519678e-3, rel=1e-6)
    assert r["mlp_share"] == pytest.approx(0.7446, abs=1e-4)
    assert r["attn_proj_share"] == pytest.approx(0.1773, abs=1e-4)
    assert r["lm_head_share"] == pytest.approx(0.0694, abs=1e-4)
    assert r["kv_share"] == pytest.approx(0.0087, abs=1e-4)


def test_kernels_in_sequence_cost_the_sum_of_their_floors() -> None:
    """Batch 512, context 1: the GEMM groups turn compute-bound (intensity ≈ 512 FLOP/B at 2-byte
    weights, above the 295 ridge): attention projections 2 × 1,342,177,280 × 512 ÷ 989.5e12 =
    1.38895 ms > 0.8013 ms of reads. The KV group stays memory-bound (4 FLOP/B), so the sum of
    the groups' maxima exceeds the max of the step's total bytes and total FLOPs."""
    r = decode_step_breakdown(model="llama-3-8b", gpu="h100-sxm", batch=512, context_tokens=1)
    assert r["attn_proj_seconds"] == pytest.approx(2 * 1_342_177_280 * 512 / PEAK, rel=1e-9)
    assert r["attn_proj_bound"] == r["mlp_bound"] == "compute"
    assert r["kv_bound"] == "memory" and r["step_bound"] == "mixed"
    assert r["step_seconds"] > max(r["step_bytes"] / BW, r["step_flops"] / PEAK)


def test_a_tied_head_is_the_embedding_read_once() -> None:
    """Qwen2.5 7B ties nothing; the course's demo model ties its head: vocab × hidden, read as
    the head and counted once."""
    demo = MODELS.get("course-lm")
    if demo is None:
        from problems.arithmetic.catalog import models_all

        demo = models_all()["course-lm"]
    r = decode_step_breakdown(model="course-lm", gpu="h100-sxm", batch=1, context_tokens=1)
    assert demo.tied_embeddings
    assert r["lm_head_params"] == demo.vocab * demo.hidden


def test_a_context_past_the_window_is_refused() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        decode_step_breakdown(model="llama-3-8b", gpu="h100-sxm", context_tokens=8193)
    assert error.value.field == "context_tokens"


def test_utilization_at_batch_one_and_sixty_four() -> None:
    """Host 3 ms, not overlapped. Batch 1: GPU 4.519678 ms, wall 7.519678 ms, utilisation
    0.601047; MFU busy 15,534,137,344 ÷ (4.519678 ms × 989.5 TFLOP/s) = 0.34735%, over wall
    0.20877%; host for 30% = 4.519678 × (1 ÷ 0.3 − 1) = 10.54592 ms. Batch 64: GPU 6.984614 ms,
    wall 9.984614 ms, utilisation 0.699538, MFU busy 994,184,790,016 ÷ (6.984614 ms × 989.5
    TFLOP/s) = 14.385%, 64 ÷ 9.984614 ms = 6,409.86 tokens/s."""
    r = gpu_utilization(model="llama-3-8b", gpu="h100-sxm")
    small, large = r["small"], r["large"]
    assert small["bytes"] == 15_140_921_344 and small["flops"] == 15_534_137_344
    assert small["gpu_seconds"] == pytest.approx(4.519678e-3, rel=1e-6)
    assert small["utilization"] == pytest.approx(0.601047, abs=1e-6)
    assert small["mfu_busy"] == pytest.approx(0.0034735, rel=1e-4)
    assert small["mfu_wall"] == pytest.approx(0.0020877, rel=1e-4)
    assert small["host_for_target_seconds"] == pytest.approx(1.054592e-2, rel=1e-6)
    assert large["bytes"] == 23_398_457_344 and large["flops"] == 994_184_790_016
    assert large["gpu_seconds"] == pytest.approx(6.984614e-3, rel=1e-6)
    assert large["utilization"] == pytest.approx(0.699538, abs=1e-6)
    assert large["mfu_busy"] == pytest.approx(0.143850, rel=1e-4)
    assert large["tokens_per_second"] == pytest.approx(6409.86, rel=1e-5)
    assert r["throughput_gain"] == pytest.approx(48.20, rel=1e-3)
    assert small["fits"] and large["fits"]


def test_no_host_time_reads_fully_busy_at_under_one_percent_mfu() -> None:
    r = gpu_utilization(model="llama-3-8b", gpu="h100-sxm", host_ms=0)
    for point in (r["small"], r["large"]):
        assert point["utilization"] == 1.0
    assert r["small"]["mfu_busy"] < 0.01


def test_overlapped_host_work_hides_until_it_is_longer() -> None:
    """Overlapped, 3 ms of host work hides under 4.52 ms of GPU time; 10 ms does not: wall 10
    ms, utilisation 4.519678 ÷ 10 = 0.4519678."""
    r = gpu_utilization(model="llama-3-8b", gpu="h100-sxm", overlap="on")
    assert r["small"]["wall_seconds"] == r["small"]["gpu_seconds"]
    assert r["small"]["utilization"] == r["large"]["utilization"] == 1.0
    slow = gpu_utilization(model="llama-3-8b", gpu="h100-sxm", overlap="on", host_ms=10)
    assert slow["small"]["utilization"] == pytest.approx(0.4519678, rel=1e-6)


def test_a_verification_pass_reads_once_and_multiplies_the_flops() -> None:
    """Batch 64 × 1,000 tokens, 3 positions per sequence (γ = 2): the same 23,398,457,344 B as
    a plain step (weights and KV read once), the FLOPs three times: MLP 2 × 5,637,144,576 × 192
    = 2,164,663,517,184 (2.188 ms at the peak, still under its 3.365 ms of bytes); attention
    192 × 1,000 × 524,288 = 100,663,296,000."""
    at = dict(model=MODELS["llama-3-8b"], batch=64, context_tokens=1000,
              weight_bytes_per_param=2, kv_bytes_per_token=131_072,
              bandwidth_bytes_per_second=BW, peak_flops=PEAK)
    plain = {g["name"]: g for g in decode_groups_model(**at)}
    verify = {g["name"]: g for g in decode_groups_model(**at, queries_per_sequence=3)}
    assert sum(g["bytes"] for g in verify.values()) == 23_398_457_344
    assert verify["mlp"]["flops"] == 2_164_663_517_184
    assert verify["kv"]["flops"] == 100_663_296_000
    assert all(verify[n]["flops"] == 3 * plain[n]["flops"] for n in plain)
    assert verify["mlp"]["bound"] == "memory"
    assert verify["mlp"]["compute_seconds"] == pytest.approx(2.188e-3, rel=1e-3)


def test_mbu_over_wall_time_is_the_utilisation_while_memory_bound() -> None:
    model = MODELS["llama-3-8b"]
    point = utilization_point_model(
        model=model, batch=8, context_tokens=500, weight_bytes_per_param=2,
        kv_bytes_per_token=131_072, bandwidth_bytes_per_second=BW, peak_flops=PEAK,
        host_seconds=0.002)
    assert point["bound"] == "memory"
    assert point["mbu_wall"] == pytest.approx(point["utilization"], abs=1e-12)


@pytest.mark.parametrize("field, value", [("target_utilization", 0), ("target_utilization", 1.5),
                                          ("host_ms", -1), ("context_tokens", 9000),
                                          ("overlap", "sometimes")])
def test_bad_inputs_name_their_field(field, value) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        gpu_utilization(model="llama-3-8b", gpu="h100-sxm", **{field: value})
    assert error.value.field == field


def test_a_compute_bound_step_at_full_bandwidth_is_still_called_a_floor() -> None:
    """Batch 4,096 × 1 token: the weight groups are compute-bound at the dense peak; with full
    bandwidth nothing is derated, so the step time is a floor whichever roof binds."""
    r = gpu_utilization(model="llama-3-8b", gpu="h100-sxm", context_tokens=1, batch_small=1,
                        batch_large=4096, host_ms=0.0)
    assert r["large"]["bound"] in ("compute", "mixed")
    titles = [s.label for s in r.steps]
    assert any(t.startswith("GPU floor per step, batch 4,096") for t in titles)
    derated = gpu_utilization(model="llama-3-8b", gpu="h100-sxm", context_tokens=1,
                              batch_large=4096, host_ms=0.0, bandwidth_efficiency=0.8)
    assert any(t.startswith("GPU time per step, batch 4,096") for t in
               [s.label for s in derated.steps])


def test_mla_decode_attention_is_counted_in_the_absorbed_form() -> None:
    """Review P0607-13, DeepSeek-V3 in FP8 with an FP8 KV cache on an H100, 64 × 1,000 tokens.
    Bytes: 64 × 1,000 × 61 layers × 576 latent values × 1 B = 2,248,704,000. Absorbed FLOPs per
    pair per layer: 2 × 128 heads × (512 + 64) + 2 × 128 × 512 = 278,528 (the decompressed
    count, 128 × 2 × (192 + 128) = 81,920, is 3.4× fewer); × 61 layers = 16,990,208 a pair;
    × 64,000 pairs = 1,087,373,312,000 FLOP. Intensity 483.5 FLOP/B, above the BF16 ridge
    989.5e12 ÷ 3.35e12 = 295.4 (attention computes in BF16 over an FP8 cache): compute-bound,
    1,087,373,312,000 ÷ 989.5e12 = 1.0989 ms, not memory-bound at 2.2487e9 ÷ 3.35e12 = 671 µs."""
    from problems.arithmetic.compute import (
        attention_flops_per_token_pair,
        decode_attention_flops_per_token_pair,
    )

    v3 = MODELS["deepseek-v3"]
    assert decode_attention_flops_per_token_pair(v3) == 61 * 278_528 == 16_990_208
    assert attention_flops_per_token_pair(v3) == 61 * 81_920  # prefill keeps the full form
    llama = MODELS["llama-3-8b"]
    assert decode_attention_flops_per_token_pair(llama) == attention_flops_per_token_pair(llama)
    r = decode_step_breakdown(model="deepseek-v3", gpu="h100-sxm", dtype="fp8", kv_dtype="fp8",
                              batch=64, context_tokens=1000)
    assert r["kv_bytes"] == 2_248_704_000
    assert r["kv_flops"] == 1_087_373_312_000
    assert r["kv_intensity"] == pytest.approx(483.55, abs=0.01)
    assert r["attention_ridge_flops_per_byte"] == pytest.approx(295.37, abs=0.01)
    assert r["kv_bound"] == "compute"
    assert r["kv_seconds"] == pytest.approx(1.0989e-3, rel=1e-4)
