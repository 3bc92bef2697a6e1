"""Canary sizing (problems/arithmetic/rollout.py) against figures worked by hand."""

import math

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.rollout import (
    canary,
    canary_requests,
    canary_requests_corrected,
    errors_rule_of_three,
    lognormal_sigma,
    share_above_p99,
    z_of,
)

DEFAULTS = dict(request_rate=20.0, canary_share=0.05, error_rate=0.005,
                error_rate_regressed=0.01, p50_ms=300.0, p99_ms=1500.0, p99_regression=1.25,
                confidence=0.95, power=0.8, replicas=20, gpus_per_replica=2,
                price_per_hour=2.5)


def test_z_values():
    assert z_of(0.95) == pytest.approx(1.6449, abs=1e-4)
    assert z_of(0.8) == pytest.approx(0.8416, abs=1e-4)
    assert z_of(0.99) == pytest.approx(2.3263, abs=1e-4)


def test_one_sample_sample_size():
    """p₀ 1%, p₁ 2%, a baseline known exactly: (1.6449 × √0.0099 + 0.8416 × √0.0196)² ÷ 0.01²
    = (0.16366 + 0.11782)² ÷ 10⁻⁴ = 792.4."""
    assert canary_requests(p0=0.01, p1=0.02, k=math.inf, confidence=0.95,
                           power=0.8) == pytest.approx(792.4, abs=0.1)


def test_a_finite_baseline_needs_more():
    """k = 19: (1.6449 √(0.004975 × 20/19) + 0.8416 √(0.0099 + 0.004975/19))² ÷ 0.005² =
    (0.119035 + 0.084841)² ÷ 2.5×10⁻⁵ = 1,662.6."""
    n = canary_requests(p0=0.005, p1=0.01, k=19, confidence=0.95, power=0.8)
    assert n == pytest.approx(1662.6, abs=0.2)
    assert n > canary_requests(p0=0.005, p1=0.01, k=math.inf, confidence=0.95, power=0.8)


def test_latency_as_a_share_above_p99():
    """200 ms and 1 s: σ = ln 5 ÷ 2.3263 = 0.6918; 1.2× slower: 1 − Φ(2.3263 − 0.18232 ÷
    0.6918) = 1 − Φ(2.0628) = 1.957%. No slowdown: exactly 1%."""
    sigma = lognormal_sigma(p50=200, p99=1000)
    assert sigma == pytest.approx(0.6918, abs=1e-4)
    assert share_above_p99(sigma=sigma, slowdown=1.2) == pytest.approx(0.01957, abs=1e-5)
    assert share_above_p99(sigma=sigma, slowdown=1.0) == pytest.approx(0.01, abs=1e-12)


def test_rule_of_three():
    assert errors_rule_of_three(requests=300) == pytest.approx(0.01)


def test_the_canary_at_the_defaults():
    """1 request/s of canary traffic; 1,663 requests for the error rate, 551 for p99 (1,500 →
    1,875 ms moves 2.25% above the old p99) by the normal formula. Only 8.3 errors expected in
    1,663, so the plan takes Fleiss's correction: 40 ÷ (19 × 1,662.55 × 0.005) = 0.25326,
    1,662.55 ÷ 4 × (1 + √1.25326)² = 1,867.1 → 1,868; for p99, 40 ÷ (19 × 550.39 × 0.012545)
    = 0.3049 → 631.5 → 632. Errors bind: 1,868 s = 31.1 min; 1,868 × 0.5% = 9.34 extra
    failures; one canary replica of 20."""
    r = canary(**DEFAULTS)
    assert r["canary_rate"] == pytest.approx(1.0)
    assert r["requests_errors"] == 1663
    assert r["requests_latency"] == 551
    assert r["expected_errors"] == pytest.approx(8.313, abs=1e-3)
    assert r["requests_errors_corrected"] == 1868
    assert r["requests_latency_corrected"] == 632
    assert r["requests"] == 1868
    assert r["share_above_p99"] == pytest.approx(0.0225, abs=1e-4)
    assert r["binding"] == "error rate"
    assert r["seconds"] == pytest.approx(1868)
    assert r["extra_errors"] == pytest.approx(9.34)
    assert r["canary_replicas"] == 1
    assert r["blue_green_gpus"] == 40


def test_a_larger_share_is_quicker_but_exposes_about_as_many_users():
    small = canary(**{**DEFAULTS, "canary_share": 0.01})
    large = canary(**{**DEFAULTS, "canary_share": 0.2})
    assert large["seconds"] < small["seconds"]
    # A larger canary arm shrinks the baseline arm, so it needs slightly more requests.
    assert large["requests"] > small["requests"]


@pytest.mark.parametrize(("field", "value"), [
    ("error_rate_regressed", 0.004), ("p99_ms", 200.0), ("canary_share", 0.9),
    ("confidence", 1.5), ("request_rate", -1.0), ("p99_regression", 0.5)])
def test_bad_inputs_name_their_field(field, value):
    with pytest.raises(ArithmeticInputError) as caught:
        canary(**{**DEFAULTS, field: value})
    assert caught.value.field == field


def test_request_rates_read_as_words():
    from problems.arithmetic.rollout import requests_rate_text

    assert requests_rate_text(1.0) == "1 request/s"
    assert requests_rate_text(2.5) == "2.5 requests/s"


def test_the_continuity_correction_closes_most_of_the_gap_to_the_exact_test():
    """1% → 2% against a known baseline, one-sided 95%, 80% power: the normal formula says
    792.4; Fleiss's correction (1 + √(1 + 2 ÷ (792.4 × 0.01)))² ÷ 4 = 1.1227× → 889.5; the exact
    binomial test first reaches 80% power at n = 905 (reject at 15 or more errors: P(X ≥ 15 |
    905, 1%) ≤ 5%, P(X ≥ 15 | 905, 2%) ≥ 80%), and no smaller n does: at 904, still rejecting
    at 15, the power is 79.98%."""
    from math import comb

    n = canary_requests(p0=0.01, p1=0.02, k=math.inf, confidence=0.95, power=0.8)
    corrected = canary_requests_corrected(n=n, p0=0.01, p1=0.02, k=math.inf)
    assert corrected == pytest.approx(889.5, abs=0.1)

    def above(c: int, size: int, p: float) -> float:
        return 1 - sum(comb(size, x) * p**x * (1 - p) ** (size - x) for x in range(c))

    assert above(15, 905, 0.01) <= 0.05 and above(15, 905, 0.02) >= 0.8

    def exact_power(size: int) -> float:
        c = 0
        while above(c, size, 0.01) > 0.05:
            c += 1
        return above(c, size, 0.02)

    assert exact_power(904) == pytest.approx(0.79976, abs=1e-5)
    assert all(exact_power(size) < 0.8 for size in range(793, 905))
    assert n < corrected < 905


def test_the_canary_replica_is_added_beside_the_fleet():
    """Review E7: a canary was counted as one of the fleet's replicas, so a 5% canary on a
    1-replica fleet was '100% of the traffic' with no baseline left. It is added beside it:
    round(0.05 × 1 ÷ 0.95) = 0, at least 1 replica, taking 1 ÷ (1 + 1) = 50% of an unweighted
    router's traffic. At the defaults, round(0.05 × 20 ÷ 0.95 = 1.05) = 1 replica of 21,
    4.76%; a 50% canary of 20 is round(20) = 20 added replicas, 50%."""
    tiny = canary(**{**DEFAULTS, "replicas": 1, "request_rate": 0.05, "gpus_per_replica": 8})
    assert tiny["canary_replicas"] == 1
    assert tiny["replica_share"] == pytest.approx(0.5)
    r = canary(**DEFAULTS)
    assert r["canary_replicas"] == 1 and r["replica_share"] == pytest.approx(1 / 21)
    half = canary(**{**DEFAULTS, "canary_share": 0.5})
    assert half["canary_replicas"] == 20 and half["replica_share"] == pytest.approx(0.5)
