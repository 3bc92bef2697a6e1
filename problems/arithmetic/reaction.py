"""How far a moving machine travels while its model is still thinking.

A car or robot that waits on inference keeps moving at its current speed until the answer
arrives, so the distance covered before it can even begin to react is speed × latency.
Plain Python, no Django: the home page's calculator and its tests call `reaction_distance`.

Self-contained on purpose: the step type here is local, so this file depends on nothing else
in problems/arithmetic.
"""

import math
from dataclasses import dataclass

# Bounds that keep the calculator honest: below is meaningless, above is not a vehicle or
# robot this question is about (the land speed record is about 1,228 km/h; a minute of
# latency is no longer a control loop).
SPEED_KMH_MIN = 0.0
SPEED_KMH_MAX = 1_000.0
LATENCY_MS_MIN = 0.0
LATENCY_MS_MAX = 60_000.0

METRES_PER_KILOMETRE = 1_000
SECONDS_PER_HOUR = 3_600
MILLISECONDS_PER_SECOND = 1_000


@dataclass(frozen=True)
class ReactionStep:
    """One line of worked arithmetic: what it is, the sum with its inputs, the result."""

    label: str
    expression: str
    value: float
    unit: str

    @property
    def value_text(self) -> str:
        return number_text(self.value)

    @property
    def display(self) -> str:
        """The value formatted for people with its unit, as the shared steps table shows it."""
        return f"{self.value_text} {self.unit}"


@dataclass(frozen=True)
class ReactionResult:
    speed_kmh: float
    latency_ms: float
    speed_m_per_s: float
    latency_s: float
    distance_m: float
    steps: tuple[ReactionStep, ...]

    @property
    def texts(self) -> dict[str, str]:
        """The inputs and the distance formatted for people, keyed like the fields."""
        return {"speed_kmh": number_text(self.speed_kmh),
                "latency_ms": number_text(self.latency_ms),
                "distance_m": number_text(self.distance_m)}


class ReactionInputError(ValueError):
    """An input outside what the formula accepts; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def number_text(value: float, *, decimals: int = 2) -> str:
    """A number for people: thousands separators, at most `decimals` places (more below 1, so
    that three significant digits survive: 0.005, not 0.01), no trailing zeros."""
    if 0 < abs(value) < 1:
        decimals = max(decimals, 2 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _checked(value: float, *, field: str, low: float, high: float, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReactionInputError(field, "must be a number")
    if not math.isfinite(value):
        raise ReactionInputError(field, "must be a finite number")
    if value < low:
        raise ReactionInputError(field, f"must be at least {number_text(low)} {unit}")
    if value > high:
        raise ReactionInputError(field, f"must be at most {number_text(high)} {unit}")
    return float(value)


def reaction_distance(*, speed_kmh: float, latency_ms: float) -> ReactionResult:
    """Distance travelled before reacting, in metres.

    speed_kmh: the machine's speed in kilometres per hour (0 to 1,000).
    latency_ms: the model's inference latency in milliseconds (0 to 60,000), from the moment
        the sensor reading is available to the moment the decision is.
    Returns the speed in m/s, the latency in s, the distance in m and the worked steps.
    Raises ReactionInputError naming the field for a value outside those ranges.
    """
    speed_kmh = _checked(speed_kmh, field="speed_kmh", low=SPEED_KMH_MIN, high=SPEED_KMH_MAX,
                         unit="km/h")
    latency_ms = _checked(latency_ms, field="latency_ms", low=LATENCY_MS_MIN,
                          high=LATENCY_MS_MAX, unit="ms")
    speed_m_per_s = speed_kmh * METRES_PER_KILOMETRE / SECONDS_PER_HOUR
    latency_s = latency_ms / MILLISECONDS_PER_SECOND
    distance_m = speed_m_per_s * latency_s
    steps = (
        ReactionStep(
            label="Speed in metres per second",
            expression=(f"{number_text(speed_kmh)} km/h × {METRES_PER_KILOMETRE:,} m/km "
                        f"÷ {SECONDS_PER_HOUR:,} s/h"),
            value=speed_m_per_s,
            unit="m/s",
        ),
        ReactionStep(
            label="Latency in seconds",
            expression=f"{number_text(latency_ms)} ms ÷ {MILLISECONDS_PER_SECOND:,} ms/s",
            value=latency_s,
            unit="s",
        ),
        ReactionStep(
            label="Distance before it reacts",
            expression=(f"{number_text(speed_m_per_s)} m/s × "
                        f"{number_text(latency_s)} s"),
            value=distance_m,
            unit="m",
        ),
    )
    return ReactionResult(
        speed_kmh=speed_kmh,
        latency_ms=latency_ms,
        speed_m_per_s=speed_m_per_s,
        latency_s=latency_s,
        distance_m=distance_m,
        steps=steps,
    )
