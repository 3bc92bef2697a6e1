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
    prefill_flops_model,
    time_label,
)
from problems.arithmetic.decode import decode_flops_per_sequence
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    TP_MAX,
    context_check,
    embedding_dtype_resolve,
    kv_heads_per_gpu,
    memory_fit,
    params_count_model,
    tp_check,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase


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
    tp: int = 1,
) -> Result:
    """The chunks of a prompt and the stall each adds to `decode_batch` running decoders
    (seconds).

    With `tp` GPUs in tensor parallel, FLOPs and bytes split evenly over them (the all-reduces
    between them are not counted, so the times are floors) and the fit is per GPU.

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
    tp = count_check(tp, field="tp", maximum=TP_MAX)
    kv_heads_gpu, _ = kv_heads_per_gpu(model=m, tp=tp)
    rate = peak_flops_get(gpu=g, dtype=d) * mfu * tp
    # INT8 tensor cores are rated in integer operations per second (OPS), not FLOP/s.
    unit = "OP" if d.compute == "int8" else "FLOP"
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency * tp
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
    chunk_seconds = [
        step(i * chunk_tokens, min((i + 1) * chunk_tokens, prompt_tokens))["time"]
        for i in range(chunks)
    ] if chunks <= 4096 else []
    prefill_seconds = sum(chunk_seconds) if chunk_seconds else (
        chunks * (first["time"] + last["time"]) / 2)
    weights_all = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    kv_share = kv_heads_gpu / m.kv_heads if m.attention != "MLA" else 1.0
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_all / tp,
        kv_bytes=(decoders_kv + prompt_tokens * kv_per_token) * kv_share,
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
        per_gpu="per GPU" if tp > 1 else "",
    )
    over = f" × {tp} GPUs" if tp > 1 else ""

    def bound(s: dict[str, float]) -> str:
        return "compute" if s["compute"] >= s["memory"] else "memory"

    def describe(s: dict[str, float]) -> str:
        return (f"max({seconds_format(s['memory'])} memory, {seconds_format(s['compute'])} "
                f"compute)")

    decoders = (f"{count_phrase(decode_batch, 'decoder')} at "
                f"{count_phrase(decode_context_tokens, 'token')}")
    stall_first = first["time"] - alone["time"]
    stall_largest = largest["time"] - alone["time"]
    stall_whole = whole["time"] - alone["time"]
    return Result(
        values={
            "chunks": chunks,
            "decode_step_seconds": alone["time"],
            "decode_step_bound": bound(alone),
            "first_chunk_stall_seconds": stall_first,
            "first_step_bound": bound(first),
            "max_chunk_stall_seconds": stall_largest,
            "largest_step_seconds": largest["time"],
            "largest_step_bound": bound(largest),
            "unchunked_stall_seconds": stall_whole,
            "unchunked_step_seconds": whole["time"],
            "unchunked_step_bound": bound(whole),
            "prefill_seconds": prefill_seconds,
            "chunk_compute_seconds": largest["chunk_flops"] / rate,
            "chunk_seconds": chunk_seconds,
            "tp": tp,
            **fit,
        },
        steps=(
            Step(
                "Chunks",
                f"⌈{count_phrase(prompt_tokens, 'token')} ÷ {chunk_tokens:,} per chunk⌉",
                chunks,
                "chunks",
                count_format(chunks, "chunk"),
            ),
            Step(
                "Compute rate",
                f"{rate_of_format(rate / mfu / tp, unit=unit)} × {number_format(mfu)} MFU{over}",
                rate,
                f"{unit}/s",
                rate_of_format(rate, unit=unit),
            ),
            Step(
                "Usable bandwidth",
                f"{bandwidth_format(g.bandwidth_bytes_per_second)} × "
                f"{number_format(bandwidth_efficiency)} of peak{over}",
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
                "its one step's time" if chunks == 1 else f"the sum of {chunks:,} steps' times",
                prefill_seconds,
                "s",
                seconds_format(prefill_seconds),
            ),
            *fit_steps,
        ),
    )


# Static vs continuous batching (problem 6) -----------------------------------------------------

DISTRIBUTIONS = ("uniform", "exponential")
BATCH_SLOTS_MAX = 100_000
_QUADRATURE_POINTS = 4_000


def _harmonic(n: int) -> float:
    return sum(1.0 / k for k in range(1, n + 1))


def output_lengths_moments(
    *, distribution: str, output_min: float, output_max: float, output_mean: float, batch: int
) -> dict[str, float]:
    """Mean output length, the expected longest of `batch` independent draws, and E[L²]
    (tokens, tokens²) for the two length distributions.

    "uniform": L uniform on [min, max]; E[max of B] = min + (max − min) · B ÷ (B + 1).
    "exponential": L = min + an exponential tail of mean (mean − min), cut at `output_max`
    (max_tokens): E[max of B] = min + ∫ 1 − (1 − e^(−t/θ))^B dt over [0, max − min], which is
    min + θ · H_B (the B-th harmonic number) without the cut.
    """
    a, c = float(output_min), float(output_max)
    if distribution == "uniform":
        mean = (a + c) / 2
        longest = a + (c - a) * batch / (batch + 1)
        second = (a * a + a * c + c * c) / 3
        return {"mean": mean, "longest": longest, "second_moment": second}
    theta = output_mean - a
    span = c - a
    if theta <= 0 or span <= 0:
        return {"mean": a, "longest": a, "second_moment": a * a}
    # Simpson's rule on [0, span] for E[max − min] and for the tail moments.
    n = _QUADRATURE_POINTS
    # Past θ·(ln B + 35) the integrand is below e^−35: stop there, so the grid stays fine.
    top = min(span, theta * (math.log(batch) + 35))
    h = top / n
    total_max = 0.0
    for i in range(n + 1):
        t = i * h
        weight = 1 if i in (0, n) else (4 if i % 2 else 2)
        total_max += weight * (1 - (1 - math.exp(-t / theta)) ** batch)
    tail_max = total_max * h / 3
    cut = math.exp(-span / theta)
    tail_mean = theta * (1 - cut)  # E[min(X, span)], X ~ Exp(θ)
    # E[min(X, span)²] = 2θ² (1 − e^(−s/θ)(1 + s/θ))
    tail_second = 2 * theta * theta * (1 - cut * (1 + span / theta))
    return {"mean": a + tail_mean, "longest": a + tail_max,
            "second_moment": a * a + 2 * a * tail_mean + tail_second}


def static_vs_continuous(
    *,
    batch: int = 32,
    distribution: str = "uniform",
    output_min: int = 16,
    output_max: int = 1_024,
    output_mean: int = 256,
) -> Result:
    """The decode slots a static batch wastes and continuous batching's gain over it.

    A static batch of `batch` sequences runs until its longest member ends, so it spends
    `batch` × E[longest] slot-steps for `batch` × mean useful tokens. Continuous batching
    refills a freed slot at the next step (a queue is assumed to be waiting), so every slot
    yields a token every step. With the step time the same in both (a memory-bound decode step
    costs about the same with or without its padded rows), the throughput ratio is
    E[longest] ÷ mean. `output_mean` is read for "exponential" only.
    """
    batch = count_check(batch, field="batch", maximum=BATCH_SLOTS_MAX)
    if distribution not in DISTRIBUTIONS:
        raise ArithmeticInputError(field="distribution",
                                   message="must be 'uniform' or 'exponential'")
    output_min = count_check(output_min, field="output_min", maximum=TOKENS_MAX)
    output_max = count_check(output_max, field="output_max", maximum=TOKENS_MAX)
    if output_max < output_min:
        raise ArithmeticInputError(field="output_max",
                                   message="must be at least the shortest output")
    output_mean = count_check(output_mean, field="output_mean", maximum=TOKENS_MAX)
    if distribution == "exponential" and not output_min <= output_mean <= output_max:
        raise ArithmeticInputError(
            field="output_mean", message="must lie between the shortest and longest output")
    mo = output_lengths_moments(distribution=distribution, output_min=output_min,
                                output_max=output_max, output_mean=output_mean, batch=batch)
    mean, longest = mo["mean"], mo["longest"]
    useful = mean / longest
    wasted = 1 - useful
    ratio = longest / mean
    # Seat-weighted context of a decoding sequence: a sequence of length L holds a seat for L
    # steps at outputs 1..L, so the average output held is E[L²] ÷ (2 E[L]).
    held = mo["second_moment"] / (2 * mean)
    if distribution == "uniform":
        lengths_text = f"output lengths uniform on [{output_min:,}, {output_max:,}] tokens"
        mean_expr = f"({output_min:,} + {output_max:,}) ÷ 2"
        longest_expr = (f"{output_min:,} + ({output_max:,} − {output_min:,}) × {batch:,} ÷ "
                        f"({batch:,} + 1)")
    else:
        lengths_text = (f"output lengths {output_min:,} + an exponential tail, mean "
                        f"{output_mean:,} before the cut at {output_max:,} tokens")
        mean_expr = (f"{output_min:,} + {output_mean - output_min:,} × (1 − e^(−"
                     f"{output_max - output_min:,} ÷ {output_mean - output_min:,}))")
        longest_expr = (f"{output_min:,} + ∫ 1 − (1 − e^(−t ÷ {output_mean - output_min:,}))^"
                        f"{batch:,} dt up to {output_max - output_min:,} (≈ θ·H_B = "
                        f"{number_format((output_mean - output_min) * _harmonic(batch))} "
                        "without the cut)")
    return Result(
        values={
            "mean_output_tokens": mean,
            "expected_longest_tokens": longest,
            "static_useful_share": useful,
            "static_wasted_share": wasted,
            "continuous_occupancy": 1.0,
            "throughput_ratio": ratio,
            "static_steps_per_batch": longest,
            "useful_tokens_per_batch": batch * mean,
            "mean_output_held_tokens": held,
        },
        steps=(
            Step("Mean output", f"{lengths_text}: {mean_expr}", mean, "tokens",
                 count_format(mean, "token")),
            Step(f"Expected longest of {batch:,}", longest_expr, longest, "tokens",
                 count_format(longest, "token")),
            Step("Decode steps a static batch runs", "until its longest member ends", longest,
                 "steps", count_format(longest, "step")),
            Step("Static: share of slot-steps doing useful work",
                 f"{number_format(mean)} ÷ {number_format(longest)} (mean ÷ longest)", useful,
                 "", percent_format(useful)),
            Step("Static: share wasted on finished members",
                 f"1 − {percent_format(useful)}", wasted, "", percent_format(wasted)),
            Step("Continuous: occupancy",
                 "a freed slot is refilled at the next step while requests wait", 1.0, "",
                 percent_format(1.0)),
            Step("Throughput ratio, continuous ÷ static",
                 f"{number_format(longest)} ÷ {number_format(mean)} at the same step time "
                 "(a memory-bound step)", ratio, "×", f"{number_format(ratio)}×"),
            Step("Output held by a running sequence, on average",
                 "E[L²] ÷ (2 E[L]): long outputs hold their seats longer", held, "tokens",
                 count_format(held, "token")),
        ),
    )


# A 100K-token prompt under a per-step token budget (problem 7) ----------------------------------


def mlp_activation_bytes(*, model: str, tokens: int, dtype: str = "bf16") -> float:
    """Bytes of one layer's MLP gate and up projections' outputs for `tokens` tokens in one
    step: tokens × intermediate width × 2 (gate and up) × bytes per value. One piece of the
    activation peak an engine must reserve for its largest step (vLLM profiles a forward pass
    at its token budget, max_num_batched_tokens, and takes that peak out of the KV pool).

    Llama 3.1 8B (intermediate 14,336) in BF16: 100,000 tokens × 14,336 × 2 × 2 B = 5.73 GB in
    one pass, against 2,048 × 14,336 × 2 × 2 B = 0.117 GB at a 2,048-token budget.
    """
    m = model_get(model)
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    width = m.intermediate if not m.is_moe else m.moe_intermediate * m.experts_per_token
    return float(tokens * width * 2 * dtype_get(dtype).bytes)


def long_prompt(
    *,
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    tp: int = 1,
    prompt_tokens: int = 100_000,
    token_budget: int = 2_048,
    decode_batch: int = 32,
    decode_context_tokens: int = 2_000,
    dtype: str = "bf16",
    mfu: float = 0.5,
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """One long prompt arriving while `decode_batch` streams decode, with and without a
    per-step token budget.

    The budget counts every token a step computes: the decoders' one each, the rest goes to
    the prompt's chunk (vLLM's max_num_batched_tokens works the same way). Returns the
    prompt's FLOPs (linear, attention, and attention's share), its prefill alone, its KV
    bytes and the fit, the chunks and the stall each adds to every stream's next token, and
    the prompt's own time to first token chunked and in one pass (seconds). Every step time is
    a roofline bound; with `tp` > 1 the split is ideal (no all-reduce), so times are floors.
    """
    m = model_get(model)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    token_budget = count_check(token_budget, field="token_budget", maximum=TOKENS_MAX)
    decode_batch = count_check(decode_batch, field="decode_batch", minimum=0, maximum=USERS_MAX)
    if token_budget <= decode_batch:
        raise ArithmeticInputError(
            field="token_budget",
            message=f"must exceed the {decode_batch:,} decode tokens every step carries, or no "
                    "prompt token ever fits")
    tp = count_check(tp, field="tp", maximum=TP_MAX)
    # Refused here, before the chunks are worked: a size past the KV-head count copies KV
    # heads, but the query heads must still divide (Qwen2.5 7B: 28 over 8 GPUs).
    tp_check(model=m, tp=tp)
    chunk = token_budget - decode_batch
    common = dict(model=model, gpu=gpu, prompt_tokens=prompt_tokens, dtype=dtype, mfu=mfu,
                  kv_dtype=kv_dtype, bandwidth_efficiency=bandwidth_efficiency,
                  decode_batch=decode_batch, decode_context_tokens=decode_context_tokens,
                  memory_fraction=memory_fraction, reserve_gb=reserve_gb, tp=tp)
    chunked = chunked_prefill(**common, chunk_tokens=chunk)
    alone = chunked_prefill(**{**common, "decode_batch": 0}, chunk_tokens=prompt_tokens)
    flops = prefill_flops_model(m, prompt_tokens)
    attention_share = flops["attention"] / flops["total"]
    kv_per_token = kv_bytes_per_token_model(m, kv_dtype_get(kv_dtype, model=m))
    kv_bytes = prompt_tokens * kv_per_token
    # The chunks' steps one by one (empty past 4,096 chunks, so the first step is chunked's).
    times = chunked["chunk_seconds"]
    stall_first = chunked["first_chunk_stall_seconds"]
    first_step = stall_first + chunked["decode_step_seconds"]
    ttft_chunked = chunked["prefill_seconds"]
    ttft_whole = chunked["unchunked_step_seconds"]
    gpus = f" on {tp} GPUs" if tp > 1 else ""
    return Result(
        values={
            "prefill_flops": flops["total"],
            "linear_flops": flops["linear"] + flops["head"],
            "attention_flops": flops["attention"],
            "attention_share": attention_share,
            "prefill_alone_seconds": alone["unchunked_step_seconds"],
            "prefill_alone_bound": alone["largest_step_bound"],
            "kv_bytes": kv_bytes,
            "kv_bytes_per_token": kv_per_token,
            "chunk_tokens": chunk,
            "chunks": chunked["chunks"],
            "chunk_seconds": times,
            "first_chunk_step_seconds": first_step,
            "largest_chunk_step_seconds": chunked["largest_step_seconds"],
            "first_chunk_stall_seconds": stall_first,
            "first_step_bound": chunked["first_step_bound"],
            "max_chunk_stall_seconds": chunked["max_chunk_stall_seconds"],
            "decode_step_seconds": chunked["decode_step_seconds"],
            "decode_step_bound": chunked["decode_step_bound"],
            "largest_step_bound": chunked["largest_step_bound"],
            "unchunked_stall_seconds": chunked["unchunked_stall_seconds"],
            "ttft_chunked_seconds": ttft_chunked,
            "ttft_unchunked_seconds": ttft_whole,
            "ttft_cost_of_chunking": ttft_chunked / ttft_whole if ttft_whole else 1.0,
            **{k: chunked[k] for k in ("fits", "memory_needed_bytes", "memory_usable_bytes",
                                       "memory_total_bytes", "reserve_bytes", "tp")},
        },
        steps=(
            Step("Prefill FLOPs, linear layers and head",
                 f"2 × {number_format(flops['params'])} non-embedding parameters × "
                 f"{count_phrase(prompt_tokens, 'token')} + the head once",
                 flops["linear"] + flops["head"], "FLOP",
                 flops_format(flops["linear"] + flops["head"])),
            Step("Prefill FLOPs, attention",
                 f"{attention_flops_per_token_pair(m):,} FLOP per (query, key) pair × "
                 f"{prompt_tokens:,} × {prompt_tokens + 1:,} ÷ 2 causal pairs",
                 flops["attention"], "FLOP", flops_format(flops["attention"])),
            Step("Attention's share of the prefill",
                 f"{flops_format(flops['attention'])} ÷ {flops_format(flops['total'])}",
                 attention_share, "", percent_format(attention_share)),
            Step(f"The prompt's prefill alone{gpus} ({alone['largest_step_bound']}-bound)",
                 f"max(memory, compute) of one pass over {count_phrase(prompt_tokens, 'token')}",
                 alone["unchunked_step_seconds"], "s",
                 seconds_format(alone["unchunked_step_seconds"])),
            Step("KV cache the prompt holds",
                 f"{count_phrase(prompt_tokens, 'token')} × {bytes_short(kv_per_token)} per token",
                 kv_bytes, "B", bytes_short(kv_bytes)),
            Step("Prompt tokens per step under the budget",
                 f"{token_budget:,} budget − {amount_phrase(decode_batch, 'decode tokens')}",
                 chunk, "tokens",
                 count_format(chunk, "token")),
            *chunked.steps,
            Step("The long prompt's TTFT, chunked (a floor: no queue)",
                 ("its one step" if chunked["chunks"] == 1 else
                  f"the sum of its {chunked['chunks']:,} steps"), ttft_chunked, "s",
                 seconds_format(ttft_chunked)),
            Step("The long prompt's TTFT, one pass (a floor: no queue)",
                 "one step with the whole prompt and the decoders", ttft_whole, "s",
                 seconds_format(ttft_whole)),
        ),
    )


# Published gains of iteration-level scheduling, quoted on problem 6 with their sources.
PUBLISHED_BATCHING_GAINS = {
    # Yu et al., Orca (OSDI 2022), abstract: throughput at the same latency vs FasterTransformer,
    # on GPT-3 (ORCA_BENCHMARK).
    "orca_vs_fastertransformer": 36.9,
    # Anyscale blog (2023-06-22): 8x from continuous batching alone (text-generation-inference,
    # and their Ray Serve copy of it) over naive static batching (Hugging Face Pipelines), up to
    # 23x with vLLM's paged memory on top; the setup is ANYSCALE_BENCHMARK below.
    "anyscale_continuous": 8.0,
    "anyscale_vllm": 23.0,
    # Kwon et al., PagedAttention (SOSP 2023), abstract: 2-4x the throughput of Orca and
    # FasterTransformer at the same latency.
    "vllm_low": 2.0,
    "vllm_high": 4.0,
    # PagedAttention, Fig. 2 and its text: only 20.4%-38.2% of the KV memory of earlier systems
    # (Orca variants) held actual token states.
    "token_states_low": 0.204,
    "token_states_high": 0.382,
}

# The benchmark behind the Anyscale figures (its "Benchmarking setup"): Meta's OPT-13B on one
# A100 with 40 GB, a queue of 1,000 requests of 512 input tokens each, output lengths drawn from
# an exponential distribution with a mean of 128 tokens and capped at 32, 128, 512 or 1,536.
# The model behind Orca's figure (its abstract): GPT-3 with 175 billion parameters.
ORCA_BENCHMARK = {"model": "GPT-3", "parameters_billion": 175}

ANYSCALE_BENCHMARK = {
    "model": "OPT-13B",
    "gpu": "A100",
    "gpu_memory_gb": 40,
}


# Agrawal et al., Sarathi-Serve (OSDI 2024): serving capacity (the highest load that meets a
# P99 time-between-tokens target). The abstract gives Mistral-7B's and Yi-34B's against vLLM,
# and "up to 5.6x" end-to-end for Falcon-180B with pipeline parallelism without naming that
# one's baseline. The paper's hybrid-parallelism experiment (Figure 8 of its OSDI artifact,
# osdi-experiments/figure-8) sets Falcon-180B's tensor parallelism across two nodes against
# tensor plus pipeline parallelism; no figure for it beyond the abstract's is quoted here.
PUBLISHED_CHUNKED_PREFILL_GAINS = {
    "sarathi_mistral_7b_1xa100": 2.6,
    "sarathi_yi_34b_2xa100_tp2": 3.7,
    "sarathi_falcon_180b_pp": 5.6,
}
# vLLM's default per-step token budget (max_num_batched_tokens) when none is set,
# vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: on GPUs of at least 70 GiB other
# than the A100 (H100, MI300X), 8,192 for the OpenAI-compatible server and 16,384 for the
# offline LLM class; on other GPUs 2,048 and 8,192.
VLLM_DEFAULT_TOKEN_BUDGETS = {
    "large_gpu_server": 8_192,
    "large_gpu_offline": 16_384,
    "other_gpu_server": 2_048,
    "other_gpu_offline": 8_192,
}
# The models those two gains were measured on, as the paper names them.
SARATHI_MODELS = {"small": "Mistral-7B", "large": "Falcon-180B"}


def occupancy_curve(*, distribution: str, output_min: int, output_max: int, output_mean: int,
                    points: int = 48) -> tuple[list[float], list[float]]:
    """Expected share of a static batch's slots still running at each decode step, P(L > t)
    (steps, fraction): 1 until the shortest output, then falling to 0 at the longest."""
    a, c = float(output_min), float(output_max)
    xs = [a * i / 4 for i in range(4)] + [a + (c - a) * i / (points - 1) for i in range(points)]
    ys = []
    for t in xs:
        if t < a:
            ys.append(1.0)
        elif distribution == "uniform":
            ys.append(1.0 if c == a else max(0.0, (c - t) / (c - a)))
        else:
            theta = output_mean - a
            ys.append(0.0 if t >= c else (math.exp(-(t - a) / theta) if theta > 0 else 0.0))
    return xs, ys
