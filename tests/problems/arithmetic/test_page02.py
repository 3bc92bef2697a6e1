"""Page 02's formulas against figures worked by hand or published: the KV cache of Llama 3.1 70B
at 32K × 100 users, the levers, paged against reserved memory, and attention's traffic."""

import math

import pytest

from problems.arithmetic.attention_io import (
    attention_io,
    attention_traffic_model,
    tile_working_set_bytes,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.kv_sizing import kv_sizing, mha_bytes_per_token
from problems.arithmetic.paging import held_blocks_mean, mix_parse, paging, policies_model


def test_llama_31_70b_at_32k_for_100_users_by_hand() -> None:
    """2 × 80 layers × 8 KV heads × 128 × 2 B = 327,680 B per token (FACTS.md); × 32,768 tokens
    = 10,737,418,240 B = 10 GiB per user; × 100 = 1,000 GiB."""
    r = kv_sizing()
    assert r["bytes_per_token"] == 327_680
    assert r["bytes_per_sequence"] == 10 * 2**30
    assert r["total_bytes"] == 1000 * 2**30
    # Weights: 70,553,706,496 parameters (FACTS.md, Llama 3 70B's architecture) × 2 B.
    assert r["weights_bytes"] == pytest.approx(2 * 70_553_706_496)
    assert r["kv_over_weights"] == pytest.approx(1000 * 2**30 / (2 * 70_553_706_496))


def test_gpus_needed_and_users_per_node() -> None:
    """H100: 81,559 MiB × 0.9 = 76.97 GB usable; weights ÷ 8 = 17.64 GB; reserve 3.3 GB; room
    56.03 GB per GPU; one user's KV per GPU is 10 GiB ÷ 8 = 1.342 GB: 41 users per node, so 3
    nodes (24 GPUs) for 100 users."""
    r = kv_sizing()
    rows = {g["gpu"]: g for g in r["gpus"]}
    usable = 81_559 * 2**20 * 0.9
    room = usable - 2 * 70_553_706_496 / 8 - 3.3e9
    assert rows["h100-sxm"]["node_users"] == math.floor(room / (10 * 2**30 / 8)) == 41
    assert rows["h100-sxm"]["gpus"] == 24 and rows["h100-sxm"]["tp"] == 8
    for row in rows.values():
        assert row["batch"] * row["replicas"] >= 100
        assert row["gpus"] == row["tp"] * row["replicas"]
    # More memory per GPU: fewer GPUs.
    assert rows["b200"]["gpus"] <= rows["h200"]["gpus"] <= rows["h100-sxm"]["gpus"]


def test_levers() -> None:
    r = kv_sizing(mean_tokens=8_192, window_tokens=4_096, window_share=0.5)
    assert r["fp8_total_bytes"] == r["total_bytes"] / 2
    # Full multi-head attention: 64 KV heads instead of 8, 8× the cache (2.5 MiB per token).
    assert r["mha_bytes_per_token"] == 8 * 327_680 == 2.5 * 2**20
    # DeepSeek-V3's latent: (512 + 64) × 61 layers × 2 B = 70,272 B (FACTS.md).
    assert r["mla_bytes_per_token"] == 70_272
    assert r["mean_total_bytes"] == r["total_bytes"] / 4
    # Half the layers windowed at 4,096: (16,384 + 2,048) tokens' worth per user.
    assert r["window_tokens_effective"] == 18_432
    # One conversation (10 GiB) back over 8 PCIe Gen5 x16 links at 80% of 64 GB/s each.
    assert r["reload_seconds"] == pytest.approx(10 * 2**30 / 8 / (0.8 * 64e9))
    assert r["recompute_seconds"] > r["reload_seconds"]
    assert r["recompute_bound"] == "compute"


def test_mha_formula_and_bad_input() -> None:
    per_token, _ = mha_bytes_per_token(model_id="llama-2-7b", kv_dtype="bf16")
    assert per_token == 524_288  # Llama 2 7B is MHA: the same as its real cache (FACTS.md)
    with pytest.raises(ArithmeticInputError) as e:
        kv_sizing(mean_tokens=40_000)
    assert e.value.field == "mean_tokens"
    with pytest.raises(ArithmeticInputError) as e:
        kv_sizing(model="llama-3-70b")  # 32,768 tokens past Llama 3's 8,192
    assert e.value.field == "tokens"


def test_held_blocks_by_hand() -> None:
    """Prompt 10, output 4, blocks of 8: contexts 11, 12, 13, 14 all need 2 blocks = 16."""
    assert held_blocks_mean(10, 4, 8) == 16
    # Contexts 7, 8, 9, 10 with blocks of 8: 8, 8, 16, 16 → mean 12.
    assert held_blocks_mean(6, 4, 8) == 12
    # Brute force on a longer case.
    p, o, b = 100, 333, 16
    assert held_blocks_mean(p, o, b) == pytest.approx(
        sum(b * math.ceil((p + t) / b) for t in range(1, o + 1)) / o)


def test_policies_weight_classes_by_time_in_the_batch() -> None:
    """Two classes, equal shares of requests: the one decoding four times longer is four
    fifths of the running batch (Little's law)."""
    classes = mix_parse("1:100:100, 1:100:400")
    rows = {r["id"]: r for r in policies_model(classes, max_len=1000)}
    used = (1 * (100 + 101 / 2) + 4 * (100 + 401 / 2)) / 5
    assert rows["max"]["used"] == pytest.approx(used)
    assert rows["max"]["held"] == 1000
    assert rows["oracle"]["held"] == pytest.approx((1 * 200 + 4 * 500) / 5)
    for block in (8, 16, 32):
        row = rows[f"paged-{block}"]
        assert 0 <= row["held"] - row["used"] < block  # under one block of slack each


def test_paging_defaults_and_vllm_shape() -> None:
    r = paging()
    rows = {p["id"]: p for p in r["policies"]}
    # Reserving the maximum wastes most of the memory, as the vLLM paper measured for Orca
    # (Max): only 20.4% of the KV memory held token states there.
    assert rows["max"]["utilization"] < 0.4
    assert rows["paged-16"]["utilization"] > 0.96  # vLLM: 96.3% in its Fig. 2
    assert rows["paged-8"]["waste"] < rows["paged-16"]["waste"] < rows["paged-32"]["waste"]
    assert rows["paged-16"]["batch"] > 3 * rows["max"]["batch"]
    # Decode stays memory-bound and the KV reads grow with the batch, so throughput grows less
    # than the batch does.
    assert 1 < r["paged_over_max"] < r["paged_batch_over_max"]


def test_paging_bad_mix_names_the_field() -> None:
    for bad in ("", "x:1:2", "50:300", "0:10:10", "50:6000:4000"):
        with pytest.raises(ArithmeticInputError) as e:
            paging(mix=bad)
        assert e.value.field == "mix"


def test_attention_traffic_by_hand() -> None:
    """N = 1,024, d = 64, 2 B: standard (4·N·d + 4·N²)·2 = 8,912,896 B; fused 4·N·d·2 =
    524,288 B; tiles of 128: 8 tiles, (2 + 16)·N·d·2 = 2,359,296 B; FLOPs 4·N²·d."""
    t = attention_traffic_model(tokens=1024, head_dim=64, value_bytes=2, tile_rows=128)
    assert t["standard"] == 8_912_896
    assert t["fused_min"] == 524_288
    assert t["fused_tiles"] == 2_359_296
    assert t["flops"] == 4 * 1024**2 * 64


def test_scores_at_32k_and_64_heads_outgrow_any_gpu() -> None:
    """32,768² × 64 heads × 2 B = 128 GiB for S alone, past an H100's 80 GB."""
    r = attention_io(model="llama-3.1-70b", tokens=32_768)
    assert r["scores_bytes"] == 128 * 2**30
    assert r["intermediate_bytes"] > r["gpu_memory_bytes"]
    assert r["standard_bound"] == "memory" and r["fused_min_bound"] == "compute"
    assert r["standard_seconds"] > r["fused_tiles_seconds"] >= r["fused_min_seconds"]
    assert r["standard_intensity"] < r["ridge"]
    with pytest.raises(ArithmeticInputError) as e:
        attention_io(model="deepseek-v3")
    assert e.value.field == "model"


def test_tile_working_set_by_hand() -> None:
    """Head_dim 128 in BF16: Q, K and V tiles of 64 rows are 3 × 64 × 128 × 2 = 49,152 B and the
    FP32 accumulator 64 × 128 × 4 = 32,768 B: 81,920 B = 80 KiB; 128 rows twice that."""
    assert tile_working_set_bytes(rows=64, head_dim=128, value_bytes=2) == 81_920
    assert tile_working_set_bytes(rows=128, head_dim=128, value_bytes=2) == 163_840


def test_users_per_node_divide_by_what_each_gpu_really_keeps() -> None:
    """The strict review's E4. Qwen2.5 7B has 4 KV heads: a 32,768-token user takes
    28 × 2 × 128 × 2 B × 32,768 = 470 MB on each GPU at tp 4, and tp 8 only copies the heads,
    so the node is two tp-4 replicas, not one tp-8 replica (the page said 152 users). By hand:
    0.9 × 85.06 GB (CUDA's 79.22 GiB) − 15.23 GB ÷ 4 − 3.3 GB = 69.45 GB per GPU ÷ 0.4698 GB =
    ⌊147.8⌋ = 147 users each, 2 × 147 = 294 (eight tp-1 replicas: 8 × ⌊(76.56 − 15.23 − 3.3) ÷
    1.879⌋ = 8 × 30 = 240). DeepSeek-V3's latent is kept whole on
    every GPU."""
    r = kv_sizing(model="qwen2.5-7b")
    h100 = r["gpus"][0]
    assert (h100["node_tp"], h100["node_replicas"], h100["node_batch"]) == (4, 2, 147)
    assert h100["node_users"] == 294
    steps = {s.label: s for s in r.steps}
    node = steps["Users of 32,768 tokens on one 8-GPU H100 SXM node"]
    assert "2 × tp 4" in node.expression and "470 MB per user on each GPU" in node.expression
    # course-lm (4 KV heads): never a tp-8 node either. The review's M9: a blank cache format
    # is the model's own FP32, 6 layers × 2 × 4 heads × 32 × 4 B = 6,144 B per token, not BF16.
    course = kv_sizing(model="course-lm", tokens=1024, mean_tokens=512, kv_dtype=None)
    assert course["bytes_per_token"] == 6_144
    assert course["gpus"][0]["node_tp"] <= 4
    steps = {s.label: s for s in kv_sizing(model="deepseek-v3").steps}
    node = steps["Users of 32,768 tokens on one 8-GPU B200 node"]
    assert "one user takes 2.3 GB on each GPU" in node.expression
    assert "whole latent" in node.expression
    assert node.display == "no users"
    assert "not one user of 32,768 tokens fits" in steps["B200s for all 100 users"].expression


def test_offload_reload_counts_what_each_gpu_keeps() -> None:
    """Llama 3.1 70B: an eighth of 10.7 GB per GPU, 1,342,177,280 B ÷ (64 GB/s × 0.8) = 26.2 ms.
    DeepSeek-V3 keeps its whole latent on every GPU: 70,272 B × 32,768 = 2,302,672,896 B on each,
    45.0 ms, not an eighth of it."""
    assert kv_sizing()["reload_seconds"] == pytest.approx(1_342_177_280 / 51.2e9)
    r = kv_sizing(model="deepseek-v3")
    assert r["reload_seconds"] == pytest.approx(2_302_672_896 / 51.2e9)
    # No 8-GPU node of H100s, H200s or B200s holds its BF16 weights (1.34 TB ÷ 8 = 168 GB per
    # GPU), so the largest, eight B200s at 8 TB/s, stands in, and says it cannot.
    assert not r["offload_fits"] and r["offload_gpu"] == "b200"
    assert r["decode_read_hbm_seconds"] == pytest.approx(2_302_672_896 / 8e12)


def test_deepseek_v3_with_full_multi_head_attention_by_hand() -> None:
    """128 heads, keys of 128 + 64 = 192 values and values of 128, 61 layers, BF16:
    61 × 128 × (192 + 128) × 2 = 4,997,120 B per token (it counted 192 for the values too:
    5,996,544 B), 71.1× MLA's 70,272 B."""
    per_token, expression = mha_bytes_per_token(model_id="deepseek-v3", kv_dtype="bf16")
    assert per_token == 61 * 128 * (192 + 128) * 2 == 4_997_120
    assert "(192 key + 128 value)" in expression
    assert kv_sizing(model="deepseek-v3")["mha_bytes_per_token"] == 4_997_120


def test_fp32_attention_runs_at_the_fp32_rate() -> None:
    """An H100 does 67 TFLOP/s in FP32 against 3.35 TB/s: a ridge of 20 FLOP per byte, not the
    BF16 tensor-core peak's 295; FP32 attention at 32K is then compute-bound either way."""
    r = attention_io(model="llama-3.1-70b", tokens=32_768, dtype="fp32")
    assert r["ridge"] == pytest.approx(67e12 / 3.35e12)
    assert r["standard_bound"] == "compute" == r["fused_min_bound"]
    assert attention_io(model="llama-3.1-70b", dtype="bf16")["ridge"] == pytest.approx(
        989.5e12 / 3.35e12)


def test_the_fp8_lever_step_says_a_one_byte_cache_saves_nothing() -> None:
    """A cache already in FP8 gets no "1 B → 1 B per value" step: the lever saves nothing."""
    step = next(s for s in kv_sizing(model="llama-3.1-70b", kv_dtype="fp8").steps
                if s.label == "Lever: FP8 KV cache")
    assert "1 B → 1 B" not in step.expression and "no saving" in step.expression
    step = next(s for s in kv_sizing(model="llama-3.1-70b").steps
                if s.label == "Lever: FP8 KV cache")
    assert step.expression == "2 B → 1 B per value"


def test_tensor_parallel_sizes_need_the_query_heads_to_divide() -> None:
    """Found on the strict re-review: Qwen2.5 7B has 28 query heads and 4 KV heads, so vLLM
    refuses tensor parallel 8 ("Total number of attention heads (28) must be divisible by
    tensor parallel size (8)"), yet problem 3 set its cache per GPU "under tp 8" beside MLA's.
    By hand: the divisors of 28 are 1, 2, 4, 7, 14, 28; 7 and 14 neither split nor copy 4 KV
    heads evenly, so 1, 2, 4 and 28 remain; Llama 3.1 70B (64 and 8) allows every power of two
    up to 64; DeepSeek-V3's latent is kept whole, so its 128 heads alone decide."""
    from problems.arithmetic.catalog import model_get
    from problems.arithmetic.memory import tp_sizes_model

    assert tp_sizes_model(model_get("qwen2.5-7b"), maximum=32) == (1, 2, 4, 28)
    assert tp_sizes_model(model_get("llama-3.1-70b"), maximum=64) == (1, 2, 4, 8, 16, 32, 64)
    assert tp_sizes_model(model_get("deepseek-v3"), maximum=8) == (1, 2, 4, 8)
    qwen = kv_sizing(model="qwen2.5-7b")
    assert qwen["mla_compare_tp"] == 4
    step = next(s for s in qwen.steps if s.label.startswith("…per GPU under tp"))
    assert step.label == "…per GPU under tp 4: this model against MLA"
    assert qwen["own_per_gpu_tp_bytes_per_token"] == 28 * 2 * 4 * 128 * 2 / 4
    assert kv_sizing()["mla_compare_tp"] == 8
