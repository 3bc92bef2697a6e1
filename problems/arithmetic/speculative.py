"""Speculative decoding: tokens gained per target-model step and the speedup, from Leviathan,
Kalman and Matias, 'Fast Inference from Transformers via Speculative Decoding' (ICML 2023,
https://arxiv.org/abs/2211.17192), Eq. (1) and Theorem 3.8."""

from problems.arithmetic.inputs import count_check, fraction_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import number_format

DRAFT_TOKENS_MAX = 64


def speculative(*, acceptance: float, draft_tokens: int, draft_cost: float = 0.0) -> Result:
    """Expected tokens per target step and the walltime speedup (tokens, ×).

    `acceptance` (α) is the chance the target accepts a drafted token; `draft_tokens` (γ) are
    drafted per step; `draft_cost` (c) is one draft step's time as a fraction of one target
    step. Each target step yields (1 − α^(γ+1)) / (1 − α) tokens and costs γ·c + 1.
    """
    alpha = fraction_check(acceptance, field="acceptance", allow_zero=True)
    gamma = count_check(draft_tokens, field="draft_tokens", maximum=DRAFT_TOKENS_MAX)
    cost = number_check(
        draft_cost, field="draft_cost", minimum=0.0, maximum=1e3, allow_minimum=True
    )
    if alpha == 1.0:
        expected = float(gamma + 1)  # the limit of the geometric sum as α → 1
        expression = f"γ + 1 = {gamma} + 1 (every draft accepted)"
    else:
        expected = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        shown = f"{alpha:.10g}"  # the input as given, not rounded to 1 when it is 0.9999999
        expression = f"(1 − {shown}^({gamma} + 1)) ÷ (1 − {shown})"
    step_cost = gamma * cost + 1
    speedup = expected / step_cost
    return Result(
        values={"expected_tokens_per_step": expected, "step_cost": step_cost, "speedup": speedup},
        steps=(
            Step(
                "Expected tokens per target step",
                expression,
                expected,
                "tokens",
                f"{number_format(expected)} tokens",
            ),
            Step(
                "Cost of one step, in target steps",
                f"{gamma} drafts × {number_format(cost)} + 1 target step",
                step_cost,
                "target steps",
                f"{number_format(step_cost)} target steps",
            ),
            Step(
                "Speedup",
                f"{number_format(expected)} ÷ {number_format(step_cost)}",
                speedup,
                "×",
                f"{number_format(speedup)}×",
            ),
        ),
    )
