"""Problem 16's arithmetic against figures worked by hand."""

import math

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.serving_metrics import (
    goodput,
    histogram_quantile,
    percentile,
    request_cost,
    request_latencies,
)

INF = math.inf


def test_request_latencies_from_token_times() -> None:
    # Arrival at 10 s; tokens at 10.5, 10.6, 10.8, 11.1: TTFT 0.5, gaps 0.1 0.2 0.3,
    # TPOT (11.1 − 10.5) ÷ 3 = 0.2, E2E 1.1.
    r = request_latencies(arrival=10.0, token_times=[10.5, 10.6, 10.8, 11.1])
    assert r["ttft"] == pytest.approx(0.5)
    assert r["itl"] == pytest.approx([0.1, 0.2, 0.3])
    assert r["tpot"] == pytest.approx(0.2)
    assert r["e2e"] == pytest.approx(1.1)
    one = request_latencies(arrival=0.0, token_times=[0.25])
    assert one["tpot"] is None and one["itl"] == []


def test_percentile_interpolates_like_numpy() -> None:
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    # Rank 0.9 × 9 = 8.1: between 9 and 10, a tenth of the way.
    assert percentile(values, 0.9) == pytest.approx(9.1)
    assert percentile(values, 0.5) == pytest.approx(5.5)
    assert percentile([3.0], 0.99) == 3.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_histogram_quantile_as_prometheus_computes_it() -> None:
    # 40 observations: 10 up to 0.1 s, 20 more up to 0.5 s, 10 above. The median's rank is 20,
    # half way through the second bucket's 20: 0.1 + 0.4 × 10/20 = 0.3 s.
    buckets = [(0.1, 10), (0.5, 30), (INF, 40)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.3)
    # Rank 2 falls in the first bucket, interpolated from 0: 0.1 × 2/10.
    assert histogram_quantile(0.05, buckets) == pytest.approx(0.02)
    # The p99's rank (39.6) is in +Inf: the highest finite bound is returned.
    assert histogram_quantile(0.99, buckets) == 0.5
    assert histogram_quantile(0.5, [(0.1, 0), (INF, 0)]) is None


def test_goodput_counts_requests_meeting_every_slo() -> None:
    requests = [{"ttft": 0.2, "tpot": 0.02, "e2e": 2.0},
                {"ttft": 0.9, "tpot": 0.02, "e2e": 2.5},   # TTFT too slow
                {"ttft": 0.3, "tpot": 0.08, "e2e": 3.0},   # TPOT too slow
                {"ttft": 0.1, "tpot": None, "e2e": 0.1}]   # one token: no TPOT to check
    g = goodput(requests, duration_s=2.0, ttft_slo_s=0.5, tpot_slo_s=0.05)
    assert (g["good"], g["total"], g["goodput"]) == (2, 4, 1.0)


def test_request_cost_worked_by_hand() -> None:
    """$3.95/h, 2,000-token prompts half cached, 300 output tokens, prefill 20,000 tokens/s,
    decode 3,000 tokens/s, 60% utilisation: 1,000 tokens ÷ 20,000 = 50 ms plus 300 ÷ 3,000 =
    100 ms = 150 ms per request; 3,600 × 0.6 ÷ 0.15 = 14,400 requests per paid hour;
    $3.95 ÷ 14,400 = $0.000274 per request. A 20-point drop (to 30%) prefills 1,400 tokens:
    170 ms, $0.000311, 13.3% more, 1 − 150/170 = 11.8% capacity lost; at a million requests
    a day, $0.0000366 × 30 million = $1,097 a month."""
    r = request_cost(price_per_hour=3.95, gpus=1, prompt_tokens=2000, output_tokens=300,
                     prefill_tokens_per_second=20000, decode_tokens_per_second=3000,
                     utilization=0.6, cache_hit_rate=0.5, hit_rate_drop=0.2,
                     requests_per_day=1e6)
    assert r["busy_seconds"] == pytest.approx(0.15)
    assert r["requests_per_hour"] == pytest.approx(14_400)
    assert r["dollars_per_request"] == pytest.approx(3.95 / 14_400)
    assert r["dollars_per_million_output_tokens"] == pytest.approx(3.95 / 14_400 / 300 * 1e6)
    assert r["busy_seconds_after"] == pytest.approx(0.17)
    assert r["cost_increase"] == pytest.approx(0.17 / 0.15 - 1)
    assert r["capacity_loss"] == pytest.approx(1 - 0.15 / 0.17)
    assert r["extra_dollars_per_month"] == pytest.approx(3.95 * 0.02 / 0.6 / 3600 * 30e6)


def test_request_cost_refuses_a_drop_past_the_hit_rate() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        request_cost(price_per_hour=3.95, gpus=1, prompt_tokens=2000, output_tokens=300,
                     prefill_tokens_per_second=20000, decode_tokens_per_second=3000,
                     utilization=0.6, cache_hit_rate=0.1, hit_rate_drop=0.2,
                     requests_per_day=1e6)
    assert error.value.field == "hit_rate_drop"


def test_a_measured_run_costs_its_wall_time_by_hand() -> None:
    """Review: the metrics demo's cost per request is computed here, not in the runner.
    $3.60 an hour for 10 s is $0.01; over 4 requests $0.0025 each; over 200 output tokens
    $50 per million."""
    from problems.arithmetic.serving_metrics import measured_cost

    cost = measured_cost(price_per_hour=3.6, seconds=10, requests=4, output_tokens=200)
    assert cost == pytest.approx({"dollars": 0.01, "per_request": 0.0025,
                                  "per_million_output_tokens": 50.0})
    nothing = measured_cost(price_per_hour=3.6, seconds=10, requests=0, output_tokens=0)
    assert nothing["per_request"] is None and nothing["per_million_output_tokens"] is None
