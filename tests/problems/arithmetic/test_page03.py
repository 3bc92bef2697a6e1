"""Page 03's arithmetic against figures worked by hand: static vs continuous batching, a long
prompt under a token budget, tenants under FCFS and fair sharing."""

import math

import pytest

from problems.arithmetic.batching import _harmonic, long_prompt, static_vs_continuous
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.queueing import tenant_fairness


def test_uniform_lengths_by_hand():
    r = static_vs_continuous(batch=32, distribution="uniform", output_min=16, output_max=1024)
    assert r["mean_output_tokens"] == 520  # (16 + 1024) / 2
    assert r["expected_longest_tokens"] == pytest.approx(16 + 1008 * 32 / 33)
    assert r["static_useful_share"] == pytest.approx(520 / (16 + 1008 * 32 / 33))
    assert r["throughput_ratio"] == pytest.approx((16 + 1008 * 32 / 33) / 520)
    assert r["static_wasted_share"] + r["static_useful_share"] == pytest.approx(1)
    # E[L²] = (a² + ac + c²) / 3 for the uniform; held = E[L²] / (2 E[L]).
    assert r["mean_output_held_tokens"] == pytest.approx(
        (16**2 + 16 * 1024 + 1024**2) / 3 / (2 * 520))


def test_uniform_gain_tends_to_two_and_equal_lengths_give_none():
    wide = static_vs_continuous(batch=10_000, output_min=1, output_max=100_000)
    assert wide["throughput_ratio"] == pytest.approx(2, rel=1e-3)
    same = static_vs_continuous(batch=64, output_min=300, output_max=300)
    assert same["throughput_ratio"] == 1
    assert static_vs_continuous(batch=1)["throughput_ratio"] == 1


def test_exponential_longest_is_theta_times_harmonic_without_the_cut():
    for batch in (1, 8, 32):
        r = static_vs_continuous(batch=batch, distribution="exponential", output_min=1,
                                 output_max=10**7, output_mean=101)
        assert r["mean_output_tokens"] == pytest.approx(101)
        assert r["expected_longest_tokens"] == pytest.approx(1 + 100 * _harmonic(batch),
                                                             rel=1e-6)
    assert _harmonic(4) == pytest.approx(25 / 12)
    # A cut at max_tokens can only shorten the longest member.
    cut = static_vs_continuous(batch=32, distribution="exponential", output_min=1,
                               output_max=300, output_mean=101)
    assert cut["expected_longest_tokens"] < 300


def test_batching_inputs_are_checked():
    with pytest.raises(ArithmeticInputError) as e:
        static_vs_continuous(output_min=100, output_max=10)
    assert e.value.field == "output_max"
    with pytest.raises(ArithmeticInputError) as e:
        static_vs_continuous(distribution="exponential", output_min=10, output_max=100,
                             output_mean=500)
    assert e.value.field == "output_mean"
    with pytest.raises(ArithmeticInputError) as e:
        static_vs_continuous(distribution="zipf")
    assert e.value.field == "distribution"


def test_long_prompt_flops_by_hand():
    r = long_prompt(model="llama-3.1-8b", gpu="h100-sxm", prompt_tokens=100_000,
                    token_budget=2_048, decode_batch=32)
    # 32 layers × 32 heads × 2 × (128 + 128) FLOP per pair × 100,000 × 100,001 / 2 pairs.
    pair = 32 * 32 * 2 * 256
    assert r["attention_flops"] == pytest.approx(pair * 100_000 * 100_001 / 2)
    assert r["attention_share"] == pytest.approx(
        r["attention_flops"] / (r["attention_flops"] + r["linear_flops"]))
    assert 0.6 < r["attention_share"] < 0.7  # attention is most of a 100K prefill on 8B
    # KV: 32 layers × 2 × 8 KV heads × 128 × 2 bytes = 128 KiB a token.
    assert r["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    assert r["kv_bytes"] == 100_000 * 131_072
    assert r["chunk_tokens"] == 2_048 - 32
    assert r["chunks"] == math.ceil(100_000 / 2_016)
    assert len(r["chunk_seconds"]) == r["chunks"]
    # Later full chunks attend to more of the prompt, so they take longer.
    assert r["chunk_seconds"][-2] > r["chunk_seconds"][0]
    assert r["ttft_chunked_seconds"] >= r["ttft_unchunked_seconds"]
    assert r["unchunked_stall_seconds"] > 10 * r["max_chunk_stall_seconds"]
    assert r["prefill_alone_bound"] == "compute"
    assert r["fits"]


def test_long_prompt_bigger_budget_fewer_longer_stalls_and_tp_splits_the_work():
    small = long_prompt(token_budget=2_048)
    large = long_prompt(token_budget=8_192)
    assert large["chunks"] < small["chunks"]
    assert large["first_chunk_stall_seconds"] > small["first_chunk_stall_seconds"]
    one = long_prompt(model="llama-3.1-70b", tp=1, memory_fraction=1.0)
    eight = long_prompt(model="llama-3.1-70b", tp=8)
    assert not one["fits"] and eight["fits"]
    assert eight["prefill_alone_seconds"] == pytest.approx(one["prefill_alone_seconds"] / 8)
    with pytest.raises(ArithmeticInputError) as e:
        long_prompt(token_budget=32, decode_batch=32)
    assert e.value.field == "token_budget"


def test_tenants_overloaded_by_hand():
    r = tenant_fairness(capacity_tokens_per_s=20_000, tokens_per_request=500, heavy_rate=36,
                        light_rate=2, light_tenants=3, queue_bound=64, burst_seconds=2,
                        overload_seconds=60)
    assert r["service_rate"] == 40
    assert r["utilization"] == pytest.approx(42 / 40)
    assert not r["fcfs_stable"] and r["fcfs_wait_seconds"] is None
    assert r["fcfs_wait_growth"] == pytest.approx(2 / 40)
    # From empty, 60 s at λ − μ = 2/s: the fluid 120 requests plus the diffusion's spread
    # (σ² = 82/s) gives 140; ÷ 40/s = 3.5 s (the fluid alone said 3 s).
    assert r["fcfs_backlog_requests"] == pytest.approx(140.0, abs=0.1)
    assert r["fcfs_wait_after_overload_seconds"] == pytest.approx(3.5, abs=0.01)
    assert r["fair_share_rate"] == 10
    # The replica is always busy: a light request waits one residual service (1/40 s) and its
    # peers' queue, ÷ (1 − 6/40): 25 / 0.85 = 29.4 ms.
    assert r["light_wait_seconds"] == pytest.approx((1 / 40) / 0.85)
    assert r["light_wait_bound_seconds"] == pytest.approx((1 / 40) / 0.85)
    assert r["heavy_capacity_rate"] == 34
    assert r["heavy_excess_rate"] == 2
    assert r["heavy_wait_seconds"] == pytest.approx(64 / 34)
    # An M/M/1/K queue at ρ_h = 36/34, K = 64: (1 − 1/ρ_h) ÷ (1 − ρ_h^−65) = 0.0556 ÷ 0.976 =
    # 5.69%, a little over the fluid excess 2/36 = 5.56%.
    rho_h = 36 / 34
    assert r["heavy_refused_share"] == pytest.approx((1 - 1 / rho_h) / (1 - rho_h ** -65))
    assert r["heavy_refused_share"] == pytest.approx(0.0569, abs=5e-5)
    assert r["heavy_fluid_refused_share"] == pytest.approx(2 / 36)
    assert r["bucket_rate_tokens"] == 5_000
    assert r["bucket_depth_tokens"] == 10_000
    assert r["retry_after_seconds"] == pytest.approx(0.1)
    # The header carries whole seconds (RFC 9110): 0.1 s is sent as 1, never as 0.
    assert r["retry_after_header_seconds"] == 1
    assert tenant_fairness(tokens_per_request=500, capacity_tokens_per_s=1_000,
                           heavy_rate=0.3, light_rate=0.1, light_tenants=1)[
        "retry_after_header_seconds"] == 1
    assert tenant_fairness(capacity_tokens_per_s=400, tokens_per_request=500, heavy_rate=0.5,
                           light_rate=0.1, light_tenants=1)["retry_after_header_seconds"] == 3
    # A whole number of seconds is sent as itself, not one more: 100 tokens/s shared by three
    # tenants refills a 100-token request in 3 s (the quotient computes as 3.0000000000000004).
    whole = tenant_fairness(capacity_tokens_per_s=100, tokens_per_request=100, heavy_rate=1,
                            light_rate=0.1, light_tenants=2)
    assert whole["retry_after_seconds"] == pytest.approx(3)
    assert whole["retry_after_header_seconds"] == 3
    assert tenant_fairness(capacity_tokens_per_s=1_000, tokens_per_request=1_000,
                           heavy_rate=1, light_rate=0.05, light_tenants=8)[
        "retry_after_header_seconds"] == 9
    assert r.to_dict()["fcfs_wait_seconds"] is None


def test_tenants_under_capacity_by_hand():
    """The strict review's E1 at heavy rate 20: μ = 40/s, λ = 26/s, ρ = 0.65, FCFS 0.65/14 =
    46.4 ms. The heavy tenant used to get an M/M/1 of its own at 34/s, (20/34)/14 = 42 ms,
    below FCFS with the light tenants also below: impossible at a fixed load. Light tenants
    first (non-preemptive priority): W0 = 26/1600 = 16.25 ms; light 16.25/0.85 = 19.1 ms;
    heavy 16.25/(0.85 × 0.35) = 54.6 ms; rate-weighted mean (6 × 19.1 + 20 × 54.6)/26 =
    46.4 ms, FCFS's."""
    r = tenant_fairness(heavy_rate=20)
    assert r["fcfs_stable"] and r["fcfs_settled"]
    assert r["fcfs_wait_seconds"] == pytest.approx(0.65 / 14)
    assert r["fcfs_wait_after_overload_seconds"] == pytest.approx(0.65 / 14)
    # ρ_h = 20/34 with a bound of 64: (1 − ρ) ρ^64 ≈ 7×10⁻¹⁶, nothing to speak of.
    assert r["heavy_stable"] and r["heavy_refused_share"] == pytest.approx(0, abs=1e-12)
    assert r["light_wait_seconds"] == pytest.approx(0.01625 / 0.85)
    assert r["heavy_wait_seconds"] == pytest.approx(0.01625 / (0.85 * 0.35))
    assert r["heavy_wait_seconds"] > r["fcfs_wait_seconds"] > r["light_wait_seconds"]
    assert r["fair_mean_wait_seconds"] == pytest.approx(0.65 / 14)
    with pytest.raises(ArithmeticInputError) as e:
        tenant_fairness(light_rate=10)
    assert e.value.field == "light_rate"


def test_tenants_with_equal_rates_all_wait_as_fcfs():
    """The review's symmetric case, heavy rate 2 with three light tenants at 2: four identical
    tenants, λ = 8/s, so each waits FCFS's (8/40)/32 = 6.25 ms (the page gave the 'heavy' one
    1.84 ms). A heavy tenant sending less than each light one is the favoured class: at 1/s,
    W0 = 7/1600 s, heavy 4.375/(1 − 1/40) = 4.49 ms, light 4.49/(1 − 7/40) = 5.44 ms."""
    same = tenant_fairness(heavy_rate=2)
    assert same["light_wait_seconds"] == same["heavy_wait_seconds"] == pytest.approx(0.00625)
    lighter = tenant_fairness(heavy_rate=1)
    assert not lighter["heavy_is_heavier"]
    assert lighter["heavy_wait_seconds"] == pytest.approx(0.004375 / 0.975)
    assert lighter["light_wait_seconds"] == pytest.approx(0.004375 / (0.975 * 0.825))
    assert lighter["fair_mean_wait_seconds"] == pytest.approx(lighter["fcfs_wait_seconds"])


def test_fcfs_wait_does_not_jump_where_the_load_crosses_capacity():
    """The strict review's E2: the FCFS curve read 788 ms at heavy rate 32.8 and 76.9 ms at
    34.1, as the model switched from the steady M/M/1 wait to the fluid backlog. One transient
    model now: an M/M/1 from empty after 60 s. At λ = μ = 40/s the diffusion gives
    √(80 × 60 × 2/π) = 55.3 requests, 1.38 s (an exact step-by-step M/M/1 gives 54.8). The
    wait rises with the load on both sides of capacity."""
    from problems.arithmetic.queueing import mm1_backlog_from_empty

    at = mm1_backlog_from_empty(arrival_rate=40, service_rate=40, seconds=60)
    assert at == pytest.approx((80 * 60 * 2 / math.pi) ** 0.5)
    assert at / 40 == pytest.approx(1.38, abs=0.01)
    # Just under and just over capacity the backlog is continuous, not a 10× drop.
    below = mm1_backlog_from_empty(arrival_rate=40 - 1e-6, service_rate=40, seconds=60)
    above = mm1_backlog_from_empty(arrival_rate=40 + 1e-6, service_rate=40, seconds=60)
    assert below == pytest.approx(at, rel=1e-4) and above == pytest.approx(at, rel=1e-4)
    # Far below, it is the steady state: λ = 26, ρ/(1 − ρ) = 0.65/0.35 = 1.857.
    assert mm1_backlog_from_empty(arrival_rate=26, service_rate=40,
                                  seconds=60) == pytest.approx(0.65 / 0.35)
    waits = [tenant_fairness(heavy_rate=h)["fcfs_wait_after_overload_seconds"]
             for h in (30, 32.8, 34.1, 35.3, 40)]
    assert waits == sorted(waits)
    assert waits[2] > 1.0  # 34.1 + 6 = 40.1/s, near capacity: about 1.4 s, not 77 ms
    # The heavy tenant's wait under fair sharing stays finite and continuous at its capacity.
    heavy = [tenant_fairness(heavy_rate=h)["heavy_wait_seconds"] for h in (33.9, 34, 34.1)]
    assert all(math.isfinite(w) for w in heavy) and heavy == sorted(heavy)


def test_seat_waits_by_hand():
    from problems.arithmetic.queueing import seat_waits_steps

    # 8 heavy requests on 2 seats, 10 steps each: waves start at 0, 10, 20, 30; done at 40.
    w = seat_waits_steps(heavy=8, seats=2, service_steps=10, arrivals=[3, 15])
    # FCFS: the first late request is 9th in line (wave 4, step 40), the second 10th (wave 4).
    assert w["fcfs"] == [37.0, 25.0]
    # Fair: each takes the next seat to free: steps 10 and 20.
    assert w["fair"] == [7.0, 5.0]
    # After the burst is done nobody waits.
    assert seat_waits_steps(heavy=2, seats=2, service_steps=5, arrivals=[9])["fair"] == [0.0]


def test_a_short_queue_bound_refuses_what_random_bursts_fill_it_with():
    """Found on the fresh review: at a queue bound of 1 the page said 5.56% of the heavy
    tenant's requests are refused, the fluid excess 2/36, which holds only for a long bound. As
    an M/M/1/K queue with K = 1 at ρ_h = 36/34 the blocked share is ρ ÷ (1 + ρ) = 36/70 =
    51.4%; below capacity, at 33.9 against 34 with K = 8, it is (1 − ρ) ρ⁸ ÷ (1 − ρ⁹) ≈ 11%,
    where the fluid model said none."""
    r = tenant_fairness(queue_bound=1)
    assert r["heavy_refused_share"] == pytest.approx(36 / 70)
    near = tenant_fairness(heavy_rate=33.9, queue_bound=8)
    rho = 33.9 / 34
    assert near["heavy_refused_share"] == pytest.approx((1 - rho) * rho**8 / (1 - rho**9))
    assert near["heavy_refused_share"] == pytest.approx(0.11, abs=0.005)
    # At ρ = 1 exactly the formula's limit, 1 ÷ (K + 1).
    assert tenant_fairness(heavy_rate=34, queue_bound=64)["heavy_refused_share"] == (
        pytest.approx(1 / 65))


def test_long_prompt_refuses_a_tp_the_query_heads_do_not_divide():
    """Found on the strict re-review: Qwen2.5 7B's 28 query heads over 8 GPUs were accepted
    (its 4 KV heads are copied there), though vLLM refuses that size."""
    with pytest.raises(ArithmeticInputError) as refused:
        long_prompt(model="qwen2.5-7b", tp=8)
    assert refused.value.field == "tp"
    assert "28 query heads do not split evenly over 8 GPUs" in str(refused.value)
    assert "1, 2, 4 or 28" in str(refused.value)
    assert long_prompt(model="qwen2.5-7b", tp=4)["chunks"] >= 1
