"""Problem 18's arithmetic against figures worked by hand."""

import pytest

from problems.arithmetic.benchmarking import (
    benchmark_plan,
    benchmark_summary,
    percentile_order_interval,
    requests_for_bounded_percentile,
    requests_for_percentile_precision,
)


def test_a_p99_needs_381_whole_requests_before_it_is_bounded() -> None:
    """Review E9: n > 1.96² × 0.99 ÷ 0.01 = 380.3, and a 'fewest N' is a ceiling: at n = 380
    the low end is 3.80 − 1.96 × √(380 × 0.99 × 0.01) = 3.80 − 3.8015 = −0.0015, below zero;
    at 381 it is 3.81 − 3.8065 = +0.0035. For the median, 1.96² × 0.5 ÷ 0.5 = 3.84 → 4."""
    assert requests_for_bounded_percentile(0.99) == 381
    assert requests_for_bounded_percentile(0.5) == 4
    assert not benchmark_plan(request_rate=1, duration_s=380, percentile_q=0.99,
                              e2e_latency_s=8, client_concurrency=64,
                              output_tokens=256)["bounded"]
    assert benchmark_plan(request_rate=1, duration_s=381, percentile_q=0.99, e2e_latency_s=8,
                          client_concurrency=64, output_tokens=256)["bounded"]


def test_the_percentiles_interval_is_a_pair_of_order_statistics() -> None:
    """Review M1: the distribution-free 95% interval for p99 from n sorted requests is the
    ranks ⌊nq − 1.96√(nq(1−q))⌋ to ⌈nq + 1.96√(nq(1−q))⌉. n = 1,200: 1,188 ± 1.96 × √11.88
    = 1,188 ± 6.756, ranks 1,181 to 1,195 (the sample's p98.4 to p99.6). n = 380: 376.2 ±
    1.96 × √3.762 = 376.2 ± 3.80, ranks 372 to 380, the maximum. Pinning p99 to ±0.002 takes
    1.96² × 0.99 × 0.01 ÷ 0.002² = 9,507.6, so 9,508 requests."""
    assert percentile_order_interval(requests=1200, q=0.99) == (1181, 1195)
    assert percentile_order_interval(requests=380, q=0.99) == (372, 380)
    assert requests_for_percentile_precision(q=0.99, half_width=0.002) == 9508
    r = benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.99, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256)
    assert (r["rank_low"], r["rank_high"]) == (1181, 1195)
    assert r["requests_precise"] == 9508 and not r["precise_enough"]


def test_benchmark_plan_worked_by_hand() -> None:
    """4 requests/s for 120 s = 480 requests; 4.8 expected beyond the p99, 95% range
    4.8 ± 1.96 × √(480 × 0.99 × 0.01) = 4.8 ± 4.27; in flight 4 × 8 s = 32, so a client capped
    at 16 offers only 16 ÷ 8 = 2 requests/s, 512 output tokens/s at 256 tokens each."""
    r = benchmark_plan(request_rate=4, duration_s=120, percentile_q=0.99, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256)
    assert r["requests"] == pytest.approx(480)
    assert r["beyond"] == pytest.approx(4.8)
    assert r["beyond_high"] - r["beyond"] == pytest.approx(4.27, abs=0.01)
    assert r["in_flight"] == pytest.approx(32)
    assert r["capped"] is True and r["offered_rate"] == pytest.approx(2)
    assert r["output_tokens_per_second"] == pytest.approx(512)
    assert r["bounded"] is True
    short = benchmark_plan(request_rate=1, duration_s=60, percentile_q=0.99, e2e_latency_s=8,
                           client_concurrency=64, output_tokens=256)
    assert short["bounded"] is False and short["capped"] is False


def test_benchmark_summary_of_a_load_point() -> None:
    requests = [
        {"ok": True, "ttft": 0.1, "tpot": 0.01, "itl": [0.01, 0.01], "e2e": 0.12,
         "prompt_tokens": 10, "output_tokens": 3},
        {"ok": True, "ttft": 0.3, "tpot": 0.03, "itl": [0.03, 0.03], "e2e": 0.36,
         "prompt_tokens": 10, "output_tokens": 3},
        {"ok": False},
    ]
    s = benchmark_summary(requests, duration_s=2.0, ttft_slo_s=0.2)
    assert (s["completed"], s["failed"], s["output_tokens"]) == (2, 1, 6)
    assert s["output_throughput"] == pytest.approx(3.0)
    assert s["p50_ttft"] == pytest.approx(0.2)
    assert s["mean_itl"] == pytest.approx(0.02)
    assert (s["good"], s["goodput"]) == (1, 0.5)
    assert s["good_share"] == pytest.approx(1 / 3)


def test_expected_output_throughput() -> None:
    from problems.arithmetic.benchmarking import expected_output_throughput

    # 4 requests/s × 16 tokens = 64 tokens/s; 8 in flight at 0.5 s each = 16 requests/s,
    # × 16 tokens = 256 tokens/s; "all at once" has no rate to predict from.
    assert expected_output_throughput(mode="rate", level=4, output_tokens=16) == 64
    assert expected_output_throughput(mode="concurrency", level=8, output_tokens=16,
                                      mean_e2e_s=0.5) == 256
    assert expected_output_throughput(mode="rate", level=float("inf"), output_tokens=16) is None


def test_the_default_precision_follows_the_percentile() -> None:
    """±0.002 from p1 to p99; beyond, a fifth of the tail (±0.0002 at p99.9), so the default
    never reaches past p100. A given precision wider than the tail is refused in words."""
    from problems.arithmetic.benchmarking import percentile_label, precision_default
    from problems.arithmetic.inputs import ArithmeticInputError

    assert precision_default(0.5) == 0.002 and precision_default(0.99) == 0.002
    assert precision_default(0.01) == 0.002
    assert precision_default(0.999) == pytest.approx(0.0002)
    for q in (0.01, 0.5, 0.99, 0.995, 0.999, 0.9999):
        r = benchmark_plan(request_rate=4, duration_s=300, percentile_q=q, e2e_latency_s=8,
                           client_concurrency=16, output_tokens=256)
        assert r["precision"] <= min(q, 1 - q) / 5 + 1e-15
    assert benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.999, e2e_latency_s=8,
                          client_concurrency=16, output_tokens=256)["requests_precise"] == 95941
    assert percentile_label(0.9999) == "p99.99" and percentile_label(0.999) == "p99.9"
    with pytest.raises(ArithmeticInputError, match="at most 0.001 at the p99.9"):
        benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.999, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256, precision=0.002)
