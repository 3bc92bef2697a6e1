"""MoE layouts (problems/arithmetic/parallel.py) against figures worked by hand.

DeepSeek-V3 in FP8 (embedding and head in BF16): 671,026,404,352 parameters, of which routed
experts 256 × 44,040,192 × 58 = 653,908,770,816; weight bytes (671,026,404,352 − 2 × 926,679,040)
× 1 + 2 × 926,679,040 × 2 = 672,879,762,432, so everything but the routed experts is
18,970,991,616 B. MLA KV per token 61 × (512 + 64) × 2 B = 70,272 B; at 5,000 tokens a sequence
holds 351,360,000 B on every GPU of its attention group.

An H200 reports 143,771 MiB = 150,754,820,096 B; × 0.9 − 5 GB = 130,679,338,086.4 B usable.
An H100 reports 81,559 MiB = 85,520,809,984 B; × 0.9 − 5 GB = 71,968,728,985.6 B usable.
"""

import math

import pytest

from problems.arithmetic.catalog import model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.moe import expert_gpu_hit_probability
from problems.arithmetic.parallel import (
    Layout,
    allreduce_bytes,
    layout_row,
    mla_decode_attention_flops,
    moe_layout,
    moe_layouts_compare,
    pipeline_bubble,
    stage_layers,
)

SHARED = dict(dtype="fp8", kv_dtype=None, batch=256, context_tokens=5000, memory_fraction=0.9,
              reserve_gb=5.0, bandwidth_efficiency=0.8, mfu=0.5, link_efficiency=0.8,
              collective_us=10.0, ib_gbps=50.0, dispatch_dtype="fp8", copies="per_gpu")


def test_a_gpu_holds_one_of_a_tokens_experts_with_the_hypergeometric_chance():
    """1 − C(224, 8)/C(256, 8): Π (224 − i)/(256 − i) for i < 8 = 0.338168, so 0.661832;
    over 16 GPUs Π (240 − i)/(256 − i) = 0.592295, so 0.407705; Mixtral on 8 GPUs (one expert
    each, top-2): 1 − C(7, 2)/C(8, 2) = 1 − 21/28 = 0.25."""
    assert expert_gpu_hit_probability(experts=256, per_gpu=32, k=8) == pytest.approx(0.661832,
                                                                                       abs=1e-6)
    assert expert_gpu_hit_probability(experts=256, per_gpu=16, k=8) == pytest.approx(0.407705,
                                                                                       abs=1e-6)
    assert expert_gpu_hit_probability(experts=8, per_gpu=1, k=2) == pytest.approx(0.25)


def test_a_ring_all_reduce_sends_twice_the_message_less_a_share_and_splits_across_nodes():
    """TP8 in one node, 256 tokens × 14,336 B = 3,670,016 B: 2 × 7/8 × that = 6,422,528 B over
    NVLink, none over InfiniBand. TP16 over two nodes, 70 tokens: 1,003,520 B → 1.75 × that =
    1,756,160 B over NVLink; each GPU's eighth (125,440 B) all-reduced between 2 nodes, 2 × ½ × it
    = 125,440 B over InfiniBand."""
    assert allreduce_bytes(message_bytes=3_670_016, group=8, per_node=8) == (6_422_528, 0)
    assert allreduce_bytes(message_bytes=1_003_520, group=16, per_node=8) == pytest.approx(
        (1_756_160, 125_440))


def test_the_pipeline_bubble():
    """GPipe's (p − 1)/(m + p − 1): 2 stages, 2 micro-batches → 1/3, and no idle stage in steady
    decode; 4 stages, 1 micro-batch → 3/4 either way; one stage → none."""
    assert pipeline_bubble(stages=2, microbatches=2) == pytest.approx({"flush": 1 / 3,
                                                                       "steady": 0.0})
    assert pipeline_bubble(stages=4, microbatches=1) == pytest.approx({"flush": 0.75,
                                                                       "steady": 0.75})
    assert pipeline_bubble(stages=1, microbatches=1) == {"flush": 0.0, "steady": 0.0}


def test_mla_decode_attention_in_the_absorbed_form():
    """61 layers × 128 heads × 2 × (512 + 64 + 512) × 5,000 = 84,951,040,000 FLOP."""
    model = model_get("deepseek-v3")
    assert mla_decode_attention_flops(model=model, context=5000) == 84_951_040_000


def test_layers_split_into_stages_with_the_dense_layers_first():
    assert stage_layers(layers=61, dense_layers=3, pp=2) == [(31, 3), (30, 0)]
    assert stage_layers(layers=61, dense_layers=3, pp=1) == [(61, 3)]
    assert sum(n for n, _ in stage_layers(layers=61, dense_layers=3, pp=7)) == 61


def test_dp8_attention_with_ep8_on_eight_h200s():
    """Weights per GPU 18,970,991,616 + 653,908,770,816 ÷ 8 = 100,709,587,968 B; free
    130,679,338,086.4 − that = 29,969,750,118.4 B = ⌊85.30⌋ = 85 sequences per GPU, 680 per node.

    Attention per GPU (32 sequences): reads 187,107,328 × 61 × 1 B + 32 × 5,000 × 70,272 =
    22,657,067,008 B (5.90 ms at 3.84 TB/s), computes 2 × 32 × 187,107,328 × 61 FLOP at the FP8
    rate (0.738 ms) + core attention 32 × 84,951,040,000 = 2.71843e12 FLOP at the BF16 rate
    (5.495 ms): 6.233 ms, compute-bound. FFN: 87.42 GB read, 22.765 ms, memory-bound.
    All-to-all per MoE layer: 32 tokens × 4.63282 GPUs × 7,168 × (1 + 2) B over NVLink at
    360 GB/s + 2 × 10 µs = 28.856 µs; × 58 = 1.674 ms. Step 29.00 to 30.67 ms; 256 ÷ those =
    8,347 to 8,828 tokens/s."""
    r = moe_layout(model="deepseek-v3", gpu="h200")
    assert r["weights_per_gpu_bytes"] == 100_709_587_968
    assert r["free_bytes"] == pytest.approx(29_969_750_118.4)
    assert r["max_sequences"] == 680 and r["fits"]
    assert r["attention_seconds"] == pytest.approx(6.233e-3, rel=1e-3)
    assert r["attention_bound"] == "compute"
    assert r["ffn_seconds"] == pytest.approx(22.765e-3, rel=1e-3)
    assert r["ffn_bound"] == "memory"
    assert r["remote_gpus"] == pytest.approx(4.63282, abs=1e-5)
    assert r["comm_nvlink_bytes"] == pytest.approx(184_902_463, rel=1e-6)
    assert r["comm_infiniband_bytes"] == 0
    assert r["comm_seconds"] == pytest.approx(1.674e-3, rel=1e-3)
    assert r["tpot_low_seconds"] == pytest.approx(28.998e-3, rel=1e-3)
    assert r["tpot_high_seconds"] == pytest.approx(30.671e-3, rel=1e-3)
    assert round(r["tokens_per_second_low"]) == 8347
    assert round(r["tokens_per_second_high"]) == 8828


def test_the_comparison_rows_on_the_two_clusters():
    """TP8: 672,879,762,432 ÷ 8 = 84,109,970,304 B per GPU, free 46,569,367,782 B, but the
    latent is on every GPU: ⌊132.5⌋ = 132 sequences, so the batch is cut. TP16 on H100s, each
    with 0.9 × CUDA's 79.22 GiB − 5 GB = 71,555,644,567.3 B: (that − 42,054,985,152) ÷
    (5,000 × 70,272 B) = ⌊83.96⌋ = 83. DP16 + EP16: (that − 59,840,289,792) ÷ 351,360,000 =
    ⌊33.34⌋ × 16 = 528; its all-to-all per MoE layer, 16 tokens ×
    6.11557 GPUs × 7,168 B, 8/15 of it over InfiniBand at 40 GB/s: dispatch 374,086 B → 9.352 µs,
    combine 748,172 B → 18.704 µs, + 20 µs = 48.056 µs; × 58 = 2.787 ms."""
    rows = moe_layouts_compare(model="deepseek-v3",
                               clusters=[("h200", 1, 8), ("h100-sxm", 2, 8)], **SHARED)
    by_name = {row["name"]: row for row in rows}
    tp8 = by_name["8 × H200 SXM TP8 (experts by TP)"]
    assert tp8["weights"] == pytest.approx(84_109_970_304)
    assert tp8["max_seq"] == 132 and not tp8["fits"] and tp8["batch"] == 132
    assert by_name["16 × H100 SXM TP16 (experts by TP)"]["max_seq"] == 83
    dp16 = by_name["16 × H100 SXM DP16 attention + EP16"]
    assert dp16["max_seq"] == 528
    assert dp16["comm_time"] == pytest.approx(2.787e-3, rel=1e-3)
    assert dp16["comm_ib"] == pytest.approx(65_093_000, rel=1e-3)
    assert round(dp16["tps_low"]) == 9654 and round(dp16["tps_high"]) == 10788
    pp = by_name["16 × H100 SXM TP8 × PP2 (experts by TP)"]
    assert pp["microbatches"] == 2 and pp["bubble"]["flush"] == pytest.approx(1 / 3)
    # Every sequence waits for both stages: the token time is two stage-steps.
    assert pp["tpot_low"] == pytest.approx(2 * max(s["low"] for s in pp["stages"]))


def test_a_layout_the_model_cannot_take_is_a_row_that_says_why():
    row = layout_row(model="mixtral-8x7b", gpu="h100-sxm", layout=Layout(2, 8), **SHARED)
    assert not row["valid"] and "do not split evenly" in row["reason"]


@pytest.mark.parametrize(("changes", "field"), [
    ({"model": "llama-3-8b"}, "model"),
    ({"attn_tp": 3}, "attn_tp"),
    ({"pp": 3}, "pp"),
    ({"moe": "tp", "attn_tp": 4}, "moe"),
    ({"moe": "xx"}, "moe"),
    ({"gpu": "h100-sxm", "gpus_per_node": 4}, "nodes"),
    # 29 GB reserved leaves ~1 GB per GPU: not one sequence of 100,000 tokens (7 GB of KV).
    ({"context_tokens": 100_000, "reserve_gb": 29}, "context_tokens"),
    ({"copies": "both"}, "copies"),
])
def test_bad_layouts_name_the_input_to_change(changes, field):
    with pytest.raises(ArithmeticInputError) as error:
        moe_layout(**{"model": "deepseek-v3", "gpu": "h200", **changes})
    assert error.value.field == field


def test_one_copy_per_expert_sends_more_than_one_per_gpu():
    """k (e − 1)/e = 8 × 7/8 = 7 copies per token against 4.63."""
    per_gpu = moe_layout(model="deepseek-v3", gpu="h200")
    per_expert = moe_layout(model="deepseek-v3", gpu="h200", copies="per_expert")
    assert per_expert["remote_gpus"] == pytest.approx(7.0)
    assert per_expert["comm_nvlink_bytes"] == pytest.approx(
        per_gpu["comm_nvlink_bytes"] * 7 / 4.63282, rel=1e-5)
    assert math.isfinite(per_expert["tokens_per_second_high"])


def test_a_stage_count_that_does_not_divide_the_gpus_says_so():
    with pytest.raises(ArithmeticInputError) as error:
        moe_layout(model="deepseek-v3", gpu="h200", nodes=64, gpus_per_node=8, pp=61, attn_tp=8,
                   **SHARED)
    assert error.value.field == "pp"
    assert error.value.message == "61 stages do not divide the 512 GPUs evenly"


def test_fewer_sequences_than_attention_groups_work_the_busiest_group():
    """Review E10, batch 1 on DP8 attention + EP8: the one sequence sits whole on one GPU, so
    that GPU's attention reads its 351,360,000 B of KV (70,272 B × 5,000), not an eighth of it
    (43,920,000 B) as the average did, and it dispatches 1 token, not 0.125. The step is the
    busiest GPU's, so batch 1 and batch 8 (one sequence per group) have the same attention
    time and the same bytes sent per GPU; batch 9 puts 2 sequences on some GPU and takes
    longer."""
    one = moe_layout(model="deepseek-v3", gpu="h200", batch=1)
    eight = moe_layout(model="deepseek-v3", gpu="h200", batch=8)
    nine = moe_layout(model="deepseek-v3", gpu="h200", batch=9)
    assert one["attention_seconds"] == pytest.approx(eight["attention_seconds"], rel=1e-12)
    assert one["comm_nvlink_bytes"] == pytest.approx(eight["comm_nvlink_bytes"], rel=1e-12)
    assert nine["attention_seconds"] > eight["attention_seconds"]
    # Attention is memory-bound here: the KV read at 1 sequence is the whole sequence's.
    no_kv = moe_layout(model="deepseek-v3", gpu="h200", batch=1, context_tokens=1)
    extra = (one["attention_seconds"] - no_kv["attention_seconds"])
    assert extra == pytest.approx((351_360_000 - 70_272) / (4.8e12 * 0.8), rel=0.02)
