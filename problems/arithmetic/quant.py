"""Quantization: what a smaller weight format saves in memory and bandwidth, and what that does to
the decode floor: a roofline bound at full efficiency, the larger of bytes read ÷ bandwidth and
FLOPs ÷ the format's dense peak. Weight-only formats (INT4 group-quantized, MXFP4 on GPUs without
FP4 tensor cores) still multiply at the BF16 rate, so once a large batch makes the step
compute-bound they save memory but no time. The embedding and output head stay in BF16
(as AWQ, GPTQ and FP8 checkpoints keep them) and the KV cache keeps its own format, by default
the model's precision, so neither shrinks with the weights."""

import math

from problems.arithmetic.catalog import (
    Dtype,
    Gpu,
    Model,
    dtype_get,
    gpu_get,
    kv_dtype_get,
    model_get,
)
from problems.arithmetic.compute import (
    decode_attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_describe,
    peak_flops_get,
    prefill_flops_model,
    time_label,
)
from problems.arithmetic.decode import decode_flops_per_sequence, decode_step_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
from problems.arithmetic.interconnect import collective_links
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    memory_fit,
    params_count_model,
    tp_sizes_model,
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
    rate_of_format,
    seconds_format,
)


def quantization(
    *,
    model: str,
    gpu: str,
    to_dtype: str,
    from_dtype: str = "bf16",
    kv_dtype: str | None = None,
    batch: int = 1,
    context_tokens: int = 1,
    embedding_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """Weight bytes before and after (bytes), bytes saved, the decode floor before and after
    (seconds) for `batch` sequences of `context_tokens`, and whether each fits one `gpu` with
    that KV and the runtime reserve.

    The floor is max(bytes read ÷ peak bandwidth, FLOPs ÷ the format's dense peak), the bound
    named: at small batches the weights' bytes decide it, at large ones the matmuls may.

    The KV cache stays in `kv_dtype` (default the model's own precision) in both cases, so at
    long contexts and large batches the saving on the floor shrinks: weights are no longer
    most of the bytes.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    before_d = dtype_get(from_dtype, field="from_dtype")
    after_d = dtype_get(to_dtype, field="to_dtype")
    kv_d = kv_dtype_get(kv_dtype, model=m)
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    params = params_count_model(m)["total"]
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    kv_bytes = batch * context_tokens * kv_per_token
    flops = batch * decode_flops_per_sequence(m, context_tokens)
    results = []
    for d, field in ((before_d, "from_dtype"), (after_d, "to_dtype")):
        e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
        weights = weight_bytes_model(model=m, dtype=d, embedding=e)
        floor = decode_step_model(
            model=m, gpu=g, batch=batch, context_tokens=context_tokens,
            weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_efficiency=1.0, embedding_bytes_per_param=e.bytes,
        )
        try:
            peak = peak_flops_get(gpu=g, dtype=d)
        except ArithmeticInputError as error:
            raise ArithmeticInputError(field=field, message=error.message) from error
        compute = flops / peak
        floor = {**floor, "memory": floor["seconds"], "compute": compute, "peak": peak,
                 "seconds": max(floor["seconds"], compute),
                 "bound": "memory" if floor["seconds"] >= compute else "compute"}
        fit, fit_steps = memory_fit(
            gpu=g, weights_bytes=weights["total"], kv_bytes=kv_bytes, reserve_gb=reserve_gb,
            memory_fraction=memory_fraction, per_gpu=f"in {d.name}",
        )
        results.append({"dtype": d, "embedding": e, "weights": weights, "floor": floor,
                         "fit": fit, "fit_step": fit_steps[-1],
                        "fit_steps": fit_steps})
    before, after = results
    speedup = before["floor"]["seconds"] / after["floor"]["seconds"]

    def weights_step(r: dict) -> Step:
        d, e, w = r["dtype"], r["embedding"], r["weights"]
        kept = f"; embedding and head in {e.name}" if e.id != d.id else ""
        return Step(
            f"Weights in {d.name}",
            f"{number_format(params)} parameters, the body at {number_format(d.bits)} bits{kept}",
            w["total"],
            "B",
            bytes_format(w["total"]),
        )

    def floor_step(r: dict) -> Step:
        f, d = r["floor"], r["dtype"]
        return Step(
            f"Decode floor with {d.name} weights ({f['bound']}-bound)",
            f"max({bytes_short(f['bytes'])} read per step ({bytes_short(f['kv'])} of it KV in "
            f"{kv_d.kv_label}) ÷ {g.name} bandwidth = {seconds_format(f['memory'])}; "
            f"{flops_format(flops)} ÷ {peak_describe(gpu=g, dtype=d)} = "
            f"{seconds_format(f['compute'])})",
            f["seconds"],
            "s",
            seconds_format(f["seconds"]),
        )

    saved = before["weights"]["total"] - after["weights"]["total"]
    return Result(
        values={
            "weights_bytes_before": before["weights"]["total"],
            "weights_bytes_after": after["weights"]["total"],
            "bytes_saved": saved,
            "fraction_saved": saved / before["weights"]["total"],
            "floor_seconds_before": before["floor"]["seconds"],
            "floor_seconds_after": after["floor"]["seconds"],
            "floor_bound_before": before["floor"]["bound"],
            "floor_bound_after": after["floor"]["bound"],
            "floor_speedup": speedup,
            "fits_before": before["fit"]["fits"],
            "fits_after": after["fit"]["fits"],
            "memory_usable_bytes": after["fit"]["memory_usable_bytes"],
            "memory_needed_before_bytes": before["fit"]["memory_needed_bytes"],
            "memory_needed_after_bytes": after["fit"]["memory_needed_bytes"],
        },
        steps=(
            weights_step(before),
            weights_step(after),
            Step(
                "Memory saved",
                f"{bytes_short(before['weights']['total'])} − "
                f"{bytes_short(after['weights']['total'])}",
                saved,
                "B",
                bytes_format(saved),
            ),
            floor_step(before),
            floor_step(after),
            Step(
                "Floor speedup",
                f"{seconds_format(before['floor']['seconds'])} ÷ "
                f"{seconds_format(after['floor']['seconds'])}",
                speedup,
                "×",
                f"{number_format(speedup)}×",
            ),
            *before["fit_steps"][:2],
            before["fit_step"],
            after["fit_step"],
        ),
    )


# Problem 11: every weight format side by side on one GPU, and which of four GPUs each fits.

FORMATS_COMPARED = ("bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4")
FIT_GPUS = ("h100-sxm", "h200", "b200", "l40s")
NO_PATH = "no kernel path on this GPU"
# Tensor-parallel deployments tried, smallest first: within one 8-GPU node, where TP runs.
TP_DEPLOY = (1, 2, 4, 8)
# The fixed cost of one all-reduce (launch and synchronisation, seconds), as parallel.py's
# collective_us default: at decode sizes it, not the bytes, dominates TP's communication.
COLLECTIVE_SECONDS = 10e-6
# The bytes of an activation value all-reduced between GPUs (BF16).
ACTIVATION_BYTES = 2.0


def kv_per_token_gpu_model(*, model: Model, kv_dtype: Dtype, tp: int) -> float | None:
    """KV bytes one token adds on each of `tp` GPUs (bytes): GQA's KV heads split over the GPUs
    (replicated once there are more GPUs than heads), MLA's latent kept whole on every GPU. None
    when the heads do not allow `tp` (`tp_sizes_model`: the query heads must divide it)."""
    per_token = kv_bytes_per_token_model(model, kv_dtype)
    if tp not in tp_sizes_model(model, maximum=tp):
        return None
    if model.attention == "MLA" or tp == 1:
        return per_token
    return per_token / min(tp, model.kv_heads)


def tp_comm_seconds(*, model: Model, gpu: Gpu, tp: int, tokens: int) -> float:
    """One forward pass's tensor-parallel communication over `tp` GPUs (seconds): two ring
    all-reduces a layer (after attention and after the MLP) of `tokens` × hidden BF16
    activations, each sending 2(tp − 1)/tp of the message at each GPU's one-way bandwidth in a
    collective over `tp` GPUs (`Gpu.collective_one_way_bytes_per_second`: NVLink's whole
    figure, an MI300X's tp − 1 links), plus COLLECTIVE_SECONDS each. Zero on one GPU."""
    if tp == 1:
        return 0.0
    message = tokens * model.hidden * ACTIVATION_BYTES
    per_allreduce = (2 * (tp - 1) / tp * message
                     / gpu.collective_one_way_bytes_per_second(tp))
    return 2 * model.layers * (per_allreduce + COLLECTIVE_SECONDS)


def deployment_model(*, row: dict, model: Model, gpu: Gpu, kv_dtype: Dtype, tokens: int,
                     batch: int, bandwidth_efficiency: float) -> dict:
    """The smallest tensor-parallel deployment of one format (a `format_row_model` row) on
    `gpu`: the fewest GPUs in TP_DEPLOY on which each GPU holds its share of the weights, the
    reserve and its share of the batch's KV, and can still hold one sequence of the model's
    full context (vLLM refuses to start otherwise). Its decode step and prefill: each GPU reads
    and computes its 1/tp share, then the GPUs all-reduce (`tp_comm_seconds`). `tp` None: no
    deployment up to 8 GPUs, or no kernel path."""
    usable = float(row["fit"]["memory_usable_bytes"])
    reserve = float(row["fit"]["reserve_bytes"])
    context = max(model.context or tokens, tokens)
    dec, pre = row["decode"], row["prefill"]
    none = {"tp": None, "decode_seconds": None, "prefill_seconds": None, "kv_room_tokens": 0,
            "comm_decode_seconds": 0.0}
    if dec["seconds"] is None:
        return none
    for tp in TP_DEPLOY:
        kv_gpu = kv_per_token_gpu_model(model=model, kv_dtype=kv_dtype, tp=tp)
        if kv_gpu is None:
            continue
        free = usable - row["weights"] / tp - reserve
        if free < batch * tokens * kv_gpu or free < context * kv_gpu:
            continue
        kv_share = kv_gpu / row["kv_per_token"]
        memory = (dec["weights"] / tp + dec["kv"] * kv_share) / (
            gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
        comm_decode = tp_comm_seconds(model=model, gpu=gpu, tp=tp, tokens=batch)
        comm_prefill = tp_comm_seconds(model=model, gpu=gpu, tp=tp, tokens=tokens)
        return {
            "tp": tp, "kv_room_tokens": math.floor(free / kv_gpu),
            "decode_seconds": max(memory, dec["compute"] / tp) + comm_decode,
            "decode_bound": "memory" if memory >= dec["compute"] / tp else "compute",
            "comm_decode_seconds": comm_decode,
            "prefill_seconds": max(pre["compute"], pre["memory"]) / tp + comm_prefill,
        }
    return none


def linear_rows_model(model: Model) -> int:
    """Output rows of every linear weight matrix (q, k, v, o, gate, up, down; every expert's for
    an MoE model), which is the number of per-channel scales an FP8 or INT8 checkpoint stores
    (count). MLA's projections are counted row by row as well."""
    h = model.hidden
    if model.attention == "MLA":
        qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
        attention = (model.q_lora_rank + model.heads * qk_head
                     + model.kv_lora_rank + model.qk_rope_head_dim
                     + model.heads * (model.qk_nope_head_dim + model.v_head_dim) + h)
    else:
        attention = (model.heads + 2 * model.kv_heads) * model.head_dim + h
    dense_ffn = 2 * model.intermediate + h
    expert = 2 * model.moe_intermediate + h
    moe_layers = model.layers - model.dense_layers if model.is_moe else 0
    moe_ffn = (model.experts_routed + model.experts_shared) * expert + model.experts_routed
    return (attention * model.layers + dense_ffn * (model.layers - moe_layers)
            + moe_ffn * moe_layers)


def format_rate_get(*, gpu: Gpu, dtype: Dtype) -> float | None:
    """The dense rate `dtype`'s matmuls run at on `gpu` (FLOP/s, OP/s for INT8), with the
    weight-only fallback; None when the GPU has no kernel path for it."""
    try:
        return peak_flops_get(gpu=gpu, dtype=dtype)
    except ArithmeticInputError:
        return None


def format_native(*, gpu: Gpu, dtype: Dtype) -> bool:
    """Whether `gpu`'s tensor cores multiply in `dtype` itself (not weight-only)."""
    return gpu.rate_get(dtype.compute) is not None and not dtype.weight_only


def decode_point_model(*, model: Model, gpu: Gpu, dtype: Dtype, embedding: Dtype,
                       kv_bytes_per_token: float, batch: int, context_tokens: int, mfu: float,
                       bandwidth_efficiency: float) -> dict:
    """One decode step of `batch` sequences holding `context_tokens` each (bytes, FLOP,
    seconds): bytes read ÷ bandwidth, and compute with the linear layers at `dtype`'s rate and
    attention at the BF16 rate (the KV cache and attention kernels stay in BF16 unless FP8
    attention is switched on); the step is the larger, its bound named. Without a kernel path
    the times are None."""
    memory = decode_step_model(
        model=model, gpu=gpu, batch=batch, context_tokens=context_tokens,
        weight_bytes_per_param=dtype.bytes, kv_bytes_per_token=kv_bytes_per_token,
        bandwidth_efficiency=bandwidth_efficiency, embedding_bytes_per_param=embedding.bytes)
    parts = params_count_model(model)
    linear_flops = batch * 2 * (parts["non_embedding_active"] + parts["head"])
    attention_flops = batch * decode_attention_flops_per_token_pair(model) * context_tokens
    rate = format_rate_get(gpu=gpu, dtype=dtype)
    point = {"weights": memory["weights"], "kv": memory["kv"], "bytes": memory["bytes"],
             "memory": memory["seconds"], "linear_flops": linear_flops,
             "attention_flops": attention_flops, "flops": linear_flops + attention_flops,
             "rate": rate, "compute": None, "seconds": None, "bound": None}
    if rate is None:
        return point
    compute = linear_flops / (rate * mfu) + attention_flops / (gpu.bf16_flops * mfu)
    seconds = max(memory["seconds"], compute)
    return {**point, "compute": compute, "seconds": seconds,
            "bound": "memory" if memory["seconds"] >= compute else "compute"}


def prefill_point_model(*, model: Model, gpu: Gpu, dtype: Dtype, embedding: Dtype,
                        kv_bytes_per_token: float, tokens: int, mfu: float,
                        bandwidth_efficiency: float) -> dict:
    """One prefill of `tokens` tokens (FLOP, bytes, seconds): the linear layers and the last
    position's head at `dtype`'s rate, causal attention at the BF16 rate, each at `mfu`; memory
    the weights read once, the embedding rows gathered and the KV written, at
    `bandwidth_efficiency` of peak; the larger of the two, its bound named (None without a
    kernel path)."""
    flops = prefill_flops_model(model, tokens)
    reads = weights_read_model(model=model, tokens=tokens, dtype=dtype, embedding=embedding)
    total_bytes = reads["total"] + reads["embedding_rows"] + tokens * kv_bytes_per_token
    memory = total_bytes / (gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
    rate = format_rate_get(gpu=gpu, dtype=dtype)
    point = {"linear_flops": flops["linear"] + flops["head"], "attention_flops":
             flops["attention"], "flops": flops["total"], "bytes": total_bytes,
             "memory": memory, "rate": rate, "compute": None, "seconds": None, "bound": None}
    if rate is None:
        return point
    compute = (point["linear_flops"] / (rate * mfu)
               + flops["attention"] / (gpu.bf16_flops * mfu))
    return {**point, "compute": compute, "seconds": max(compute, memory),
            "bound": "compute" if compute >= memory else "memory"}


def format_row_model(*, model: Model, gpu: Gpu, dtype: Dtype, kv_dtype: Dtype, tokens: int,
                     batch: int, mfu: float, bandwidth_efficiency: float,
                     memory_fraction: float, reserve_gb: float) -> dict:
    """One weight format on one GPU: its weights (bytes, embedding and head kept as
    `embedding_dtype_resolve` says), the decode step of `batch` sequences at `tokens` of
    context and the prefill of `tokens` (see decode_point_model, prefill_point_model), whether
    it runs natively, whether weights + that KV + the reserve fit, and the KV room left in
    tokens (bytes, seconds, tokens)."""
    embedding = embedding_dtype_resolve(model=model, dtype=dtype)
    weights = weight_bytes_model(model=model, dtype=dtype, embedding=embedding)["total"]
    kv_per_token = kv_bytes_per_token_model(model, kv_dtype)
    decode_point = decode_point_model(
        model=model, gpu=gpu, dtype=dtype, embedding=embedding,
        kv_bytes_per_token=kv_per_token, batch=batch, context_tokens=tokens, mfu=mfu,
        bandwidth_efficiency=bandwidth_efficiency)
    prefill_point = prefill_point_model(
        model=model, gpu=gpu, dtype=dtype, embedding=embedding,
        kv_bytes_per_token=kv_per_token, tokens=tokens, mfu=mfu,
        bandwidth_efficiency=bandwidth_efficiency)
    fit, fit_steps = memory_fit(gpu=gpu, weights_bytes=weights,
                                kv_bytes=batch * tokens * kv_per_token, reserve_gb=reserve_gb,
                                memory_fraction=memory_fraction, per_gpu=f"in {dtype.name}")
    free = float(fit["memory_usable_bytes"]) - weights - float(fit["reserve_bytes"])
    room = max(0, math.floor(free / kv_per_token)) if free > 0 else 0
    context = max(model.context or tokens, tokens)
    return {
        "dtype": dtype, "embedding": embedding, "weights": weights,
        "kv_per_token": kv_per_token, "decode": decode_point, "prefill": prefill_point,
        "native": format_native(gpu=gpu, dtype=dtype), "path": decode_point["rate"] is not None,
        "fits": bool(fit["fits"]), "free": free, "kv_room_tokens": room,
        # vLLM starts only if the KV pool holds one sequence of max_model_len (the model's
        # context by default); with less room it needs --max-model-len cut to the room.
        "full_context": bool(fit["fits"]) and room >= context,
        "max_model_len": min(room, context),
        "fit": fit, "fit_steps": fit_steps,
    }


def path_describe(*, gpu: Gpu, dtype: Dtype) -> str:
    """Which units multiply `dtype` on `gpu`, in a few words, by the vendor's own names (tensor
    cores on NVIDIA's GPUs, Matrix Cores on AMD's)."""
    if format_rate_get(gpu=gpu, dtype=dtype) is None:
        return NO_PATH
    units = gpu.matrix_units
    if not format_native(gpu=gpu, dtype=dtype):
        return f"BF16 {units}, weights unpacked first (weight-only)"
    if dtype.compute == "fp32":
        return f"FP32 {gpu.vector_units} (no {units})"
    kind = {"bf16": "BF16", "fp8": "FP8", "int8": "INT8", "fp4": "FP4"}[dtype.compute]
    return f"{kind} {units}" + (" (TOPS)" if dtype.compute == "int8" else "")


def quantization_formats(
    *,
    model: str = "llama-3-70b",
    gpu: str = "h100-sxm",
    prompt_tokens: int = 1000,
    batch: int = 1,
    kv_dtype: str | None = None,
    mfu: float = 1.0,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    formats: tuple[str, ...] = FORMATS_COMPARED,
    fit_gpus: tuple[str, ...] = FIT_GPUS,
) -> Result:
    """Every weight format in `formats` on one `gpu`: weights (bytes), the decode step of
    `batch` sequences at `prompt_tokens` of context and the prefill of `prompt_tokens`
    (seconds, each a roofline bound with its bound named) on that one GPU, whether each fits
    with that KV cache and the reserve, the KV room left (tokens) and whether it holds one
    sequence of the model's context; each format's smallest tensor-parallel deployment
    (`deployment_model`) with its decode step and prefill, and its latency and GPU count
    against the baseline's: the checkpoint's published format (values["baseline_dtype"]). The
    one-GPU speedups (`decode_speedup`) are floors on the same GPU, hypothetical for a row that
    does not fit. Plus the same fit check on each of `fit_gpus` (values["fit"])."""
    m = model_get(model)
    g = gpu_get(gpu)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    dtypes = [dtype_get(f, field="formats") for f in formats]
    if not dtypes:
        raise ArithmeticInputError(field="formats", message="give at least one format")
    common = dict(model=m, kv_dtype=kv_d, tokens=prompt_tokens, batch=batch, mfu=mfu,
                  bandwidth_efficiency=bandwidth_efficiency, memory_fraction=memory_fraction,
                  reserve_gb=reserve_gb)
    rows = [format_row_model(gpu=g, dtype=d, **common) for d in dtypes]
    # The baseline is the checkpoint as published: BF16 for most models, FP8 for DeepSeek-V3,
    # whose FP8 weights are what anyone serves (its BF16 row is an up-cast, not a starting point).
    published = m.checkpoint_dtype or m.dtype
    base_index = next((i for i, d in enumerate(dtypes) if d.id == published), 0)
    base = rows[base_index]
    deployed = [deployment_model(row=r, model=m, gpu=g, kv_dtype=kv_d, tokens=prompt_tokens,
                                 batch=batch, bandwidth_efficiency=bandwidth_efficiency)
                for r in rows]
    base_deployed = deployed[base_index]

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    parts = params_count_model(m)
    emb_params = parts["embedding"] + parts["lm_head"]
    fit = []
    for d in dtypes:
        cells = []
        for gid in fit_gpus:
            r = format_row_model(gpu=gpu_get(gid, field="fit_gpus"), dtype=d, **common)
            cells.append({"gpu": gid, "fits": r["fits"], "free_bytes": r["free"],
                          "kv_room_tokens": r["kv_room_tokens"],
                          "full_context": r["full_context"],
                          "max_model_len": r["max_model_len"]})
        fit.append({"dtype": d.id, "cells": cells})
    formats_out = []
    for r, dep in zip(rows, deployed, strict=True):
        d, dec, pre = r["dtype"], r["decode"], r["prefill"]
        formats_out.append({
            "deploy_tp": dep["tp"], "deploy_decode_seconds": dep["decode_seconds"],
            "deploy_prefill_seconds": dep["prefill_seconds"],
            "deploy_kv_room_tokens": dep["kv_room_tokens"],
            "deploy_comm_seconds": dep["comm_decode_seconds"],
            # Against BF16's smallest deployment: latency and GPUs, each on its own.
            "deploy_decode_speedup": ratio(base_deployed["decode_seconds"],
                                           dep["decode_seconds"]),
            "deploy_prefill_speedup": ratio(base_deployed["prefill_seconds"],
                                            dep["prefill_seconds"]),
            "deploy_gpu_ratio": ratio(base_deployed["tp"], dep["tp"]),
            "full_context": r["full_context"], "max_model_len": r["max_model_len"],
            "dtype": d.id, "name": d.name, "bits": d.bits, "weights_bytes": r["weights"],
            "embedding_dtype": r["embedding"].id, "read_bytes": dec["weights"],
            "decode_bytes": dec["bytes"], "decode_memory_seconds": dec["memory"],
            "decode_compute_seconds": dec["compute"], "decode_seconds": dec["seconds"],
            "decode_bound": dec["bound"], "decode_speedup":
            ratio(base["decode"]["seconds"], dec["seconds"]),
            "prefill_compute_seconds": pre["compute"], "prefill_memory_seconds": pre["memory"],
            "prefill_seconds": pre["seconds"], "prefill_bound": pre["bound"],
            "prefill_speedup": ratio(base["prefill"]["seconds"], pre["seconds"]),
            "rate": dec["rate"], "native": r["native"], "path": r["path"],
            "path_text": path_describe(gpu=g, dtype=d), "fits": r["fits"],
            "free_bytes": r["free"], "kv_room_tokens": r["kv_room_tokens"],
            "size_ratio": base["weights"] / r["weights"],
        })
    kv_per_token = base["kv_per_token"]
    pre0 = base["prefill"]
    steps: list[Step] = [
        Step("Parameters: layers, and embedding + head",
             f"{number_format(parts['non_embedding'])} in the layers + "
             f"{number_format(emb_params)} in the embedding"
             + (" (tied to the head)" if m.tied_embeddings else " and the output head")
             + ", kept in BF16 below 16 bits",
             parts["total"], "parameters", f"{number_format(parts['total'])} parameters"),
        Step("KV cache of the decode step",
             f"{count_format(batch, 'sequence')} × {count_format(prompt_tokens, 'token')} × "
             f"{bytes_short(kv_per_token)} per token ({kv_d.kv_label})",
             batch * prompt_tokens * kv_per_token, "B",
             bytes_format(batch * prompt_tokens * kv_per_token)),
        Step("Prefill FLOPs",
             f"{flops_format(pre0['linear_flops'])} in the linear layers and the last "
             f"position's head + {flops_format(pre0['attention_flops'])} in causal attention",
             pre0["flops"], "FLOP", flops_format(pre0["flops"])),
    ]
    for r in rows:
        d, dec, pre = r["dtype"], r["decode"], r["prefill"]
        e = r["embedding"]
        steps.append(Step(
            f"Weights in {d.name}",
            f"{number_format(parts['non_embedding'])} × {number_format(d.bits)} bits ÷ 8 + "
            f"{number_format(emb_params)} × {number_format(e.bits)} bits ÷ 8 ({e.name})",
            r["weights"], "B", bytes_format(r["weights"])))
        if dec["seconds"] is None:
            steps.append(Step(f"{d.name} on the {g.name}",
                              f"{NO_PATH}: the {g.name} has neither {d.compute.upper()} tensor "
                              "cores nor a weight-only kernel for it in the engines named here",
                              0.0, "s", NO_PATH))
        else:
            unit = "OP" if d.compute == "int8" else "FLOP"
            efficiency = bandwidth_efficiency if dec["bound"] == "memory" else mfu
            steps.append(Step(
                time_label(f"Decode step in {d.name}", bound=dec["bound"],
                           efficiency=efficiency),
                f"max({bytes_short(dec['bytes'])} ÷ "
                f"{bandwidth_format(g.bandwidth_bytes_per_second)}"
                f" × {number_format(bandwidth_efficiency)} = {seconds_format(dec['memory'])}; "
                f"{flops_format(dec['linear_flops'])} at {rate_of_format(dec['rate'], unit=unit)}"
                f" + {flops_format(dec['attention_flops'])} of attention at BF16, × "
                f"{number_format(mfu)} MFU = {seconds_format(dec['compute'])})",
                dec["seconds"], "s", seconds_format(dec["seconds"])))
            efficiency = mfu if pre["bound"] == "compute" else bandwidth_efficiency
            steps.append(Step(
                time_label(f"Prefill in {d.name}", bound=pre["bound"], efficiency=efficiency),
                f"max({flops_format(pre['linear_flops'])} at "
                f"{peak_describe(gpu=g, dtype=d)} + attention at BF16, × {number_format(mfu)} "
                f"MFU = {seconds_format(pre['compute'])}; {bytes_short(pre['bytes'])} moved = "
                f"{seconds_format(pre['memory'])})",
                pre["seconds"], "s", seconds_format(pre["seconds"])))
        steps.append(r["fit_steps"][-1])
        steps.append(Step(
            f"KV room in {d.name}",
            f"⌊({bytes_short(r['fit']['memory_usable_bytes'])} usable − "
            f"{bytes_short(r['weights'])} weights − {bytes_short(r['fit']['reserve_bytes'])} "
            f"reserve) ÷ {bytes_short(kv_per_token)} per token⌋",
            r["kv_room_tokens"], "tokens", count_format(r["kv_room_tokens"], "token")
            if r["free"] > 0 else "none"))
    context = max(m.context or prompt_tokens, prompt_tokens)
    for r, dep in zip(rows, deployed, strict=True):
        d = r["dtype"]
        if dep["tp"] is None:
            steps.append(Step(
                f"Smallest deployment in {d.name}",
                (NO_PATH if r["decode"]["seconds"] is None else
                 f"no tensor-parallel group of up to {TP_DEPLOY[-1]} {g.name} GPUs holds the "
                 f"weights, this KV cache and one {context:,}-token sequence"),
                0.0, "GPUs", "none up to 8 GPUs"))
            continue
        steps.append(Step(
            f"Smallest deployment in {d.name}: TP {dep['tp']}",
            f"the fewest GPUs each holding 1/{dep['tp']} of the weights, the reserve, its share "
            f"of this KV cache and of one {context:,}-token sequence; decode "
            + (f"{seconds_format(dep['decode_seconds'] - dep['comm_decode_seconds'])} of reads "
               f"or compute per GPU + {seconds_format(dep['comm_decode_seconds'])} of "
               f"all-reduces (2 × {m.layers} a step, {seconds_format(COLLECTIVE_SECONDS)} each "
               f"plus the bytes over {collective_links(g, dep['tp'])[1]})"
               if dep["tp"] > 1 else
               f"{seconds_format(dep['decode_seconds'])} of reads or compute on the one GPU, "
               "with no all-reduce"),
            dep["decode_seconds"], "s", seconds_format(dep["decode_seconds"])))
    steps[3:3] = list(base["fit_steps"][:2])
    return Result(
        values={
            "formats": formats_out,
            "fit": fit,
            "kv_bytes_per_token": kv_per_token,
            "kv_bytes": batch * prompt_tokens * kv_per_token,
            "prefill_flops": pre0["flops"],
            "prefill_linear_flops": pre0["linear_flops"],
            "prefill_attention_flops": pre0["attention_flops"],
            "memory_usable_bytes": base["fit"]["memory_usable_bytes"],
            "memory_total_bytes": base["fit"]["memory_total_bytes"],
            "reserve_bytes": base["fit"]["reserve_bytes"],
            "channel_scales": linear_rows_model(m),
            "context_window": context,
            "baseline_dtype": dtypes[base_index].id,
        },
        steps=tuple(steps),
    )
