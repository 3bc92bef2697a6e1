"""The few phrasings every problem's prose needs, chosen by the numbers so that a sentence stays
true at every input, not only at the defaults (COURSE.md, "Correct at every input").

- `ratio_phrase`: "1.23× more", "4.66× less", "about the same": never a ratio under one with a
  comparative;
- `change_phrase` and `direction_verb`: "rises", "falls", "does not change", from the sign;
- `count_phrase` and `whole_count`: "no replicas", "1 replica", "3 replicas"; whole things are
  never fractional, and the caller says which rounding it means (a ceiling for "the fewest N
  that pass", a floor for "at most N that fit");
- `share_phrase`: a share clamped to 0–100%, "under 0.1%" rather than "0%" when it is not zero;
- `finite_or`: a number, or a sentence when it is undefined or infinite at these inputs.

Plain Python, no Django: the content modules and the calculators' steps call it.
"""

import math
from collections.abc import Callable

from problems.arithmetic.units import bytes_in, number_format

# Two quantities within this relative distance read "about the same" (a 1.03× difference is
# below what a back-of-the-envelope figure can tell apart).
SAME_WITHIN = 0.05

# Nouns whose plural is not the noun plus "s".
_IRREGULAR = {
    "query": "queries",
    "batch": "batches",
    "box": "boxes",
    "pass": "passes",
    "copy": "copies",
    "entry": "entries",
    "policy": "policies",
    "memory": "memories",
    "bus": "buses",
    "child": "children",
    "person": "people",
    "this": "these",
    "is": "are",
    "was": "were",
    "has": "have",
    "does": "do",
}


def plural(noun: str) -> str:
    """The plural of a noun as the course uses it: "replica" → "replicas", "query" →
    "queries", "GPU" → "GPUs"; a noun of several words takes it on its first word when the
    rest is a qualifier ("token of context" → "tokens of context")."""
    head, space, rest = noun.partition(" ")
    if rest and rest.split(" ", 1)[0] in {"of", "per", "a", "in", "on", "at", "for"}:
        return plural(head) + space + rest
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    lower = noun.lower()
    if lower.endswith(("s", "x", "ch", "sh")) and not noun.isupper():
        return noun + "es"
    if lower.endswith("y") and len(noun) > 1 and lower[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def singular(noun: str) -> str:
    """The singular of a plural noun ("tokens" → "token", "queries" → "query", "GPUs" →
    "GPU"); a unit symbol ("ms", "GB", "tokens/s") comes back as it is."""
    for one, many in _IRREGULAR.items():
        if noun == many:
            return one
    if len(noun) <= 2 or not noun.replace(" ", "").isalpha() or not noun.endswith("s"):
        return noun
    head, space, rest = noun.partition(" ")
    if rest:
        return singular(head) + space + rest if head.endswith("s") else noun
    if noun.endswith("ies"):
        return noun[:-3] + "y"
    if noun.endswith(("ches", "shes", "xes", "sses")):
        return noun[:-2]
    return noun[:-1]


def amount_phrase(value: float, unit: str, *, digits: int = 3) -> str:
    """A number with its unit, the unit agreeing with it: "1 token", "1,000 tokens", "4.8 ms",
    "1 GPU" (a unit given in the plural is made singular for exactly one)."""
    text = number_format(value, digits=digits)
    if not unit:
        return text
    if unit == "%":
        return f"{text}%"
    return f"{text} {singular(unit) if text in ('1', '-1') else unit}"


def whole_count(value: float, *, rounding: str) -> int:
    """A count of whole things from a computed value: `rounding="ceil"` for the fewest that
    suffice (5.1 GPUs needed → 6), `"floor"` for the most that fit (5.9 sequences fit → 5),
    `"nearest"` for an estimate said aloud. A value within 1e-9 of a whole number is that
    number (float noise never adds a GPU)."""
    if not math.isfinite(value):
        raise ValueError(f"a count must be finite, not {value}")
    nearest = round(value)
    if abs(value - nearest) <= 1e-9 * max(1.0, abs(value)):
        return int(nearest)
    if rounding == "ceil":
        return math.ceil(value)
    if rounding == "floor":
        return math.floor(value)
    if rounding == "nearest":
        return int(nearest)
    raise ValueError(f"rounding must be 'ceil', 'floor' or 'nearest', not {rounding!r}")


def count_phrase(value: float, noun: str, *, rounding: str = "exact", zero: str = "no",
                 plural_noun: str | None = None) -> str:
    """A count of whole things with its noun: "no replicas", "1 replica", "3 replicas",
    "12,800 requests".

    `rounding` says how a computed value becomes whole ("ceil", "floor", "nearest"); the
    default, "exact", refuses a value that is not already whole, so a fractional count of
    things is a bug found in a test rather than a sentence on a page. `zero` is the word for
    none ("no", or "zero" where "no" reads badly)."""
    if rounding == "exact":
        whole = whole_count(value, rounding="nearest")
        if abs(value - whole) > 1e-9 * max(1.0, abs(value)):
            raise ValueError(f"{value} {noun}: a count of whole things must be whole; "
                             "say which rounding is meant")
    else:
        whole = whole_count(value, rounding=rounding)
    many = plural_noun or plural(noun)
    if whole == 0:
        return f"{zero} {many}"
    return f"{number_format(whole)} {noun if abs(whole) == 1 else many}"


def noun_for(value: float, noun: str, *, plural_noun: str | None = None) -> str:
    """Just the noun, singular or plural to agree with `value` ("1 GPU", "0.5 GPUs")."""
    return noun if number_format(value) in ("1", "-1", "−1") else (plural_noun or plural(noun))


def ratio_phrase(value: float, reference: float, *, more: str = "more", less: str = "less",
                 same: str = "about the same", digits: int = 3,
                 within: float = SAME_WITHIN) -> str:
    """How `value` compares with `reference`, as a ratio of at least one with the comparative
    that fits: ratio_phrase(1.23, 1) → "1.23× more"; ratio_phrase(1, 4.66) → "4.66× less";
    within 5% → "about the same". `more`/`less` may be any pair ("faster"/"slower",
    "larger"/"smaller"). Both values must be positive and finite."""
    if not (value > 0 and reference > 0 and math.isfinite(value) and math.isfinite(reference)):
        raise ValueError(f"a ratio needs two positive finite values, not {value} and {reference}")
    ratio = value / reference
    if abs(ratio - 1) <= within:
        return same
    if ratio > 1:
        return f"{number_format(ratio, digits=digits)}× {more}"
    return f"{number_format(1 / ratio, digits=digits)}× {less}"


def times_phrase(value: float, reference: float, *, digits: int = 3,
                 within: float = SAME_WITHIN) -> str:
    """`value` as a multiple or a fraction of `reference`, for "X is … the Y": "2.5 times",
    "about the same as", "40% of". Never "0.4 times"."""
    if not (value >= 0 and reference > 0 and math.isfinite(value) and math.isfinite(reference)):
        raise ValueError(f"a ratio needs finite values and a positive reference, not "
                         f"{value} and {reference}")
    ratio = value / reference
    if abs(ratio - 1) <= within:
        return "about the same as"
    if ratio > 1:
        return f"{number_format(ratio, digits=digits)} times"
    return f"{share_phrase(ratio)} of"


def direction_verb(change: float, *, rises: str = "rises", falls: str = "falls",
                   same: str = "does not change", within: float = 0.0) -> str:
    """The verb for a change from its sign: "rises", "falls" or "does not change" (a change
    no larger than `within` in size counts as none)."""
    if not math.isfinite(change):
        raise ValueError(f"a change must be finite, not {change}")
    if abs(change) <= within:
        return same
    return rises if change > 0 else falls


def change_phrase(before: float, after: float, *, fmt: Callable[[float], str] = number_format,
                  rises: str = "rises", falls: str = "falls",
                  same: str = "does not change", within: float = 1e-9) -> str:
    """A change said with its verb and its amount: "rises from 4.8 ms to 7.2 ms", "falls from
    10 to 4", "does not change (4.8 ms)". `within` is relative: changes smaller than that share
    of the larger value are none."""
    scale = max(abs(before), abs(after))
    verb = direction_verb(after - before, rises=rises, falls=falls, same=same,
                          within=within * scale)
    if verb == same:
        return f"{same} ({fmt(after)})"
    return f"{verb} from {fmt(before)} to {fmt(after)}"


def share_phrase(fraction: float, *, digits: int = 3) -> str:
    """A share as a percentage clamped to 0–100%, never "0%" or "100%" when it is neither:
    0.0004 → "under 0.1%", 0.9996 → "over 99.9%", 0.25 → "25%"."""
    if not math.isfinite(fraction):
        raise ValueError(f"a share must be finite, not {fraction}")
    fraction = min(1.0, max(0.0, fraction))
    if fraction == 0:
        return "0%"
    if fraction == 1:
        return "100%"
    if fraction < 0.001:
        return "under 0.1%"
    if fraction > 0.999:
        return "over 99.9%"
    # Rounding to the shown digits must not reach a bound the share does not: 99.67% to two
    # digits would read "100%", so show one more digit until it does not (between 0.1% and
    # 99.9%, three decimals always suffice).
    text = number_format(fraction * 100, digits=digits)
    while text in ("100", "0") and digits < 6:
        digits += 1
        text = number_format(fraction * 100, digits=digits)
    return f"{text}%"


def finite_or(value: float | None, fmt: Callable[[float], str], *, undefined: str) -> str:
    """`fmt(value)` when the value is a finite number; otherwise `undefined`, a sentence
    fragment that says why there is none ("unbounded: the queue grows without end")."""
    if value is None or not math.isfinite(value):
        return undefined
    return fmt(value)


def list_phrase(items: list[str] | tuple[str, ...], *, conjunction: str = "and",
                empty: str = "none") -> str:
    """Items joined as prose: "a", "a and b", "a, b and c"; `empty` when there are none (never
    an empty "()")."""
    items = [item for item in items if item]
    if not items:
        return empty
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def ordinal(n: int) -> str:
    """A whole rank as English writes it: "1st", "2nd", "3rd", "11th", "1,181st", "1,195th"."""
    n = int(n)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def bytes_phrase(count: float, *, digits: int = 2) -> str:
    """A byte count in the decimal unit it reads best in: terabytes from one, smaller units
    down to a tenth of themselves: 1.5e11 → "150 GB" (not "0.15 TB"), 1.7e8 → "0.17 GB",
    1.1e7 → "11 MB" (not "0.011 GB"), 2.1e12 → "2.1 TB" (not "2,100 GB"). For prose; a working
    that compares figures keeps one unit throughout."""
    for unit, floor in (("TB", 1e12), ("GB", 1e8), ("MB", 1e5), ("kB", 1e2)):
        if abs(count) >= floor:
            return bytes_in(count, unit, digits=digits)
    return bytes_in(count, "B", digits=digits)


def params_phrase(count: float, *, digits: int = 3) -> str:
    """A parameter count as said aloud: "8.03 billion", "671 billion", "5.4 million"."""
    if count >= 1e9:
        return f"{number_format(count / 1e9, digits=digits)} billion"
    if count >= 1e6:
        return f"{number_format(count / 1e6, digits=digits)} million"
    return number_format(count)
