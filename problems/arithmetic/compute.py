"""Prefill compute: FLOPs of a prompt (the linear layers plus causal attention) and the time it
takes at a given model FLOPs utilisation (MFU)."""

from problems.arithmetic.catalog import Dtype, Gpu, Model, dtype_get, gpu_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import flops_format, flops_rate_format, number_format, seconds_format


def peak_flops_get(*, gpu: Gpu, dtype: Dtype) -> float:
    """The dense tensor-core peak of `gpu` for `dtype`'s matmuls (FLOP/s)."""
    rate = gpu.rate_get(dtype.compute)
    if rate is None:
        raise ArithmeticInputError(
            field="dtype",
            message=f"the {gpu.name} has no {dtype.compute.upper()} tensor cores for {dtype.name}",
        )
    return rate


def attention_flops_per_token_pair(model: Model) -> int:
    """FLOPs of attention for one (query, key) pair summed over heads and layers (FLOP).

    Scores cost 2 × d_qk per head (multiply and add), the weighted sum of values 2 × d_v.
    """
    if model.attention == "MLA":
        d_qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        d_v = model.v_head_dim
    else:
        d_qk = d_v = model.head_dim
    return model.layers * model.heads * 2 * (d_qk + d_v)


def prefill_flops_model(model: Model, tokens: int) -> dict[str, float]:
    """Linear and attention FLOPs to prefill `tokens` tokens of one prompt (FLOP).

    Linear: 2 FLOPs (multiply, add) per active parameter per token, the usual estimate (it
    counts the embedding and output head as matmuls, as the 2·N·T rule does). Attention:
    causal, so each token attends to itself and the tokens before it: T·(T+1)/2 pairs.
    """
    active = params_count_model(model)["active"]
    linear = 2 * active * tokens
    pairs = tokens * (tokens + 1) / 2
    attention = attention_flops_per_token_pair(model) * pairs
    return {"params": active, "linear": linear, "attention": attention, "total": linear + attention}


def prefill(
    *, model: str, gpu: str, prompt_tokens: int, dtype: str = "bf16", mfu: float = 1.0
) -> Result:
    """FLOPs of a `prompt_tokens` prefill (FLOP) and its time on one `gpu` at `mfu` (seconds)."""
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    mfu = fraction_check(mfu, field="mfu")
    peak = peak_flops_get(gpu=g, dtype=d)
    parts = prefill_flops_model(m, prompt_tokens)
    achieved = peak * mfu
    seconds = parts["total"] / achieved
    linear_seconds = parts["linear"] / achieved
    what = "active parameters" if m.is_moe else "parameters"
    steps = (
        Step(
            "Linear layers",
            f"2 FLOP × {number_format(parts['params'])} {what} × {prompt_tokens:,} tokens",
            parts["linear"],
            "FLOP",
            flops_format(parts["linear"]),
        ),
        Step(
            "Attention (causal)",
            f"{attention_flops_per_token_pair(m):,} FLOP per token pair × "
            f"{prompt_tokens:,} × {prompt_tokens + 1:,} ÷ 2 pairs",
            parts["attention"],
            "FLOP",
            flops_format(parts["attention"]),
        ),
        Step(
            "Prefill FLOPs",
            f"{flops_format(parts['linear'])} + {flops_format(parts['attention'])}",
            parts["total"],
            "FLOP",
            flops_format(parts["total"]),
        ),
        Step(
            "Achieved compute",
            f"{flops_rate_format(peak)} dense {d.name} peak × {number_format(mfu)} MFU",
            achieved,
            "FLOP/s",
            flops_rate_format(achieved),
        ),
        Step(
            "Prefill time",
            f"{flops_format(parts['total'])} ÷ {flops_rate_format(achieved)}",
            seconds,
            "s",
            seconds_format(seconds),
        ),
    )
    return Result(
        values={
            "flops": parts["total"],
            "linear_flops": parts["linear"],
            "attention_flops": parts["attention"],
            "seconds": seconds,
            "linear_seconds": linear_seconds,
            "peak_flops": peak,
        },
        steps=steps,
    )
