"""Chunked prefill: a long prompt split into chunks that share each engine step with the
running decoders (Agrawal et al., 'Sarathi-Serve', OSDI 2024, https://arxiv.org/abs/2403.02310).

A step is a roofline bound like any other: the larger of its memory time (the weights once, the
decoders' KV, the chunk's reads of the prompt's earlier KV and its own KV writes) and its compute
time (the decoders' tokens plus the chunk's). A chunk's stall on the decoders is how much longer
the step gets with the chunk in it, not the chunk's compute added on top: a small chunk can hide
entirely under the weight reads the decode step pays anyway.
"""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_flops_get,
    time_label,
)
from problems.arithmetic.decode import decode_flops_per_sequence
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
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
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    flops_format,
    number_format,
    rate_of_format,
    seconds_format,
)


def chunked_prefill(
    *,
    model: str,
    gpu: str,
    prompt_tokens: int,
    chunk_tokens: int = 512,
    dtype: str = "bf16",
    mfu: float = 1.0,
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    decode_batch: int = 32,
    decode_context_tokens: int = 1_000,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """The chunks of a prompt and the stall each adds to `decode_batch` running decoders
    (seconds).

    Every step time is max(memory time, compute time) at `bandwidth_efficiency` and `mfu`.
    The stall of a chunk is its step's time minus the decode-only step's. Later chunks attend
    to more of the prompt, so they cost a little more; the last is the largest.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    chunk_tokens = count_check(chunk_tokens, field="chunk_tokens", maximum=TOKENS_MAX)
    decode_batch = count_check(decode_batch, field="decode_batch", minimum=0, maximum=USERS_MAX)
    decode_context_tokens = count_check(
        decode_context_tokens, field="decode_context_tokens", maximum=TOKENS_MAX
    )
    context_check(model=m, tokens=decode_context_tokens, field="decode_context_tokens")
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    rate = peak_flops_get(gpu=g, dtype=d) * mfu
    # INT8 tensor cores are rated in integer operations per second (OPS), not FLOP/s.
    unit = "OP" if d.compute == "int8" else "FLOP"
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    parts = params_count_model(m)
    pair = attention_flops_per_token_pair(m)
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    decoders_kv = decode_batch * decode_context_tokens * kv_per_token
    decoders_flops = decode_batch * decode_flops_per_sequence(m, decode_context_tokens)

    def step(start: int, end: int) -> dict[str, float]:
        """One step: the decoders plus prompt tokens start+1..end (none when start == end)."""
        chunk = end - start
        reads = weights_read_model(model=m, tokens=decode_batch + chunk, dtype=d, embedding=e)
        # The chunk reads the KV of the prompt before it and writes its own.
        memory_bytes = reads["total"] + decoders_kv + (start + chunk) * kv_per_token
        pairs = (end * (end + 1) - start * (start + 1)) / 2
        chunk_flops = 2 * parts["non_embedding_active"] * chunk + pair * pairs
        if chunk and end == prompt_tokens:
            chunk_flops += 2 * parts["head"]  # logits for the prompt's last position
        flops = decoders_flops + chunk_flops
        memory = memory_bytes / bandwidth
        compute = flops / rate
        return {"memory": memory, "compute": compute, "time": max(memory, compute),
                "bytes": memory_bytes, "flops": flops, "chunk_flops": chunk_flops}

    chunks = math.ceil(prompt_tokens / chunk_tokens)
    alone = step(0, 0) if decode_batch else {"time": 0.0, "memory": 0.0, "compute": 0.0,
                                             "bytes": 0.0, "flops": 0.0}
    first = step(0, min(chunk_tokens, prompt_tokens))
    last_start = (chunks - 1) * chunk_tokens
    last = step(last_start, prompt_tokens)
    whole = step(0, prompt_tokens)
    candidates = [first, last]
    if chunks > 1:
        candidates.append(step(max(0, last_start - chunk_tokens), last_start))
    largest = max(candidates, key=lambda s: s["time"])
    # The newcomer's prefill spans every chunk's step; sum them (attention grows per chunk).
    prefill_seconds = sum(
        step(i * chunk_tokens, min((i + 1) * chunk_tokens, prompt_tokens))["time"]
        for i in range(chunks)
    ) if chunks <= 4096 else chunks * (first["time"] + last["time"]) / 2
    weights_all = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_all, kv_bytes=decoders_kv + prompt_tokens * kv_per_token,
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
    )

    def bound(s: dict[str, float]) -> str:
        return "compute" if s["compute"] >= s["memory"] else "memory"

    def describe(s: dict[str, float]) -> str:
        return (f"max({seconds_format(s['memory'])} memory, {seconds_format(s['compute'])} "
                f"compute)")

    decoders = f"{decode_batch:,} decoders at {decode_context_tokens:,} tokens"
    stall_first = first["time"] - alone["time"]
    stall_largest = largest["time"] - alone["time"]
    stall_whole = whole["time"] - alone["time"]
    return Result(
        values={
            "chunks": chunks,
            "decode_step_seconds": alone["time"],
            "decode_step_bound": bound(alone),
            "first_chunk_stall_seconds": stall_first,
            "max_chunk_stall_seconds": stall_largest,
            "largest_step_seconds": largest["time"],
            "largest_step_bound": bound(largest),
            "unchunked_stall_seconds": stall_whole,
            "unchunked_step_seconds": whole["time"],
            "unchunked_step_bound": bound(whole),
            "prefill_seconds": prefill_seconds,
            "chunk_compute_seconds": largest["chunk_flops"] / rate,
            **fit,
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
                f"{rate_of_format(rate / mfu, unit=unit)} × {number_format(mfu)} MFU",
                rate,
                f"{unit}/s",
                rate_of_format(rate, unit=unit),
            ),
            Step(
                "Usable bandwidth",
                f"{bandwidth_format(g.bandwidth_bytes_per_second)} × "
                f"{number_format(bandwidth_efficiency)} of peak",
                bandwidth,
                "B/s",
                bandwidth_format(bandwidth),
            ),
            Step(
                time_label("Decode-only step", bound=bound(alone),
                           efficiency=bandwidth_efficiency if bound(alone) == "memory" else mfu),
                f"{decoders}: {bytes_short(alone['bytes'])}, {flops_format(alone['flops'])}: "
                + describe(alone),
                alone["time"],
                "s",
                seconds_format(alone["time"]),
            ),
            Step(
                f"Step with the largest chunk ({bound(largest)}-bound)",
                f"{decoders} + {min(chunk_tokens, prompt_tokens):,} prompt tokens attending to "
                f"up to {prompt_tokens:,}: {describe(largest)}",
                largest["time"],
                "s",
                seconds_format(largest["time"]),
            ),
            Step(
                "Stall the largest chunk adds",
                f"{seconds_format(largest['time'])} − {seconds_format(alone['time'])}: the step's "
                f"growth, not the chunk's {seconds_format(largest['chunk_flops'] / rate)} of "
                "compute on top",
                stall_largest,
                "s",
                seconds_format(stall_largest),
            ),
            Step(
                "Stall the first chunk adds",
                f"{seconds_format(first['time'])} − {seconds_format(alone['time'])}",
                stall_first,
                "s",
                seconds_format(stall_first),
            ),
            Step(
                "Stall without chunking",
                f"the whole prompt in one step: {describe(whole)} − "
                f"{seconds_format(alone['time'])}",
                stall_whole,
                "s",
                seconds_format(stall_whole),
            ),
            Step(
                "The newcomer's prefill, over all its chunks",
                f"the sum of {chunks:,} steps' times",
                prefill_seconds,
                "s",
                seconds_format(prefill_seconds),
            ),
            *fit_steps,
        ),
    )
