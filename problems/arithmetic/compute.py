"""Prefill: the FLOPs of a prompt (the weight matmuls, the output head at the last position, causal
attention) and its time as a roofline bound: the larger of its compute time at a model FLOPs
utilisation (MFU) and the time to read the weights once (and write the prompt's KV) at a share
of peak bandwidth. Short prompts are memory-bound, long ones compute-bound."""

from problems.arithmetic.catalog import (
    Dtype,
    Gpu,
    Model,
    dtype_get,
    gpu_get,
    kv_dtype_get,
    model_get,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    kv_values_per_token_layer,
    memory_fit,
    params_count_model,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    ops_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

# Where a bisection for a crossover gives up: far past any model's context window.
CROSSOVER_MAX = 10**8


def peak_flops_get(*, gpu: Gpu, dtype: Dtype) -> float:
    """The dense peak of `gpu`'s matrix units (tensor cores, or AMD's Matrix Cores) for
    `dtype`'s matmuls (FLOP/s, or OP/s for INT8).

    Weight-only formats run at the activations' rate (BF16); MXFP4 falls back to that on a GPU
    without FP4 matrix units, as engines run it there.
    """
    rate = gpu.rate_get(dtype.compute)
    if rate is None and dtype.weight_only_on:
        rate = gpu.rate_get(dtype.weight_only_on)
    if rate is None:
        raise ArithmeticInputError(
            field="dtype",
            message=f"the {gpu.name} has no {dtype.compute.upper()} {gpu.matrix_units} for "
            f"{dtype.name}",
        )
    return rate


def native_peak_get(*, gpu: Gpu, dtype: Dtype, field: str = "dtype") -> float:
    """The dense peak of `gpu`'s own matrix units for `dtype` (FLOP/s, or OP/s for INT8),
    refusing a format the GPU would only run weight-only (NVFP4 or MXFP4 off Blackwell)."""
    if gpu.rate_get(dtype.compute) is None:
        fallback = (f": engines run it weight-only there, at the "
                    f"{dtype.weight_only_on.upper()} rate" if dtype.weight_only_on else "")
        raise ArithmeticInputError(
            field=field,
            message=f"the {gpu.name} has no {dtype.compute.upper()} {gpu.matrix_units} for "
            f"{dtype.name}{fallback}",
        )
    return peak_flops_get(gpu=gpu, dtype=dtype)


def peak_describe(*, gpu: Gpu, dtype: Dtype) -> str:
    """The peak named for what it is: which matrix units (by the vendor's name), dense, and
    FLOP/s or OPS."""
    peak = peak_flops_get(gpu=gpu, dtype=dtype)
    if dtype.compute == "int8":
        return (f"{ops_format(peak)} dense INT8 {gpu.matrix_unit_attributive} peak (integer "
                f"operations, W8A8)")
    if dtype.compute == "fp32":
        return f"{rate_of_format(peak)} FP32 peak ({gpu.vector_units}, no {gpu.matrix_units})"
    if dtype.weight_only or (gpu.rate_get(dtype.compute) is None and dtype.weight_only_on):
        return (
            f"{rate_of_format(peak)} dense BF16 peak: {dtype.name} weights are dequantized and "
            f"multiplied in BF16 (weight-only), so compute runs at the BF16 rate"
        )
    kind = {"bf16": "BF16", "fp8": "FP8", "fp4": "FP4"}[dtype.compute]
    return f"{rate_of_format(peak)} dense {kind} {gpu.matrix_unit_attributive} peak"


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


def decode_attention_flops_per_token_pair(model: Model) -> int:
    """FLOPs of decode attention for one (query, cached token) pair, summed over heads and
    layers (FLOP), in the form decode kernels compute it.

    For MHA, GQA and MQA that is the same count as prefill's (`attention_flops_per_token_pair`).
    MLA decodes in the absorbed form (DeepSeek-V2 §2.1.2; FlashMLA, and vLLM's and SGLang's MLA
    decode): the key up-projection is folded into the query and the value up-projection into
    the output, so every head scores its query against the cached latent and RoPE key
    (2 × (kv_lora_rank + qk_rope_head_dim)) and sums the latent itself (2 × kv_lora_rank).
    DeepSeek-V3: 2 × 128 × (512 + 64) + 2 × 128 × 512 = 278,528 FLOP a pair per layer, against
    81,920 decompressed: with one 576-value latent read for all 128 heads, the kernel does about
    2 × 128 FLOP per byte in BF16 and is compute-bound on every GPU here. The per-token
    projections that absorption moves are the same weights, counted in the linear layers."""
    if model.attention != "MLA":
        return attention_flops_per_token_pair(model)
    per_head = 2 * (model.kv_lora_rank + model.qk_rope_head_dim) + 2 * model.kv_lora_rank
    return model.layers * model.heads * per_head


def prefill_flops_model(
    model: Model, tokens: int, *, logits_positions: int = 1
) -> dict[str, float]:
    """FLOPs to prefill `tokens` tokens of one prompt (FLOP), counted as the GPU does them.

    Linear: 2 FLOPs (multiply, add) per non-embedding weight a token uses, per token; the
    embedding lookup is a gather, not a matmul. Head: the output projection (vocab × hidden)
    only for the positions whose logits are needed, the last one. Attention: causal, so each
    token attends to itself and the tokens before it: T·(T+1)/2 pairs. `rule_of_thumb` is the
    familiar 2·N·T with N every parameter, embedding and head included, for every token.
    """
    parts = params_count_model(model)
    body = parts["non_embedding_active"]
    linear = 2 * body * tokens
    head = 2 * parts["head"] * min(logits_positions, tokens)
    pairs = tokens * (tokens + 1) / 2
    attention = attention_flops_per_token_pair(model) * pairs
    return {
        "params": body,
        "linear": linear,
        "head": head,
        "attention": attention,
        "total": linear + head + attention,
        "rule_of_thumb": 2 * parts["active"] * tokens,
        "params_rule": parts["active"],
    }


def kv_bytes_per_token_model(model: Model, kv_dtype: Dtype) -> float:
    """KV bytes one token adds to the cache, over all layers (bytes)."""
    return model.layers * kv_values_per_token_layer(model)[0] * kv_dtype.bytes


def prefill_times_model(
    *,
    model: Model,
    gpu: Gpu,
    tokens: int,
    dtype: Dtype,
    embedding: Dtype,
    kv_dtype: Dtype,
    mfu: float,
    bandwidth_efficiency: float,
) -> dict[str, float]:
    """Compute time and memory time of one prefill pass over `tokens` tokens (seconds, bytes).

    Memory: the weights read once (the body the tokens touch, the output head), the tokens'
    embedding rows gathered and their KV written. Activations passed between layers stay on
    chip in fused kernels and are left out.
    """
    flops = prefill_flops_model(model, tokens)
    reads = weights_read_model(model=model, tokens=tokens, dtype=dtype, embedding=embedding)
    kv_written = tokens * kv_bytes_per_token_model(model, kv_dtype)
    total_bytes = reads["total"] + reads["embedding_rows"] + kv_written
    achieved = peak_flops_get(gpu=gpu, dtype=dtype) * mfu
    bandwidth = gpu.bandwidth_bytes_per_second * bandwidth_efficiency
    return {
        **{f"flops_{k}": v for k, v in flops.items()},
        "weights_read": reads["total"],
        "embedding_rows": reads["embedding_rows"],
        "kv_written": kv_written,
        "bytes": total_bytes,
        "achieved": achieved,
        "bandwidth": bandwidth,
        "compute_seconds": flops["total"] / achieved,
        "memory_seconds": total_bytes / bandwidth,
    }


def crossover_find(compute_minus_memory, *, high: int = CROSSOVER_MAX) -> int:
    """The smallest whole n ≥ 1 where `compute_minus_memory(n)` ≥ 0, or 0 if none up to `high`.

    Compute grows faster than memory in every case here, so the sign changes once.
    """
    if compute_minus_memory(high) < 0:
        return 0
    low = 1
    if compute_minus_memory(low) >= 0:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        if compute_minus_memory(middle) >= 0:
            high = middle
        else:
            low = middle
    return high


def time_label(base: str, *, bound: str, efficiency: float) -> str:
    """"Prefill floor (compute-bound)" when the binding side runs at 100% of peak, else
    "Prefill time (compute-bound)": a result at 100% is a floor and says so."""
    kind = "floor" if efficiency >= 1.0 else "time"
    return f"{base} {kind} ({bound}-bound)"


def prefill(
    *,
    model: str,
    gpu: str,
    prompt_tokens: int,
    dtype: str = "bf16",
    mfu: float = 1.0,
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    embedding_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """FLOPs of a `prompt_tokens` prefill (FLOP) and its time on one `gpu` (seconds): the larger
    of compute at `mfu` of the dense peak and the weight reads at `bandwidth_efficiency` of peak
    bandwidth, with the bound named and the prompt length where they cross."""
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    peak = peak_flops_get(gpu=g, dtype=d)
    parts = params_count_model(m)

    def times(tokens: int) -> dict[str, float]:
        return prefill_times_model(
            model=m, gpu=g, tokens=tokens, dtype=d, embedding=e, kv_dtype=kv_d, mfu=mfu,
            bandwidth_efficiency=bandwidth_efficiency,
        )

    t = times(prompt_tokens)
    seconds = max(t["compute_seconds"], t["memory_seconds"])
    bound = "compute" if t["compute_seconds"] >= t["memory_seconds"] else "memory"
    crossover = crossover_find(
        lambda n: (lambda x: x["compute_seconds"] - x["memory_seconds"])(times(n))
    )
    linear = t["flops_linear"] + t["flops_head"]
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    weights_total = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights_total, kv_bytes=prompt_tokens * kv_per_token,
        reserve_gb=reserve_gb, memory_fraction=memory_fraction,
    )
    what = "non-embedding active parameters" if m.is_moe else "non-embedding parameters"
    rule_what = "active parameters" if m.is_moe else "parameters"
    unit = "OP" if d.compute == "int8" else "FLOP"
    efficiency = mfu if bound == "compute" else bandwidth_efficiency
    steps = (
        Step(
            "Rule of thumb: 2 × N × T",
            f"2 × {number_format(parts['active'])} {rule_what} × "
            f"{count_phrase(prompt_tokens, 'token')} "
            "(counts the embedding and output head as matmuls for every token)",
            t["flops_rule_of_thumb"],
            "FLOP",
            flops_format(t["flops_rule_of_thumb"]),
        ),
        Step(
            "Linear layers",
            f"2 FLOP × {number_format(t['flops_params'])} {what} × "
            f"{count_phrase(prompt_tokens, 'token')} "
            "(the embedding lookup is a gather: no FLOPs)",
            t["flops_linear"],
            "FLOP",
            flops_format(t["flops_linear"]),
        ),
        Step(
            "Output head, last position only",
            f"2 × {m.vocab:,} vocab × {m.hidden:,} hidden × 1 position (only the last position's "
            "logits pick the first token)",
            t["flops_head"],
            "FLOP",
            flops_format(t["flops_head"]),
        ),
        Step(
            "Attention (causal)",
            f"{attention_flops_per_token_pair(m):,} FLOP per token pair × "
            f"{prompt_tokens:,} × {prompt_tokens + 1:,} ÷ 2 pairs",
            t["flops_attention"],
            "FLOP",
            flops_format(t["flops_attention"]),
        ),
        Step(
            "Prefill FLOPs, counted",
            f"{flops_format(t['flops_linear'])} + {flops_format(t['flops_head'])} + "
            f"{flops_format(t['flops_attention'])} "
            f"({number_format(t['flops_total'] / t['flops_rule_of_thumb'] * 100, digits=2)}% "
            "of the rule of thumb)",
            t["flops_total"],
            "FLOP",
            flops_format(t["flops_total"]),
        ),
        Step(
            "Peak for this format",
            peak_describe(gpu=g, dtype=d),
            peak,
            f"{unit}/s",
            rate_of_format(peak, unit=unit),
        ),
        Step(
            "Achieved compute",
            f"{rate_of_format(peak, unit=unit)} × {number_format(mfu)} MFU",
            t["achieved"],
            f"{unit}/s",
            rate_of_format(t["achieved"], unit=unit),
        ),
        Step(
            "Compute time",
            f"{flops_format(t['flops_total'])} ÷ {rate_of_format(t['achieved'], unit=unit)}",
            t["compute_seconds"],
            "s",
            seconds_format(t["compute_seconds"]),
        ),
        Step(
            "Bytes moved",
            f"{bytes_short(t['weights_read'])} of weights read once + "
            f"{bytes_short(t['kv_written'])} of KV written ({kv_d.kv_label}) + "
            f"{bytes_short(t['embedding_rows'])} of embedding rows gathered",
            t["bytes"],
            "B",
            bytes_format(t["bytes"]),
        ),
        Step(
            "Memory time",
            f"{bytes_short(t['bytes'])} ÷ ({bandwidth_format(g.bandwidth_bytes_per_second)} × "
            f"{number_format(bandwidth_efficiency)})",
            t["memory_seconds"],
            "s",
            seconds_format(t["memory_seconds"]),
        ),
        Step(
            time_label("Prefill", bound=bound, efficiency=efficiency),
            f"max({seconds_format(t['compute_seconds'])} compute, "
            f"{seconds_format(t['memory_seconds'])} memory)",
            seconds,
            "s",
            seconds_format(seconds),
        ),
        Step(
            "Compute-bound from",
            f"the prompt length where compute time overtakes the weight reads, at "
            f"{number_format(mfu)} MFU and {number_format(bandwidth_efficiency)} of peak "
            "bandwidth"
            + ("" if crossover else ": never, within any context window")
            + (f": past {m.name}'s {m.context:,}-token context window, so no prompt gets there"
               if m.context and crossover > m.context else ""),
            crossover,
            "tokens",
            count_format(crossover, "token") if crossover else "never",
        ),
        *fit_steps,
    )
    return Result(
        values={
            "flops": t["flops_total"],
            "linear_flops": linear,
            "head_flops": t["flops_head"],
            "attention_flops": t["flops_attention"],
            "rule_of_thumb_flops": t["flops_rule_of_thumb"],
            "seconds": seconds,
            "linear_seconds": linear / t["achieved"],
            "rule_of_thumb_seconds": t["flops_rule_of_thumb"] / t["achieved"],
            "compute_seconds": t["compute_seconds"],
            "memory_seconds": t["memory_seconds"],
            "bytes": t["bytes"],
            "weight_bytes_read": t["weights_read"],
            "bound": bound,
            "crossover_tokens": crossover,
            "peak_flops": peak,
            **fit,
        },
        steps=steps,
    )

