"""The stopping-distance formula on the home page: speed × latency, with worked steps."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import POSITIVE_MIN
from problems.arithmetic.reaction import (
    LATENCY_MS_MAX,
    SPEED_KMH_MAX,
    reaction_distance,
    reaction_texts,
)
from problems.arithmetic.steps import Step

# Zero, or a value no smaller than the formula accepts.
speeds = st.just(0.0) | st.floats(min_value=POSITIVE_MIN, max_value=SPEED_KMH_MAX)
latencies = st.just(0.0) | st.floats(min_value=POSITIVE_MIN, max_value=LATENCY_MS_MAX)


def test_highway_speed_and_a_tenth_of_a_second():
    # 90 km/h is exactly 25 m/s, so 100 ms covers 2.5 m: checkable by hand.
    result = reaction_distance(speed_kmh=90, latency_ms=100)
    assert result["speed_m_per_s"] == pytest.approx(25.0)
    assert result["latency_s"] == pytest.approx(0.1)
    assert result["distance_m"] == pytest.approx(2.5)


def test_steps_carry_units_and_end_in_the_distance():
    result = reaction_distance(speed_kmh=100, latency_ms=300)
    assert all(isinstance(step, Step) for step in result.steps)
    assert [step.unit for step in result.steps] == ["m/s", "s", "m"]
    assert result.steps[-1].value == result["distance_m"]
    assert [step.expression for step in result.steps] == [
        "100 km/h × 1,000 m/km ÷ 3,600 s/h",
        "300 ms ÷ 1,000 ms/s",
        "27.78 m/s × 0.3 s",
    ]
    assert [step.display for step in result.steps] == ["27.78 m/s", "0.3 s", "8.33 m"]


def test_texts_for_the_sentence_above_the_steps():
    texts = reaction_texts(reaction_distance(speed_kmh=36, latency_ms=1500))
    assert texts == {"speed_kmh": "36 km/h", "latency_ms": "1,500 ms", "distance_m": "15 m"}


def test_result_is_json_ready():
    as_dict = reaction_distance(speed_kmh=50, latency_ms=20).to_dict()
    assert as_dict["distance_m"] == pytest.approx(50 / 3.6 * 0.02)
    assert len(as_dict["steps"]) == 3


def test_tiny_but_sensible_inputs_are_formatted():
    result = reaction_distance(speed_kmh=1e-9, latency_ms=1e-9)
    assert result["distance_m"] > 0
    assert "×10" in result.steps[-1].display


def test_zero_latency_means_no_distance():
    assert reaction_distance(speed_kmh=120, latency_ms=0)["distance_m"] == 0


@given(speed=speeds, latency=latencies)
def test_distance_is_speed_times_time(speed, latency):
    distance = reaction_distance(speed_kmh=speed, latency_ms=latency)["distance_m"]
    assert distance == pytest.approx(speed / 3.6 * latency / 1000, rel=1e-12, abs=1e-12)
    assert math.isfinite(distance) and distance >= 0


@given(speed=st.floats(min_value=POSITIVE_MIN, max_value=SPEED_KMH_MAX / 2), latency=latencies)
def test_doubling_speed_doubles_distance(speed, latency):
    once = reaction_distance(speed_kmh=speed, latency_ms=latency)["distance_m"]
    twice = reaction_distance(speed_kmh=2 * speed, latency_ms=latency)["distance_m"]
    assert twice == pytest.approx(2 * once, rel=1e-12, abs=1e-12)


@given(speed=speeds, latency=st.floats(min_value=POSITIVE_MIN, max_value=LATENCY_MS_MAX / 2))
def test_doubling_latency_doubles_distance(speed, latency):
    once = reaction_distance(speed_kmh=speed, latency_ms=latency)["distance_m"]
    twice = reaction_distance(speed_kmh=speed, latency_ms=2 * latency)["distance_m"]
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
        (5e-324, 100, "speed_kmh"),
        (50, 1e-12, "latency_ms"),
    ],
)
def test_bad_input_names_the_field(speed, latency, field):
    with pytest.raises(ArithmeticInputError) as error:
        reaction_distance(speed_kmh=speed, latency_ms=latency)
    assert error.value.field == field
