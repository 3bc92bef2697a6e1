"""Problem 18's arithmetic against figures worked by hand."""

import pytest

from problems.arithmetic.benchmarking import (
    benchmark_plan,
    benchmark_summary,
    percentile_order_interval,
    percentile_order_open,
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
    """A fifth of the share of requests beyond the percentile, as ±0.002 is for a p99's 1%:
    ±0.0002 at p99.9, ±0.02 at p90, ±0.1 at p50 (review: a p50 held to ±0.002 asked 240,092
    requests of a median, which 1,200 pin to p47.2–p52.8). The default never reaches past
    p100. A given precision wider than the tail is refused in words."""
    from problems.arithmetic.benchmarking import percentile_label, precision_default
    from problems.arithmetic.inputs import ArithmeticInputError

    assert precision_default(0.5) == 0.1 and precision_default(0.99) == 0.002
    assert precision_default(0.9) == 0.02
    assert precision_default(0.999) == pytest.approx(0.0002)
    for q in (0.5, 0.9, 0.99, 0.995, 0.999, 0.9999):
        r = benchmark_plan(request_rate=4, duration_s=300, percentile_q=q, e2e_latency_s=8,
                           client_concurrency=16, output_tokens=256)
        assert r["precision"] == pytest.approx((1 - q) / 5)
    assert benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.5, e2e_latency_s=8,
                          client_concurrency=16, output_tokens=256)["requests_precise"] == 97
    assert benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.999, e2e_latency_s=8,
                          client_concurrency=16, output_tokens=256)["requests_precise"] == 95941
    assert percentile_label(0.9999) == "p99.99" and percentile_label(0.999) == "p99.9"
    with pytest.raises(ArithmeticInputError, match="at most 0.001 at the p99.9"):
        benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.999, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256, precision=0.002)


def test_a_percentile_below_the_median_is_refused() -> None:
    """Review: at 0.01 the page counted the 99 of 100 requests 'beyond the true p1' (a range up
    to 101 of 100) and called 1 request the bare minimum; the counts are of the requests beyond
    the percentile, the smaller side only from the median up."""
    from problems.arithmetic.inputs import ArithmeticInputError

    with pytest.raises(ArithmeticInputError, match="at least 0.5"):
        benchmark_plan(request_rate=1, duration_s=100, percentile_q=0.01, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256)
    assert benchmark_plan(request_rate=1, duration_s=100, percentile_q=0.5, e2e_latency_s=8,
                          client_concurrency=16, output_tokens=256)["rank_low"] == 40


def test_an_interval_end_past_the_sample_is_open() -> None:
    """Review: a p99.9 of 1,200 requests: 1,198.8 ± 1.96 × √1.1988 = 1,196.65 to 1,200.95,
    past the 1,200th, so the sample sets no upper bound (0.999¹²⁰⁰ = 30% of runs hold no
    request beyond the true p99.9); the page said it 'lies between the 1,196th and the
    1,200th'. A p99 of 380: 376.2 + 3.8015 = 380.0015, past 380, open too. One request bounds
    neither side."""
    assert percentile_order_open(requests=1200, q=0.99) == (False, False)
    assert percentile_order_open(requests=1200, q=0.999) == (False, True)
    assert percentile_order_open(requests=380, q=0.99) == (False, True)
    assert percentile_order_open(requests=1, q=0.99) == (True, True)
    r = benchmark_plan(request_rate=4, duration_s=300, percentile_q=0.999, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256)
    interval = next(s for s in r.steps if s.label.startswith("95% interval"))
    assert interval.display == ("rank 1,196 up, the sample's p99.67; past the slowest request: no "
                             "upper bound")


def test_the_bare_minimum_reads_below_its_ceiling() -> None:
    """Review: 1.96² × 0.999 ÷ 0.001 = 3,837.62 read "the next whole number above ... = 3,838"
    beside 3,838 requests; it reads 3,837.6 now (38,410.7 for a p99.99, 380 for a p99)."""
    for q, shown in ((0.999, "= 3,837.6"), (0.9999, "= 38,410.7"), (0.99, "= 380")):
        r = benchmark_plan(request_rate=4, duration_s=300, percentile_q=q, e2e_latency_s=8,
                           client_concurrency=16, output_tokens=256)
        step = next(s for s in r.steps if s.label.startswith("Fewest requests"))
        assert step.expression.endswith(shown), step.expression


def test_a_fractional_load_point_is_a_mean() -> None:
    """0.3 requests/s for 5 s sends a Poisson count of requests, 1.5 on average: never
    "1.5 requests"; Little's law's in-flight count is a mean too."""
    r = benchmark_plan(request_rate=0.3, duration_s=5, percentile_q=0.99, e2e_latency_s=8,
                       client_concurrency=16, output_tokens=256)
    texts = {s.label: s.display for s in r.steps}
    assert texts["Requests in this load point"] == "1.5 requests on average"
    assert texts["Requests in flight the client must hold (Little's law)"] == (
        "2.4 requests on average")
