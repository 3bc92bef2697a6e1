"""Decode: one step reads the weights it uses (the non-embedding body and the output head) plus
each sequence's KV cache, and does a little arithmetic per sequence; its time is the larger of the
two (a roofline bound). Tokens/s per sequence and in aggregate; a whole answer, whose first token
came from prefill, so an answer of n tokens takes n − 1 decode steps."""

from problems.arithmetic.catalog import Gpu, Model, dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    crossover_find,
    decode_attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_describe,
    peak_flops_get,
    time_label,
)
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    experts_touched,
    memory_fit,
    params_count_model,
    weight_bytes_model,
    weights_read_model,
    window_advice,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    rate_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, share_phrase

__all__ = ["decode", "decode_step_model", "experts_touched", "weights_read_params"]


def weights_read_params(*, model: Model, batch: int) -> float:
    """Parameters a decode step of `batch` sequences reads (parameters): the non-embedding body
    (for MoE, the shared weights plus the experts the batch touches) and the output head."""
    parts = params_count_model(model)
    body = parts["non_embedding"]
    if model.is_moe:
        routed_all = model.experts_routed * parts["expert"] * parts["moe_layers"]
        routed_read = experts_touched(model=model, batch=batch) * parts["expert"] * parts[
            "moe_layers"]
        body = body - routed_all + routed_read
    return body + parts["head"]


def decode_flops_per_sequence(model: Model, context_tokens: float) -> float:
    """FLOPs one sequence's token costs in a decode step (FLOP): 2 per non-embedding active
    weight, the output head, and attention over the `context_tokens` in its cache (MLA in the
    absorbed form decode kernels use: `decode_attention_flops_per_token_pair`)."""
    parts = params_count_model(model)
    return (
        2 * (parts["non_embedding_active"] + parts["head"])
        + decode_attention_flops_per_token_pair(model) * context_tokens
    )


def decode_step_model(
    *,
    model: Model,
    gpu: Gpu,
    batch: int,
    context_tokens: int,
    weight_bytes_per_param: float,
    kv_bytes_per_token: float,
    bandwidth_efficiency: float,
    embedding_bytes_per_param: float | None = None,
) -> dict[str, float]:
    """Bytes one decode step reads and its memory-bound time (bytes, seconds).

    Weights: the body at `weight_bytes_per_param`, the output head at
    `embedding_bytes_per_param` (default: the same). KV: each sequence's `context_tokens`.
    """
    parts = params_count_model(model)
    body = weights_read_params(model=model, batch=batch) - parts["head"]
    head_bytes = embedding_bytes_per_param or weight_bytes_per_param
    weights = body * weight_bytes_per_param + parts["head"] * head_bytes
    kv = batch * context_tokens * kv_bytes_per_token
    bandwidth = gpu.bandwidth_bytes_per_second * bandwidth_efficiency
    return {
        "weights": weights,
        "kv": kv,
        "bytes": weights + kv,
        "bandwidth": bandwidth,
        "seconds": (weights + kv) / bandwidth,
    }


def decode(
    *,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1,
    output_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    mfu: float = 1.0,
    embedding_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """One decode step and a whole answer on one `gpu` (bytes, seconds, tokens/s).

    `context_tokens` is the KV each of the `batch` sequences holds when the step runs. The step
    takes the larger of its bytes at `bandwidth_efficiency` × peak bandwidth and its FLOPs at
    `mfu` × the dense peak, and says which bound applies and from what batch compute takes
    over. An answer of `output_tokens` tokens is one prefill (which yields the first) plus
    `output_tokens` − 1 decode steps, each sequence's KV growing by one token per step. The KV
    cache is in `kv_dtype`, by default the model's own precision (BF16), not the weights'.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    lengths = {"model": m, "first": context_tokens, "second": output_tokens,
               "first_name": "context", "second_name": "answer"}
    context_check(model=m, tokens=context_tokens, field="context_tokens",
                  advice=window_advice(**lengths, excess=False))
    context_check(
        model=m, tokens=context_tokens + output_tokens, field="output_tokens",
        what=f"the context ({context_tokens:,}) plus the answer ({output_tokens:,})",
        advice=window_advice(**lengths),
    )
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    mfu = fraction_check(mfu, field="mfu")
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    peak = peak_flops_get(gpu=g, dtype=d)
    achieved = peak * mfu
    # INT8 tensor cores are rated in integer operations per second (OPS), not FLOP/s.
    rate_unit = "OP" if d.compute == "int8" else "FLOP"
    parts = params_count_model(m)

    def step_at(sequences: int, context: float) -> dict[str, float]:
        memory = decode_step_model(
            model=m, gpu=g, batch=sequences, context_tokens=context,
            weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_efficiency=bandwidth_efficiency, embedding_bytes_per_param=e.bytes,
        )
        flops = sequences * decode_flops_per_sequence(m, context)
        compute = flops / achieved
        return {**memory, "flops": flops, "compute": compute,
                "time": max(memory["seconds"], compute)}

    step = step_at(batch, context_tokens)
    step_seconds = step["time"]
    bound = "memory" if step["seconds"] >= step["compute"] else "compute"
    crossover = crossover_find(
        lambda b: (lambda x: x["compute"] - x["seconds"])(step_at(b, context_tokens)),
        high=USERS_MAX,
    )
    # n − 1 decode steps; the cache grows one token per step from `context_tokens`.
    decode_steps = output_tokens - 1
    mean_context = context_tokens + (decode_steps - 1) / 2 if decode_steps else context_tokens
    mean_step = step_at(batch, mean_context)["time"]
    total_seconds = decode_steps * mean_step
    per_sequence = 1 / step_seconds
    aggregate = batch / step_seconds
    reads = weights_read_model(model=m, tokens=batch, dtype=d, embedding=e)
    # The rule of thumb reads every parameter the batch's tokens use once: all of a dense model;
    # of an MoE model the shared weights and, per MoE layer, up to min(E, batch × k) experts
    # (the k of one sequence at batch 1, every expert once the batch covers them), embedding
    # and head included.
    rule_experts = (min(m.experts_routed, batch * m.experts_per_token) if m.is_moe else 0)
    rule_params = parts["active"] + (
        (rule_experts - m.experts_per_token) * parts["expert"] * parts["moe_layers"]
        if m.is_moe else 0)
    rule_weights = rule_params * d.bytes
    rule_floor = rule_weights / step["bandwidth"]
    weights_all = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    kv_at_end = batch * (context_tokens + decode_steps) * kv_per_token
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_all, kv_bytes=kv_at_end, reserve_gb=reserve_gb,
        memory_fraction=memory_fraction,
    )
    room = float(fit["memory_usable_bytes"]) - weights_all - float(fit["reserve_bytes"])
    per_sequence_end = (context_tokens + decode_steps) * kv_per_token
    largest_batch = max(0, int(room // per_sequence_end)) if room > 0 else 0
    weight_share = step["weights"] / step["bytes"]
    body_label = (
        f"{number_format(reads['body_params'])} non-embedding parameters read (shared + experts "
        f"touched)"
        if m.is_moe
        else f"{number_format(reads['body_params'])} non-embedding parameters"
    )
    head_what = "the embedding matrix, tied" if m.tied_embeddings else "untied"
    efficiency = bandwidth_efficiency if bound == "memory" else mfu
    steps = (
        Step(
            "Rule of thumb: every active parameter once" if m.is_moe and batch == 1
            else "Rule of thumb: every parameter the batch uses once" if m.is_moe
            else "Rule of thumb: every parameter once",
            f"{number_format(rule_params)} {'active ' if m.is_moe and batch == 1 else ''}"
            "parameters"
            + (f" (shared + min({m.experts_routed:,} experts, {batch:,} sequences × "
               f"{m.experts_per_token:,}) = {rule_experts:,} experts per MoE layer)"
               if m.is_moe and batch > 1 else "")
            + f" × {number_format(d.bytes)} B "
            f"= {bytes_short(rule_weights)}, ÷ {bandwidth_format(step['bandwidth'])}",
            rule_floor,
            "s",
            seconds_format(rule_floor),
        ),
        Step(
            "Weights read per step",
            f"{body_label} × {number_format(d.bytes)} B ({d.name}) + output head "
            f"{m.vocab:,} × {m.hidden:,} ({head_what}) × {number_format(e.bytes)} B ({e.name}); "
            "the embedding lookup gathers only the batch's rows",
            step["weights"],
            "B",
            bytes_format(step["weights"]),
        ),
        Step(
            "KV read per step",
            f"{count_format(batch, 'sequence')} × {count_format(context_tokens, 'token')} × "
            f"{bytes_short(kv_per_token)} per token ({kv_d.kv_label})",
            step["kv"],
            "B",
            bytes_format(step["kv"]),
        ),
        Step(
            "Bytes per step",
            f"{bytes_short(step['weights'])} + {bytes_short(step['kv'])}: weights "
            f"{share_phrase(weight_share)}, KV {share_phrase(1 - weight_share)}",
            step["bytes"],
            "B",
            bytes_format(step["bytes"]),
        ),
        Step(
            "Usable bandwidth",
            f"{bandwidth_format(g.bandwidth_bytes_per_second)} × "
            f"{number_format(bandwidth_efficiency)} of peak",
            step["bandwidth"],
            "B/s",
            bandwidth_format(step["bandwidth"]),
        ),
        Step(
            "Memory time per step",
            f"{bytes_short(step['bytes'])} ÷ {bandwidth_format(step['bandwidth'])}",
            step["seconds"],
            "s",
            seconds_format(step["seconds"]),
        ),
        Step(
            "Compute time per step",
            f"{flops_format(step['flops'])} ÷ ({peak_describe(gpu=g, dtype=d)} × "
            f"{number_format(mfu)} MFU = {rate_of_format(achieved, unit=rate_unit)})",
            step["compute"],
            "s",
            seconds_format(step["compute"]),
        ),
        Step(
            time_label("Step", bound=bound, efficiency=efficiency),
            f"max({seconds_format(step['seconds'])} memory, {seconds_format(step['compute'])} "
            "compute)",
            step_seconds,
            "s",
            seconds_format(step_seconds),
        ),
        Step(
            "Compute-bound from",
            "the batch where compute overtakes the reads, at "
            f"{count_format(context_tokens, 'token')} of context"
            + (
                ""
                if crossover
                else ": never, since each added sequence brings "
                f"{bytes_short(context_tokens * kv_per_token)} of KV to read for "
                f"{flops_format(decode_flops_per_sequence(m, context_tokens))}, too few FLOPs "
                "per byte (attention's KV reads stay memory-bound at any batch)"
            ),
            crossover,
            "sequences",
            count_format(crossover, "sequence") if crossover else "never",
        ),
        Step(
            "Tokens/s per sequence",
            f"1 ÷ {seconds_format(step_seconds)}",
            per_sequence,
            "tokens/s",
            rate_format(per_sequence, "tokens/s"),
        ),
        Step(
            "Tokens/s in aggregate",
            f"{count_format(batch, 'sequence')} ÷ {seconds_format(step_seconds)}",
            aggregate,
            "tokens/s",
            rate_format(aggregate, "tokens/s"),
        ),
        Step(
            "Decode loop of the answer",
            f"{count_phrase(output_tokens, 'token')} = 1 from prefill + "
            f"{count_phrase(decode_steps, 'decode step', zero='0')} × "
            f"{seconds_format(mean_step)} (mean step as the KV grows from "
            f"{count_phrase(context_tokens, 'token')})",
            total_seconds,
            "s",
            seconds_format(total_seconds),
        ),
        *fit_steps,
        Step(
            "Largest batch that fits",
            f"⌊{bytes_short(max(room, 0))} left after weights and reserve ÷ "
            f"{bytes_short(per_sequence_end)} per sequence at "
            f"{count_phrase(context_tokens + decode_steps, 'token')}⌋",
            largest_batch,
            "sequences",
            count_phrase(largest_batch, "sequence"),
        ),
    )
    return Result(
        values={
            "bytes_per_step": step["bytes"],
            "weight_bytes_per_step": step["weights"],
            "kv_bytes_per_step": step["kv"],
            "weight_share": weight_share,
            "memory_seconds": step["seconds"],
            "weights_floor_seconds": step["weights"] / step["bandwidth"],
            "rule_of_thumb_weight_bytes": rule_weights,
            "rule_of_thumb_floor_seconds": rule_floor,
            "fits_in_memory": fit["fits"],
            "compute_seconds": step["compute"],
            "flops_per_step": step["flops"],
            "step_seconds": step_seconds,
            "bound": bound,
            "crossover_batch": crossover,
            "decode_steps": decode_steps,
            "total_seconds": total_seconds,
            "tokens_per_second": aggregate,
            "tokens_per_second_per_sequence": per_sequence,
            "largest_batch": largest_batch,
            **fit,
        },
        steps=steps,
    )
