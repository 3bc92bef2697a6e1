"""Worked steps and results: what every formula returns so pages can show the working."""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    """One line of working.

    `expression` has the inputs filled in with their units ("2 (K and V) × 32 layers × ...");
    `value` is in `unit`; `display` is the value formatted for people, unit included.
    """

    label: str
    expression: str
    value: float
    unit: str
    display: str

    def to_dict(self) -> dict[str, float | str]:
        return {
            "label": self.label,
            "expression": self.expression,
            "value": self.value,
            "unit": self.unit,
            "display": self.display,
        }


@dataclass(frozen=True)
class Result:
    """The named results of a formula plus the steps that produced them."""

    values: dict[str, float | int | str | bool | list]
    steps: tuple[Step, ...] = field(default_factory=tuple)

    def __getitem__(self, key: str) -> float | int | str | bool | list:
        return self.values[key]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: every value plus `steps`; non-finite floats would break JSON, so refuse."""
        for name, value in self.values.items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, float) and not math.isfinite(item):
                    raise ValueError(f"{name} is not finite")
        return {**self.values, "steps": [step.to_dict() for step in self.steps]}
