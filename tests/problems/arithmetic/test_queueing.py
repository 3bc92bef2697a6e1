"""Queueing, against textbook results (Harchol-Balter 2013, ch. 14; Erlang C tables)."""

import math

import pytest

from problems.arithmetic import ArithmeticInputError, queue
from problems.arithmetic.queueing import erlang_c, tail_latency


def test_mm1_response_time_is_exponential_with_rate_mu_minus_lambda() -> None:
    # M/M/1: T ~ Exp(μ − λ): mean 1/(μ − λ), median ln 2/(μ − λ), p99 ln 100/(μ − λ).
    result = queue(arrival_rate=9, service_rate=10)
    assert result["utilization"] == pytest.approx(0.9)
    assert result["mean_response_seconds"] == pytest.approx(1.0)
    assert result["mean_wait_seconds"] == pytest.approx(0.9)
    assert result["p50_response_seconds"] == pytest.approx(math.log(2), rel=1e-6)
    assert result["p99_response_seconds"] == pytest.approx(math.log(100), rel=1e-6)


def test_erlang_c_matches_published_tables() -> None:
    # Two servers at 1 erlang: C = 1/3. Ten servers at 8 erlangs: C ≈ 0.409.
    assert erlang_c(servers=2, offered_load=1.0) == pytest.approx(1 / 3)
    assert erlang_c(servers=10, offered_load=8.0) == pytest.approx(0.4092, abs=1e-4)


def test_pooling_servers_cuts_the_wait_at_the_same_utilisation() -> None:
    one = queue(arrival_rate=0.8, service_rate=1, servers=1)
    ten = queue(arrival_rate=8, service_rate=1, servers=10)
    assert one["utilization"] == ten["utilization"]
    assert ten["mean_wait_seconds"] < one["mean_wait_seconds"] / 10


def test_an_unstable_queue_is_refused() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        queue(arrival_rate=20, service_rate=10, servers=2)
    assert error.value.field == "arrival_rate"


def test_percentiles_are_ordered() -> None:
    result = queue(arrival_rate=30, service_rate=10, servers=4)
    assert result["p50_response_seconds"] < result["mean_response_seconds"]
    assert result["mean_response_seconds"] < result["p99_response_seconds"]


def test_wait_percentiles_by_hand() -> None:
    import math

    from problems.arithmetic.queueing import queue_percentiles, wait_percentile

    # M/M/1, ρ 0.9, μ 10/s: P(W > t) = 0.9 e^(−t); p99 = ln(0.9 / 0.01) = 4.4998 s.
    assert wait_percentile(q=0.99, waiting=0.9, drain_rate=1.0) == pytest.approx(
        math.log(90))
    # Half the arrivals never wait at ρ 0.5: the median wait is zero.
    assert wait_percentile(q=0.5, waiting=0.5, drain_rate=5.0) == 0
    rows = queue_percentiles(service_rate=10.0, servers=1, utilizations=(0.5, 0.9))
    for row in rows:
        # Response ~ Exp(μ − λ): p50 = ln 2 / (μ − λ), p99 = ln 100 / (μ − λ).
        drain = 10.0 * (1 - row["utilization"])
        assert row["p50_response_seconds"] == pytest.approx(math.log(2) / drain, rel=1e-6)
        assert row["p99_response_seconds"] == pytest.approx(math.log(100) / drain, rel=1e-6)
        assert row["response_ratio"] == pytest.approx(math.log(100) / math.log(2), rel=1e-6)


def test_length_tail_by_hand() -> None:
    from problems.arithmetic.queueing import length_tail

    r = length_tail(ttft_seconds=0.2, tpot_seconds=0.02, p50_output_tokens=200,
                    p99_output_tokens=2000)
    assert (r["p50_seconds"], r["p99_seconds"]) == (pytest.approx(4.18), pytest.approx(40.18))
    assert r["ratio"] == pytest.approx(40.18 / 4.18)


def test_tail_latency_many_seats_keep_the_median_low() -> None:
    r = tail_latency(mean_service_seconds=4.0, servers=16, utilization=0.9)
    assert r["mine_mmc"]["p50_response_seconds"] < r["mine_mm1"]["p50_response_seconds"]
    assert r["mine_mmc"]["wait_probability"] < 0.9
    with pytest.raises(ArithmeticInputError) as e:
        tail_latency(p50_output_tokens=500, p99_output_tokens=100)
    assert e.value.field == "p99_output_tokens"


def test_the_mean_output_length_the_service_time_implies() -> None:
    """Review: 4 s of service at 200 ms TTFT and 20 ms TPOT is (4 − 0.2) ÷ 0.02 + 1 = 191
    tokens on average, below the 200-token median the same example uses."""
    r = tail_latency(mean_service_seconds=4.0, ttft_ms=200, tpot_ms=20)
    assert r["implied_mean_output_tokens"] == pytest.approx(191)
    assert tail_latency(mean_service_seconds=0.1, ttft_ms=200)["implied_mean_output_tokens"] == 0


def test_a_service_time_equal_to_ttft_implies_a_one_token_answer() -> None:
    """Dr2: s = TTFT + (n − 1) × TPOT gives n = 1 when s equals TTFT (it returned the 'no
    answer' 0); 0.2 s + 0.02 s of service is two tokens."""
    assert tail_latency(mean_service_seconds=0.2, ttft_ms=200)["implied_mean_output_tokens"] == 1
    assert tail_latency(mean_service_seconds=0.22, ttft_ms=200, tpot_ms=20)[
        "implied_mean_output_tokens"] == pytest.approx(2)
