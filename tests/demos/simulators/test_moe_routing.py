"""The routing simulator (demos/simulators/moe_routing.py): exact top-k sampling, placements
that respect their slots, loads within what chance allows, and the prediction it compares to."""

import math

import numpy as np
import pytest

from demos.simulators.moe_routing import (
    expert_hit_probability,
    gpu_counts,
    placement_balanced,
    placement_plain,
    popularity,
    route,
    simulate,
)

H200 = dict(expert_params=44_040_192, hidden=7_168, weight_bytes=1.0, dispatch_bytes=1.0,
            combine_bytes=2.0, peak_flops=1_979e12, mfu=0.5, bandwidth=4.8e12 * 0.8,
            link_bandwidth=450e9 * 0.8, collective_seconds=10e-6)


def test_each_token_gets_k_distinct_experts_in_proportion_to_popularity():
    rng = np.random.default_rng(0)
    weights = popularity(experts=16, skew=1.0, rng=rng)
    race = rng.standard_exponential((20_000, 16), dtype=np.float32)
    choices = route(race=race, weights=weights, k=1)
    assert choices.shape == (20_000, 1)
    # With k = 1 the race picks each expert with its own probability.
    share = np.bincount(choices.ravel(), minlength=16) / 20_000
    assert np.allclose(share, weights, atol=0.015)
    several = route(race=race, weights=weights, k=4)
    assert all(len(set(row)) == 4 for row in several)


def test_uniform_routing_stays_within_what_chance_allows():
    """256 experts over 8 GPUs, 2,048 tokens × 8: 2,048 pairs per GPU on average, each GPU's
    load about binomial with σ ≈ √(16,384 × 1/8 × 7/8) ≈ 42, so the busiest of 8 stays within
    2,048 + 4σ (a max/mean of 1.08)."""
    run = simulate(experts=256, k=8, gpus=8, tokens=2_048, skew=0.0, redundant=0, steps=3,
                   seed=1, **H200)
    assert 1.0 < run["ratio_plain"][0] < 1 + 4 * math.sqrt(16_384 / 8 * 7 / 8) / 2_048


def test_skew_loads_the_busiest_gpu_and_redundancy_brings_it_back():
    run = simulate(experts=256, k=8, gpus=8, tokens=2_048, skew=1.0, redundant=32, steps=2,
                   seed=0, **H200)
    ratios = dict(zip(run["skews"], run["ratio_plain"], strict=True))
    balanced = dict(zip(run["skews"], run["ratio_balanced"], strict=True))
    assert ratios[0.0] < ratios[1.0] < ratios[2.0]
    assert ratios[1.0] > 1.4 and balanced[1.0] < 1.15


def test_placements_respect_slots_and_never_double_an_expert_on_a_gpu():
    load = np.random.default_rng(2).pareto(1.0, 64) + 0.1
    slot_gpu, slot_expert, copies = placement_balanced(load=load, gpus=8, redundant=16)
    assert len(slot_gpu) == 80 and copies.sum() == 80
    assert np.all(np.bincount(slot_gpu, minlength=8) == 10)
    for g in range(8):
        held = slot_expert[slot_gpu == g]
        assert len(held) == len(set(held))
    # The hottest expert got a copy; each expert is held somewhere.
    assert copies[int(np.argmax(load))] > 1 and set(slot_expert) == set(range(64))
    plain_gpu, plain_expert, _ = placement_plain(experts=64, gpus=8)
    assert list(np.bincount(plain_gpu)) == [8] * 8 and list(plain_expert) == list(range(64))


def test_gpu_counts_of_one_token():
    """One token on GPU 0 choosing experts 0 and 9 (GPUs 0 and 1 of 8, eight experts each):
    one pair each, one expert read each, and one remote token, received by GPU 1."""
    slot_gpu, slot_expert, _ = placement_plain(experts=64, gpus=8)
    counts = gpu_counts(choices=np.array([[0, 9]]), slot_gpu=slot_gpu, slot_expert=slot_expert,
                        gpus=8, rng=np.random.default_rng(0))
    assert list(counts["load"][:2]) == [1, 1] and counts["load"].sum() == 2
    assert list(counts["touched"][:2]) == [1, 1]
    assert list(counts["received"]) == [0, 1, 0, 0, 0, 0, 0, 0]


def test_the_prediction_is_the_layout_calculators_uniform_formula():
    """2,048 tokens over EP8: 2,048 pairs per GPU (compute 2 × 2,048 × 44,040,192 ÷ 989.5e12 =
    182.3 µs), 32 × (1 − (248/256)^2048) ≈ 32 experts read (32 × 44 MB ÷ 3.84 TB/s = 367.0 µs,
    the bound), 2,048 × 7/8 × 0.661832 = 1,186.2 tokens received × 7,168 × 3 B ÷ 360 GB/s =
    70.9 µs, and 20 µs fixed: 457.8 µs."""
    run = simulate(experts=256, k=8, gpus=8, tokens=2_048, skew=0.0, redundant=0, steps=1,
                   seed=0, **H200)
    assert expert_hit_probability(experts=256, per_gpu=32, k=8) == pytest.approx(0.661832,
                                                                                  abs=1e-6)
    assert run["predicted_time"] == pytest.approx(457.8e-6, rel=1e-3)


def test_uneven_splits_and_too_much_work_are_refused():
    with pytest.raises(ValueError):
        simulate(experts=256, k=8, gpus=7, tokens=64, skew=0, redundant=0, steps=1, seed=0,
                 **H200)
    with pytest.raises(ValueError):
        simulate(experts=256, k=8, gpus=8, tokens=8_192, skew=0.3, redundant=0, steps=20,
                 seed=0, **H200)


def test_the_same_seed_gives_the_same_run():
    one = simulate(experts=64, k=4, gpus=8, tokens=256, skew=1.0, redundant=8, steps=2, seed=5,
                   **H200)
    two = simulate(experts=64, k=4, gpus=8, tokens=256, skew=1.0, redundant=8, steps=2, seed=5,
                   **H200)
    assert one["time_plain"] == two["time_plain"]
    assert list(one["loads_balanced"]) == list(two["loads_balanced"])


def test_the_hottest_expert_runs_further_above_its_mean_than_the_busiest_gpu():
    """Uniform routing: 2,048 tokens × 8 over 256 experts is 64 pairs per expert, each about
    binomial (σ ≈ 7.9), so the hottest of 256 sits near 64 + 3σ (about 1.4× the mean). Skewed
    routing piles onto the most popular expert far faster than onto any GPU, which also holds
    31 cooler experts."""
    run = simulate(experts=256, k=8, gpus=8, tokens=2_048, skew=1.0, redundant=0, steps=2,
                   seed=0, **H200)
    experts = dict(zip(run["skews"], run["ratio_expert"], strict=True))
    gpus = dict(zip(run["skews"], run["ratio_plain"], strict=True))
    assert run["mean_expert_load"] == 64
    assert 1.2 < experts[0.0] < 1 + 5 * math.sqrt(2_048 * 8 / 256 * (1 - 8 / 256)) / 64
    assert experts[1.0] > 5 * gpus[1.0] > 5
    assert experts[2.0] > experts[1.0] > experts[0.5] > experts[0.0]


def test_the_hottest_expert_at_zipf_1_is_about_25_times_the_mean_for_256_experts_top_8():
    """DeepSeek-V3's 256 experts, top-8, Zipf 1: the hottest expert's weight is 1/H₂₅₆ =
    1/6.1243 = 0.1633 of the whole. A token picks 8 distinct experts, so the hottest is picked
    by a share of tokens between 1 − (1 − 0.1633)⁸ = 0.760 (every draw at its bare weight) and
    1 − ∏ⱼ(1 − 0.1633 ÷ (1 − the next j experts' weight)) = 0.832 (the heaviest others drawn
    first), while the mean expert gets 8/256 = 1/32 of the tokens: 24.3× to 26.6× the mean, never
    the 256 ÷ 6.124 = 41.8× of drawing with replacement, nor above 32 (one pick per token)."""
    harmonic = sum(1 / r for r in range(1, 257))
    top = 1 / harmonic
    low = 1 - (1 - top) ** 8
    miss = 1.0
    for j in range(8):
        miss *= 1 - top / (1 - (sum(1 / r for r in range(2, j + 2))) / harmonic)
    assert (32 * low, 32 * (1 - miss)) == pytest.approx((24.31, 26.62), abs=0.01)
    run = simulate(experts=256, k=8, gpus=8, tokens=4_096, skew=1.0, redundant=0, steps=2,
                   seed=1, **H200)
    hottest = dict(zip(run["skews"], run["ratio_expert"], strict=True))[1.0]
    # 8,192 token draws: the share's standard error is under 0.005, 0.15 on the ratio.
    assert 32 * low - 0.5 < hottest < 32 * (1 - miss) + 0.5
