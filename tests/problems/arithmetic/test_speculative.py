"""Speculative decoding, from Leviathan et al. 2023 (arXiv:2211.17192)."""

import pytest

from problems.arithmetic import ArithmeticInputError, speculative


def test_expected_tokens_follow_equation_1() -> None:
    # Eq. (1): E[tokens] = (1 − α^(γ+1)) / (1 − α); α = 0.8, γ = 4 → 3.3616.
    result = speculative(acceptance=0.8, draft_tokens=4)
    assert result["expected_tokens_per_step"] == pytest.approx((1 - 0.8**5) / 0.2)
    assert result["expected_tokens_per_step"] == pytest.approx(3.3616)


def test_limits() -> None:
    assert speculative(acceptance=0.0, draft_tokens=5)["expected_tokens_per_step"] == 1
    assert speculative(acceptance=1.0, draft_tokens=5)["expected_tokens_per_step"] == 6


def test_speedup_pays_for_the_draft() -> None:
    # Theorem 3.8: speedup = (1 − α^(γ+1)) / ((1 − α)(γc + 1)).
    result = speculative(acceptance=0.8, draft_tokens=4, draft_cost=0.05)
    assert result["speedup"] == pytest.approx(3.3616 / 1.2)
    # A draft as slow as the target with poor acceptance makes things slower.
    assert speculative(acceptance=0.3, draft_tokens=4, draft_cost=1.0)["speedup"] < 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"acceptance": 1.2, "draft_tokens": 3}, "acceptance"),
        ({"acceptance": -0.1, "draft_tokens": 3}, "acceptance"),
        ({"acceptance": 0.5, "draft_tokens": 0}, "draft_tokens"),
        ({"acceptance": 0.5, "draft_tokens": 3, "draft_cost": -1}, "draft_cost"),
    ],
)
def test_bad_input(kwargs: dict, field: str) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        speculative(**kwargs)
    assert error.value.field == field


def test_the_expression_shows_acceptance_as_given() -> None:
    step = speculative(acceptance=0.9999999, draft_tokens=4).steps[0]
    assert "0.9999999" in step.expression
