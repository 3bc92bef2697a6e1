"""Speculative decoding: tokens gained per target-model step and the speedup, from Leviathan,
Kalman and Matias, 'Fast Inference from Transformers via Speculative Decoding' (ICML 2023,
https://arxiv.org/abs/2211.17192), Eq. (1) and Theorem 3.8.

The paper's speedup assumes verifying γ + 1 tokens costs one ordinary target step, which holds
while the step is memory-bound (batch 1). Given a model, a GPU and a batch, the verification step
is costed as a roofline bound like any decode step: once the batch makes it compute-bound,
checking γ + 1 tokens per sequence costs up to γ + 1 steps and the gain shrinks, then reverses.
"""

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    decode_attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_flops_get,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    memory_fit,
    params_count_model,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import count_format, number_format, percent_format, seconds_format
from problems.arithmetic.wording import amount_phrase, count_phrase

DRAFT_TOKENS_MAX = 64
TREE_NODES_MAX = 1_024


def speculative(
    *,
    acceptance: float,
    draft_tokens: int,
    draft_cost: float = 0.0,
    model: str | None = None,
    gpu: str | None = None,
    batch: int = 1,
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    mfu: float = 1.0,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    verify_tokens: int | None = None,
) -> Result:
    """Expected tokens per target step and the walltime speedup (tokens, ×).

    `verify_tokens` is how many positions the target checks per sequence in one pass: γ + 1
    for a chain of drafts (the default), more for a tree of candidates (Medusa, EAGLE-2,
    SpecInfer), whose expected yield this formula does not model but whose FLOPs it costs.

    `acceptance` (α) is the chance the target accepts a drafted token; `draft_tokens` (γ) are
    drafted per step; `draft_cost` (c) is one draft step's time as a fraction of one plain
    target step. Each target step yields (1 − α^(γ+1)) / (1 − α) tokens and costs γ·c plus the
    verification step, in plain target steps: 1 when no `model` and `gpu` are given (the
    paper's memory-bound assumption), else the roofline time of a step running γ + 1 tokens
    for each of `batch` sequences over one running 1, with a check that the target's weights,
    the batch's KV and the runtime reserve fit the GPU.
    """
    alpha = fraction_check(acceptance, field="acceptance", allow_zero=True)
    gamma = count_check(draft_tokens, field="draft_tokens", maximum=DRAFT_TOKENS_MAX)
    cost = number_check(
        draft_cost, field="draft_cost", minimum=0.0, maximum=1e3, allow_minimum=True
    )
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    checked = gamma + 1 if verify_tokens is None else count_check(
        verify_tokens, field="verify_tokens", maximum=TREE_NODES_MAX)
    if checked < gamma + 1:
        raise ArithmeticInputError(field="verify_tokens",
                                   message=f"a pass checks at least γ + 1 = {gamma + 1} "
                                   "positions")
    if alpha == 1.0:
        expected = float(gamma + 1)  # the limit of the geometric sum as α → 1
        expression = f"γ + 1 = {gamma} + 1 (every draft accepted)"
    else:
        expected = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        shown = f"{alpha:.10g}"  # the input as given, not rounded to 1 when it is 0.9999999
        expression = f"(1 − {shown}^({gamma} + 1)) ÷ (1 − {shown})"
    verify = _verification(model=model, gpu=gpu, batch=batch, context_tokens=context_tokens,
                           dtype=dtype, kv_dtype=kv_dtype, mfu=mfu,
                           bandwidth_efficiency=bandwidth_efficiency, tokens=checked,
                           memory_fraction=memory_fraction, reserve_gb=reserve_gb)
    ratio = verify["ratio"]
    step_cost = gamma * cost + ratio
    speedup = expected / step_cost
    return Result(
        values={"expected_tokens_per_step": expected, "step_cost": step_cost,
                "speedup": speedup, "verify_ratio": ratio,
                "plain_step_seconds": verify["plain"], "verify_step_seconds": verify["verify"],
                "verify_bound": verify["bound"], **verify["fit"]},
        steps=(
            Step(
                "Expected tokens per target step",
                expression,
                expected,
                "tokens",
                amount_phrase(expected, "tokens"),
            ),
            *verify["steps"],
            Step(
                "Cost of one step, in plain target steps",
                f"{gamma} drafts × {number_format(cost)} + {number_format(ratio)} for "
                "verification",
                step_cost,
                "target steps",
                count_format(step_cost, "target step"),
            ),
            Step(
                "Speedup",
                f"{number_format(expected)} ÷ {number_format(step_cost)}"
                + (" (below 1: a slowdown)" if speedup < 1 else ""),
                speedup,
                "×",
                f"{number_format(speedup)}×",
            ),
            *verify["fit_steps"],
        ),
    )


def _verification(*, model: str | None, gpu: str | None, batch: int, context_tokens: int,
                  dtype: str, kv_dtype: str | None, mfu: float, bandwidth_efficiency: float,
                  tokens: int, memory_fraction: float, reserve_gb: float) -> dict:
    """The verification step's cost in plain target steps, and the steps that show it."""
    if model is None and gpu is None:
        return {"ratio": 1.0, "plain": 0.0, "verify": 0.0, "bound": "memory", "fit": {},
                "fit_steps": (), "steps": (
            Step("Verification, in plain target steps",
                 "assumed memory-bound, as at batch 1: checking the drafts costs one plain step "
                 "(give a model and GPU to cost it at a batch size)", 1.0, "target steps",
                 count_format(1, "target step")),)}
    if model is None or gpu is None:
        field = "model" if model is None else "gpu"
        raise ArithmeticInputError(field=field, message="give both a model and a GPU, or neither")
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens + tokens, field="context_tokens",
                  what=f"the context ({context_tokens:,}) plus the drafts")
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    parts = params_count_model(m)
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    kv = batch * context_tokens * kv_bytes_per_token_model(m, kv_d)
    per_token = (2 * (parts["non_embedding_active"] + parts["head"])
                 + decode_attention_flops_per_token_pair(m) * context_tokens)

    def time(per_sequence: int) -> tuple[float, str]:
        reads = weights_read_model(model=m, tokens=batch * per_sequence, dtype=d, embedding=e)
        memory = (reads["total"] + kv) / bandwidth
        compute = batch * per_sequence * per_token / rate
        return max(memory, compute), "compute" if compute >= memory else "memory"

    plain, plain_bound = time(1)
    verify, verify_bound = time(tokens)
    ratio = verify / plain
    sequences = count_format(batch, "sequence")
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weight_bytes_model(model=m, dtype=d, embedding=e)["total"],
        kv_bytes=batch * (context_tokens + tokens) * kv_bytes_per_token_model(m, kv_d),
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
        per_gpu="for the target model (the draft model's own weights and KV need room on top)",
    )
    return {"ratio": ratio, "plain": plain, "verify": verify, "bound": verify_bound,
            "fit": fit, "fit_steps": fit_steps, "steps": (
        Step(f"Plain target step ({plain_bound}-bound)",
             f"{sequences} × 1 token at {count_format(context_tokens, 'token')} of context",
             plain, "s", seconds_format(plain)),
        Step(f"Verification step ({verify_bound}-bound)",
             f"{sequences} × {tokens} tokens checked: the weights and KV are read once, "
             f"the FLOPs grow {tokens} times", verify, "s", seconds_format(verify)),
        Step("Verification, in plain target steps",
             f"{seconds_format(verify)} ÷ {seconds_format(plain)}", ratio, "target steps",
             count_format(ratio, "target step")),
    )}


def speedup_memory_bound(*, acceptance: float, draft_tokens: int, draft_cost: float) -> float:
    """Leviathan et al.'s Theorem 3.8 (×): (1 − α^(γ+1)) / ((1 − α)(γ·c + 1)), the walltime
    gain while verifying costs one plain step. α 0.8, γ 4, c 0.05: 3.3616 / 1.2 = 2.8013."""
    alpha, gamma = acceptance, draft_tokens
    expected = gamma + 1.0 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return expected / (gamma * draft_cost + 1)


def speedup_by_gamma(*, acceptance: float, draft_cost: float,
                     gamma_max: int = 16) -> list[tuple[int, float]]:
    """(γ, memory-bound speedup) for γ = 1 … `gamma_max`."""
    return [(g, speedup_memory_bound(acceptance=acceptance, draft_tokens=g,
                                     draft_cost=draft_cost)) for g in range(1, gamma_max + 1)]


def acceptance_by_position(*, acceptance: float, draft_tokens: int) -> list[float]:
    """Chance the j-th guess of a step is kept (j = 1 … γ): α^j, every guess before it having
    been kept too, when each is accepted independently with probability α."""
    return [acceptance ** j for j in range(1, draft_tokens + 1)]


def batch_where(*, predicate, high: int = USERS_MAX) -> int | None:
    """The smallest batch in 1 … `high` where `predicate(batch)` holds (it must stay true
    beyond), or None."""
    if not predicate(high):
        return None
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(middle):
            high = middle
        else:
            low = middle
    return high


NEARLY_FREE = 1.1  # verification "nearly free": at most 10% dearer than a plain step


def speculative_plan(
    *,
    acceptance: float,
    draft_tokens: int,
    draft_cost: float,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1_000,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    mfu: float = 0.5,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    verify_tokens: int | None = None,
) -> Result:
    """Speculative decoding for one model on one GPU (×, sequences): the speedup at `batch`
    from the roofline, the best γ at batch 1 under the paper's memory-bound assumption (0, do
    not speculate, when no γ gains: α ≤ c, Corollary 3.9), the chance each guess is kept, and,
    among the batches the GPU's memory holds, the batch from which verifying costs more than
    `NEARLY_FREE` plain steps and the batch from which speculation is a slowdown."""
    at = dict(acceptance=acceptance, draft_tokens=draft_tokens, draft_cost=draft_cost,
              model=model, gpu=gpu, context_tokens=context_tokens, dtype=dtype,
              kv_dtype=kv_dtype, mfu=mfu, bandwidth_efficiency=bandwidth_efficiency,
              memory_fraction=memory_fraction, reserve_gb=reserve_gb,
              verify_tokens=verify_tokens)
    here = speculative(**at, batch=batch)
    by_gamma = speedup_by_gamma(acceptance=acceptance, draft_cost=draft_cost,
                                gamma_max=DRAFT_TOKENS_MAX // 4)
    # The best γ is searched over every γ the form accepts, not only the plotted ones: at a
    # high α and a cheap draft it lies past 16, and a "best" below the chosen γ's own speedup
    # would contradict the page.
    best_gamma, best = max(speedup_by_gamma(acceptance=acceptance, draft_cost=draft_cost,
                                            gamma_max=DRAFT_TOKENS_MAX), key=lambda p: p[1])
    if best <= 1:  # α ≤ c: every γ loses (Corollary 3.9), so the best is not to speculate
        best_gamma, best = 0, 1.0
    positions = acceptance_by_position(acceptance=acceptance, draft_tokens=draft_tokens)
    # The batches worth searching are those whose target KV fits beside the weights.
    memory_batch = batch_where(predicate=lambda b: not speculative(**at, batch=b)["fits"])
    held = USERS_MAX if memory_batch is None else memory_batch - 1
    costly = (batch_where(predicate=lambda b: speculative(**at, batch=b)["verify_ratio"]
                          > NEARLY_FREE, high=held) if held >= 1 else None)
    slower = (batch_where(predicate=lambda b: speculative(**at, batch=b)["speedup"] < 1,
                          high=held) if held >= 1 else None)
    paper = speedup_memory_bound(acceptance=acceptance, draft_tokens=draft_tokens,
                                 draft_cost=draft_cost)
    floor = (1 + acceptance) / (1 + draft_cost)
    steps = (
        *here.steps,
        Step("Memory-bound speedup (the paper's Theorem 3.8)",
             f"{number_format(here['expected_tokens_per_step'])} ÷ ({draft_tokens} × "
             f"{number_format(draft_cost)} + 1)", paper, "×", f"{number_format(paper)}×"),
        Step("Best γ while verification is free",
             f"the γ from 1 to {DRAFT_TOKENS_MAX} with the largest "
             "(1 − α^(γ+1)) ÷ ((1 − α)(γc + 1)), or none when none exceeds 1 (α ≤ c)",
             best_gamma, "tokens",
             f"γ = {best_gamma} ({number_format(best)}×)" if best_gamma
             else "do not speculate"),
        Step("Largest batch the GPU's memory holds",
             "the target's weights, reserve, and each sequence's KV at this context plus the "
             "checked positions", held, "sequences",
             count_phrase(held, "sequence") if memory_batch is not None
             else "more than any batch searched"),
        Step("Chance the last guess is kept", f"α^γ = {number_format(acceptance)}^"
             f"{draft_tokens}", positions[-1], "", percent_format(positions[-1])),
        Step(f"Verification no longer nearly free (over {number_format(NEARLY_FREE)} plain "
             "steps) from", f"the smallest batch memory holds where the checked tokens per "
             f"sequence cost more than {number_format(NEARLY_FREE)} plain steps, at "
             f"{count_format(context_tokens, 'token')} of context",
             costly or 0, "sequences",
             count_format(costly, "sequence") if costly else "never"),
        Step("Speculation slower than plain decoding from",
             "the smallest batch where the speedup falls below 1", slower or 0, "sequences",
             count_format(slower, "sequence") if slower else "never"),
    )
    return Result(values={**here.values, "memory_bound_speedup": paper,
                          "paper_floor_speedup": floor,
                          "best_gamma": best_gamma, "best_gamma_speedup": best,
                          "speedup_by_gamma": [s for _, s in by_gamma],
                          "acceptance_by_position": positions,
                          "costly_batch": costly or 0, "slower_batch": slower or 0,
                          "memory_batch": held if memory_batch is not None else 0},
                  steps=steps)
