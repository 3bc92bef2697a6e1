"""Users to a fleet (problems/arithmetic/capacity.py), worked by hand at problem 25's defaults:
1,000,000 daily users × 2 sessions × 5 turns; system prompt 500, messages 150, answers 400
tokens; peak 3× the average; half of the repeated prompt cached; Llama 3.1 70B in FP8 with an FP8
KV cache on 4 × H100 SXM; TTFT target 0.5 s, TPOT 50 ms; pools at most 70% busy; 3 regions that
survive losing one; $2.50 an hour.
"""

import pytest

from problems.arithmetic.capacity import (
    TORNADO_RANGES,
    capstone,
    capstone_monthly,
    chat_demand,
    little_concurrency,
    tornado,
)
from problems.arithmetic.errors import ArithmeticInputError

DEFAULTS = dict(daily_users=1_000_000, sessions=2.0, turns=5, system_tokens=500,
                user_tokens=150, answer_tokens=400, peak_to_average=3.0, prefix_hit=0.5,
                ttft_target_s=0.5, tpot_target_ms=50.0, think_s=30.0, model="llama-3.1-70b",
                gpu="h100-sxm", tp=4, dtype="fp8", kv_dtype="fp8", memory_fraction=0.9,
                reserve_gb=5.0, bandwidth_efficiency=0.8, mfu_decode=0.5, mfu_prefill=0.5,
                utilisation=0.7, regions=3, survive_region="on", price_per_hour=None,
                link_gbps=50.0)


def test_chat_demand():
    """Mean prompt 500 + 150 + 4 ÷ 2 × 550 = 1,750; computed 150 + 0.5 × 1,600 = 950. 10⁷
    requests a day, 115.74/s on average, 347.22/s at the peak: 138,889 output and 329,861
    computed input tokens/s."""
    d = chat_demand(daily_users=1_000_000, sessions=2, turns=5, system_tokens=500,
                    user_tokens=150, answer_tokens=400, peak_to_average=3, prefix_hit=0.5)
    assert (d["prompt"], d["uncached"]) == (1750, 950)
    assert d["average_rps"] == pytest.approx(115.74, abs=0.01)
    assert d["peak_rps"] == pytest.approx(347.22, abs=0.01)
    assert d["peak_output"] == pytest.approx(138_889, abs=1)
    assert d["peak_prefill"] == pytest.approx(329_861, abs=1)


def test_littles_law():
    assert little_concurrency(arrival_rate=347.22, time_in_system=10.392) == pytest.approx(
        3608.3, abs=0.1)


def test_the_fleet_at_the_defaults():
    """Weights 72,655,052,800 ÷ 4 = 18,163,763,200 B per GPU; the H100's budget is 0.9 × CUDA's
    79.22 GiB = 0.9 × 85,061,827,297 = 76,555,644,567.3 B, less the 5 GB reserve 71,555,644,567.3;
    free 71,555,644,567.3 − 18,163,763,200 = 53,391,881,367.3 B; context 1,750 + 200 = 1,950 tokens
    × 40,960 B = 79,872,000 B per sequence: ⌊668.5⌋ = 668 sequences (the target alone allows
    1,373), so KV memory sets the batch. Step (17,638,426,624 + 668 × 79,872,000) ÷ 2.68e12 =
    26.49 ms; 668 ÷ that = 25,217 tokens/s. Request 0.5 + 399 × 26.49 ms = 11.07 s; concurrency
    347.22 × 11.07 = 3,844 in the system; replicas by throughput 138,889 ÷ (25,217 × 0.7) = 7.87.
    Review M9: decode KV holds only the decoding sequences, 347.22 × 399 × 26.49 ms = 3,670 (the
    0.5 s to first token is spent in the prefill pool), so by KV 3,670 ÷ (668 × 0.7) = 7.85, not
    3,844 ÷ 467.6 = 8.22: the two counts are one formula apart from the first token, and memory
    does not 'bind' on top of the batch it set. Prefill: 140,248,367,104 FLOP per computed token
    ÷ (1,979e12 × 0.5) = 141.7 µs; 329,861 × that ÷ 0.7 = 66.8 GPUs. Per region ⌈7.87 ÷ 2⌉ = 4
    decode and ⌈66.8 ÷ 2 ÷ 4⌉ = 9 prefill replicas: 52 GPUs, 156 in all; 156 × $2.50 × 730 h =
    $284,700 a month, ÷ 3 = $94,900 following the load."""
    r = capstone(**DEFAULTS)
    assert (r["batch_memory"], r["batch_target"], r["batch"]) == (668, 1373, 668)
    assert r["batch_limit"] == "KV memory"
    assert r["step_seconds"] == pytest.approx(26.49e-3, rel=1e-3)
    assert r["concurrency"] == pytest.approx(3844, abs=1)
    assert r["replicas_by_throughput"] == pytest.approx(7.87, abs=0.01)
    assert r["replicas_by_kv"] == pytest.approx(7.85, abs=0.01) and not r["kv_binds"]
    assert r["prefill_gpus"] == pytest.approx(66.8, abs=0.05)
    assert (r["decode_replicas_per_region"], r["prefill_replicas_per_region"]) == (4, 9)
    assert (r["gpus_per_region"], r["total_gpus"]) == (52, 156)
    assert r["monthly_cost_peak"] == 284_700
    assert r["monthly_cost_follow"] == pytest.approx(94_900)


def test_without_the_spare_region_each_region_takes_a_third():
    r = capstone(**{**DEFAULTS, "survive_region": "off"})
    assert r["decode_replicas_per_region"] == 3  # ⌈7.87 ÷ 3⌉
    assert r["prefill_replicas_per_region"] == 6  # ⌈66.8 ÷ 3 ÷ 4⌉


def test_the_tornado_sorts_by_swing():
    def linear(*, a: float, b: float, c: float) -> float:
        return 2 * a - 5 * b + 0 * c

    rows = tornado(compute=linear, inputs={"a": 1.0, "b": 1.0, "c": 1.0},
                   ranges={"a": (0, 10, "a"), "b": (0, 1, "b"), "c": (0, 100, "c")})
    assert [r["name"] for r in rows] == ["a", "b", "c"]
    assert [r["swing"] for r in rows] == [20, 5, 0]


def test_the_tornado_at_the_defaults():
    """Turns 3 → 10 moves the bill most, then sessions and answer length; the TPOT target,
    30 to 100 ms, does not move it: KV memory sets the batch across that range."""
    rows = tornado(compute=capstone_monthly, inputs={**DEFAULTS, "price_per_hour": 2.5},
                   ranges=TORNADO_RANGES)
    assert [r["name"] for r in rows[:3]] == ["turns", "sessions", "answer_tokens"]
    assert rows[0]["at_low"] < 306_600 < rows[0]["at_high"]
    assert next(r for r in rows if r["name"] == "tpot_target_ms")["swing"] == 0


@pytest.mark.parametrize(("changes", "field"), [
    ({"tp": 1}, "tp"),
    ({"turns": 100, "answer_tokens": 2000}, "turns"),  # past the context window
    ({"survive_region": "yes"}, "survive_region"),
    ({"peak_to_average": 0.5}, "peak_to_average"),
])
def test_bad_inputs_name_their_field(changes, field):
    with pytest.raises(ArithmeticInputError) as error:
        capstone(**{**DEFAULTS, **changes})
    assert error.value.field == field


def test_the_kv_room_for_idle_conversations_counts_an_mla_latent_once_per_replica():
    """DeepSeek-V3 in FP8 with an FP8 KV cache on 8 × H200 per replica: each GPU keeps
    130,679,338,086.4 − 84,109,970,304 = 46,569,367,782.4 B free and, since tensor parallelism
    copies MLA's latent on every GPU, a replica holds 46,569,367,782.4 ÷ 35,136 B of tokens, not
    eight times that. With 15 decode replicas (3 regions × ⌈9.92 ÷ 2⌉) the pool holds 15 ×
    46,569,367,782.4 B of KV; the Llama default (GQA, each GPU a quarter of every token) keeps
    4 × free per replica: weights (68,452,360,192 + 2 × 1,050,673,152 × 2) ÷ 4 =
    18,163,763,200 B per GPU, each GPU's budget 0.9 × CUDA's 79.22 GiB − 5 GB =
    71,555,644,567.3 B, 12 replicas (3 × ⌈7.87 ÷ 2⌉)."""
    mla = capstone(**{**DEFAULTS, "model": "deepseek-v3", "gpu": "h200", "tp": 8})
    replicas = 3 * mla["decode_replicas_per_region"]
    assert replicas == 15
    assert mla["kv_room_bytes"] == pytest.approx(15 * 46_569_367_782.4, rel=1e-9)
    gqa = capstone(**DEFAULTS)
    assert gqa["kv_room_bytes"] == pytest.approx(12 * 4 * (71_555_644_567.3 - 18_163_763_200),
                                                 rel=1e-6)


def test_the_kv_transfer_moves_each_gpus_own_share():
    """Llama at the defaults: 1,750 tokens × 163,840 B ÷ 4 GPUs = 71,680,000 B per GPU over
    50 GB/s × 0.8 = 1.792 ms. DeepSeek-V3 on 8 × H200: each GPU holds the whole FP8 latent,
    1,750 × 35,136 B = 61,488,000 B over its own link, 1.537 ms (not an eighth of it)."""
    from problems.arithmetic.capacity import capstone_checked, fleet_plan_model

    gqa = fleet_plan_model(capstone_checked(**DEFAULTS))
    assert gqa["kv_transfer"] == pytest.approx(71_680_000 / 40e9)
    mla = fleet_plan_model(capstone_checked(**{**DEFAULTS, "model": "deepseek-v3",
                                               "gpu": "h200", "tp": 8}))
    assert mla["kv_transfer"] == pytest.approx(61_488_000 / 40e9)


def test_the_prefill_step_divides_its_reads_by_the_achieved_bandwidth():
    """The typical prompt's pass reads 17.7 GB per GPU over 3.35 TB/s × 0.8 = 2.68 TB/s, 6.61 ms;
    the working shows that divisor, not a bare '÷ 0.8 of the bandwidth'."""
    step = next(s for s in capstone(**DEFAULTS).steps if s.label.startswith("A typical prompt's "
                                                                            "prefill"))
    assert "17.7 GB of weights and KV per GPU ÷ (3.35 TB/s × 0.8))" in step.expression
    assert "of the bandwidth" not in step.expression
    assert step.label == "A typical prompt's prefill (compute-bound)"
