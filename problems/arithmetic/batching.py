"""Chunked prefill: a long prompt split into chunks that share each engine step with the
running decoders, so each decoder waits one chunk's compute per step instead of the whole
prompt's (Agrawal et al., 'Sarathi-Serve', OSDI 2024, https://arxiv.org/abs/2403.02310)."""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.compute import attention_flops_per_token_pair, peak_flops_get
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import flops_format, flops_rate_format, number_format, seconds_format


def chunked_prefill(
    *,
    model: str,
    gpu: str,
    prompt_tokens: int,
    chunk_tokens: int = 512,
    dtype: str = "bf16",
    mfu: float = 1.0,
) -> Result:
    """Chunks of a prompt and the stall each adds to the decoders sharing its step (seconds).

    A chunk's compute is its tokens' linear FLOPs plus their causal attention to every earlier
    token of the prompt, so later chunks cost a little more. The stall is that compute at
    `mfu` of the dense peak, the extra time the step takes for every decoder in it.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    chunk_tokens = count_check(chunk_tokens, field="chunk_tokens", maximum=TOKENS_MAX)
    mfu = fraction_check(mfu, field="mfu")
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    active = params_count_model(m)["active"]
    pair = attention_flops_per_token_pair(m)

    def chunk_flops(start: int, end: int) -> float:
        # Tokens start+1..end each attend to themselves and all before: Σ t pairs.
        pairs = (end * (end + 1) - start * (start + 1)) / 2
        return 2 * active * (end - start) + pair * pairs

    chunks = math.ceil(prompt_tokens / chunk_tokens)
    first = chunk_flops(0, min(chunk_tokens, prompt_tokens))
    last_start = (chunks - 1) * chunk_tokens
    last = chunk_flops(last_start, prompt_tokens)
    whole = chunk_flops(0, prompt_tokens)
    largest = max(
        first,
        last,
        chunk_flops(max(0, last_start - chunk_tokens), last_start) if chunks > 1 else first,
    )
    return Result(
        values={
            "chunks": chunks,
            "first_chunk_stall_seconds": first / rate,
            "max_chunk_stall_seconds": largest / rate,
            "unchunked_stall_seconds": whole / rate,
            "prefill_seconds": whole / rate,
        },
        steps=(
            Step(
                "Chunks",
                f"⌈{prompt_tokens:,} tokens ÷ {chunk_tokens:,} per chunk⌉",
                chunks,
                "chunks",
                f"{chunks:,} chunks",
            ),
            Step(
                "Compute rate",
                f"{flops_rate_format(rate / mfu)} × {number_format(mfu)} MFU",
                rate,
                "FLOP/s",
                flops_rate_format(rate),
            ),
            Step(
                "Stall from the first chunk",
                f"{flops_format(first)} (linear + attention) ÷ {flops_rate_format(rate)}",
                first / rate,
                "s",
                seconds_format(first / rate),
            ),
            Step(
                "Stall from the largest chunk",
                f"{flops_format(largest)} ÷ {flops_rate_format(rate)} (it attends to the most "
                "earlier tokens)",
                largest / rate,
                "s",
                seconds_format(largest / rate),
            ),
            Step(
                "Stall without chunking",
                f"the whole prompt in one step: {flops_format(whole)} ÷ {flops_rate_format(rate)}",
                whole / rate,
                "s",
                seconds_format(whole / rate),
            ),
        ),
    )
