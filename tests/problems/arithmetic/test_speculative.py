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


def test_the_gain_shrinks_once_verification_is_compute_bound() -> None:
    """Llama 3 8B on an H100 at 1,000 tokens of context, α 0.7, γ 4, c 0.05: at batch 1 the
    verification of 5 tokens per sequence still only reads the 15 GB of weights and the KV
    (memory-bound), so it costs one plain step: (1 − 0.7⁵) ÷ 0.3 = 2.77 tokens ÷ (4 × 0.05 +
    1) = 2.31×. At batch 512, 5 tokens × 512 sequences of FLOPs outrun the reads: the
    verification costs 1.64 plain steps and the speedup falls to 2.77 ÷ 1.84 = 1.51×."""
    kwargs = {"acceptance": 0.7, "draft_tokens": 4, "draft_cost": 0.05, "model": "llama-3-8b",
              "gpu": "h100-sxm", "context_tokens": 1000}
    one = speculative(batch=1, **kwargs)
    assert one["verify_bound"] == "memory"
    assert one["verify_ratio"] == pytest.approx(1.0, abs=0.001)
    assert one["speedup"] == pytest.approx(2.7731 / 1.2, abs=0.005)
    big = speculative(batch=512, **kwargs)
    assert big["verify_bound"] == "compute"
    assert big["verify_ratio"] == pytest.approx(1.64, abs=0.01)
    assert big["speedup"] < one["speedup"]


def test_model_and_gpu_come_together() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        speculative(acceptance=0.7, draft_tokens=4, model="llama-3-8b")
    assert error.value.field == "gpu"


def test_memory_bound_speedup_by_hand() -> None:
    from problems.arithmetic.speculative import (
        acceptance_by_position,
        speedup_by_gamma,
        speedup_memory_bound,
    )

    # Leviathan et al. Theorem 3.8: α 0.8, γ 4, c 0.05 → 3.3616 / 1.2 = 2.8013.
    assert speedup_memory_bound(acceptance=0.8, draft_tokens=4, draft_cost=0.05) == (
        pytest.approx(2.80133, rel=1e-5))
    # At γ = 1 it is (1 + α) / (1 + c), the paper's Corollary 3.9 bound.
    assert speedup_memory_bound(acceptance=0.6, draft_tokens=1, draft_cost=0.1) == (
        pytest.approx(1.6 / 1.1))
    assert acceptance_by_position(acceptance=0.5, draft_tokens=3) == [0.5, 0.25, 0.125]
    # The best γ for α 0.7, c 0.05 is 6 (2.35×): γ 5 and 7 both give less.
    table = dict(speedup_by_gamma(acceptance=0.7, draft_cost=0.05, gamma_max=16))
    assert max(table, key=table.get) == 6


def test_plan_finds_where_verification_stops_being_free() -> None:
    from problems.arithmetic.speculative import speculative, speculative_plan

    inputs = dict(acceptance=0.7, draft_tokens=4, draft_cost=0.05, model="llama-3-8b",
                  gpu="h100-sxm", context_tokens=1000, mfu=0.5)
    r = speculative_plan(**inputs)
    costly, slower = r["costly_batch"], r["slower_batch"]
    assert 1 < costly < slower
    assert speculative(**inputs, batch=costly)["verify_ratio"] > 1.1
    assert speculative(**inputs, batch=costly - 1)["verify_ratio"] <= 1.1
    assert speculative(**inputs, batch=slower)["speedup"] < 1
    assert speculative(**inputs, batch=slower - 1)["speedup"] >= 1


def test_tree_verification_multiplies_the_flops() -> None:
    """Review P10-K5. Llama 3 8B on an H100 at 50% MFU, 1,000 tokens, batch 3: a chain checks
    5 positions per sequence (15 tokens, memory-bound, one plain step); a 64-node tree checks
    192 tokens, about 3.1×10¹² FLOP, 6.2 ms against about 5 ms of reads: compute-bound and
    dearer than a plain step."""

    at = dict(acceptance=0.7, draft_tokens=4, draft_cost=0.05, model="llama-3-8b",
              gpu="h100-sxm", batch=3, context_tokens=1_000, mfu=0.5)
    assert speculative(**at)["verify_ratio"] == pytest.approx(1.0, abs=0.01)
    tree = speculative(**at, verify_tokens=64)
    assert tree["verify_bound"] == "compute" and tree["verify_ratio"] > 1.1
    with pytest.raises(ArithmeticInputError):
        speculative(**at, verify_tokens=3)


def test_no_gamma_pays_when_alpha_is_at_most_c() -> None:
    """Review P10-M9: α = c = 0.3 gives (1.3 ÷ 1.3) = 1 at γ = 1 and less beyond: γ = 0."""
    from problems.arithmetic.speculative import speculative_plan
    r = speculative_plan(acceptance=0.3, draft_tokens=4, draft_cost=0.3, model="llama-3-8b",
                         gpu="h100-sxm")
    assert r["best_gamma"] == 0 and r["best_gamma_speedup"] == 1.0
    r = speculative_plan(acceptance=0.7, draft_tokens=4, draft_cost=0.05,
                         model="llama-3.1-70b", gpu="h200", dtype="fp8", context_tokens=8_000)
    assert r["memory_batch"] == 22 and r["costly_batch"] == 0
