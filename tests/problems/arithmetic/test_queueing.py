"""Queueing, against textbook results (Harchol-Balter 2013, ch. 14; Erlang C tables)."""

import math

import pytest

from problems.arithmetic import ArithmeticInputError, queue
from problems.arithmetic.queueing import erlang_c


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
