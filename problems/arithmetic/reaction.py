"""How far a moving machine travels while its model is still thinking.

A car or robot that waits on inference keeps moving at its current speed until the answer
arrives, so the distance it covers before it can even begin to react is speed × latency.
Plain Python, no Django: the home page's calculator and its tests call `reaction_distance`.
"""

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import POSITIVE_MIN, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import number_format

# Bounds that keep the calculator honest: below is meaningless, above is not a vehicle or
# robot this question is about (the land speed record is about 1,228 km/h; a minute of
# latency is no longer a control loop).
SPEED_KMH_MIN = 0.0  # zero and, apart from it, nothing below POSITIVE_MIN
SPEED_KMH_MAX = 1_000.0
LATENCY_MS_MIN = 0.0
LATENCY_MS_MAX = 60_000.0

METRES_PER_KILOMETRE = 1_000
SECONDS_PER_HOUR = 3_600
MILLISECONDS_PER_SECOND = 1_000


def _checked(value: float, *, field: str, maximum: float, unit: str) -> float:
    value = float(number_check(value, field=field, minimum=0.0, maximum=maximum,
                               allow_minimum=True))
    # Zero is a real answer (standing still, instant inference); a vanishingly small positive
    # value is a typo or a probe, and would underflow when formatted.
    if 0 < value < POSITIVE_MIN:
        raise ArithmeticInputError(field=field,
                                   message=f"must be 0 or at least {POSITIVE_MIN:g} {unit}")
    return value


def distance_text(metres: float) -> str:
    """A distance in the unit that reads best: "8.33 m", "0.278 mm" is "278 µm", never
    "0.000278 m" (a learner reads a bare run of zeros as zero)."""
    if metres == 0 or metres >= 0.1:
        return f"{number_format(metres)} m"
    for scale, unit in ((1e-3, "mm"), (1e-6, "µm"), (1e-9, "nm")):
        if metres >= scale:
            return f"{number_format(metres / scale)} {unit}"
    return f"{number_format(metres)} m"


def _text(value: float) -> str:
    # Four significant figures: enough that each step's shown inputs reproduce its shown result.
    return number_format(value, digits=4)


def reaction_distance(*, speed_kmh: float, latency_ms: float) -> Result:
    """Distance travelled before reacting, in metres.

    speed_kmh: the machine's speed in kilometres per hour (0 to 1,000).
    latency_ms: the model's inference latency in milliseconds (0 to 60,000), from the moment
        the sensor reading is available to the moment the decision is.
    Returns a Result with `speed_kmh` and `latency_ms` (the inputs), `speed_m_per_s` (m/s),
    `latency_s` (s) and `distance_m` (m), and the worked steps.
    Raises ArithmeticInputError naming the field for a value outside those ranges.
    """
    speed_kmh = _checked(speed_kmh, field="speed_kmh", maximum=SPEED_KMH_MAX, unit="km/h")
    latency_ms = _checked(latency_ms, field="latency_ms", maximum=LATENCY_MS_MAX, unit="ms")
    speed_m_per_s = speed_kmh * METRES_PER_KILOMETRE / SECONDS_PER_HOUR
    latency_s = latency_ms / MILLISECONDS_PER_SECOND
    distance_m = speed_m_per_s * latency_s
    steps = (
        Step(
            label="Speed in metres per second",
            expression=(f"{_text(speed_kmh)} km/h × {METRES_PER_KILOMETRE:,} m/km "
                        f"÷ {SECONDS_PER_HOUR:,} s/h"),
            value=speed_m_per_s,
            unit="m/s",
            display=f"{_text(speed_m_per_s)} m/s",
        ),
        Step(
            label="Latency in seconds",
            expression=f"{_text(latency_ms)} ms ÷ {MILLISECONDS_PER_SECOND:,} ms/s",
            value=latency_s,
            unit="s",
            display=f"{_text(latency_s)} s",
        ),
        Step(
            label="Distance before it reacts",
            expression=f"{_text(speed_m_per_s)} m/s × {_text(latency_s)} s",
            value=distance_m,
            unit="m",
            display=distance_text(distance_m),
        ),
    )
    return Result(
        values={
            "speed_kmh": speed_kmh,
            "latency_ms": latency_ms,
            "speed_m_per_s": speed_m_per_s,
            "latency_s": latency_s,
            "distance_m": distance_m,
        },
        steps=steps,
    )


def reaction_texts(result: Result) -> dict[str, str]:
    """The inputs and the distance formatted for people, keyed like the result's values."""
    return {
        "speed_kmh": f"{_text(result['speed_kmh'])} km/h",
        "latency_ms": f"{_text(result['latency_ms'])} ms",
        "distance_m": result.steps[-1].display,
    }


__all__ = ["ArithmeticInputError", "reaction_distance", "reaction_texts"]
