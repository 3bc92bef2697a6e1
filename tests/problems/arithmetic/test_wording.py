"""The phrasing helper at its edges: ratios never under one with a comparative, verbs from the
sign, counts of whole things with their nouns, shares clamped, undefined values said."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from problems.arithmetic.wording import (
    amount_phrase,
    change_phrase,
    count_phrase,
    direction_verb,
    finite_or,
    list_phrase,
    plural,
    ratio_phrase,
    share_phrase,
    singular,
    times_phrase,
    whole_count,
)


def test_ratio_above_and_below_one():
    # The review's case: 0.816 "less" means 1/0.816 = 1.23× more.
    assert ratio_phrase(1.0, 0.816) == "1.23× more"
    assert ratio_phrase(1.0, 4.66) == "4.66× less"
    assert ratio_phrase(1.02, 1.0) == "about the same"
    assert ratio_phrase(3, 1, more="faster", less="slower") == "3× faster"


@given(st.floats(1e-6, 1e6), st.floats(1e-6, 1e6))
def test_ratio_never_under_one(value, reference):
    text = ratio_phrase(value, reference)
    if text != "about the same":
        assert float(text.split("×")[0].replace(",", "")) >= 1


def test_ratio_refuses_zero():
    with pytest.raises(ValueError):
        ratio_phrase(0, 1)


def test_times_phrase():
    assert times_phrase(2.5, 1) == "2.5 times"
    assert times_phrase(0.4, 1) == "40% of"
    assert times_phrase(1.01, 1) == "about the same as"
    assert times_phrase(0.0001, 1) == "under 0.1% of"


def test_direction_verbs():
    assert direction_verb(2) == "rises"
    assert direction_verb(-2) == "falls"
    assert direction_verb(0) == "does not change"
    assert change_phrase(4.8, 7.2) == "rises from 4.8 to 7.2"
    assert change_phrase(10, 4) == "falls from 10 to 4"
    assert change_phrase(4.8, 4.8) == "does not change (4.8)"


def test_counts_and_plurals():
    assert count_phrase(0, "replica") == "no replicas"
    assert count_phrase(1, "replica") == "1 replica"
    assert count_phrase(3, "replica") == "3 replicas"
    assert count_phrase(12_800, "request") == "12,800 requests"
    assert count_phrase(1, "query") == "1 query"
    assert count_phrase(2, "query") == "2 queries"
    assert count_phrase(2, "batch") == "2 batches"
    assert count_phrase(2, "GPU") == "2 GPUs"
    assert count_phrase(2, "token of context") == "2 tokens of context"
    assert plural("sequence") == "sequences"


def test_counts_refuse_fractions_unless_rounding_is_said():
    with pytest.raises(ValueError):
        count_phrase(2.5, "GPU")
    # The fewest that suffice is a ceiling; the most that fit is a floor.
    assert count_phrase(5.1, "GPU", rounding="ceil") == "6 GPUs"
    assert count_phrase(5.9, "sequence", rounding="floor") == "5 sequences"
    assert count_phrase(0.4, "request", rounding="floor") == "no requests"
    # Float noise never adds a GPU.
    assert whole_count(3.0000000000001, rounding="ceil") == 3


def test_singular_and_amounts():
    assert singular("tokens") == "token"
    assert singular("queries") == "query"
    assert singular("GPUs") == "GPU"
    assert singular("ms") == "ms"
    assert singular("tokens/s") == "tokens/s"
    assert amount_phrase(1, "tokens") == "1 token"
    assert amount_phrase(1_000, "tokens") == "1,000 tokens"
    assert amount_phrase(50, "%") == "50%"


def test_shares_clamped_and_never_rounded_to_a_bound():
    assert share_phrase(0.25) == "25%"
    assert share_phrase(0.0004) == "under 0.1%"
    assert share_phrase(0.9996) == "over 99.9%"
    assert share_phrase(4.07) == "100%"
    assert share_phrase(-0.2) == "0%"
    assert share_phrase(0) == "0%"


@given(st.floats(0, 1, exclude_min=True, exclude_max=True))
def test_a_share_strictly_between_bounds_never_reads_as_a_bound(fraction):
    assert share_phrase(fraction) not in ("0%", "100%")


def test_undefined_said_in_words():
    assert finite_or(math.inf, str, undefined="unbounded: the queue grows without end") == (
        "unbounded: the queue grows without end")
    assert finite_or(None, str, undefined="none") == "none"
    assert finite_or(2.0, lambda v: f"{v:.1f} s", undefined="-") == "2.0 s"


def test_lists():
    assert list_phrase([]) == "none"
    assert list_phrase(["a"]) == "a"
    assert list_phrase(["a", "b", "c"]) == "a, b and c"
