"""Where a decode step's time must go, and how busy against how efficient the GPU is.

A decode step runs its kernels one after another: the attention projections, the MLP, the
output head, the norms and attention over each sequence's KV cache. Each group has a floor, the
larger of its bytes at the bandwidth and its FLOPs at the dense peak; the step's floor is the
sum of the groups' floors (kernels in sequence cannot hide a compute-bound group behind a
memory-bound one). Add a host time per step that the GPU waits for, and the step's wall time
gives what nvidia-smi calls utilisation (the share of time a kernel runs), set beside MFU and
MBU (the share of peak compute and peak bandwidth used over the same time).

Counted as problems/arithmetic/decode.py counts a step: the non-embedding weights (for an MoE,
the shared weights plus the experts the batch touches) and the output head, read once per step;
two FLOPs per weight per sequence; attention's FLOPs over each sequence's context.
"""

from problems.arithmetic.catalog import Gpu, Model, dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import (
    decode_attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_describe,
    peak_flops_get,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    experts_touched,
    memory_fit,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    rate_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

# Decode batches the calculators take: far past any real step, small enough to stay quick.
BATCH_MAX = 65_536
HOST_MS_MAX = 10_000.0
HOST_PER_SEQUENCE_US_MAX = 100_000.0
# The kernels an eager Llama-style layer launches in vLLM's model code with q/k/v and gate/up
# packed (vllm/model_executor/models/llama.py, --enforce-eager): two norms, each with the residual
# add fused in (fused_add_rms_norm), four matmuls (qkv, o, gate_up, down), RoPE, the KV-cache
# write (reshape_and_cache), attention and the activation (silu_and_mul). Hugging Face's eager
# code runs the adds, the norm's steps and the activation's as separate ops: several times this.
KERNELS_PER_LAYER = 10
# Outside the layers: the embedding gather, the final norm and the output head.
KERNELS_OUTSIDE_LAYERS = 3

GROUPS = ("attn_proj", "mlp", "lm_head", "norms", "kv")
GROUP_LABELS = {
    "attn_proj": "attention projections",
    "mlp": "MLP",
    "lm_head": "LM head",
    "norms": "norms",
    "kv": "KV-cache attention",
}


def decode_groups_model(
    *,
    model: Model,
    batch: int,
    context_tokens: float,
    weight_bytes_per_param: float,
    kv_bytes_per_token: float,
    bandwidth_bytes_per_second: float,
    peak_flops: float,
    embedding_bytes_per_param: float | None = None,
    queries_per_sequence: int = 1,
    attention_peak_flops: float | None = None,
    head_peak_flops: float | None = None,
) -> list[dict[str, float | str]]:
    """One decode step of `batch` sequences split into kernel groups, each with its parameters
    read, bytes, FLOPs, memory and compute seconds, floor (the larger) and bound.

    No catalog lookups: the rates are arguments (a datasheet's, or a machine's measured ones).
    `context_tokens` is each sequence's KV length; the head is read at
    `embedding_bytes_per_param` (default: the weights' format). `queries_per_sequence`
    positions per sequence (γ + 1 for a speculative verification pass) each run through every
    matmul and attend over the context, while the weights and each sequence's KV are read once.
    The KV group's FLOPs run at `attention_peak_flops` (default `peak_flops`): attention
    kernels compute in BF16 even over an FP8 cache or beside FP8 weights, so the calculators
    pass the BF16 rate. The head's FLOPs run at `head_peak_flops` (default `peak_flops`): a head
    kept in BF16 beside FP8 or 4-bit layers multiplies at the BF16 rate. MLA is counted in its
    absorbed decode form.
    """
    parts = params_count_model(model)
    rows_in = batch * queries_per_sequence  # positions through the matmuls
    moe_layers = parts["moe_layers"]
    dense_layers = model.layers - moe_layers
    attn = parts["attention_per_layer"] * model.layers
    mlp_dense = parts["dense_ffn_per_layer"] * dense_layers
    if model.is_moe:
        router = model.hidden * model.experts_routed
        touched = experts_touched(model=model, batch=rows_in)
        mlp_read = mlp_dense + moe_layers * (
            (model.experts_shared + touched) * parts["expert"] + router)
        mlp_used = mlp_dense + moe_layers * (
            (model.experts_shared + model.experts_per_token) * parts["expert"] + router)
    else:
        mlp_read = mlp_used = mlp_dense
    head_bytes = embedding_bytes_per_param or weight_bytes_per_param
    rows = (
        ("attn_proj", attn, attn * weight_bytes_per_param, 2 * attn * rows_in),
        ("mlp", mlp_read, mlp_read * weight_bytes_per_param, 2 * mlp_used * rows_in),
        ("lm_head", parts["head"], parts["head"] * head_bytes, 2 * parts["head"] * rows_in),
        # Norm weights are counted as the other weights are (two FLOPs each per position).
        ("norms", parts["norms"], parts["norms"] * weight_bytes_per_param,
         2 * parts["norms"] * rows_in),
        ("kv", 0.0, batch * context_tokens * kv_bytes_per_token,
         rows_in * context_tokens * decode_attention_flops_per_token_pair(model)),
    )
    groups = []
    for name, params, size, flops in rows:
        memory = size / bandwidth_bytes_per_second
        rate = (attention_peak_flops if name == "kv" and attention_peak_flops
                else head_peak_flops if name == "lm_head" and head_peak_flops else peak_flops)
        compute = flops / rate
        groups.append({
            "name": name,
            "label": GROUP_LABELS[name],
            "params": float(params),
            "bytes": float(size),
            "flops": float(flops),
            "memory_seconds": memory,
            "compute_seconds": compute,
            "seconds": max(memory, compute),
            "bound": "memory" if memory >= compute else "compute",
        })
    return groups


def step_bound(groups: list[dict]) -> str:
    """"memory" or "compute" when every group with any time is bound the same way, else
    "mixed" (the GEMMs compute-bound, the KV reads still memory-bound)."""
    bounds = {g["bound"] for g in groups if g["seconds"] > 0}
    return bounds.pop() if len(bounds) == 1 else "mixed"


def _inputs_resolve(*, model: str, gpu: str, dtype: str, kv_dtype: str | None,
                    context_tokens: int, bandwidth_efficiency: float):
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    return m, g, d, kv_d, e, context_tokens, bandwidth_efficiency


def _fit(*, model: Model, gpu: Gpu, dtype, embedding, kv_bytes: float, reserve_gb: float,
         memory_fraction: float):
    weights_all = weight_bytes_model(model=model, dtype=dtype, embedding=embedding)["total"]
    return memory_fit(gpu=gpu, weights_bytes=weights_all, kv_bytes=kv_bytes,
                      reserve_gb=reserve_gb, memory_fraction=memory_fraction)


def decode_step_breakdown(
    *,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    mfu: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """One decode step split into kernel groups (bytes, FLOP, seconds per group).

    Groups: attn_proj, mlp, lm_head, norms, kv. Each group's time is
    max(bytes ÷ (bandwidth × bandwidth_efficiency), FLOPs ÷ (peak × mfu)); the step's time is
    their sum, because the kernels run in sequence. Also: the KV group's intensity against the
    ridge, the fewest kernels an eager step launches, and whether every weight, the batch's KV
    and the runtime reserve fit the GPU.
    """
    m, g, d, kv_d, e, context_tokens, bandwidth_efficiency = _inputs_resolve(
        model=model, gpu=gpu, dtype=dtype, kv_dtype=kv_dtype, context_tokens=context_tokens,
        bandwidth_efficiency=bandwidth_efficiency)
    batch = count_check(batch, field="batch", maximum=BATCH_MAX)
    mfu = fraction_check(mfu, field="mfu")
    peak = peak_flops_get(gpu=g, dtype=d)
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    achieved = peak * mfu
    # Attention computes in BF16 whatever the weights' or the cache's format (an FP8 cache is
    # widened in the kernel, as FlashMLA and FlashInfer do), so its rate and ridge are BF16's;
    # a model run in FP32 computes it in FP32.
    attention_peak = g.fp32_flops if d.compute == "fp32" else g.bf16_flops
    attention_name = "FP32" if d.compute == "fp32" else "BF16"
    attention_achieved = attention_peak * mfu
    attention_ridge = attention_peak / g.bandwidth_bytes_per_second
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    groups = decode_groups_model(
        model=m, batch=batch, context_tokens=context_tokens, weight_bytes_per_param=d.bytes,
        kv_bytes_per_token=kv_per_token, bandwidth_bytes_per_second=bandwidth,
        peak_flops=achieved, embedding_bytes_per_param=e.bytes,
        attention_peak_flops=attention_achieved,
        head_peak_flops=peak_flops_get(gpu=g, dtype=e) * mfu)
    by = {gr["name"]: gr for gr in groups}
    step_bytes = sum(gr["bytes"] for gr in groups)
    step_flops = sum(gr["flops"] for gr in groups)
    step_seconds = sum(gr["seconds"] for gr in groups)
    kv = by["kv"]
    kv_intensity = kv["flops"] / kv["bytes"]
    ridge = peak / g.bandwidth_bytes_per_second
    kernels_floor = KERNELS_PER_LAYER * m.layers + KERNELS_OUTSIDE_LAYERS
    fit, fit_steps = _fit(model=m, gpu=g, dtype=d, embedding=e, kv_bytes=kv["bytes"],
                          reserve_gb=reserve_gb, memory_fraction=memory_fraction)
    rate_unit = "OP" if d.compute == "int8" else "FLOP"
    floor = bandwidth_efficiency >= 1 and mfu >= 1
    kind = "floor" if floor else "time"
    mlp_what = (f"the shared weights and the {number_format(experts_touched(model=m, batch=batch))}"
                " experts per layer this batch touches (of "
                f"{m.experts_routed}); {m.experts_per_token} per token multiply"
                if m.is_moe else "gate, up and down")
    whats = {
        "attn_proj": f"q, k, v and o in {m.layers} layers",
        "mlp": mlp_what,
        "lm_head": ("the embedding matrix, read as the head (tied)" if m.tied_embeddings
                    else "its own vocab × hidden matrix") + f" in {e.name}",
        "norms": f"{2 * m.layers + 1} norm weights of {m.hidden:,}",
    }
    steps: list[Step] = [
        Step("Usable bandwidth", f"{bandwidth_format(g.bandwidth_bytes_per_second)} × "
             f"{number_format(bandwidth_efficiency)}", bandwidth, "B/s",
             bandwidth_format(bandwidth)),
        Step("Usable compute", f"{peak_describe(gpu=g, dtype=d)} × {number_format(mfu)}",
             achieved, "FLOP/s", rate_of_format(achieved, unit=rate_unit)),
        Step("Ridge point", f"{rate_of_format(peak, unit=rate_unit)} ÷ "
             f"{bandwidth_format(g.bandwidth_bytes_per_second)}", ridge, "FLOP/B",
             f"{number_format(ridge)} {rate_unit}/B"),
    ]
    for name in ("attn_proj", "mlp", "lm_head", "norms"):
        gr = by[name]
        steps.append(Step(
            f"{gr['label'][0].upper()}{gr['label'][1:]} {kind} ({gr['bound']}-bound)",
            f"{number_format(gr['params'])} parameters ({whats[name]}) = "
            f"{bytes_short(gr['bytes'])} ÷ {bandwidth_format(bandwidth)} = "
            f"{seconds_format(gr['memory_seconds'])}; {flops_format(gr['flops'])} ÷ "
            f"{rate_of_format(achieved, unit=rate_unit)} = "
            f"{seconds_format(gr['compute_seconds'])}",
            gr["seconds"], "s", seconds_format(gr["seconds"])))
    steps.append(Step(
        f"KV-cache attention {kind} ({kv['bound']}-bound)",
        f"{count_format(batch, 'sequence')} × {count_format(context_tokens, 'token')} × "
        f"{bytes_short(kv_per_token)} ({kv_d.kv_label}) = {bytes_short(kv['bytes'])} ÷ "
        f"{bandwidth_format(bandwidth)} = {seconds_format(kv['memory_seconds'])}; "
        f"{flops_format(kv['flops'])}"
        + (" (MLA in the absorbed form decode kernels run)" if m.attention == "MLA" else "")
        + f" ÷ {rate_of_format(attention_achieved)} ({attention_name}) = "
        f"{seconds_format(kv['compute_seconds'])}",
        kv["seconds"], "s", seconds_format(kv["seconds"])))
    steps.append(Step(
        "KV-cache intensity against the ridge",
        f"{flops_format(kv['flops'])} ÷ {bytes_short(kv['bytes'])}: each sequence reads its own "
        f"cache, so batching never moves it "
        f"({'below' if kv_intensity < attention_ridge else 'above'} "
        f"the {attention_name} ridge of {number_format(attention_ridge)})",
        kv_intensity, "FLOP/B", f"{number_format(kv_intensity)} FLOP/B"))
    steps.append(Step(
        f"Step {kind} (sum of the groups: kernels run in sequence)",
        " + ".join(seconds_format(gr["seconds"]) for gr in groups)
        + f" for {bytes_short(step_bytes)} read",
        step_seconds, "s", seconds_format(step_seconds)))
    steps.append(Step(
        "Shares of the step",
        ", ".join(f"{gr['label']} {percent_format(gr['seconds'] / step_seconds)}"
                  for gr in groups if gr["name"] != "norms"),
        by["mlp"]["seconds"] / step_seconds, "fraction",
        f"MLP {percent_format(by['mlp']['seconds'] / step_seconds)}"))
    steps.append(Step(
        "Kernels an eager step launches (residual adds fused into the norms)"
        + ("; a dense GQA layer's count, so a floor for this model's MoE or MLA layers"
           if m.is_moe or m.attention == "MLA" else ""),
        f"{KERNELS_PER_LAYER} per layer × {m.layers} layers + {KERNELS_OUTSIDE_LAYERS} "
        "(embedding gather, final norm, head)", kernels_floor, "kernels",
        count_format(kernels_floor, "kernel")))
    steps.extend(fit_steps)
    values: dict[str, float | int | str | bool | list] = {}
    for gr in groups:
        n = gr["name"]
        values.update({f"{n}_params": gr["params"], f"{n}_bytes": gr["bytes"],
                       f"{n}_flops": gr["flops"], f"{n}_seconds": gr["seconds"],
                       f"{n}_memory_seconds": gr["memory_seconds"],
                       f"{n}_compute_seconds": gr["compute_seconds"],
                       f"{n}_bound": gr["bound"], f"{n}_share": gr["seconds"] / step_seconds})
    values.update({
        "step_bytes": step_bytes,
        "step_flops": step_flops,
        "step_seconds": step_seconds,
        "step_bound": step_bound(groups),
        "kv_bytes_per_token": kv_per_token,
        "kv_intensity": kv_intensity,
        "ridge_flops_per_byte": ridge,
        "attention_ridge_flops_per_byte": attention_ridge,
        "kernels_floor": kernels_floor,
        "kernels_per_layer": KERNELS_PER_LAYER,
        "fits_in_memory": fit["fits"],
        **fit,
    })
    return Result(values=values, steps=tuple(steps))


def utilization_point_model(
    *,
    model: Model,
    batch: int,
    context_tokens: float,
    weight_bytes_per_param: float,
    kv_bytes_per_token: float,
    bandwidth_bytes_per_second: float,
    peak_flops: float,
    bandwidth_efficiency: float = 1.0,
    host_seconds: float = 0.0,
    overlap: bool = False,
    embedding_bytes_per_param: float | None = None,
    attention_peak_flops: float | None = None,
    head_peak_flops: float | None = None,
) -> dict[str, float | str]:
    """One decode step's GPU time (the kernel groups' floors summed), its wall time with
    `host_seconds` of host work per step, and what nvidia-smi, MFU and MBU report (bytes, FLOP,
    seconds, fractions).

    Without `overlap` the GPU waits for the host every step (wall = GPU + host); with it the
    host prepares the next step while this one runs (wall = the longer of the two). Utilisation
    is GPU time ÷ wall time; MFU and MBU divide the step's FLOPs and bytes by wall time × peak
    ("wall") or by GPU time × peak ("busy", while kernels run). No catalog lookups, so the
    utilization demo calls it with the demo model and this machine's measured rates.
    """
    groups = decode_groups_model(
        model=model, batch=batch, context_tokens=context_tokens,
        weight_bytes_per_param=weight_bytes_per_param, kv_bytes_per_token=kv_bytes_per_token,
        bandwidth_bytes_per_second=bandwidth_bytes_per_second * bandwidth_efficiency,
        peak_flops=peak_flops, embedding_bytes_per_param=embedding_bytes_per_param,
        attention_peak_flops=attention_peak_flops, head_peak_flops=head_peak_flops)
    size = sum(g["bytes"] for g in groups)
    flops = sum(g["flops"] for g in groups)
    gpu = sum(g["seconds"] for g in groups)
    wall = max(gpu, host_seconds) if overlap else gpu + host_seconds
    return {
        "bytes": size,
        "flops": flops,
        "memory_seconds": sum(g["memory_seconds"] for g in groups),
        "compute_seconds": sum(g["compute_seconds"] for g in groups),
        "gpu_seconds": gpu,
        "bound": step_bound(groups),
        "host_seconds": host_seconds,
        "wall_seconds": wall,
        "utilization": gpu / wall,
        "mfu_busy": flops / (gpu * peak_flops),
        "mbu_busy": size / (gpu * bandwidth_bytes_per_second),
        "mfu_wall": flops / (wall * peak_flops),
        "mbu_wall": size / (wall * bandwidth_bytes_per_second),
        "tokens_per_second": batch / wall,
    }


def host_for_utilization(*, gpu_seconds: float, target: float) -> float:
    """Host time per step, not overlapped, that brings utilisation down to `target` (seconds):
    GPU ÷ (GPU + host) = target, so host = GPU × (1 ÷ target − 1)."""
    return gpu_seconds * (1 / target - 1)


def gpu_utilization(
    *,
    model: str,
    gpu: str,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    context_tokens: int = 1000,
    batch_small: int = 1,
    batch_large: int = 64,
    bandwidth_efficiency: float = 1.0,
    host_ms: float = 3.0,
    host_per_sequence_us: float = 0.0,
    overlap: str = "off",
    target_utilization: float = 0.30,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """A decode step at two batch sizes: GPU time (roofline floors of its kernel groups), wall
    time with `host_ms` of host work per step plus `host_per_sequence_us` for each sequence in
    it (scheduling, input preparation and output processing grow with the running batch:
    vLLM v0.6's diagnosis) (`overlap` "on" or "off"), and what nvidia-smi,
    MFU and MBU read (seconds, fractions, tokens/s); the host time that would bring the
    reading down to `target_utilization`; whether each batch fits the GPU."""
    m, g, d, kv_d, e, context_tokens, bandwidth_efficiency = _inputs_resolve(
        model=model, gpu=gpu, dtype=dtype, kv_dtype=kv_dtype, context_tokens=context_tokens,
        bandwidth_efficiency=bandwidth_efficiency)
    batch_small = count_check(batch_small, field="batch_small", maximum=BATCH_MAX)
    batch_large = count_check(batch_large, field="batch_large", maximum=BATCH_MAX)
    host_ms = number_check(host_ms, field="host_ms", minimum=0.0, maximum=HOST_MS_MAX,
                           allow_minimum=True)
    host_per_sequence_us = number_check(host_per_sequence_us, field="host_per_sequence_us",
                                        minimum=0.0, maximum=HOST_PER_SEQUENCE_US_MAX,
                                        allow_minimum=True)
    if overlap not in ("on", "off"):
        raise ArithmeticInputError(field="overlap", message="must be on or off")
    target = fraction_check(target_utilization, field="target_utilization")
    if target < 0.01:
        raise ArithmeticInputError(field="target_utilization", message="must be at least 0.01")
    peak = peak_flops_get(gpu=g, dtype=d)
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    overlapped = overlap == "on"
    rate_unit = "OP" if d.compute == "int8" else "FLOP"
    floor = bandwidth_efficiency >= 1
    points = {}
    steps: list[Step] = [
        Step("Bandwidth while kernels run", f"{bandwidth_format(g.bandwidth_bytes_per_second)}"
             f" × {number_format(bandwidth_efficiency)}",
             g.bandwidth_bytes_per_second * bandwidth_efficiency, "B/s",
             bandwidth_format(g.bandwidth_bytes_per_second * bandwidth_efficiency)),
        Step("Compute peak", peak_describe(gpu=g, dtype=d), peak, "FLOP/s",
             rate_of_format(peak, unit=rate_unit)),
    ]
    for key, batch in (("small", batch_small), ("large", batch_large)):
        host = host_ms / 1e3 + batch * host_per_sequence_us / 1e6
        p = utilization_point_model(
            model=m, batch=batch, context_tokens=context_tokens,
            weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_bytes_per_second=g.bandwidth_bytes_per_second, peak_flops=peak,
            bandwidth_efficiency=bandwidth_efficiency, host_seconds=host,
            overlap=overlapped, embedding_bytes_per_param=e.bytes,
            attention_peak_flops=g.fp32_flops if d.compute == "fp32" else g.bf16_flops,
            head_peak_flops=peak_flops_get(gpu=g, dtype=e))
        fit, _ = _fit(model=m, gpu=g, dtype=d, embedding=e,
                      kv_bytes=batch * context_tokens * kv_per_token, reserve_gb=reserve_gb,
                      memory_fraction=memory_fraction)
        p["fits"] = fit["fits"]
        p["memory_needed_bytes"] = fit["memory_needed_bytes"]
        p["host_for_target_seconds"] = host_for_utilization(gpu_seconds=p["gpu_seconds"],
                                                            target=target)
        p["batch"] = batch
        points[key] = p
        at = f"batch {batch:,}"
        host_said = seconds_format(host) + (
            f" ({seconds_format(host_ms / 1e3)} + {batch:,} × "
            f"{seconds_format(host_per_sequence_us / 1e6)})" if host_per_sequence_us else "")
        whose = f"{batch:,} sequence's" if batch == 1 else f"{batch:,} sequences'"
        # Compute always runs at the dense peak here, so full bandwidth makes it a floor.
        gpu_label = "GPU floor" if floor else "GPU time"
        steps += [
            Step(f"Bytes per step, {at}", f"weights and head read once + {batch:,} × "
                 f"{count_phrase(context_tokens, 'token')} × {bytes_short(kv_per_token)} of KV",
                 p["bytes"], "B", bytes_short(p["bytes"])),
            Step(f"FLOPs per step, {at}", "2 per weight per sequence + attention over the "
                 "context", p["flops"], "FLOP", flops_format(p["flops"])),
            Step(f"{gpu_label} per step, {at} ({p['bound']}-bound)",
                 f"each kernel group's max(bytes ÷ bandwidth, FLOPs ÷ peak), summed: memory "
                 f"{seconds_format(p['memory_seconds'])}, compute "
                 f"{seconds_format(p['compute_seconds'])}", p["gpu_seconds"], "s",
                 seconds_format(p["gpu_seconds"])),
            Step(f"While kernels run, {at}: MFU and MBU",
                 f"{flops_format(p['flops'])} ÷ ({seconds_format(p['gpu_seconds'])} × "
                 f"{rate_of_format(peak, unit=rate_unit)}); bytes ÷ (GPU time × "
                 f"{bandwidth_format(g.bandwidth_bytes_per_second)}): MBU "
                 f"{percent_format(p['mbu_busy'])}", p["mfu_busy"], "fraction",
                 f"MFU {percent_format(p['mfu_busy'])}"),
            Step(f"Wall time per step, {at}",
                 (f"max({seconds_format(p['gpu_seconds'])} GPU, {host_said} host): "
                  "overlapped") if overlapped else
                 (f"{seconds_format(p['gpu_seconds'])} GPU + {host_said} "
                  "host: not overlapped"), p["wall_seconds"], "s",
                 seconds_format(p["wall_seconds"])),
            Step(f"nvidia-smi utilisation, {at}", f"{seconds_format(p['gpu_seconds'])} ÷ "
                 f"{seconds_format(p['wall_seconds'])}", p["utilization"], "fraction",
                 percent_format(p["utilization"])),
            Step(f"Over wall time, {at}: MFU and MBU",
                 f"MFU {percent_format(p['mfu_wall'])}, MBU {percent_format(p['mbu_wall'])}; "
                 f"{rate_format(p['tokens_per_second'], 'tokens/s')}", p["mfu_wall"],
                 "fraction", f"MFU {percent_format(p['mfu_wall'])}"),
            Step(f"Host time for {percent_format(target)} utilisation, {at}",
                 f"{seconds_format(p['gpu_seconds'])} × (1 ÷ {number_format(target)} − 1), "
                 "not overlapped", p["host_for_target_seconds"], "s",
                 seconds_format(p["host_for_target_seconds"])),
            Step(f"Fits one {g.name}, {at}: " + ("yes" if p["fits"] else "no"),
                 f"every weight + {whose} KV + {number_format(reserve_gb)} GB "
                 "reserve against the engine's share of memory", p["memory_needed_bytes"], "B",
                 bytes_short(p["memory_needed_bytes"])
                 + (" (fits)" if p["fits"] else " (does not fit)")),
        ]
    small, large = points["small"], points["large"]
    return Result(values={
        "small": small,
        "large": large,
        "throughput_gain": large["tokens_per_second"] / small["tokens_per_second"],
        "step_time_ratio": large["wall_seconds"] / small["wall_seconds"],
        "peak_flops": peak,
        "bandwidth_bytes_per_second": g.bandwidth_bytes_per_second,
        "kv_bytes_per_token": kv_per_token,
        "reserve_bytes": reserve_gb * 1e9,
    }, steps=tuple(steps))
