"""The stopping-distance formula on the home page: speed × latency, with worked steps."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from problems.arithmetic.reaction import (
    LATENCY_MS_MAX,
    SPEED_KMH_MAX,
    ReactionInputError,
    number_text,
    reaction_distance,
)

speeds = st.floats(min_value=0, max_value=SPEED_KMH_MAX)
latencies = st.floats(min_value=0, max_value=LATENCY_MS_MAX)


def test_highway_speed_and_a_tenth_of_a_second():
    # 90 km/h is exactly 25 m/s, so 100 ms covers 2.5 m: checkable by hand.
    result = reaction_distance(speed_kmh=90, latency_ms=100)
    assert result.speed_m_per_s == pytest.approx(25.0)
    assert result.latency_s == pytest.approx(0.1)
    assert result.distance_m == pytest.approx(2.5)


def test_steps_carry_units_and_end_in_the_distance():
    result = reaction_distance(speed_kmh=100, latency_ms=300)
    assert [step.unit for step in result.steps] == ["m/s", "s", "m"]
    assert result.steps[-1].value == result.distance_m
    assert result.steps[0].expression == "100 km/h × 1,000 m/km ÷ 3,600 s/h"
    assert result.steps[1].expression == "300 ms ÷ 1,000 ms/s"
    assert result.steps[2].expression == "27.78 m/s × 0.3 s"
    assert result.steps[2].value_text == "8.33"


def test_zero_latency_means_no_distance():
    assert reaction_distance(speed_kmh=120, latency_ms=0).distance_m == 0


@given(speed=speeds, latency=latencies)
def test_distance_is_speed_times_time(speed, latency):
    result = reaction_distance(speed_kmh=speed, latency_ms=latency)
    assert result.distance_m == pytest.approx(speed / 3.6 * latency / 1000, rel=1e-12, abs=1e-12)
    assert math.isfinite(result.distance_m) and result.distance_m >= 0


@given(speed=st.floats(min_value=0, max_value=SPEED_KMH_MAX / 2), latency=latencies)
def test_doubling_speed_doubles_distance(speed, latency):
    once = reaction_distance(speed_kmh=speed, latency_ms=latency).distance_m
    twice = reaction_distance(speed_kmh=2 * speed, latency_ms=latency).distance_m
    assert twice == pytest.approx(2 * once, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("speed", "latency", "field"),
    [
        (-1, 100, "speed_kmh"),
        (SPEED_KMH_MAX + 1, 100, "speed_kmh"),
        (math.nan, 100, "speed_kmh"),
        (math.inf, 100, "speed_kmh"),
        ("fast", 100, "speed_kmh"),
        (True, 100, "speed_kmh"),
        (50, -5, "latency_ms"),
        (50, LATENCY_MS_MAX + 1, "latency_ms"),
        (50, math.nan, "latency_ms"),
    ],
)
def test_bad_input_names_the_field(speed, latency, field):
    with pytest.raises(ReactionInputError) as error:
        reaction_distance(speed_kmh=speed, latency_ms=latency)
    assert error.value.field == field


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0"), (8.3333, "8.33"), (0.005, "0.005"), (1234567.891, "1,234,567.89"), (2.50, "2.5")],
)
def test_number_text(value, text):
    assert number_text(value) == text
