"""A demo's own parameters, declared once beside its runner: each field's label, kind, limits,
default and help. The web process checks a request against it (a `ParamError` naming the field
becomes a 422) and the demo's partial draws its form from it; the worker gets the cleaned dict.

No Django and no torch: the runner modules that declare schemas are imported by the web
process. Demos that take a prompt (lifecycle, streaming) keep their checks in demos/params.py.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

# Whole numbers longer than this are no parameter's value (as in demos/params.py).
_DIGITS_MAX = 30


class ParamError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: `kind` is "whole", "real", "choice" (one of `choices`, (value, label)
    pairs), "choices" (a list of distinct `choices` values, at least one, kept in the order of
    `choices`; drawn as check boxes) or "bool". Numbers are bounded by `minimum` and `maximum`
    inclusive."""

    name: str
    label: str
    kind: str
    default: object
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[tuple[str, str], ...] = ()
    unit: str = ""
    help: str = ""

    def clean(self, value: object) -> object:
        """`value` checked and converted; ParamError naming this field otherwise."""
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "on", "off"):
                return value.lower() in ("true", "on")
            raise ParamError(self.name, "must be true or false")
        if self.kind == "choices":
            allowed = [c for c, _ in self.choices]
            if isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ParamError(self.name, "must be a list of names")
            unknown = [v for v in value if v not in allowed]
            if unknown:
                raise ParamError(self.name, f"{unknown[0][:40]!r} is not one of "
                                 f"{', '.join(allowed)}")
            picked = [c for c in allowed if c in value]
            if not picked:
                raise ParamError(self.name, "choose at least one")
            return picked
        if self.kind == "choice":
            allowed = [c for c, _ in self.choices]
            if value not in allowed:
                raise ParamError(self.name, f"must be one of {', '.join(allowed)}")
            return value
        whole = self.kind == "whole"
        if isinstance(value, bool):
            raise ParamError(self.name, "must be a number")
        if isinstance(value, str):
            text = value.strip()
            if len(text) > 64:
                raise ParamError(self.name, "must be a number")
            try:
                value = int(text) if whole else float(text)
            except ValueError:
                raise ParamError(self.name, "must be a whole number" if whole
                                 else "must be a number") from None
        if isinstance(value, int) and len(str(abs(value))) > _DIGITS_MAX:
            raise ParamError(self.name, "is far too large")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ParamError(self.name, "must be a finite number")
        if whole and value != int(value):
            raise ParamError(self.name, "must be a whole number")
        value = int(value) if whole else float(value)
        if self.minimum is not None and value < self.minimum:
            raise ParamError(self.name, f"must be at least {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ParamError(self.name, f"must be at most {self.maximum:g}")
        return value


@dataclass(frozen=True)
class ParamSchema:
    """A demo's parameters, and the work a run asks of a worker (tokens, the queue's unit)."""

    specs: tuple[ParamSpec, ...]
    work: Callable[[dict], int] = field(default=lambda values: 0)
    # A check across fields, on the cleaned values: raises ParamError naming the field to fix.
    check: Callable[[dict], None] = field(default=lambda values: None)

    def defaults(self) -> dict:
        return {spec.name: spec.default for spec in self.specs}

    def parse(self, raw: dict) -> "SchemaParams":
        """Check a request's JSON object: unknown names and bad values raise ParamError; a
        parameter left out takes its default."""
        known = {spec.name for spec in self.specs}
        unknown = sorted(name for name in raw if name not in known)
        if unknown:
            raise ParamError(unknown[0], "is not a parameter of this demo")
        values = {spec.name: spec.clean(raw[spec.name]) if spec.name in raw else spec.default
                  for spec in self.specs}
        self.check(values)
        return SchemaParams(values=values, work_tokens=int(self.work(values)))


@dataclass(frozen=True)
class SchemaParams:
    """A run's checked parameters, as the run row stores them."""

    values: dict
    work_tokens: int

    def as_dict(self) -> dict:
        return dict(self.values)
