"""Problem 12, H100 vs H200 vs B200 vs L40S: the calculator that runs one workload through the
four GPUs (fit, largest batch, decode step, prefill, tokens per second, per dollar and per kW),
the rooflines calculator of the demo (the four rooflines with the workload on them; the
worker's own measured roofline is added in the browser from /demos/hardware), and every
figure the prose quotes, all from problems/arithmetic at render time.
"""

import math

from django.http import HttpRequest

from problems.arithmetic.catalog import DTYPES, dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.prices import PRICE_EXAMPLES
from problems.arithmetic.cost import PRICE_MAX
from problems.arithmetic.gpus import (
    CONCURRENCY_MAX,
    GPUS_COMPARED,
    TPOT_MS_MAX,
    gpu_compare,
    gpu_rooflines,
    roofline_points,
)
from problems.arithmetic.interconnect import interconnect_summary
from problems.arithmetic.quant import NO_PATH
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_short,
    count_format,
    flops_format,
    flops_rate_format,
    money_format,
    number_format,
    ops_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, list_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    Input,
    bandwidth_input,
    dtype_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import PALETTE, Mark, Plot, Series

SLUG = "gpu-compare"
PREFIX = "p12-gpus"
ROOFLINE_SLUG = "gpu-rooflines"
ROOFLINE_PREFIX = "p12-roofline"
TERA = 1e12
KEYS = {"h100-sxm": "h100", "h200": "h200", "b200": "b200", "l40s": "l40s"}
CONCURRENCY_SWEEP = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TP_FOLLOWUP_MODEL = "llama-3.1-70b"
# Where the roofline plot's labels sit, so that points close together (the H100's and H200's
# ridges on the same roof, their prefills on the same point) stay readable.
# (The H100's and H200's roofs are one line: one name above it, one below.)
ROOF_LABELS = {"h100-sxm": "bottom left", "h200": "top left", "b200": "top left",
               "l40s": "top left"}


def b200_driver_bandwidth() -> float:
    """The B200's bandwidth from what its driver reports (bytes/s), from the catalog: bus bits
    ÷ 8 × memory clock × 2 transfers a clock. Hand: 7,680 ÷ 8 × 3.996e9 × 2 = 7.672e12."""
    return gpu_get("b200").driver_bandwidth_bytes_per_second


# Two bandwidth figures within 1% of each other "agree".
AGREE_WITHIN = 0.01
# A step share this close to 100% is the same step.
SAME_STEP = 0.9995
# A decode step under this share of its ridge's intensity sits "far left" of it.
RIDGE_FAR = 0.25


def ridge_scaling_text(*, mfu: float, efficiency: float) -> str:
    """What scales the datasheet ridge into the one a step meets, as a phrase after the ridge
    ("at 50% MFU"), or "" at the peaks."""
    parts = []
    if mfu < 1:
        parts.append(f"{percent_format(mfu)} MFU")
    if efficiency < 1:
        parts.append(f"{percent_format(efficiency)} of peak bandwidth")
    return f" at {' and '.join(parts)}" if parts else ""


def b200_bandwidth_context(point: dict) -> dict:
    """What the catalog's B200 bandwidth (the DGX datasheet's) means against the other figure
    on record (the HGX page's) and the driver's: whether the other agrees with the driver,
    how far apart the catalog's is (in the direction the numbers give), and what the B200's
    decode step here would take at the other figure, the same batch, where it is memory-bound.
    Hand: 8 ÷ 7.7 − 1 = 3.9% more; a memory-bound step of 9.59 ms takes 9.59 × 8 ÷ 7.7 =
    9.96 ms at 7.7 TB/s."""
    b200 = gpu_get("b200")
    catalog = b200.bandwidth_bytes_per_second
    other = b200.bandwidth_other_bytes_per_second
    driver = b200.driver_bandwidth_bytes_per_second
    step = point["decode_seconds"]
    memory_bound = bool(step) and point["decode_bound"] == "memory"
    other_step = None
    if memory_bound:
        # The tensor-parallel all-reduces, if any, do not move with the memory bandwidth.
        comm = step - max(point["decode_memory_seconds"], point["decode_compute_seconds"])
        other_step = max(point["decode_memory_seconds"] * catalog / other,
                         point["decode_compute_seconds"]) + comm
    return {
        "b200_hgx_agrees": abs(other / driver - 1) <= AGREE_WITHIN,
        "b200_catalog_higher": catalog > other,
        "b200_bandwidth_overstate_text": percent_format(abs(catalog / other - 1)),
        "b200_decode_state": ("memory" if memory_bound else "compute" if step else "none"),
        "b200_decode_text": seconds_format(step) if step else "",
        "b200_decode_other_text": seconds_format(other_step) if other_step else "",
    }


def _price_input(gid: str) -> Input:
    example = PRICE_EXAMPLES[gid]
    short = gpu_get(gid).short_name
    return real_input(f"price_{KEYS[gid]}", f"{short} price", unit="$ per GPU-hour",
                      initial=round(example.dollars_per_hour, 4),
                      api=round(example.dollars_per_hour, 4), minimum=0.01, maximum=PRICE_MAX,
                      help=f"Example: {example.provider}'s on-demand list price, "
                           f"{example.as_of} (per second × 3,600). Enter your own quote.")


INPUTS = (
    model_input(initial="llama-3.1-8b", api="llama-3.1-8b"),
    dtype_input(label="Weight format", initial="fp8", api="fp8",
                help="The format of the layers' weights (and activations, where the GPU's "
                     "tensor cores take it); the embedding and head stay in BF16 below 16 "
                     "bits. NVFP4 and MXFP4 run weight-only, at the BF16 rate, off Blackwell."),
    kv_dtype_input(),
    whole_input("context_tokens", "Context per conversation", unit="tokens", initial=8_192,
                api=8_192, maximum=10**7,
                help="The KV each conversation holds at the step timed, and the length of the "
                     "one prompt prefilled."),
    whole_input("concurrency", "Concurrent conversations", unit="conversations", initial=64,
                api=64, maximum=CONCURRENCY_MAX),
    real_input("tpot_ms", "Time-per-output-token target", unit="ms", initial=None, api=None,
               minimum=0.1, maximum=TPOT_MS_MAX, required=False,
               help="The longest decode step each user accepts (50 ms is 20 tokens/s a user). "
                    "Blank: no target, every GPU runs the largest batch that fits."),
    mfu_input(initial=0.5, api=0.5),
    bandwidth_input(),
    *memory_inputs(),
    *(_price_input(gid) for gid in GPUS_COMPARED),
)


def dollars_plot(*, inputs: dict, result) -> Plot:
    """Million output tokens per dollar on each GPU as the concurrency grows (each flattens at
    its largest batch)."""
    xs = sorted(set(CONCURRENCY_SWEEP) | {inputs["concurrency"]})
    points = {x: gpu_compare(**{**inputs, "concurrency": x})["gpus"] for x in xs}
    series = []
    for i, gid in enumerate(GPUS_COMPARED):
        values = tuple((points[x][i]["tokens_per_dollar"] or math.nan) / 1e6 for x in xs)
        series.append(Series(gpu_get(gid).short_name, tuple(xs), values, markers=True))
    return Plot(title="Output tokens per dollar as the concurrency grows",
                x_title="Concurrent conversations", y_title="Million output tokens per dollar",
                x_log=True, series=tuple(series),
                marks=(Mark(inputs["concurrency"], "your concurrency"),))


def roofline_plot(*, inputs: dict, result) -> Plot:
    """The four rooflines in the chosen format (a roof is straight on log–log axes, so its two
    ends and its ridge draw it exactly), and each GPU's decode step (at the batch that runs
    there) and one prefill as points in its roof's colour."""
    d = dtype_get(inputs["dtype"])
    roofs, points = [], []
    ridges_x, ridges_y = [], []
    for index, p in enumerate(result["gpus"]):
        if p["rate"] is None:
            continue
        g = gpu_get(p["gpu"])
        colour = PALETTE[index % len(PALETTE)]
        xs, ys = roofline_points(peak=p["rate"], bandwidth=g.bandwidth_bytes_per_second,
                                 points=2)
        # Named at its right-hand end: the plot has no legend.
        roofs.append(Series(p["short_name"], xs, tuple(y / TERA for y in ys), color=colour,
                            labels=("", "", p["short_name"]),
                            label_positions=("top center", "top center",
                                             ROOF_LABELS.get(p["gpu"], "top left"))))
        ridges_x.append(p["ridge"])
        ridges_y.append(p["rate"] / TERA)
        xs, ys, labels = [], [], []
        if p["intensity"] is not None:
            xs.append(p["intensity"])
            ys.append(p["achieved_flops"] / TERA)
            labels.append("decode")
        if p["prefill_flops_per_second"] is not None:
            xs.append(result["prefill_intensity"])
            ys.append(p["prefill_flops_per_second"] / TERA)
            labels.append("prefill")
        points.append((p, xs, ys, labels, colour))
    workload = []
    for i, (p, xs, ys, labels, colour) in enumerate(points):
        # The points of each GPU take its roof's colour; only the last GPU's carry words, so
        # the four near-identical points do not print their names over each other.
        last = i == len(points) - 1
        words = {"decode": "decode at each GPU's batch", "prefill": "one prefill"}
        workload.append(Series(
            f"{p['short_name']}: this workload", tuple(xs), tuple(ys), lines=False,
            color=colour, labels=tuple(words[label] if last else "" for label in labels),
            label_positions=tuple("bottom right" if label == "decode" else "bottom center"
                                  for label in labels)))
    ridges = Series("ridge points", tuple(ridges_x), tuple(ridges_y), lines=False,
                    color="#555555")
    return Plot(title=f"Rooflines in {d.name}, with this workload",
                x_title="Arithmetic intensity (FLOP per byte)",
                y_title="Attainable TFLOP/s", x_log=True, y_log=True,
                series=(*roofs, ridges, *workload), legend=False)


def compare_note(*, inputs: dict, result) -> str:
    """What the plots leave out, and why: each GPU with no decode step, with its reason; a
    sentence saying nothing can be drawn when no GPU runs the workload (never empty axes)."""
    missing = [f"the {p['short_name']}: {why_not_running(p)}" for p in result["gpus"]
               if not p["decode_seconds"]]
    if not missing:
        replicas = [f"the {p['short_name']} on {p['tp']} GPUs" for p in result["gpus"]
                    if (p["tp"] or 1) > 1]
        return ("Costs are per replica: " + list_phrase(replicas) + ", priced at that many "
                "GPU-hours.") if replicas else ""
    if len(missing) == len(result["gpus"]):
        return ("Nothing to draw at these inputs, because no GPU runs this workload: "
                + "; ".join(missing) + ". Try a smaller model or format, or a shorter context.")
    return "Left out of the plots: " + "; ".join(missing) + "."


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Four GPUs, one workload",
    explanation=("Fit, largest batch at the context, decode step, prefill, output tokens per "
                 "second and per dollar on the H100 SXM, H200, B200 and L40S, for one model and "
                 "format. Every time is the larger of its memory and compute sides, the bound "
                 "named; prices are examples to replace with your own."),
    inputs=INPUTS,
    compute=lambda **k: gpu_compare(**k),
    plot=dollars_plot,
    note=compare_note,
    order=61,
    api_path="/gpu-compare",
    api_summary="One workload on H100, H200, B200 and L40S: fit, batch, step, prefill, cost",
))

ROOFLINE_CALCULATOR = calculator_register(Calculator(
    slug=ROOFLINE_SLUG,
    title="Rooflines of the four GPUs, with this workload on them",
    explanation=("Each GPU's attainable FLOP/s against arithmetic intensity in the chosen "
                 "format (the slope is its bandwidth, the flat roof its dense peak), its ridge "
                 "point, the decode step at the batch that runs on it, and one prefill. The "
                 "course's worker adds its own measured roofline when it has measured itself."),
    inputs=INPUTS,
    compute=lambda **k: gpu_rooflines(**k),
    plot=roofline_plot,
    note=compare_note,
    listed=False,
    order=62,
    api_path="/gpu-rooflines",
    api_summary="The four GPUs' rooflines in one format, with the workload's decode and prefill "
                "points",
))


def _evaluated(calculator: Calculator, prefix: str,
               request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(calculator, query=request.GET, prefix=prefix)


def why_not_running(p: dict) -> str:
    """Why a GPU has no decode step, or "": no kernel path for the format; no replica of up to
    8 GPUs that holds the weights and one sequence's KV; or no batch meets the per-token
    target."""
    if not p["path"]:
        return NO_PATH
    if not p["fits"]:
        return ("the weights and one sequence's KV do not fit 8 of them" if p["weights_fit"]
                or p["tp"] is None else "no room for one sequence's KV")
    if p["tpot_unmet"]:
        return "even one sequence's step is longer than the time-per-token target"
    return ""


def _gpu_texts(p: dict, *, at_floor: bool) -> dict:
    g = gpu_get(p["gpu"])

    def rate(value: float | None) -> str:
        return flops_rate_format(value) if value else "none"

    fits = p["fits"]
    step = p["decode_seconds"]
    bound = p["decode_bound"]
    floor = ", floor" if at_floor and bound == "memory" else ""
    why = why_not_running(p)
    short = p["short_name"]
    tp = p["tp"] or 1
    return {
        "id": g.id, "name": g.name, "short_name": p["short_name"], "arch": g.architecture,
        "memory_label": g.memory_label, "memory_kind": g.memory_kind,
        "memory_reported_text": f"{g.memory_total_basis} = "
                                f"{bytes_short(g.memory_total_bytes)}",
        "bandwidth_text": bandwidth_format(g.bandwidth_bytes_per_second),
        "bf16_text": rate(g.bf16_flops), "fp8_text": rate(g.fp8_flops),
        "int8_text": ops_format(g.int8_ops) if g.int8_ops else "none",
        "fp4_text": rate(g.fp4_flops),
        "interconnect_text": interconnect_summary(g),
        "power_text": f"{g.power_watts:,} W",
        "price_text": money_format(p["price_per_hour"]) + "/h",
        "ridge_text": f"{number_format(p['ridge'])} FLOP/B" if p["ridge"] else "none",
        "usable_text": bytes_short(p["usable_bytes"]),
        "fits": fits, "weights_fit": p["weights_fit"], "why_text": why,
        "fit_text": ("no" if not fits else "yes" if tp == 1
                     else f"on {tp} GPUs (TP {tp}), not on one"),
        "tp": tp, "tp_text": count_phrase(tp, "GPU") if fits else "none",
        "replica_price_text": money_format(p["replica_price_per_hour"]) + "/h" if fits
        else "none",
        "per_user_text": rate_format(p["tokens_per_second_per_user"], "tokens/s")
        if step else "none",
        "tpot_capped": p["tpot_capped"], "tpot_unmet": p["tpot_unmet"],
        "batch_max_text": count_format(p["batch_max"], "sequence") if fits else "none",
        "batch_text": count_phrase(p["batch"], "sequence") if fits else "none",
        "capped": p["capped"],
        "waiting_text": count_format(p["waiting"], "conversation"),
        "waiting_verb": "waits" if p["waiting"] == 1 else "wait",
        "step_time_text": seconds_format(step) if step else why,
        "step_text": f"{seconds_format(step)} ({bound}-bound{floor})" if step else why,
        # One GPU's decode, price and prefill as the model answer says them.
        "decode_said": (f"{seconds_format(step)} on the {short} "
                        f"({rate_format(round(p['tokens_per_second']), 'tokens/s')})"
                        if step else ""),
        "price_said": (f"{money_format(p['dollars_per_million'], significant=3)} on the {short}"
                       + (f" ({tp} GPUs)" if tp > 1 else "") if step else ""),
        "hourly_said": (f"{money_format(p['replica_price_per_hour'])} an hour for the {short}"
                        + (f" ({tp} GPUs)" if tp > 1 else "") if step else ""),
        "prefill_said": (f"{seconds_format(p['prefill_seconds'])} on the {short}"
                         if p["prefill_seconds"] else ""),
        "cannot_said": f"the {short} cannot run it ({why})" if why else "",
        "step_bound": bound,
        "tokens_per_second_text": rate_format(round(p["tokens_per_second"]), "tokens/s")
        if step else "none",
        "prefill_text": seconds_format(p["prefill_seconds"]) if p["prefill_seconds"]
        else why,
        "prefill_bound": p["prefill_bound"],
        "tokens_per_dollar_text": f"{number_format(p['tokens_per_dollar'] / 1e6)} million"
        if step else "none",
        "dollars_per_million_text": money_format(p["dollars_per_million"], significant=3)
        if step else "none",
        "tokens_per_kw_text": number_format(round(p["tokens_per_second_per_kw"]))
        if step else "none",
        "intensity_text": f"{number_format(p['intensity'])} FLOP/B" if step else "none",
    }


def _said(gpus: list[dict], key: str) -> str:
    """The GPUs' figures as one clause, those that run first and then the ones that cannot
    ("<time> on the H200; <time> on the B200; the L40S cannot run it (weights do not fit)")."""
    said = [t[key] for t in gpus if t[key]]
    cannot = [t["cannot_said"] for t in gpus if not t[key] and t["cannot_said"]]
    return "; ".join(said + cannot) if said else "nothing on any of them"


def context(*, request: HttpRequest) -> dict:
    """The figures problem 12's prose quotes, from the same inputs as its calculator."""
    inputs, result, valid = _evaluated(CALCULATOR, PREFIX, request)
    m = model_get(inputs["model"])
    d = dtype_get(inputs["dtype"])
    kv_d = kv_dtype_get(inputs["kv_dtype"], model=m)
    at_floor = inputs["bandwidth_efficiency"] >= 1
    points = {p["gpu"]: p for p in result["gpus"]}
    gpus = [_gpu_texts(p, at_floor=at_floor) for p in result["gpus"]]
    by_key = {KEYS[t["id"]]: t for t in gpus}
    h100, h200, b200, l40s = (gpu_get(g) for g in GPUS_COMPARED)
    ph100 = points["h100-sxm"]
    running = [p for p in result["gpus"] if p["decode_seconds"]]
    cheapest = min(running, key=lambda p: p["dollars_per_million"]) if running else None
    # Traffic that fills no GPU's batch is paid by the hour whatever it does: then the cheapest
    # replica an hour that runs it (and meets the per-token target, when there is one) wins.
    fills_none = bool(running) and all(not p["capped"] and not p["tpot_capped"]
                                       for p in running)
    cheapest_hour = (min(running, key=lambda p: p["replica_price_per_hour"]) if running
                     else None)
    pick = cheapest_hour if fills_none else cheapest
    dearest = max(running, key=lambda p: p["dollars_per_million"]) if running else None
    kw_order = sorted(running, key=lambda p: -p["tokens_per_second_per_kw"])
    # The H200 at the H100's running batch: the same step, read at the H200's bandwidth.
    same_batch = None
    # Only where both run on one GPU: a two-GPU H100 replica against one H200 is not "the same".
    if (ph100["decode_seconds"] and points["h200"]["prefill_seconds"]
            and ph100["tp"] == 1 and points["h200"]["tp"] == 1):
        same = gpu_compare(**{**inputs, "concurrency": ph100["batch"]})["gpus"]
        h200_same = next(p for p in same if p["gpu"] == "h200")
        if h200_same["decode_seconds"]:
            same_batch = h200_same["decode_seconds"] / ph100["decode_seconds"]
    kv_seq = float(result["kv_bytes_per_sequence"])
    # The GPU the bandwidth bullet reads its step from: the H100, or the first that runs.
    ref = ph100 if ph100["decode_seconds"] else (running[0] if running else None)
    kv_share = ref["decode_kv_bytes"] / ref["decode_bytes"] if ref else None
    example = PRICE_EXAMPLES["h100-sxm"]
    # Which GPUs' decode steps are memory-bound and which compute-bound at the batch each runs:
    # a large batch of short sequences reuses each weight read enough to pass the ridge.
    decode_memory = [p["short_name"] for p in running if p["decode_bound"] == "memory"]
    decode_compute = [p["short_name"] for p in running if p["decode_bound"] == "compute"]

    def ridge_effective(p: dict) -> float:
        """The intensity where this GPU's step turns compute-bound at the MFU and bandwidth
        efficiency assumed (the dense ridge × MFU ÷ efficiency), FLOP/B."""
        return p["ridge"] * inputs["mfu"] / inputs["bandwidth_efficiency"]
    # The four-L40S follow-up's model: two all-reduces per layer, each a message of its own.
    m70 = model_get(TP_FOLLOWUP_MODEL)
    return {
        "calculator_slug": SLUG, "calculator_prefix": PREFIX,
        "roofline_slug": ROOFLINE_SLUG, "roofline_prefix": ROOFLINE_PREFIX,
        "inputs_valid": valid,
        "model_name": m.name, "dtype_name": d.name, "kv_dtype_name": kv_d.kv_label,
        "context_tokens": f"{inputs['context_tokens']:,}",
        "concurrency": f"{inputs['concurrency']:,}",
        "concurrency_text": count_format(inputs["concurrency"], "conversation"),
        "sequences_text": count_format(inputs["concurrency"], "sequence"),
        "context_tokens_text": count_format(inputs["context_tokens"], "token"),
        "mfu_percent": percent_format(inputs["mfu"]),
        "bandwidth_efficiency_percent": percent_format(inputs["bandwidth_efficiency"]),
        "at_floor": at_floor,
        "memory_fraction_percent": percent_format(inputs["memory_fraction"]),
        "reserve_text": bytes_short(inputs["reserve_gb"] * GB),
        "weights_text": bytes_short(float(result["weights_bytes"])),
        "weights_read_text": bytes_short(float(result["weights_read_bytes"])),
        "kv_expression": f"{m.layers} layers × "
                         + ("2 (K and V) × " if m.attention != "MLA" else "")
                         + (f"{m.kv_heads} KV heads × {m.head_dim} head_dim"
                            if m.attention != "MLA" else
                            f"({m.kv_lora_rank} latent + {m.qk_rope_head_dim} RoPE key)")
                         + f" × {number_format(kv_d.bytes)} B ({kv_d.kv_label})",
        "kv_per_token_text": bytes_short(float(result["kv_bytes_per_token"])),
        "kv_per_seq_text": bytes_short(kv_seq),
        "per_seq_flops_text": flops_format(float(result["decode_flops_per_sequence"])),
        "prefill_flops_text": flops_format(float(result["prefill_flops"])),
        "kv_share_text": percent_format(kv_share) if kv_share is not None else "none",
        "ref_name": ref["short_name"] if ref else "",
        "ref": by_key[KEYS[ref["gpu"]]] if ref else None,
        "decode_said_text": _said(gpus, "decode_said"),
        "price_said_text": _said(gpus, "price_said"),
        "prefill_said_text": _said(gpus, "prefill_said"),
        # Equal only where both prefills are compute-bound: the same tensor cores, the same
        # time. A short prompt's prefill is memory-bound, and there the H200's bandwidth wins.
        "h100_h200_prefill_equal": bool(ph100["prefill_seconds"]
                                        and points["h200"]["prefill_seconds"]
                                        and ph100["prefill_seconds"]
                                        == points["h200"]["prefill_seconds"]),
        "all_prefill_compute_bound": all(p["prefill_bound"] == "compute"
                                         for p in result["gpus"] if p["prefill_seconds"]),
        "all_decode_memory_bound": all(p["decode_bound"] == "memory" for p in running),
        "all_decode_compute_bound": bool(running) and not decode_memory,
        # "Far left" of the ridge only where every step is under a quarter of it.
        "decode_far_left": all(p["intensity"] < RIDGE_FAR * ridge_effective(p) for p in running),
        "ref_ridge_effective_text": (f"{number_format(ridge_effective(ref))} FLOP/B"
                                     if ref else ""),
        "ridge_scaling_text": ridge_scaling_text(mfu=inputs["mfu"],
                                                 efficiency=inputs["bandwidth_efficiency"]),
        "decode_memory_names": list_phrase([f"the {n}" for n in decode_memory]),
        "decode_compute_names": list_phrase([f"the {n}" for n in decode_compute]),
        # Compute-bound at the H100's batch on both: the same tensor cores, the same step.
        "h200_same_batch_equal": same_batch is not None and same_batch >= SAME_STEP,
        "any_capped": any(p["capped"] for p in result["gpus"]),
        "any_running": bool(running),
        "h100_running": bool(ph100["decode_seconds"]),
        "h200_same_batch_step_share_text": percent_format(same_batch)
        if same_batch is not None else "",
        "h200_h100_bandwidth_text": f"{number_format(h200.bandwidth_bytes_per_second / h100.bandwidth_bytes_per_second)}×",  # noqa: E501
        "b200_h100_compute_text": f"{number_format(b200.bf16_flops / h100.bf16_flops)}×",
        "b200_h100_bandwidth_text": f"{number_format(b200.bandwidth_bytes_per_second / h100.bandwidth_bytes_per_second)}×",  # noqa: E501
        "l40s_h100_bandwidth_text": percent_format(l40s.bandwidth_bytes_per_second
                                                   / h100.bandwidth_bytes_per_second),
        "nvlink_pcie_ratio_text": f"{number_format(h100.interconnect_bytes_per_second / l40s.interconnect_bytes_per_second)}×",  # noqa: E501
        "tp_allreduces": f"{int(result['tp_allreduces']):,}",
        "tp_70b_name": m70.name, "tp_70b_layers": f"{m70.layers:,}",
        "tp_70b_messages": f"{2 * m70.layers:,}",
        "tp_bytes_text": bytes_short(float(result["tp_bytes"])),
        "tp_nvlink_text": seconds_format(float(result["tp_bytes"])
                                         / h100.interconnect_one_way_bytes_per_second),
        "tp_pcie_text": seconds_format(float(result["tp_bytes"])
                                       / l40s.interconnect_one_way_bytes_per_second),
        "nvfp4_bits_text": f"{number_format(DTYPES['nvfp4'].bits)} bits",
        "cheapest_name": cheapest["name"] if cheapest else "none",
        "fills_none": fills_none,
        "pick_name": pick["name"] if pick else "none",
        "pick_short": pick["short_name"] if pick else "none",
        "pick_hour_text": money_format(pick["replica_price_per_hour"]) + "/h" if pick else "",
        "pick_per_user_text": rate_format(pick["tokens_per_second_per_user"], "tokens/s")
        if pick else "",
        "pick_step_text": seconds_format(pick["decode_seconds"]) if pick else "",
        "hourly_said_text": _said(gpus, "hourly_said"),
        "tpot_text": seconds_format(inputs["tpot_ms"] / 1e3) if inputs.get("tpot_ms") else "",
        "any_tp": any((p["tp"] or 1) > 1 for p in running),
        "tp_said_text": list_phrase([f"the {p['short_name']} takes {p['tp']} GPUs (TP {p['tp']})"
                                     for p in running if (p["tp"] or 1) > 1]),
        "per_user_said_text": "; ".join(f"{t['per_user_text']} on the {t['short_name']}"
                                         for t in gpus if t["per_user_text"] != "none"),
        "dearest_name": dearest["name"] if dearest else "none",
        "kw_ranking_text": ", ".join(p["short_name"] for p in kw_order),
        "price_source_text": f"{example.provider}'s published on-demand rates (per second × "
                             f"3,600), as listed in {example.as_of}",
        "b200_announced_text": bytes_short(b200.memory_announced_bytes),
        "b200_bus_text": f"{b200.driver_memory_bus_bits:,}-bit",
        "b200_clock_text": f"{b200.driver_memory_clock_hz / 1e6:,.0f} MHz",
        "b200_driver_bandwidth_text": bandwidth_format(b200.driver_bandwidth_bytes_per_second),
        "b200_hgx_said_by": b200.bandwidth_other_said_by,
        "b200_hgx_bandwidth_text": bandwidth_format(b200.bandwidth_other_bytes_per_second),
        **b200_bandwidth_context(points["b200"]),
        "gpus": gpus,
        "g": by_key,
    }


SOURCES: list[tuple[str, str]] = [
    ("SemiAnalysis, InferenceMAX (open benchmark that compares GPUs on throughput per GPU "
     "against interactivity, tokens per second per user, across batch sizes and parallelism)",
     "https://inferencemax.semianalysis.com/"),
    ("vLLM pull request 12126 (an H100 80GB's startup log: total_gpu_memory 79.22 GiB, the "
     "total CUDA reports, × gpu_memory_utilization 0.90)",
     "https://github.com/vllm-project/vllm/pull/12126"),
    ("NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: memory, bandwidth, dense rates half "
     "the 'with sparsity' figures, NVLink, power)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("NVIDIA H200 Tensor Core GPU datasheet (HBM3e memory and bandwidth, the H100's tensor "
     "rates, power)", "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"),
    ("NVIDIA DGX B200 datasheet (eight B200s' HBM3e memory and bandwidth, the catalog's figures "
     "a GPU)", "https://www.nvidia.com/en-us/data-center/dgx-b200/"),
    ("NVIDIA HGX platform specifications (HGX B200: tensor rates for eight GPUs, dense half the "
     "sparse; NVLink 5's bandwidth a GPU)", "https://www.nvidia.com/en-us/data-center/hgx/"),
    ("Glenn K. Lockwood, 'B200' notes (HGX and GB200 power; memory and bandwidth at the "
     "announcement)", "https://glennklockwood.com/garden/processors/B200"),
    ("pytorch/ao pull request 4002, 'update b200 peak memory bandwidth' (a shipping B200's driver "
     "reports its memory bus width and clock, from which the peak bandwidth follows)",
     "https://github.com/pytorch/ao/pull/4002"),
    ("NVIDIA L40S datasheet (GDDR6 memory and bandwidth, PCIe Gen4 x16, no NVLink, FP8 tensor "
     "cores, power)", "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"),
    ("Modal, pricing (example per-second on-demand rates: H100 $0.001097, H200 $0.001261, "
     "B200 $0.001736, L40S $0.000542)", "https://modal.com/pricing"),
    ("techbytes.app, 'Serverless GPU Pricing Matrix' (Modal's H100 at $3.9492/h and L40S at "
     "$1.9512/h, verified 7 May 2026)",
     "https://techbytes.app/posts/serverless-gpu-pricing-matrix-modal-replicate-lambda-2026/"),
    ("Williams, Waterman and Patterson, 'Roofline: An Insightful Visual Performance Model for "
     "Multicore Architectures' (CACM 2009)", "https://doi.org/10.1145/1498765.1498785"),
    ("McCalpin, STREAM benchmark (copy bandwidth counts the bytes read and the bytes written)",
     "https://www.cs.virginia.edu/stream/"),
    ("Shoeybi et al., 'Megatron-LM' (tensor parallelism: two all-reduces per layer)",
     "https://arxiv.org/abs/1909.08053"),
    ("Shah et al., 'FlashAttention-3' (about 75% of the H100's FP16 peak, equal to its BF16 "
     "peak, in its best kernel)",
     "https://arxiv.org/abs/2407.08608"),
    ("vLLM engine arguments (gpu_memory_utilization, 0.9 by default)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("Meta Llama 3.1 8B config.json (the worked model)",
     "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
]
