"""Checks on numeric inputs, so every formula rejects NaN, infinities, negatives and absurd
sizes with an `ArithmeticInputError` naming the field, instead of returning nonsense."""

import math

from problems.arithmetic.errors import ArithmeticInputError

# Caps far beyond any real deployment: large enough never to bite a sensible question,
# small enough that no result overflows to infinity.
TOKENS_MAX = 10**9
USERS_MAX = 10**9
COUNT_MAX = 10**12
RATE_MAX = 1e15
# The smallest positive value a "greater than zero" input accepts: smaller ones are typos or
# probes, and dividing by them would overflow.
POSITIVE_MIN = 1e-9


def number_check(
    value: float,
    *,
    field: str,
    minimum: float = 0.0,
    maximum: float = RATE_MAX,
    allow_minimum: bool = False,
    integer: bool = False,
) -> float:
    """`value` if finite and in range (above `minimum`, or equal when `allow_minimum`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArithmeticInputError(field=field, message="must be a number")
    if not math.isfinite(value):
        raise ArithmeticInputError(field=field, message="must be a finite number")
    if integer and value != int(value):
        raise ArithmeticInputError(field=field, message="must be a whole number")
    if value < minimum or (value == minimum and not allow_minimum):
        relation = "at least" if allow_minimum else "greater than"
        raise ArithmeticInputError(field=field, message=f"must be {relation} {minimum:g}")
    if minimum == 0 and not allow_minimum and value < POSITIVE_MIN:
        raise ArithmeticInputError(field=field, message=f"must be at least {POSITIVE_MIN:g}")
    if value > maximum:
        raise ArithmeticInputError(field=field, message=f"must be at most {maximum:g}")
    return value


def count_check(value: int, *, field: str, maximum: int = COUNT_MAX, minimum: int = 1) -> int:
    """`value` as a whole number from `minimum` to `maximum` inclusive."""
    number_check(
        value, field=field, minimum=minimum, maximum=maximum, allow_minimum=True, integer=True
    )
    return int(value)


def fraction_check(
    value: float, *, field: str, allow_zero: bool = False, allow_one: bool = True
) -> float:
    """`value` as a fraction in (0, 1] (or [0, 1] / (0, 1) as the flags say)."""
    number_check(value, field=field, minimum=0.0, maximum=1.0, allow_minimum=allow_zero)
    if value == 1.0 and not allow_one:
        raise ArithmeticInputError(field=field, message="must be less than 1")
    return float(value)
