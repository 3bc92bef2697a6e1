"""Problem 8 (a cached system prompt on a fleet, routing) and problem 22 (disaggregation's
transfer and pools), against figures worked by hand."""

import math

import pytest

from problems.arithmetic import ArithmeticInputError, disagg_plan, prefix_routing
from problems.arithmetic.caching import prefix_hit_rates
from problems.arithmetic.disagg import colocated_capacity, pipelined_seconds

H100_BF16_DENSE = 989.4e12  # FLOP/s, NVIDIA H100 SXM datasheet (1,979 with sparsity ÷ 2)


def _fleet(**over: object) -> object:
    inputs = dict(model="llama-3.1-70b", gpu="h100-sxm", tp=4, system_tokens=2_000,
                  user_tokens=200, requests_per_minute=1_000, replicas=8, applications=40,
                  cache_gb=10.0, mfu=0.5, bandwidth_efficiency=0.8)
    return prefix_routing(**{**inputs, **over})


def test_hit_rates_by_hand() -> None:
    """15 prefixes kept, 40 applications: random 15/40; 8 replicas hold 5 each: all hit;
    3 replicas hold ⌈40/3⌉ = 14 ≤ 15: all hit; 2 replicas hold 20: 15/20."""
    assert prefix_hit_rates(capacity=15, applications=40, replicas=8)["random"] == 0.375
    assert prefix_hit_rates(capacity=15, applications=40, replicas=8)["affine"] == 1.0
    assert prefix_hit_rates(capacity=15, applications=40, replicas=3)["affine"] == 1.0
    assert prefix_hit_rates(capacity=15, applications=40, replicas=2)["affine"] == 0.75
    one = prefix_hit_rates(capacity=15, applications=1, replicas=8)
    assert one["random"] == one["affine"] == 1.0
    assert one["busiest_share"] == 1.0 and one["replicas_used"] == 1


def test_affine_hit_rate_is_the_fleets_when_homes_are_uneven() -> None:
    """10 applications on 8 replicas, 1 prefix kept each: two replicas are home to 2 (hit 1/2,
    2/10 of the traffic each), six to 1 (hit 1): fleet (2 × 1 + 6 × 1) ÷ 10 = 0.8, not the
    busiest replica's 0.5. 7 on 3 keeping 2: homes of 3, 2, 2: (2 + 2 + 2) ÷ 7."""
    r = prefix_hit_rates(capacity=1, applications=10, replicas=8)
    assert r["affine"] == pytest.approx(0.8) and r["affine_busiest"] == 0.5
    r = prefix_hit_rates(capacity=2, applications=7, replicas=3)
    assert r["affine"] == pytest.approx(6 / 7) and r["affine_busiest"] == pytest.approx(2 / 3)
    assert r["random"] == pytest.approx(2 / 7)
    day = _fleet(applications=10, cache_gb=0.7)  # one 655 MB prefix per replica
    assert day["capacity"] == 1 and day["hit_affine"] == pytest.approx(0.8)
    assert day["gpu_hours_affine"] == pytest.approx(
        0.8 * 1_440_000 * day["gpu_seconds_saved"] / 3600)


def test_a_hit_saves_the_prefix_prefill_worked_by_hand() -> None:
    """Llama 3.1 70B: 68,452,360,192 non-embedding parameters, 2,621,440 attention FLOPs per
    token pair (80 layers × 64 heads × 128 × 4). A miss computes 2,200 tokens, each attending
    to (2,200 + 1)/2 positions on average: 2,200 × (2 × 68,452,360,192 + 2,621,440 × 1,100.5)
    = 3.0753×10¹⁴ FLOP, at 4 × 989.4 TFLOP/s × 0.5 = 155.4 ms. A hit computes 200 tokens at
    2,200 − 100 + 0.5 = 2,100.5 positions: 200 × (136,904,720,384 + 2,621,440 × 2,100.5) =
    2.8482×10¹³ FLOP, 14.4 ms."""
    r = _fleet()
    miss = 2_200 * (2 * 68_452_360_192 + 2_621_440 * 1_100.5)
    hit = 200 * (2 * 68_452_360_192 + 2_621_440 * 2_100.5)
    assert r["miss_flops"] == pytest.approx(miss)
    assert r["hit_flops"] == pytest.approx(hit)
    assert r["flops_saved"] == pytest.approx(miss - hit)
    rate = 4 * H100_BF16_DENSE * 0.5
    assert r["miss_seconds"] == pytest.approx(miss / rate, rel=1e-3)
    assert r["ttft_saved"] == pytest.approx((miss - hit) / rate, rel=1e-3)
    assert r["gpu_seconds_saved"] == pytest.approx(4 * (miss - hit) / rate, rel=1e-3)
    assert r["miss_bound"] == r["hit_bound"] == "compute"


def test_cached_prefixes_and_a_days_savings_by_hand() -> None:
    """2,000 tokens × 327,680 B = 655.36 MB per prefix; 10 GB holds 15. 1,000 a minute is
    1,440,000 a day; affine routing hits all, so GPU-hours = 1,440,000 × saved GPU-s ÷ 3,600."""
    r = _fleet()
    assert r["prefix_kv_bytes"] == 655_360_000
    assert r["capacity"] == 15
    assert r["requests_per_day"] == 1_440_000
    assert r["hit_random"] == 0.375 and r["hit_affine"] == 1.0
    assert r["gpu_hours_affine"] == pytest.approx(1_440_000 * r["gpu_seconds_saved"] / 3600)
    assert r["gpu_hours_random"] == pytest.approx(0.375 * r["gpu_hours_affine"])


def test_a_cache_too_small_for_one_prefix_never_hits() -> None:
    r = _fleet(cache_gb=0.5)
    assert r["capacity"] == 0 and r["hit_random"] == 0 and r["hit_affine"] == 0


@pytest.mark.parametrize(("field", "value"), [("replicas", 0), ("applications", 0),
                                              ("requests_per_minute", -1), ("cache_gb", -1),
                                              ("user_tokens", 200_000)])
def test_fleet_bad_input_names_its_field(field: str, value: object) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        _fleet(**{field: value})
    assert error.value.field == field


def test_pipelining_by_hand() -> None:
    assert pipelined_seconds(first=0.6, second=0.06, stages=80) == pytest.approx(0.60075)
    assert pipelined_seconds(first=0.01, second=0.5, stages=10) == pytest.approx(0.501)


def _plan(**over: object) -> object:
    inputs = dict(model="llama-3.1-70b", gpu="h100-sxm", tp=4, prompt_tokens=8_192,
                  output_tokens=512, requests_per_second=2.0, link_efficiency=0.8)
    return disagg_plan(**{**inputs, **over})


def test_kv_to_move_and_transfer_times_by_hand() -> None:
    """8,192 × 327,680 B = 2,684,354,560 B; each of 4 GPUs holds 2 of the 8 KV heads: a
    quarter, 671,088,640 B. At 80%: NVLink 4 450 GB/s one way → 1.864 ms; 400 Gb/s InfiniBand
    50 GB/s → 16.78 ms; 100 GbE 12.5 GB/s → 67.11 ms."""
    r = _plan()
    assert r["kv_bytes"] == 2_684_354_560
    assert r["kv_bytes_per_gpu"] == 671_088_640
    seconds = [link["seconds"] for link in r["links"]]
    assert seconds == pytest.approx([671_088_640 / 360e9, 671_088_640 / 40e9,
                                     671_088_640 / 10e9])


def test_prefill_of_8k_prompt_by_hand() -> None:
    """8,192 × (2 × 68,452,360,192 + 2,621,440 × 4,096.5) = 1.2096×10¹⁵ FLOP over
    4 × 989.4 TFLOP/s × 0.5 = 611 ms, compute-bound; so even 100 GbE's 67 ms is 11% of it, and
    layer by layer only 67.1 ms / 80 = 0.84 ms sticks out."""
    r = _plan()
    flops = 8_192 * (2 * 68_452_360_192 + 2_621_440 * 4_096.5)
    assert r["prefill_seconds"] == pytest.approx(flops / (4 * H100_BF16_DENSE * 0.5), rel=1e-3)
    assert r["prefill_bound"] == "compute"
    eth = r["links"][2]
    assert eth["exposed_layered"] == pytest.approx(eth["seconds"] / 80)
    assert eth["ratio"] == pytest.approx(eth["seconds"] / r["prefill_seconds"])


def test_pool_ratio_is_replica_time_per_request() -> None:
    r = _plan()
    decode_busy = 512 * r["step_seconds"] / r["batch"]
    assert r["decode_busy"] == pytest.approx(decode_busy)
    assert r["ratio"] == pytest.approx(r["prefill_seconds"] / decode_busy)
    assert r["prefill_replicas"] == 2  # ⌈2 × 0.611⌉
    short = _plan(prompt_tokens=256, output_tokens=2_000)
    assert short["ratio"] < r["ratio"] / 10  # short prompts, long answers: decode dominates


def test_disagg_bad_input_names_its_field() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        _plan(requests_per_second=0)
    assert error.value.field == "requests_per_second"
    with pytest.raises(ArithmeticInputError) as error:
        _plan(tp=1)  # 141 GB of BF16 weights on one 80 GB GPU
    assert error.value.field == "tp"


def test_reusable_tokens_are_whole_blocks_short_of_the_last_token() -> None:
    from problems.arithmetic.caching import prefix_reusable_tokens

    assert prefix_reusable_tokens(prefix_tokens=2_000, prompt_tokens=2_200, block_size=16) == 2_000
    assert prefix_reusable_tokens(prefix_tokens=200, prompt_tokens=200, block_size=16) == 192
    assert prefix_reusable_tokens(prefix_tokens=100, prompt_tokens=120, block_size=16) == 96
    assert prefix_reusable_tokens(prefix_tokens=192, prompt_tokens=193, block_size=16) == 192


def test_handoff_over_real_links_by_hand() -> None:
    from problems.arithmetic.disagg import kv_handoff_links

    links = kv_handoff_links(nbytes=1e6)
    assert [x["seconds"] for x in links] == pytest.approx([1e6 / 450e9, 1e6 / 50e9, 80e-6])


def test_mla_latent_is_whole_on_every_gpu_and_said_so() -> None:
    """DeepSeek-V3's latent, (512 + 64) × 61 layers × 2 B = 70,272 B per token, is not split by
    heads under tensor parallelism: each of 8 GPUs holds and sends all of it."""
    r = disagg_plan(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8", prompt_tokens=8_192,
                    output_tokens=512)
    assert r["kv_bytes"] == 8_192 * 70_272 == r["kv_bytes_per_gpu"]
    share = next(s for s in r.steps if s.label == "Each GPU's share")
    assert "whole latent" in share.expression and "KV heads" not in share.expression


def test_one_shared_port_carries_the_prompts_kv_once() -> None:
    """One 100 GbE port (12.5 GB/s × 80% = 10 GB/s) for the whole replica. Llama 3.1 70B at
    8,192 tokens: 2,684,354,560 B ÷ 1e10 = 268 ms, 4 × each of 4 GPUs' 67.1 ms shares. DeepSeek-V3's
    latent is the same on all 8 GPUs, so one copy crosses: 8,192 × 70,272 B ÷ 1e10 = 57.6 ms,
    what each GPU's own link takes, not 8 × that."""
    gqa = disagg_plan(model="llama-3.1-70b", gpu="h100-sxm", tp=4, prompt_tokens=8_192,
                      output_tokens=512)["links"][2]
    assert gqa["whole_seconds"] == pytest.approx(2_684_354_560 / 1e10)
    assert gqa["whole_seconds"] == pytest.approx(4 * gqa["seconds"])
    mla = disagg_plan(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8", prompt_tokens=8_192,
                      output_tokens=512)["links"][2]
    assert mla["whole_seconds"] == pytest.approx(8_192 * 70_272 / 1e10) == mla["seconds"]


def test_fleet_gpu_hours_are_a_throughput_view_when_the_hit_is_memory_bound() -> None:
    """Review P8-E1. DeepSeek-V3 in FP8 on 8 × H200, 2,000 + 200 tokens: a hit skips about
    1.528×10¹⁴ FLOP (all eight GPUs together). The lone hit is bound by reading the weights
    (21.8 ms against 21.9 ms for the miss), so tp × the TTFT difference is only 0.000298 GPU·s.
    Batched at load the reads are shared: 1.528×10¹⁴ ÷ (1,979 TFLOP/s × 0.5) = 0.1544 GPU·s
    per hit; 1,440,000 hits a day (71 prefixes kept ≥ 40) × 0.1544 ÷ 3,600 = 61.8 GPU·h a
    day, not 0.119."""
    r = _fleet(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8")
    assert r["hit_bound"] == "memory"
    assert r["gpu_seconds_lone"] == pytest.approx(0.000298, rel=0.01)
    assert r["gpu_seconds_saved"] == pytest.approx(r["flops_saved"] / (1_979e12 * 0.5),
                                                   rel=1e-3)
    assert r["gpu_seconds_saved"] == pytest.approx(0.1544, rel=1e-3)
    assert r["gpu_hours_affine"] == pytest.approx(61.8, rel=1e-3)


def test_running_requests_hold_their_prefixes_and_raise_the_hit_rate() -> None:
    """Review P8-M6. 1,000 a minute for 5 s each is 83.3 requests in flight, 10.4 per replica
    of 8. Under random routing each of 40 equally popular prefixes has Poisson(10.4/40) holders,
    so 40 × (1 − e^(−0.2604)) = 9.17 are held and hit for free: min(1, (9.17 + 15) ÷ 40) =
    0.604 against the idle cache's 0.375. Nothing in flight gives back 15/40."""
    r = _fleet(request_seconds=5.0)
    assert r["in_flight_replica"] == pytest.approx(1000 / 60 * 5 / 8)
    assert r["pinned_random"] == pytest.approx(40 * (1 - math.exp(-(1000 / 60 * 5 / 8) / 40)))
    assert r["hit_random"] == pytest.approx((r["pinned_random"] + 15) / 40)
    assert r["hit_random"] == pytest.approx(0.604, abs=5e-4)
    assert r["hit_random_idle"] == 0.375
    assert _fleet(request_seconds=0.0)["hit_random"] == 0.375
    assert r["gpu_hours_affine"] - r["gpu_hours_random"] == pytest.approx(89.3, rel=2e-3)


def test_in_flight_sharing_on_uneven_affine_homes() -> None:
    """Ten applications on 8 replicas keeping one idle prefix each, 80 in flight on the fleet:
    a home to 2 applications carries 2/10 of them, 16, and holds 2 × (1 − e^(−8)) = 1.9993
    prefixes, so it hits min(1, (1.9993 + 1) ÷ 2) = 1: every home hits, fleet and busiest."""
    r = prefix_hit_rates(capacity=1, applications=10, replicas=8, in_flight_fleet=80)
    assert r["affine"] == 1.0 and r["affine_busiest"] == 1.0
    assert r["affine_idle"] == pytest.approx(0.8)


def _disagg(**over: object) -> object:
    inputs = dict(model="llama-3.1-70b", gpu="h100-sxm", tp=4, prompt_tokens=8_192,
                  output_tokens=512, requests_per_second=2.0)
    return disagg_plan(**{**inputs, **over})


def test_short_prompts_share_a_prefill_pass_under_the_token_budget() -> None:
    """Review P22-E2. DeepSeek-V3 in FP8 on 8 × H200, 256-token prompts: alone, the pass is
    bound by reading 84 GB of weights per GPU (21.8 ms). A loaded prefill replica packs
    8,192 ÷ 256 = 32 of them into a pass, so each carries 21.8 ÷ 32 = 0.68 ms of reads, below
    its 2.33 ms of compute (256 tokens' FLOPs ÷ 8 GPUs at 1,979 TFLOP/s × 0.5). The pools'
    ratio is 2.33 ms against 13.1–13.4 ms of decode (the reserve sets the batch): about 0.18,
    not 1.66."""
    r = _disagg(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8", prompt_tokens=256)
    assert r["prefill_seconds"] == pytest.approx(0.0218, rel=0.01)
    assert r["prompts_per_pass"] == 32
    assert r["prefill_busy"] == pytest.approx(0.00233, rel=0.01)
    assert r["prefill_busy_bound"] == "compute"
    assert r["ratio"] == pytest.approx(r["prefill_busy"] / r["decode_busy"])
    assert r["ratio"] == pytest.approx(0.175, abs=0.005)  # 0.173 at a 5 GB reserve
    # One prompt of 8,192 fills the budget: the batched cost is the lone pass.
    default = _disagg()
    assert default["prefill_busy"] == default["prefill_seconds"]
    # A prompt twice the budget is chunked over two passes, each reading the weights.
    assert _disagg(prefill_token_budget=4_096)["passes_per_prompt"] == 2


def test_colocated_capacity_by_hand() -> None:
    """Review P22-K2. A step of 10 ms + 0.2 ms per sequence, prefill P = 0.5 s a request,
    100-token answers, a 50 ms target. At B = 8 the step is 11.6 ms; decode keeps up to
    8 ÷ (0.0116 × 100 + 8 × 0.5) = 1.550/s, and the mean TPOT 11.6 ms ÷ (1 − 0.5λ) stays
    within 50 ms up to λ = 2 × (1 − 11.6/50) = 1.536/s: that binds. B = 7 gives min(1.509,
    1.544) = 1.509 and B = 9 min(1.585, 1.528) = 1.528, so B = 8, 1.536/s, is the best."""
    best = colocated_capacity(prefill_seconds=0.5, output_tokens=100,
                              step_of=lambda b: {"seconds": 0.01 + 0.0002 * b},
                              batch_max=1_000, tpot_target=0.05)
    assert best["batch"] == 8 and best["binds"] == "latency target"
    assert best["rate"] == pytest.approx(1.536)
    assert best["tpot"] == pytest.approx(0.0116 / (1 - 0.768))


def test_colocated_baseline_and_goodput_per_gpu_at_the_defaults() -> None:
    """Review P22-K2. Llama 3.1 70B on 4 × H100, 8,192 + 512 tokens, 2 requests/s: at the
    decode pool's batch of 55 (27.2 ms) a colocated replica could keep up with 1.16/s, but its
    mean TPOT would be 27.2 ms ÷ (1 − 0.611λ), within 50 ms only up to 0.746/s; a smaller batch
    does better, 0.991/s at 25. Three colocated replicas (12 GPUs) against 2 + 1 split; per
    GPU, 1 ÷ (4 × (0.611 + 0.253)) = 0.289 against 0.991 ÷ 4 = 0.248."""
    r = _disagg()
    assert r["colocated_rate"] > (1 - 0.0272 / 0.05) / 0.611
    assert r["colocated_rate"] == pytest.approx(0.991, rel=0.01)
    assert r["colocated_replicas"] == 3
    assert r["prefill_replicas"] + r["decode_replicas"] == 3
    assert r["goodput_split"] == pytest.approx(1 / (4 * (r["prefill_busy"] + r["decode_busy"])))
    assert r["goodput_split"] == pytest.approx(0.289, rel=0.01)
    assert r["goodput_colocated"] == pytest.approx(r["colocated_rate"] / 4)


def test_wide_replicas_and_slow_host_links_are_costed() -> None:
    """Review P22-M8. TP 16 spans two 8-GPU nodes: no NVLink row, and the prefill's all-reduces
    move 2 × 80 × 2 × 15/16 × 8,192 × 8,192 × 2 B = 40.3 GB through each GPU over 400 Gb/s
    InfiniBand at 80% (40 GB/s): 1.01 s, against a 153 ms prefill. At TP 4 the same is
    32.2 GB over NVLink at 360 GB/s: 89.5 ms. An L40S reaches its NIC over PCIe Gen4 x16,
    16 GT/s × 16 × 128/130 ÷ 8 = 31.5 GB/s a direction, below InfiniBand's 50."""
    wide = _disagg(tp=16)
    assert wide["spans_nodes"] and not wide["in_node"]
    assert not wide["links"][0]["applies"]
    assert wide["allreduce_bytes"] == pytest.approx(2 * 80 * 2 * 15 / 16 * 8_192 * 8_192 * 2)
    assert wide["allreduce_seconds"] == pytest.approx(wide["allreduce_bytes"] / 40e9)
    assert wide["allreduce_seconds"] == pytest.approx(1.007, rel=1e-3)
    assert _disagg()["allreduce_seconds"] == pytest.approx(0.0895, rel=1e-2)
    assert _disagg(tp=8)["in_node"] is False  # two 8-GPU replicas cannot share a node
    l40s = _disagg(gpu="l40s", model="llama-3.1-8b", tp=1)
    assert l40s["ib_capped"] and l40s["links"][1]["line_rate"] == pytest.approx(31.5076923e9)
    assert l40s["allreduce_seconds"] == 0.0


def test_paged_kv_is_many_small_regions() -> None:
    """Review P22-K3. Llama 3.1 70B at TP 4: each GPU holds 2 of 8 KV heads, so a 16-token
    block of one layer's K (or V) is 16 × 2 × 128 × 2 B = 8 KiB; 8,192 tokens are 512 blocks ×
    80 layers × 2 = 81,920 regions per GPU."""
    r = _disagg()
    assert r["kv_region_bytes"] == 8_192 and r["kv_regions"] == 81_920
