"""Prefix caching: a prompt prefix whose KV is already cached (a shared system prompt, an
earlier turn) skips its prefill; later tokens still attend to it."""

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.compute import peak_flops_get, prefill_flops_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check
from problems.arithmetic.memory import kv_cache
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_format,
    flops_format,
    flops_rate_format,
    number_format,
    percent_format,
    seconds_format,
)


def prefix_cache(
    *,
    model: str,
    gpu: str,
    prompt_tokens: int,
    prefix_tokens: int,
    hit_rate: float = 1.0,
    dtype: str = "bf16",
    mfu: float = 1.0,
) -> Result:
    """FLOPs (FLOP) and prefill time (seconds) saved per request by a cached shared prefix.

    A hit skips exactly the prefix's own prefill: its linear FLOPs and the attention among
    prefix tokens. The suffix's attention to the prefix is still computed. Expected savings
    are that times `hit_rate`.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    prefix_tokens = count_check(prefix_tokens, field="prefix_tokens", maximum=TOKENS_MAX)
    if prefix_tokens > prompt_tokens:
        raise ArithmeticInputError(field="prefix_tokens", message="must not exceed prompt_tokens")
    hit_rate = fraction_check(hit_rate, field="hit_rate", allow_zero=True)
    mfu = fraction_check(mfu, field="mfu")
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    full = prefill_flops_model(m, prompt_tokens)["total"]
    prefix = prefill_flops_model(m, prefix_tokens)["total"]
    saved = hit_rate * prefix
    prefix_kv = kv_cache(model=model, tokens=prefix_tokens, dtype=dtype)["total_bytes"]
    return Result(
        values={
            "prefill_flops": full,
            "flops_saved": saved,
            "fraction_saved": saved / full,
            "seconds_saved": saved / rate,
            "prefill_seconds": full / rate,
            "prefix_kv_bytes": prefix_kv,
        },
        steps=(
            Step(
                "Prefill without caching",
                f"{prompt_tokens:,}-token prompt",
                full,
                "FLOP",
                flops_format(full),
            ),
            Step(
                "Prefill of the prefix alone",
                f"{prefix_tokens:,} tokens (linear + attention among them)",
                prefix,
                "FLOP",
                flops_format(prefix),
            ),
            Step(
                "Expected FLOPs saved",
                f"{number_format(hit_rate)} hit rate × {flops_format(prefix)}",
                saved,
                "FLOP",
                flops_format(saved),
            ),
            Step(
                "Share of prefill saved",
                f"{flops_format(saved)} ÷ {flops_format(full)}",
                saved / full,
                "",
                percent_format(saved / full),
            ),
            Step(
                "Time saved per request",
                f"{flops_format(saved)} ÷ {flops_rate_format(rate)}",
                saved / rate,
                "s",
                seconds_format(saved / rate),
            ),
            Step(
                "KV the cached prefix occupies (once, shared)",
                f"{prefix_tokens:,} tokens of {m.name} KV",
                prefix_kv,
                "B",
                bytes_format(prefix_kv),
            ),
        ),
    )
