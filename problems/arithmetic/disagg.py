"""Disaggregated serving: prefill on one GPU, decode on another, so the prompt's KV cache must
cross the link between them."""

from problems.arithmetic.catalog import gpu_get, kv_dtype_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import context_check, kv_cache
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_format,
    bytes_short,
    seconds_format,
)


def kv_transfer(
    *,
    model: str,
    prompt_tokens: int,
    dtype: str | None = "bf16",
    gpu: str | None = None,
    link_gb_per_second: float | None = None,
    link_efficiency: float = 1.0,
) -> Result:
    """KV bytes of a `prompt_tokens` prompt (bytes) and the time to move them (seconds).

    The link is `link_gb_per_second` (GB/s, one direction) when given, else `gpu`'s
    interconnect in one direction (datasheets quote both directions together). `dtype` is the
    KV cache's format (None: the model's own precision).
    """
    m = model_get(model)
    kv_d = kv_dtype_get(dtype, model=m, field="dtype")
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    link_efficiency = fraction_check(link_efficiency, field="link_efficiency")
    if link_gb_per_second is not None:
        link = number_check(link_gb_per_second, field="link_gb_per_second", maximum=1e6) * GB
        link_source = "given link, one direction"
    elif gpu is not None:
        g = gpu_get(gpu)
        link = g.interconnect_one_way_bytes_per_second
        link_source = (
            f"{g.interconnect}: {bandwidth_format(g.interconnect_bytes_per_second)} both ways ÷ 2"
        )
    else:
        raise ArithmeticInputError(field="gpu", message="give a gpu or link_gb_per_second")
    kv = kv_cache(model=model, tokens=prompt_tokens, dtype=kv_d.id)
    total = kv["total_bytes"]
    usable = link * link_efficiency
    seconds = total / usable
    return Result(
        values={
            "bytes": total,
            "bytes_per_token": kv["bytes_per_token"],
            "link_bytes_per_second": usable,
            "seconds": seconds,
        },
        steps=(
            Step(
                "KV to move",
                f"{bytes_short(kv['bytes_per_token'])} per token × "
                f"{prompt_tokens:,} tokens ({m.name}, {kv_d.kv_label})",
                total,
                "B",
                bytes_format(total),
            ),
            Step(
                "Link bandwidth",
                f"{link_source} × {link_efficiency:g} efficiency",
                usable,
                "B/s",
                bandwidth_format(usable),
            ),
            Step(
                "Transfer time",
                f"{bytes_short(total)} ÷ {bandwidth_format(usable)}",
                seconds,
                "s",
                seconds_format(seconds),
            ),
        ),
    )
