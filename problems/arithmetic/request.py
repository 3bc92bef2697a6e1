"""One request for scale: prefill, the decode loop and the KV cache it holds, composed from the
prefill, decode and KV-cache formulas so a page can show the whole request in one working.

Plain Python, no Django. The headline figures are also given rounded to two significant
figures, the precision at which an interview answer states them.
"""

import math

from problems.arithmetic.catalog import model_get
from problems.arithmetic.compute import prefill
from problems.arithmetic.decode import decode
from problems.arithmetic.inputs import TOKENS_MAX, count_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    kv_cache,
    window_advice,
)
from problems.arithmetic.memory import context_check as memory_context_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bytes_in,
    bytes_short,
    number_format,
    scientific_format,
    seconds_format,
)
from problems.arithmetic.wording import bytes_phrase, count_phrase, share_phrase


def context_check(*, model: str, prompt_tokens: int, output_tokens: int) -> None:
    """Refuse a prompt plus answer longer than the model's context window, as a server would
    before spending any GPU time on it (naming `output_tokens`, the usual one to shorten)."""
    m = model_get(model)
    lengths = {"model": m, "first": prompt_tokens, "second": output_tokens,
               "first_name": "prompt", "second_name": "output"}
    memory_context_check(model=m, tokens=prompt_tokens, field="prompt_tokens",
                         advice=window_advice(**lengths, excess=False))
    advice = window_advice(**lengths)
    memory_context_check(
        model=m, tokens=prompt_tokens + output_tokens, field="output_tokens",
        what=f"the prompt ({prompt_tokens:,}) plus the output ({output_tokens:,})",
        advice=advice,
    )


def seconds_rounded(seconds: float, *, digits: int = 2) -> str:
    """A duration to `digits` significant figures in a sensible unit: "32 ms", "1.4 s"."""
    if seconds <= 0 or not math.isfinite(seconds):
        return seconds_format(seconds)
    for scale, unit in ((1e-6, "µs"), (1e-3, "ms"), (1.0, "s")):
        if seconds < scale * 1000 or unit == "s":
            return f"{number_format(seconds / scale, digits=digits)} {unit}"
    return seconds_format(seconds)  # unreachable: "s" always returns above


def request_for_scale(
    *,
    model: str = "llama-3-8b",
    gpu: str = "h100-sxm",
    dtype: str = "bf16",
    prompt_tokens: int = 1_000,
    output_tokens: int = 300,
    mfu: float = 0.5,
    bandwidth_efficiency: float = 1.0,
    kv_dtype: str | None = None,
    embedding_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """The time and memory of one request alone on one `gpu` (FLOP, seconds, bytes).

    Prefill (compute at `mfu`, weight reads at `bandwidth_efficiency`, whichever is longer)
    gives the time to the first token with no queue; the other `output_tokens` − 1 tokens take
    one decode step each; the KV cache holds the prompt and every answer token but the last
    (never fed back) at the end. Both the rule of thumb (every parameter, 2·N·T) and the
    refined count are given, rounded as an interview answer states them.
    """
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    context_check(model=model, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    memory = {"memory_fraction": memory_fraction, "reserve_gb": reserve_gb,
              "embedding_dtype": embedding_dtype, "kv_dtype": kv_dtype}
    pre = prefill(model=model, gpu=gpu, prompt_tokens=prompt_tokens, dtype=dtype, mfu=mfu,
                  bandwidth_efficiency=bandwidth_efficiency, **memory)
    dec = decode(model=model, gpu=gpu, batch=1, context_tokens=prompt_tokens,
                 output_tokens=output_tokens, dtype=dtype, mfu=mfu,
                 bandwidth_efficiency=bandwidth_efficiency, **memory)
    held_tokens = prompt_tokens + output_tokens - 1
    kv = kv_cache(model=model, tokens=held_tokens, users=1, dtype=kv_dtype)
    steps_count = output_tokens - 1
    weights_floor = float(dec["weights_floor_seconds"])
    rule_floor = float(dec["rule_of_thumb_floor_seconds"])
    answer_weights_only = steps_count * weights_floor
    answer_rule = steps_count * rule_floor
    ttft = float(pre["seconds"])
    e2e = ttft + float(dec["total_seconds"])
    decode_share = float(dec["total_seconds"]) / e2e
    fits = bool(dec["fits"])
    needed = float(dec["memory_needed_bytes"])
    steps = (
        *pre.steps[:-3],
        *dec.steps[:-4],
        Step(
            "Answer at the weight-read floor",
            f"{count_phrase(steps_count, 'decode step', zero='0')} × "
            f"{seconds_format(weights_floor)} (the first of "
            f"{count_phrase(output_tokens, 'token')} came from prefill)",
            answer_weights_only,
            "s",
            seconds_format(answer_weights_only),
        ),
        *kv.steps[:1],
        Step(
            "KV cache at the end",
            f"{bytes_short(kv['bytes_per_token'])} × ({prompt_tokens:,} prompt + "
            f"{steps_count:,} answer tokens fed back; the last token never is)",
            kv["total_bytes"],
            "B",
            bytes_in(kv["total_bytes"], "GB"),
        ),
        *dec.steps[-4:-1],
        Step("Time to first token (no queue)",
             f"the prefill time ({pre['bound']}-bound)", ttft, "s", seconds_format(ttft)),
        Step(
            "Whole request",
            f"{seconds_format(ttft)} prefill + {seconds_format(dec['total_seconds'])} decode",
            e2e,
            "s",
            seconds_format(e2e),
        ),
        Step(
            "Share of the time in decode",
            f"{seconds_format(dec['total_seconds'])} ÷ {seconds_format(e2e)}",
            decode_share,
            "",
            share_phrase(decode_share),
        ),
    )
    return Result(
        values={
            "prefill_flops": pre["flops"],
            "prefill_rule_flops": pre["rule_of_thumb_flops"],
            "prefill_linear_flops": pre["linear_flops"],
            "prefill_seconds": ttft,
            "prefill_linear_seconds": pre["linear_seconds"],
            "prefill_rule_seconds": pre["rule_of_thumb_seconds"],
            "prefill_memory_seconds": pre["memory_seconds"],
            "prefill_compute_seconds": pre["compute_seconds"],
            "prefill_bound": pre["bound"],
            "prefill_crossover_tokens": pre["crossover_tokens"],
            "weight_bytes": dec["weight_bytes_per_step"],
            "rule_weight_bytes": dec["rule_of_thumb_weight_bytes"],
            "decode_step_seconds": dec["step_seconds"],
            "decode_weights_floor_seconds": weights_floor,
            "decode_rule_floor_seconds": rule_floor,
            "decode_steps": steps_count,
            "decode_seconds": dec["total_seconds"],
            "answer_weights_only_seconds": answer_weights_only,
            "answer_rule_seconds": answer_rule,
            "kv_bytes": kv["total_bytes"],
            "kv_tokens": held_tokens,
            "kv_bytes_per_token": kv["bytes_per_token"],
            "ttft_seconds": ttft,
            "e2e_seconds": e2e,
            "decode_share": decode_share,
            "bound": dec["bound"],
            "memory_needed_bytes": needed,
            "memory_usable_bytes": dec["memory_usable_bytes"],
            "gpu_memory_bytes": dec["memory_total_bytes"],
            "fits": fits,
            # Rounded as an interview answer says them: the rule of thumb and the refined count.
            "prefill_flops_rule_text": scientific_format(pre["rule_of_thumb_flops"], digits=2,
                                                         unit="FLOP"),
            "prefill_flops_text": scientific_format(pre["flops"], digits=2, unit="FLOP"),
            "prefill_rule_text": seconds_rounded(float(pre["rule_of_thumb_seconds"])),
            "prefill_linear_text": seconds_rounded(float(pre["linear_seconds"])),
            "prefill_text": seconds_rounded(ttft),
            "prefill_memory_text": seconds_rounded(float(pre["memory_seconds"])),
            "prefill_compute_text": seconds_rounded(float(pre["compute_seconds"])),
            "weights_rule_text": bytes_phrase(dec["rule_of_thumb_weight_bytes"]),
            "weights_text": bytes_phrase(dec["weight_bytes_per_step"]),
            "step_floor_rule_text": seconds_rounded(rule_floor),
            "step_floor_text": seconds_rounded(weights_floor),
            "answer_rule_text": seconds_rounded(answer_rule),
            # Three figures, like the decode loop's, so the two can be compared: the KV reads
            # add about 1% at 1,000 tokens of context, which two figures would hide or inflate.
            "answer_text": seconds_rounded(answer_weights_only, digits=3),
            "decode_text": seconds_rounded(float(dec["total_seconds"]), digits=3),
            "e2e_text": seconds_rounded(e2e),
            "kv_text": bytes_phrase(kv["total_bytes"]),
            # Prefill is never free, so the share never reads "100%" (99.67% is "99.7%").
            "decode_share_text": share_phrase(decode_share, digits=2),
            "memory_needed_text": bytes_phrase(needed),
            "reserve_text": bytes_phrase(reserve_gb * GB),
            "memory_usable_text": bytes_phrase(float(dec["memory_usable_bytes"])),
        },
        steps=steps,
    )


def request_timeline(
    *,
    ttft_seconds: float,
    step_seconds: float,
    floor_step_seconds: float,
    output_tokens: int,
    points: int = 24,
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """When output token i exists (seconds since arrival): the first at `ttft_seconds`, then one
    per decode step. Returns (token numbers, seconds at `step_seconds`, seconds at the floor)."""
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    count = min(points, output_tokens)
    if count == 1:
        tokens = [1]
    else:
        tokens = sorted({1 + round((output_tokens - 1) * i / (count - 1)) for i in range(count)})
    seconds = tuple(ttft_seconds + (t - 1) * step_seconds for t in tokens)
    floor = tuple(ttft_seconds + (t - 1) * floor_step_seconds for t in tokens)
    return tuple(float(t) for t in tokens), seconds, floor


def request_split(
    *,
    ttft_seconds: float,
    step_seconds: float,
    output_tokens: int,
    points: int = 24,
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Prefill time against decode-loop time for answers up to twice `output_tokens` long.

    Returns (output lengths in tokens, prefill seconds, decode seconds): prefill is the same
    whatever the answer's length; the loop takes one step per token after the first.
    """
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    top = max(2 * output_tokens, 2)
    lengths = sorted({1 + round((top - 1) * i / (points - 1)) for i in range(points)}
                     | {output_tokens})
    decode = tuple((n - 1) * step_seconds for n in lengths)
    return tuple(float(n) for n in lengths), tuple(ttft_seconds for _ in lengths), decode
