"""Decode: one step reads every weight it uses plus each sequence's KV cache, so its floor is
bytes ÷ bandwidth; tokens/s per sequence and in aggregate; a whole answer of many tokens."""

from problems.arithmetic.catalog import Gpu, Model, dtype_get, gpu_get, model_get
from problems.arithmetic.compute import attention_flops_per_token_pair, peak_flops_get
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
from problems.arithmetic.memory import kv_cache, params_count_model
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    flops_rate_format,
    number_format,
    rate_format,
    seconds_format,
)


def experts_touched(*, model: Model, batch: int) -> float:
    """Expected distinct routed experts a decode step reads per MoE layer (experts).

    With uniform routing each token picks k of E experts, so one expert escapes a token with
    probability (E − k) / E and the whole batch with that to the power `batch`.
    """
    e, k = model.experts_routed, model.experts_per_token
    return e * (1 - ((e - k) / e) ** batch)


def weights_read_params(*, model: Model, batch: int) -> float:
    """Parameters a decode step of `batch` sequences reads (parameters).

    Dense: all of them. MoE: the shared weights plus the experts the batch touches, which is
    the active set at batch 1 and approaches every expert as the batch grows.
    """
    parts = params_count_model(model)
    if not model.is_moe:
        return parts["total"]
    routed_all = model.experts_routed * parts["expert"] * parts["moe_layers"]
    routed_read = experts_touched(model=model, batch=batch) * parts["expert"] * parts["moe_layers"]
    return parts["total"] - routed_all + routed_read


def decode_step_model(
    *,
    model: Model,
    gpu: Gpu,
    batch: int,
    context_tokens: int,
    weight_bytes_per_param: float,
    kv_bytes_per_token: float,
    bandwidth_efficiency: float,
) -> dict[str, float]:
    """Bytes one decode step reads and its memory-bound time (bytes, seconds)."""
    weights = weights_read_params(model=model, batch=batch) * weight_bytes_per_param
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
) -> Result:
    """One decode step and a whole answer on one `gpu` (bytes, seconds, tokens/s).

    `context_tokens` is the KV each of the `batch` sequences holds when the step runs. The
    step's floor is the bytes it reads at `bandwidth_efficiency` × peak bandwidth; if its
    FLOPs at peak would take longer, the step is compute-bound and takes that long instead.
    `total_seconds` sums `output_tokens` steps while each sequence's KV grows by one token per
    step (from `context_tokens` up).
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = dtype_get(kv_dtype or dtype, field="kv_dtype")
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    kv_per_token = kv_cache(model=model, tokens=1, dtype=kv_d.id)["bytes_per_token"]
    step = decode_step_model(
        model=m,
        gpu=g,
        batch=batch,
        context_tokens=context_tokens,
        weight_bytes_per_param=d.bytes,
        kv_bytes_per_token=kv_per_token,
        bandwidth_efficiency=bandwidth_efficiency,
    )
    active = params_count_model(m)["active"]
    flops = batch * (2 * active + attention_flops_per_token_pair(m) * context_tokens)
    peak = peak_flops_get(gpu=g, dtype=d)
    compute_seconds = flops / peak
    step_seconds = max(step["seconds"], compute_seconds)
    bound = "memory" if step["seconds"] >= compute_seconds else "compute"
    # KV grows one token per step: the mean context over the answer is context + (n − 1) / 2.
    mean_context = context_tokens + (output_tokens - 1) / 2
    mean_bytes = step["weights"] + batch * mean_context * kv_per_token
    mean_flops = batch * (2 * active + attention_flops_per_token_pair(m) * mean_context)
    mean_step = max(mean_bytes / step["bandwidth"], mean_flops / peak)
    total_seconds = output_tokens * mean_step
    per_sequence = 1 / step_seconds
    aggregate = batch / step_seconds
    weights_label = (
        f"{number_format(weights_read_params(model=m, batch=batch))} parameters read "
        f"(shared + experts touched)"
        if m.is_moe
        else f"{number_format(active)} parameters"
    )
    steps = (
        Step(
            "Weights read per step",
            f"{weights_label} × {number_format(d.bytes)} B ({d.name})",
            step["weights"],
            "B",
            bytes_format(step["weights"]),
        ),
        Step(
            "KV read per step",
            f"{count_format(batch, 'sequence')} × {count_format(context_tokens, 'token')} × "
            f"{bytes_short(kv_per_token)} "
            f"per token ({kv_d.name})",
            step["kv"],
            "B",
            bytes_format(step["kv"]),
        ),
        Step(
            "Bytes per step",
            f"{bytes_short(step['weights'])} + {bytes_short(step['kv'])}",
            step["bytes"],
            "B",
            bytes_format(step["bytes"]),
        ),
        Step(
            "Usable bandwidth",
            f"{bandwidth_format(g.bandwidth_bytes_per_second)} × "
            f"{number_format(bandwidth_efficiency)}",
            step["bandwidth"],
            "B/s",
            bandwidth_format(step["bandwidth"]),
        ),
        Step(
            "Memory floor per step",
            f"{bytes_short(step['bytes'])} ÷ {bandwidth_format(step['bandwidth'])}",
            step["seconds"],
            "s",
            seconds_format(step["seconds"]),
        ),
        Step(
            "Compute per step at peak",
            f"{flops_format(flops)} ÷ {flops_rate_format(peak)}",
            compute_seconds,
            "s",
            seconds_format(compute_seconds),
        ),
        Step(
            f"Step time ({bound}-bound)",
            f"max({seconds_format(step['seconds'])}, {seconds_format(compute_seconds)})",
            step_seconds,
            "s",
            seconds_format(step_seconds),
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
            "Whole answer",
            f"{output_tokens:,} steps × {seconds_format(mean_step)} (mean step as KV grows "
            f"from {context_tokens:,} tokens)",
            total_seconds,
            "s",
            seconds_format(total_seconds),
        ),
    )
    return Result(
        values={
            "bytes_per_step": step["bytes"],
            "weight_bytes_per_step": step["weights"],
            "kv_bytes_per_step": step["kv"],
            "memory_seconds": step["seconds"],
            "weights_floor_seconds": step["weights"] / step["bandwidth"],
            # Decode reads what must already sit in memory: all weights (every expert) and
            # each sequence's KV at the end of the answer.
            "fits_in_memory": params_count_model(m)["total"] * d.bytes
            + batch * (context_tokens + output_tokens) * kv_per_token
            <= g.memory_bytes,
            "compute_seconds": compute_seconds,
            "step_seconds": step_seconds,
            "bound": bound,
            "total_seconds": total_seconds,
            "tokens_per_second": aggregate,
            "tokens_per_second_per_sequence": per_sequence,
        },
        steps=steps,
    )
