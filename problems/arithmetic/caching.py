"""Prefix caching: a prompt prefix whose KV is already cached (a shared system prompt, an
earlier turn) skips its prefill; later tokens still attend to it. Times are roofline bounds, so
a hit can never make prefill faster than reading the weights once."""

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_flops_get,
    prefill_flops_model,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    kv_cache,
    memory_fit,
    params_count_model,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_format,
    flops_format,
    number_format,
    percent_format,
    rate_of_format,
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
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """FLOPs (FLOP) and prefill time (seconds) saved per request by a cached shared prefix.

    A hit skips exactly the prefix's own prefill: its linear FLOPs and the attention among
    prefix tokens. The suffix's attention to the prefix is still computed, and the suffix's
    pass still reads every weight once, so the time with a hit is
    max(suffix compute, weight reads + the prefix's KV read). Expected savings are the
    difference times `hit_rate`.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    prefix_tokens = count_check(prefix_tokens, field="prefix_tokens", maximum=TOKENS_MAX)
    if prefix_tokens > prompt_tokens:
        raise ArithmeticInputError(field="prefix_tokens", message="must not exceed prompt_tokens")
    hit_rate = fraction_check(hit_rate, field="hit_rate", allow_zero=True)
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    unit = "OP" if d.compute == "int8" else "FLOP"  # INT8 tensor cores are rated in OPS
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    parts = params_count_model(m)
    full = prefill_flops_model(m, prompt_tokens)["total"]
    prefix = prefill_flops_model(m, prefix_tokens)["total"]
    # Recomputing at least the last token keeps fresh logits (engines always do).
    suffix_tokens = max(prompt_tokens - prefix_tokens, 1)
    start = prompt_tokens - suffix_tokens
    pairs = (prompt_tokens * (prompt_tokens + 1) - start * (start + 1)) / 2
    suffix_flops = (2 * parts["non_embedding_active"] * suffix_tokens + 2 * parts["head"]
                    + attention_flops_per_token_pair(m) * pairs)

    def time(tokens: int, flops: float, kv_read: int) -> float:
        reads = weights_read_model(model=m, tokens=tokens, dtype=d, embedding=e)
        moved = reads["total"] + reads["embedding_rows"] + (tokens + kv_read) * kv_per_token
        return max(flops / rate, moved / bandwidth)

    full_seconds = time(prompt_tokens, full, 0)
    hit_seconds = time(suffix_tokens, suffix_flops, start)
    saved_seconds = hit_rate * (full_seconds - hit_seconds)
    # What a hit skips: the whole prompt's FLOPs less the suffix's (its linear layers, its
    # attention to every earlier token, the head at the last position). That is the prefix's
    # linear layers and the attention among its own tokens; the prefix alone would also pay the
    # output head at its last position, which the full prompt never computes there.
    skipped = full - suffix_flops
    saved = hit_rate * skipped
    prefix_kv = kv_cache(model=model, tokens=prefix_tokens, dtype=kv_d.id)["total_bytes"]
    weights_all = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_all, kv_bytes=prompt_tokens * kv_per_token,
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
    )
    return Result(
        values={
            "prefill_flops": full,
            "flops_saved": saved,
            "fraction_saved": saved / full,
            "seconds_saved": saved_seconds,
            "prefill_seconds": full_seconds,
            "hit_prefill_seconds": hit_seconds,
            "prefix_kv_bytes": prefix_kv,
            **fit,
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
                f"{prefix_tokens:,} tokens (linear + attention among them + the head at its last "
                "position, which a hit does not save)",
                prefix,
                "FLOP",
                flops_format(prefix),
            ),
            Step(
                "Skipped on a hit",
                f"{flops_format(full)} − {flops_format(suffix_flops)} for the {suffix_tokens:,} "
                "suffix tokens (their linear layers, their attention to every earlier token, the "
                "head at the last position)",
                skipped,
                "FLOP",
                flops_format(skipped),
            ),
            Step(
                "Expected FLOPs saved",
                f"{number_format(hit_rate)} hit rate × {flops_format(skipped)}",
                saved,
                "FLOP",
                flops_format(saved),
            ),
            Step(
                "Share of prefill FLOPs saved",
                f"{flops_format(saved)} ÷ {flops_format(full)}",
                saved / full,
                "",
                percent_format(saved / full),
            ),
            Step(
                "Prefill time on a miss",
                f"the whole prompt: max(compute at {rate_of_format(rate, unit=unit)}, weights and "
                "KV at the usable bandwidth)",
                full_seconds,
                "s",
                seconds_format(full_seconds),
            ),
            Step(
                "Prefill time on a hit",
                f"{suffix_tokens:,} suffix tokens attending to the cached {start:,}: still at "
                "least one read of every weight",
                hit_seconds,
                "s",
                seconds_format(hit_seconds),
            ),
            Step(
                "Expected time saved per request",
                f"{number_format(hit_rate)} × ({seconds_format(full_seconds)} − "
                f"{seconds_format(hit_seconds)})",
                saved_seconds,
                "s",
                seconds_format(saved_seconds),
            ),
            Step(
                "KV the cached prefix occupies (once, shared)",
                f"{prefix_tokens:,} tokens of {m.name} KV ({kv_d.kv_label})",
                prefix_kv,
                "B",
                bytes_format(prefix_kv),
            ),
            *fit_steps,
        ),
    )
