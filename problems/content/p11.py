"""Problem 11, FP8 vs INT8 vs INT4 vs NVFP4: the calculator that sets every weight format side by
side on one GPU (size, decode step, prefill, fit, KV room, and which of four GPUs each fits),
the worked NVFP4 block of the concepts (computed by the reference codec), and every figure the
prose quotes, all from problems/arithmetic at render time.
"""

import math

from django.http import HttpRequest

from demos.runners.quantization import PARAMS as QUANTIZATION_PARAMS
from problems.arithmetic.catalog import DTYPES, gpu_get, kv_dtype_get, model_get, models_all
from problems.arithmetic.catalog.models import DEMO_MODEL_ID
from problems.arithmetic.compute import attention_flops_per_token_pair
from problems.arithmetic.formats import (
    E2M1_MAX,
    E4M3_MAX,
    e2m1_decode,
    e4m3_decode,
    nvfp4_block_scale_raw,
    nvfp4_encode,
)
from problems.arithmetic.memory import MEMORY_FRACTION_DEFAULT, params_count_model
from problems.arithmetic.quant import (
    FIT_GPUS,
    FORMATS_COMPARED,
    NO_PATH,
    TP_DEPLOY,
    linear_rows_model,
    quantization_formats,
)
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    flops_rate_format,
    number_format,
    ops_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, list_phrase, ratio_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    bandwidth_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series

SLUG = "quantization-formats"
PREFIX = "p11-formats"
TOKENS_MAX = 1_000_000
BATCH_MAX = 4096
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
EMB_HEAD_SMALL_SHARE = 0.05
MS = 1e3
# Marlin's README: "close to ideal (4x) speedups up to batchsizes of 16-32 tokens" for its
# FP16 × INT4 kernel on Ampere and Ada (https://github.com/IST-DASLab/marlin).
MARLIN_IDEAL_BATCH = (16, 32)
# gpt-oss model card: the MoE weights are post-trained in MXFP4, 4.25 bits a parameter, so the
# 120B model fits one 80 GB GPU (https://arxiv.org/abs/2508.10925).
GPT_OSS_MXFP4_BITS = 4.25
GPT_OSS_GPU_GB = 80
MARLIN_IDEAL_SPEEDUP = 4

# The worked NVFP4 block: a 48-value tensor (three blocks of 16), of which the page shows the
# third. Chosen so the tensor's largest value fixes a power-of-two tensor scale and the shown
# block's scale has to round in E4M3.
NV_TENSOR = (
    1.5, -0.0625, 0.1875, 0.3125, 0.4375, 0.625, 0.875, 1.25, -1.375, 0.025, -0.075, 0.725,
    1.1, -0.4, 0.0, -1.5,
    2.625, *([0.0] * 15),
    1.0, 0.5, -0.25, 0.3, 0.7, -0.9, 0.05, *([0.0] * 8), -0.6,
)
NV_BLOCK = 2  # the block shown (0-based)


def _signed(value: float, *, digits: int = 4, plus: bool = False) -> str:
    """A number with a real minus sign (U+2212) and, with `plus`, an explicit plus."""
    text = number_format(abs(value), digits=digits)
    if value < 0 or (value == 0 and math.copysign(1, value) < 0 and not plus):
        return "−" + text
    return ("+" if plus and value > 0 else "") + text


def _ratio(value: float | None) -> str:
    return f"{number_format(value)}×" if value is not None else NO_PATH


def _seconds(value: float | None, bound: str | None = None) -> str:
    if value is None:
        return NO_PATH
    return f"{seconds_format(value)} ({bound})" if bound else seconds_format(value)


def deployment_text(tp: int | None) -> str:
    """A deployment's size in words: "1 GPU", "2 GPUs (TP 2)", or why there is none."""
    if tp is None:
        return "none within 8 GPUs"
    return count_phrase(tp, "GPU") + (f" (TP {tp})" if tp > 1 else "")


def _latency_text(value: float | None, reference: float | None, *, base: bool = False) -> str:
    """A deployed format's step against the baseline's: "1.84× faster", "1.11× slower"."""
    if base:
        return "baseline"
    if value is None or reference is None:
        return "—"
    return ratio_phrase(value, reference, more="faster", less="slower")


def _gpus_text(tp: int | None, base_tp: int | None, *, base: bool = False) -> str:
    """GPUs per replica against the baseline's: "the same", "2× fewer", "2× more"."""
    if tp is None or base_tp is None:
        return "—"
    if base:
        return "baseline"
    if tp == base_tp:
        return "the same"
    return ratio_phrase(base_tp, tp, more="fewer", less="more")


def _names_joined(names: list[str], *, total: int) -> str:
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    count = words.get(total, f"{total:,}")
    if not names:
        return f"none of the {count}"
    if len(names) == total:
        return f"all {count}" if total != 1 else names[0]
    if len(names) == 1:
        return f"the {names[0]} only"
    return ", ".join(names[:-1]) + " and " + names[-1]


def _list_joined(names: list[str]) -> str:
    """ "A", "A and B", "A, B and C"."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def code_text(dtype_id: str) -> str:
    """What a format's stored code is, in words."""
    return {"bf16": "BF16 (1·8·7)", "fp8": "E4M3 (1·4·3)", "int8": "integer −127…127",
            "int4": "4-bit code 0…15", "nvfp4": "E2M1 (1·2·1)", "mxfp4": "E2M1 (1·2·1)",
            "fp16": "FP16 (1·5·10)", "fp8-e5m2": "E5M2 (1·5·2)",
            "fp32": "FP32 (1·8·23)"}[dtype_id]


def scale_text(dtype_id: str) -> str:
    """What a format stores beside its codes, from the catalog's block size."""
    d = DTYPES[dtype_id]
    if dtype_id in ("fp8", "int8"):
        return "FP32 per output channel (counted as 0)"
    if dtype_id == "int4":
        return f"FP16 scale + 4-bit zero per {d.block_size}"
    if dtype_id == "nvfp4":
        return f"E4M3 per {d.block_size}, FP32 per tensor"
    if dtype_id == "mxfp4":
        return f"E8M0 per {d.block_size}"
    return "none"


def gain_sweep(inputs: dict) -> tuple[list[int], dict]:
    """The plot's batches and the working at each (no fit table: only the deployments)."""
    xs = sorted(set(BATCHES) | {inputs["batch"]})
    return xs, {x: quantization_formats(**{**inputs, "batch": x}, fit_gpus=()) for x in xs}


def gain_shape(inputs: dict, result) -> dict:
    """What the gain plot does as the batch grows, for the sentence under it: whether some
    format's line stops (no deployment within 8 GPUs), and the first point where a format's
    token is slower than the baseline's because the baseline has moved onto more GPUs."""
    xs, rows = gain_sweep(inputs)
    base = result["baseline_dtype"]
    base_index = FORMATS_COMPARED.index(base)
    stops, dip = False, None
    # A line jumps where the format's or the baseline's group changes size along the sweep.
    groups = {(i, rows[x]["formats"][i]["deploy_tp"]) for x in xs
              for i in range(len(FORMATS_COMPARED))}
    jumps = len(groups) > len(FORMATS_COMPARED)
    for x in xs:
        base_row = rows[x]["formats"][base_index]
        for i, d in enumerate(FORMATS_COMPARED):
            if d == base:
                continue
            row = rows[x]["formats"][i]
            gain = row["deploy_decode_speedup"]
            if gain is None:
                stops = True
            elif (dip is None and gain < 1 and base_row["deploy_tp"]
                  and base_row["deploy_tp"] > row["deploy_tp"]):
                dip = {"batch_text": count_phrase(x, "sequence"), "name": DTYPES[d].name,
                       "slower_text": ratio_phrase(row["deploy_decode_seconds"],
                                                   base_row["deploy_decode_seconds"],
                                                   more="slower", less="faster"),
                       "tp_text": deployment_text(row["deploy_tp"]),
                       "base_tp_text": deployment_text(base_row["deploy_tp"])}
    return {"stops": stops, "dip": dip, "jumps": jumps}


def memory_basis(g) -> dict:
    """Whose total the Fit step multiplies, in words true of this GPU: CUDA's own where the
    catalog has it on record (the H100 SXM), the total ROCm hands PyTorch on AMD (what vLLM
    multiplies there), else the driver's (nvidia-smi's), which is a little above CUDA's."""
    if g.memory_cuda_gib is not None:
        return {"who": "CUDA reports", "short": "what CUDA reports",
                "note": "vLLM's <code>gpu_memory_utilization</code> multiplies CUDA's total, not "
                        "nvidia-smi's larger one"}
    if g.name.startswith("AMD"):
        return {"who": "ROCm reports to PyTorch", "short": "what ROCm reports",
                "note": "vLLM's <code>gpu_memory_utilization</code> multiplies that total"}
    return {"who": "the driver reports", "short": "what the driver reports",
            "note": "vLLM's <code>gpu_memory_utilization</code> multiplies CUDA's own total, "
                    "a few hundred MiB lower and not on record for this GPU, so the room "
                    "below is slightly high"}


def no_deployment_reason(inputs: dict, result) -> dict:
    """Why no format has a deployment within the largest group: the weights themselves (even the
    smallest format's outgrow what the largest group holds beside its reserves), or the KV the
    group must hold beside them (this batch's, or one sequence of the model's full context,
    whichever is larger: `deployment_model`'s rule)."""
    group = TP_DEPLOY[-1]
    room = group * (float(result["memory_usable_bytes"]) - inputs["reserve_gb"] * GB)
    rows = [r for r in result["formats"] if r["decode_seconds"] is not None]
    smallest = min(rows, key=lambda r: r["weights_bytes"]) if rows else None
    full = float(result["context_window"]) * float(result["kv_bytes_per_token"])
    return {"group_text": count_phrase(group, "GPU"), "room_text": bytes_short(max(room, 0.0)),
            "weights_too_big": smallest is None or smallest["weights_bytes"] > room,
            "smallest_name": DTYPES[smallest["dtype"]].name if smallest else "",
            "smallest_text": bytes_short(smallest["weights_bytes"]) if smallest else "",
            "full_context_kv_text": bytes_short(full)}


def speedup_plot(*, inputs: dict, result) -> Plot:
    """Each format's token latency against the baseline's, each on its smallest deployment, as
    the batch grows (a gap where a format has no deployment within 8 GPUs)."""
    xs, rows = gain_sweep(inputs)
    base = result["baseline_dtype"]
    series = []
    for i, d in enumerate(FORMATS_COMPARED):
        if d == base:
            continue
        values = tuple(rows[x]["formats"][i]["deploy_decode_speedup"]
                       if rows[x]["formats"][i]["deploy_decode_speedup"] is not None
                       else math.nan for x in xs)
        series.append(Series(DTYPES[d].name, tuple(xs), values, dash=d == "int8",
                             markers=True))
    marks = [Mark(inputs["batch"], "your batch")]
    fp8 = next(f for f in result["formats"] if f["dtype"] == "fp8")
    kv_seq = inputs["prompt_tokens"] * float(result["kv_bytes_per_token"])
    largest = math.floor(fp8["free_bytes"] / kv_seq) if fp8["free_bytes"] > 0 else 0
    if largest >= 1:
        marks.append(Mark(largest, "largest FP8 batch on one GPU"))
    name = DTYPES[base].name
    return Plot(title=f"Token-latency gain over {name}, each format on its smallest deployment",
                x_title="Sequences per decode step",
                y_title=f"{name}'s step ÷ the format's step (×)",
                x_log=True, series=tuple(series), marks=tuple(marks))


def size_plot(*, inputs: dict, result) -> Plot:
    """Model size at each format's bits per weight, against the room for weights on each GPU."""
    formats = result["formats"]
    # The 4-bit formats sit within half a bit of each other, FP8 and INT8 on the same point.
    where = {"bf16": "top center", "fp8": "top center", "int8": "bottom center",
             "int4": "middle left", "nvfp4": "top right", "mxfp4": "bottom right"}
    series = [Series("weights", tuple(f["bits"] for f in formats),
                     tuple(f["weights_bytes"] / GB for f in formats), lines=False,
                     labels=tuple(f["name"] for f in formats),
                     label_positions=tuple(where.get(f["dtype"], "top center")
                                           for f in formats))]
    kv = float(result["kv_bytes"])
    # The learner's own GPU is always drawn, and marked, even when it is not one of the four.
    gids = FIT_GPUS if inputs["gpu"] in FIT_GPUS else (*FIT_GPUS, inputs["gpu"])
    for gid in gids:
        g = gpu_get(gid)
        room = (g.memory_total_bytes * inputs["memory_fraction"] - inputs["reserve_gb"] * GB
                - kv) / GB
        mine = " (your GPU)" if gid == inputs["gpu"] else ""
        series.append(Series(f"{g.short_name or g.name}{mine}: room for weights", (0.0, 17.0),
                             (room, room), dash=not mine))
    return Plot(title="Model size against bits per weight, and what each GPU can hold",
                x_title="Bits per weight (scales included)", y_title="GB (10⁹ bytes)",
                series=tuple(series))


INPUTS = (
    model_input(initial="llama-3-70b", api="llama-3-70b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("prompt_tokens", "Prompt (and context at decode)", unit="tokens",
                initial=1_000, api=1_000, maximum=TOKENS_MAX,
                help="Chat prompts are hundreds to a few thousand tokens; retrieval prompts tens "
                     "of thousands. Decode is timed with this much context per sequence."),
    whole_input("batch", "Sequences per decode step", unit="sequences", initial=1, api=1,
                maximum=BATCH_MAX,
                help="1 is a single user; serving batches run from tens to hundreds."),
    kv_dtype_input(),
    mfu_input(initial=1.0, api=1.0),
    bandwidth_input(),
    *memory_inputs(),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Weight formats on one GPU",
    explanation=("Size, decode step and prefill of one model in each weight format on one GPU, "
                 "with the units that multiply each format there; whether it fits with its KV "
                 "cache and a reserve; and which of four GPUs each format fits. Every time is "
                 "the larger of its memory and compute sides, the bound named."),
    inputs=INPUTS,
    compute=lambda **k: quantization_formats(**k),
    plots=lambda *, inputs, result: (speedup_plot(inputs=inputs, result=result),
                                     size_plot(inputs=inputs, result=result)),
    order=60,
    api_path="/quantization-formats",
    api_summary="Every weight format on one GPU: size, decode, prefill, fit, KV room",
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


def nvfp4_block_worked() -> dict:
    """The worked NVFP4 block of the concepts, from the reference codec (formats.py)."""
    encoded = nvfp4_encode(list(NV_TENSOR))
    start = NV_BLOCK * 16
    block = NV_TENSOR[start:start + 16]
    tensor_scale = encoded["tensor_scale"]
    amax = max(abs(v) for v in block)
    raw = nvfp4_block_scale_raw(amax, tensor_scale)
    bits = encoded["scale_bits"][NV_BLOCK]
    scale = e4m3_decode(bits)
    eff = encoded["effective"][NV_BLOCK]
    codes = encoded["codes"][start:start + 16]
    values = encoded["values"][start:start + 16]
    rows = []
    for x, code, back in zip(block, codes, values, strict=True):
        if x == 0:
            continue
        rows.append({"x": x, "back": back, "error": back - x,
                     "x_text": _signed(x), "scaled_text": _signed(x / eff),
                     "e2m1_text": _signed(e2m1_decode(code)), "code_bits": f"{code:04b}",
                     "deq_text": _signed(back), "err_text": _signed(back - x, plus=True)})
    worst = max(rows, key=lambda r: abs(r["error"]))
    smallest = min(rows, key=lambda r: abs(r["x"]))
    top = next(r for r in rows if abs(r["x"]) == amax)
    return {
        "tensor_amax_text": number_format(max(abs(v) for v in NV_TENSOR), digits=4),
        "tensor_scale_text": number_format(tensor_scale, digits=4),
        "six_448_text": f"{number_format(E2M1_MAX)} × {number_format(E4M3_MAX)}",
        "block_amax_text": number_format(amax, digits=4),
        "block_scale_raw_text": number_format(raw, digits=4),
        "block_scale_text": number_format(scale, digits=4),
        "block_scale_bits": f"{bits >> 7} {(bits >> 3) & 0xF:04b} {bits & 7:03b}",
        "effective_scale_text": number_format(eff, digits=4),
        "rows": rows,
        "amax_deq_text": _signed(top["back"]),
        "worst_x_text": worst["x_text"], "worst_deq_text": worst["deq_text"],
        "smallest_x_text": smallest["x_text"], "smallest_deq_text": smallest["deq_text"],
        "block_bytes": 16 * 4 // 8,
        "packed_text": " ".join(f"{b:02X}" for b in
                                bytes(codes[i] | codes[i + 1] << 4 for i in range(0, 16, 2))),
    }


def _gpu_rates(gid: str) -> dict:
    g = gpu_get(gid)

    def rate(value: float | None) -> str:
        return flops_rate_format(value) if value else "none"

    return {"name": g.name, "bf16_text": rate(g.bf16_flops), "fp8_text": rate(g.fp8_flops),
            "int8_text": ops_format(g.int8_ops) if g.int8_ops else "none",
            "fp4_text": rate(g.fp4_flops)}


def recommendation(*, gpu, by_id: dict) -> dict:  # noqa: ANN001
    """The format the model answer recommends, chosen by fit: the one this GPU multiplies
    fastest (NVFP4 on FP4 tensor cores, else FP8, else INT8) at its smallest deployment; INT4
    when that format has none within 8 GPUs; none when nothing deploys."""
    native = "nvfp4" if gpu.fp4_flops else ("fp8" if gpu.fp8_flops else "int8")
    for dtype_id in (native, "int4"):
        f = by_id.get(dtype_id)
        if f and f["deploy_tp"]:
            return {"found": True, "format": f, "native": dtype_id == native,
                    "one_gpu": f["deploy_tp"] == 1}
    return {"found": False, "format": by_id.get(native), "native": True, "one_gpu": False}


def context(*, request: HttpRequest) -> dict:
    """The figures problem 11's prose quotes, from the same inputs as its calculator."""
    inputs, result, valid = _evaluated(request)
    m = model_get(inputs["model"])
    g = gpu_get(inputs["gpu"])
    kv_d = kv_dtype_get(inputs["kv_dtype"], model=m)
    parts = params_count_model(m)
    emb = parts["embedding"] + parts["lm_head"]
    fit_names = [gpu_get(gid).name for gid in FIT_GPUS]
    base_deploy = next(f for f in result["formats"] if f["dtype"] == result["baseline_dtype"])
    weights = {f["dtype"]: f["weights_bytes"] for f in result["formats"]}
    formats = []
    by_id = {}
    for row, fit in zip(result["formats"], result["fit"], strict=True):
        d = DTYPES[row["dtype"]]
        is_base = row["dtype"] == result["baseline_dtype"]
        fits_on = [name for name, cell in zip(fit_names, fit["cells"], strict=True)
                   if cell["fits"]]
        overhead = d.scale_bits / d.block_size if d.block_size else 0.0
        entry = {
            "id": d.id, "name": d.name, "code_text": code_text(d.id),
            "scale_text": scale_text(d.id), "bits_text": f"{number_format(d.bits)} bits",
            "bytes_text": f"{number_format(d.bytes)} B",
            "overhead_text": f"{number_format(overhead)} bits",
            "weights_text": bytes_short(row["weights_bytes"]),
            "ratio_text": f"{number_format(row['size_ratio'])}×",
            "decode_time_text": _seconds(row["decode_seconds"]),
            "decode_text": _seconds(row["decode_seconds"], row["decode_bound"]),
            "decode_speedup_text": _ratio(row["decode_speedup"]),
            "prefill_text": _seconds(row["prefill_seconds"], row["prefill_bound"]),
            "prefill_speedup_text": _ratio(row["prefill_speedup"]),
            "native": row["native"], "path": row["path"], "path_text": row["path_text"],
            "fits": row["fits"],
            "kv_room_text": count_format(row["kv_room_tokens"], "token")
            if row["free_bytes"] > 0 else "none",
            "full_context": row["full_context"],
            "max_model_len_text": count_format(row["max_model_len"], "token"),
            "deploy_tp": row["deploy_tp"],
            "deploy_text": deployment_text(row["deploy_tp"]),
            "deploy_decode_text": _seconds(row["deploy_decode_seconds"])
            if row["deploy_tp"] else "—",
            "deploy_prefill_text": _seconds(row["deploy_prefill_seconds"])
            if row["deploy_tp"] else "—",
            "deploy_latency_text": _latency_text(base_deploy["deploy_decode_seconds"],
                                                 row["deploy_decode_seconds"], base=is_base),
            "deploy_prefill_ratio_text": _latency_text(base_deploy["deploy_prefill_seconds"],
                                                       row["deploy_prefill_seconds"],
                                                       base=is_base),
            "deploy_gpus_text": _gpus_text(row["deploy_tp"], base_deploy["deploy_tp"],
                                           base=is_base),
            "deploy_faster": (row["deploy_decode_seconds"] is not None
                              and base_deploy["deploy_decode_seconds"] is not None
                              and row["deploy_decode_seconds"]
                              < base_deploy["deploy_decode_seconds"]),
            "fits_on_text": _names_joined(fits_on, total=len(fit_names)),
            "decode_bound": row["decode_bound"], "prefill_bound": row["prefill_bound"],
        }
        formats.append(entry)
        by_id[d.id] = entry
    fit_rows = []
    for row, fit in zip(result["formats"], result["fit"], strict=True):
        fit_rows.append({"name": DTYPES[row["dtype"]].name, "cells": [
            {"gpu": cell["gpu"], "fits": cell["fits"], "full_context": cell["full_context"],
             "kv_room_text": count_format(cell["kv_room_tokens"], "token"),
             "max_model_len_text": count_format(cell["max_model_len"], "token")}
            for cell in fit["cells"]]})
    bf16 = result["formats"][0]
    kv_bytes = float(result["kv_bytes"])
    read_bf16 = bf16["decode_bytes"]
    channel_scales = linear_rows_model(m)
    at_floor = inputs["mfu"] >= 1 and inputs["bandwidth_efficiency"] >= 1
    demo = models_all().get(DEMO_MODEL_ID)
    int4 = DTYPES["int4"]
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_valid": valid,
        "baseline_name": DTYPES[result["baseline_dtype"]].name,
        "baseline_is_bf16": result["baseline_dtype"] == "bf16",
        "base": by_id[result["baseline_dtype"]],
        "context_window_text": count_format(int(result["context_window"]), "token"),
        "hypothetical_names": list_phrase([f["name"] for f in formats if not f["fits"]]),
        "any_hypothetical": any(not f["fits"] for f in formats),
        "any_deploy": any(f["deploy_tp"] for f in formats),
        "gain": gain_shape(inputs, result),
        "no_deploy": no_deployment_reason(inputs, result),
        "pick": recommendation(gpu=g, by_id=by_id),
        "marlin_ideal_text": f"{MARLIN_IDEAL_SPEEDUP}×",
        "marlin_batch_low": MARLIN_IDEAL_BATCH[0], "marlin_batch_high": MARLIN_IDEAL_BATCH[1],
        "gpt_oss_bits_text": f"{number_format(GPT_OSS_MXFP4_BITS)} bits",
        "gpt_oss_gpu_text": f"{GPT_OSS_GPU_GB} GB",
        "int4_ratio_text": f"{number_format(16 / DTYPES['int4'].bits)}×",
        # "3.55× smaller than", or for a model whose embedding stays wider than BF16 (the FP32
        # demo models) "1.29× larger than": never "0.776× smaller".
        "int4_size_phrase": ratio_phrase(weights["int4"], weights["bf16"], more="larger than",
                                         less="smaller than", same="about the same size as"),
        "gpus_has_fp4": bool(g.fp4_flops),
        # INT4 deploys on fewer GPUs than the recommended format: the answer says what it saves.
        "int4_fewer_gpus": bool(by_id["int4"]["deploy_tp"]) and bool(
            recommendation(gpu=g, by_id=by_id)["format"]["deploy_tp"])
        and by_id["int4"]["deploy_tp"] < recommendation(gpu=g, by_id=by_id)["format"]["deploy_tp"],
        # INT4's token is faster than the baseline's by more than "about the same" (5%).
        "int4_speeds": by_id["int4"]["deploy_faster"]
        and by_id["int4"]["deploy_latency_text"] != "about the same",
        "tied": m.tied_embeddings,
        "model_name": m.name, "gpu_name": g.name, "kv_dtype_name": kv_d.kv_label,
        "matrix_units": g.matrix_units,
        "kv_is_narrow": kv_d.bytes <= 1,
        "memory_kind": g.memory_kind,
        "layers": f"{m.layers:,}", "hidden": f"{m.hidden:,}", "heads": f"{m.heads:,}",
        "kv_heads": f"{m.kv_heads:,}", "head_dim": f"{m.head_dim:,}",
        "intermediate": f"{m.intermediate:,}", "vocab": f"{m.vocab:,}",
        "prompt_tokens": f"{inputs['prompt_tokens']:,}", "batch": f"{inputs['batch']:,}",
        "prompt_tokens_text": count_format(inputs["prompt_tokens"], "token"),
        "moe": m.is_moe,
        "batch_text": count_format(inputs["batch"], "sequence"),
        "bandwidth_text": bandwidth_format(g.bandwidth_bytes_per_second),
        "mfu_percent": percent_format(inputs["mfu"]),
        "bandwidth_efficiency_percent": percent_format(inputs["bandwidth_efficiency"]),
        "at_floor": at_floor,
        "params_text": f"{parts['total']:,.0f}",
        "body_params_text": f"{parts['non_embedding']:,.0f}",
        "emb_head_params_text": f"{emb:,.0f}",
        "emb_head_bytes_text": bytes_short(emb * 2),
        "emb_head_share_text": percent_format(emb / parts["total"]),
        # Below this share the embedding and head are called "a small share" of the model.
        "emb_head_share_small": emb / parts["total"] < EMB_HEAD_SMALL_SHARE,
        "kv_per_token_text": bytes_short(float(result["kv_bytes_per_token"])),
        "kv_bytes_text": bytes_short(kv_bytes),
        "kv_share_bf16_text": percent_format(kv_bytes / read_bf16) if read_bf16 else "0%",
        "channel_scales_text": f"{channel_scales:,}",
        "channel_scale_bytes_text": bytes_short(4 * channel_scales),
        "channel_scale_share_text": percent_format(4 * channel_scales / parts["non_embedding"]),
        "int4_g32_overhead_text": f"{number_format(int4.scale_bits / 32)} bits",
        "prefill_flops_text": flops_format(float(result["prefill_flops"])),
        "prefill_linear_flops_text": flops_format(float(result["prefill_linear_flops"])),
        "prefill_attention_flops_text": flops_format(float(result["prefill_attention_flops"])),
        "attention_pair_text": f"{attention_flops_per_token_pair(m):,}",
        "gpu_memory_text": bytes_format(g.memory_total_bytes),
        "memory_basis": memory_basis(g),
        "gpu_memory_label": g.memory_label,
        "memory_fraction_percent": percent_format(inputs["memory_fraction"]),
        "memory_fraction_default_percent": percent_format(MEMORY_FRACTION_DEFAULT),
        "usable_text": bytes_short(float(result["memory_usable_bytes"])),
        "reserve_text": bytes_short(inputs["reserve_gb"] * GB),
        "decode_all_memory_bound": all(f["decode_bound"] in ("memory", None)
                                       for f in result["formats"]),
        # Which formats' decode steps the calculator finds compute-bound, named in the answer.
        "decode_compute_bound_text": _list_joined([DTYPES[f["dtype"]].name.split(" (")[0]
                                                   for f in result["formats"]
                                                   if f["decode_bound"] == "compute"]),
        "prefill_all_compute_bound": all(f["prefill_bound"] in ("compute", None)
                                         for f in result["formats"]),
        "any_no_path": any(not f["path"] for f in result["formats"]),
        "fit_gpu_names": fit_names,
        "fit_rows": fit_rows,
        "formats": formats,
        "f": by_id,
        "gpus": [_gpu_rates(gid) for gid in FIT_GPUS],
        "nv": nvfp4_block_worked(),
        "demo_params_text": f"{int(demo.params_published):,}" if demo else "",
        "demo_linear_count": 7 * demo.layers if demo else 0,
        "demo_group_size": QUANTIZATION_PARAMS.defaults()["int4_group_size"],
        "demo_documents": QUANTIZATION_PARAMS.defaults()["documents"],
    }


SOURCES: list[tuple[str, str]] = [
    ("Micikevicius et al., 'FP8 Formats for Deep Learning' (E4M3 and E5M2: layouts, 448 and "
     "57,344, NaN and infinity encodings)", "https://arxiv.org/abs/2209.05433"),
    ("NVIDIA Technical Blog, 'Introducing NVFP4 for Efficient and Accurate Low-Precision "
     "Inference' (E2M1 values, an E4M3 scale per 16 and an FP32 scale per tensor; 3.5× smaller "
     "than FP16 and 1.8× than FP8; under 1% accuracy loss on the models shown; Blackwell FP4 "
     "tensor cores)",
     "https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/"),
    ("NVIDIA TensorRT Model Optimizer, nvfp4_tensor.py (the NVFP4 recipe: tensor scale amax ÷ "
     "(6 × 448), block scale amax ÷ 6 ÷ tensor scale in E4M3, E2M1 bounds and ties, two codes "
     "a byte)",
     "https://github.com/NVIDIA/TensorRT-Model-Optimizer/blob/main/modelopt/torch/quantization/qtensor/nvfp4_tensor.py"),
    ("Open Compute Project, 'OCP Microscaling Formats (MX) v1.0 Specification' (MXFP4: E2M1 "
     "values, an E8M0 scale per 32)",
     "https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf"),
    ("Lin et al., 'AWQ: Activation-aware Weight Quantization for LLM Compression and "
     "Acceleration' (salient channels, scaling before rounding, group 128)",
     "https://arxiv.org/abs/2306.00978"),
    ("mit-han-lab/llm-awq, pseudo_quantize_tensor (INT4 with a scale (max − min) ÷ 15 and a zero "
     "point per group)", "https://github.com/mit-han-lab/llm-awq/blob/main/awq/quantize/quantizer.py"),
    ("Frantar et al., 'GPTQ: Accurate Post-Training Quantization for Generative Pre-trained "
     "Transformers' (column-by-column quantization with second-order error correction)",
     "https://arxiv.org/abs/2210.17323"),
    ("Xiao et al., 'SmoothQuant: Accurate and Efficient Post-Training Quantization for Large "
     "Language Models' (W8A8 INT8, moving activation outliers into the weights)",
     "https://arxiv.org/abs/2211.10438"),
    ("Dettmers et al., 'LLM.int8(): 8-bit Matrix Multiplication for Transformers at Scale' "
     "(outlier features emerging from about 6.7B parameters; mixed-precision decomposition)",
     "https://arxiv.org/abs/2208.07339"),
    ("Kurtic et al., '\"Give Me BF16 or Give Me Death\"? Accuracy-Performance Trade-Offs in LLM "
     "Quantization' (ACL 2025: FP8 W8A8 lossless, INT8 W8A8 within 1–3%, W4A16 competitive; "
     "W4A16 for synchronous serving, W8A8 for high-throughput batching)",
     "https://arxiv.org/abs/2411.02355"),
    ("vLLM pull request 18000, 'Use NVFP4 Marlin for CompressedTensorsW4A16Fp4' (NVFP4 "
     "weight-only on GPUs without FP4 tensor cores)", "https://github.com/vllm-project/vllm/pull/18000"),
    ("vLLM documentation, 'FP8 W8A8' (W8A8 on Ada, Hopper and Blackwell; weight-only W8A16 "
     "through FP8 Marlin on GPUs without FP8 tensor cores)",
     "https://docs.vllm.ai/en/stable/features/quantization/fp8/"),
    ("IST-DASLab, Marlin (4-bit weight-only kernels that dequantize to FP16 inside the matmul; "
     "close to the ideal 4× over FP16 up to batches of 16–32 tokens; Ampere and Ada, not tuned "
     "for Hopper)", "https://github.com/IST-DASLab/marlin"),
    ("Neural Magic, 'Introducing Machete, a Mixed-Input GEMM Kernel Optimized for NVIDIA Hopper "
     "GPUs' (W4A16 on H100 with wgmma and TMA, vLLM's kernel where Marlin falls short on "
     "Hopper)", "https://neuralmagic.com/blog/introducing-machete-a-mixed-input-gemm-kernel-optimized-for-nvidia-hopper-gpus/"),
    ("vLLM documentation, 'Quantized KV Cache' (FP8 KV cache; without calibration every scale "
     "is 1.0; calculate_kv_scales estimates them on the fly; llm-compressor calibrates them on "
     "a dataset and stores them in the checkpoint)",
     "https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/"),
    ("OpenAI, 'gpt-oss-120b & gpt-oss-20b Model Card' (MoE weights post-trained in MXFP4, 4.25 "
     "bits a parameter; the 120B model fits one 80 GB GPU)", "https://arxiv.org/abs/2508.10925"),
    ("vLLM issue 2418 (the engine refuses to start when the KV cache cannot hold one sequence of "
     "max_model_len; the fix is --max-model-len or more memory)",
     "https://github.com/vllm-project/vllm/issues/2418"),
    ("vLLM pull request 12126 (startup log on an H100 80GB: total_gpu_memory 79.22 GiB × "
     "gpu_memory_utilization 0.90 = 71.29 GiB, the total CUDA reports)",
     "https://github.com/vllm-project/vllm/pull/12126"),
    ("Lucas Wilkinson, 'Machete: a mixed-input GEMM kernel targeting NVIDIA Hopper GPUs' (MIT "
     "Scale ML talk: W4A16 on Hopper dequantizes on the fly)",
     "https://csail.mit.edu/event/scale-ml-lucas-wilkinson-machete-cutting-edge-mixed-input-gemm-gpu-kernel-targeting-nvidia"),
    ("TensorRT-LLM documentation, 'Quantization' (its recipes: FP4, FP8, W4A16 and W4A8 AWQ "
     "and GPTQ, FP8 and NVFP4 KV caches)",
     "https://nvidia.github.io/TensorRT-LLM/features/quantization.html"),
    ("NVIDIA Model Optimizer, support matrix (W4A8: INT4 weights with FP8 activations, Ada and "
     "later; FP4 on Blackwell and later)",
     "https://nvidia.github.io/Model-Optimizer/guides/0_support_matrix.html"),
    ("TensorRT-LLM pull request 6244, 'Support NVFP4 KV Cache' (merged August 2025)",
     "https://github.com/NVIDIA/TensorRT-LLM/pull/6244"),
    ("vLLM engine arguments, --kv-cache-dtype (FP8 E4M3 or E5M2 KV cache)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("Shah et al., 'FlashAttention-3' (an FP8 attention path on Hopper)",
     "https://arxiv.org/abs/2407.08608"),
    ("DeepSeek-AI, 'DeepSeek-V3 Technical Report' (FP8 weights with 128 × 128 block scales)",
     "https://arxiv.org/abs/2412.19437"),
    ("NVIDIA A100 Tensor Core GPU datasheet (INT4 tensor throughput listed, no FP8)",
     "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense rates, no INT4 or FP4 row)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("NVIDIA H200 Tensor Core GPU datasheet",
     "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"),
    ("NVIDIA HGX platform specifications (HGX B200 tensor rates, FP4 tensor cores)",
     "https://www.nvidia.com/en-us/data-center/hgx/"),
    ("NVIDIA DGX B200 datasheet (each GPU's memory and bandwidth)",
     "https://www.nvidia.com/en-us/data-center/dgx-b200/"),
    ("NVIDIA L40S datasheet (FP8 tensor cores, no FP4)",
     "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"),
    ("Meta Llama 3 70B config.json (the worked model)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
]
