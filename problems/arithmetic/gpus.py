"""Comparing accelerators on one workload (problem 12): for a model, a weight format, a
context and a number of concurrent conversations, each GPU's fit, largest batch at that
context, decode step and prefill (roofline bounds, bound named), output tokens per second, per
dollar at an hourly price and per kilowatt of board power; the roofline of each GPU, and the
tensor-parallel all-reduce traffic that decides whether GPUs without NVLink can share a model.

The decode step and the prefill are the same computation as problem 11's (quant.py: linear
layers at the format's rate, attention at BF16), with the batch chosen by capacity.
"""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.prices import price_example_get
from problems.arithmetic.compute import (
    kv_bytes_per_token_model,
    peak_describe,
    prefill_flops_model,
)
from problems.arithmetic.cost import PRICE_MAX
from problems.arithmetic.decode import decode_flops_per_sequence
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    kv_values_per_token_layer,
    memory_fit,
    weight_bytes_model,
    weights_read_model,
)
from problems.arithmetic.parallel import allreduce_bytes
from problems.arithmetic.quant import (
    NO_PATH,
    TP_DEPLOY,
    decode_point_model,
    format_rate_get,
    kv_per_token_gpu_model,
    prefill_point_model,
    tp_comm_seconds,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    money_format,
    number_format,
    rate_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

GPUS_COMPARED = ("h100-sxm", "h200", "b200", "l40s")
CONCURRENCY_MAX = 4096
TPOT_MS_MAX = 10_000.0
HOUR = 3600
MILLION = 1e6
KILOWATT = 1000


def tp_allreduce_bytes(*, layers: int, hidden: int, tokens: int, group: int,
                       activation_bytes: float = 2.0) -> float:
    """Bytes each GPU sends per forward step under tensor parallelism over `group` GPUs in one
    node (bytes): two all-reduces per layer (after attention, after the MLP, as Megatron-LM
    splits them) of `tokens` × `hidden` activations, each a ring that sends 2(n − 1)/n of the
    message. Hand: (32 layers, 4,096 hidden, 64 tokens, 2 GPUs) → 2 × 32 × 1 × 524,288 =
    33,554,432 B."""
    message = tokens * hidden * activation_bytes
    per_allreduce, _ = allreduce_bytes(message_bytes=message, group=group, per_node=group)
    return 2 * layers * per_allreduce


def roofline_points(*, peak: float, bandwidth: float, x_min: float = 0.1, x_max: float = 1e5,
                    points: int = 60) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A roofline on a log grid of intensities (FLOP/byte) from `x_min` to `x_max`, with the
    ridge (peak ÷ bandwidth) among them when it falls inside: (intensities, attainable FLOP/s),
    attainable = min(peak, intensity × bandwidth)."""
    ratio = (x_max / x_min) ** (1 / (points - 1))
    xs = {x_min * ratio**i for i in range(points)}
    ridge = peak / bandwidth
    if x_min < ridge < x_max:
        xs.add(ridge)
    grid = tuple(sorted(xs))
    return grid, tuple(min(peak, x * bandwidth) for x in grid)


def price_resolve(*, gpu: str, price: float | None, field: str) -> float:
    """The hourly price the learner gave, else the catalog's example (dollars per GPU-hour)."""
    if price is None:
        example = price_example_get(gpu)
        if example is None:
            raise ArithmeticInputError(field=field, message="enter a price for this GPU")
        return example.dollars_per_hour
    return number_check(price, field=field, minimum=0.0, maximum=PRICE_MAX)


def replica_tp(*, model, gpu, weights: float, kv_dtype, context_tokens: int,
               usable: float, reserve: float) -> int | None:
    """The fewest GPUs in TP_DEPLOY (one node, NVLink or PCIe as the GPU has) over which
    `model` runs with room for one sequence of `context_tokens` on each GPU; None if 8 do not
    hold it."""
    for tp in TP_DEPLOY:
        kv_gpu = kv_per_token_gpu_model(model=model, kv_dtype=kv_dtype, tp=tp)
        if kv_gpu is not None and usable - weights / tp - reserve >= context_tokens * kv_gpu:
            return tp
    return None


def replica_decode(*, model, gpu, dtype, embedding, kv_dtype, kv_per_token: float, tp: int,
                   batch: int, context_tokens: int, mfu: float,
                   bandwidth_efficiency: float) -> dict:
    """One decode step of `batch` sequences on a replica of `tp` GPUs (bytes, FLOP, seconds):
    each GPU reads 1/tp of the weights and its share of the KV and does 1/tp of the FLOPs, then
    the GPUs all-reduce twice a layer (quant.tp_comm_seconds). On one GPU, quant's
    decode_point_model unchanged."""
    whole = decode_point_model(
        model=model, gpu=gpu, dtype=dtype, embedding=embedding, kv_bytes_per_token=kv_per_token,
        batch=batch, context_tokens=context_tokens, mfu=mfu,
        bandwidth_efficiency=bandwidth_efficiency)
    if tp == 1:
        return {**whole, "comm": 0.0, "kv_gpu": whole["kv"]}
    share = kv_per_token_gpu_model(model=model, kv_dtype=kv_dtype, tp=tp) / kv_per_token
    size = whole["weights"] / tp + whole["kv"] * share
    memory = size / (gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
    compute = whole["compute"] / tp
    comm = tp_comm_seconds(model=model, gpu=gpu, tp=tp, tokens=batch)
    return {**whole, "bytes": size, "memory": memory, "compute": compute, "comm": comm,
            "kv_gpu": whole["kv"] * share,
            "flops": whole["flops"] / tp, "seconds": max(memory, compute) + comm,
            "bound": "memory" if memory >= compute else "compute"}


def gpu_point_model(*, model, gpu, dtype, kv_dtype, context_tokens: int, concurrency: int,
                    mfu: float, bandwidth_efficiency: float, memory_fraction: float,
                    reserve_gb: float, price: float, tpot_seconds: float | None = None) -> dict:
    """One replica of `gpu`s serving `concurrency` conversations of `context_tokens` each: the
    GPUs it takes (`tp`, the fewest that hold the weights and one sequence), fit, largest batch,
    running batch (no larger than `tpot_seconds`, a time-per-output-token target, allows), decode
    step, prefill of one `context_tokens` prompt, and the rates and costs that follow per
    replica (bytes, seconds, tokens/s, dollars). `weights_fit`: the weights and the reserve fit
    one GPU; `fits`: a replica of at most 8 holds one sequence too. Times are None where the
    model does not fit or the GPU has no kernel path for the format."""
    embedding = embedding_dtype_resolve(model=model, dtype=dtype)
    weights = weight_bytes_model(model=model, dtype=dtype, embedding=embedding)["total"]
    kv_per_token = kv_bytes_per_token_model(model, kv_dtype)
    kv_per_seq = context_tokens * kv_per_token
    fit, fit_steps = memory_fit(gpu=gpu, weights_bytes=weights, kv_bytes=kv_per_seq,
                                reserve_gb=reserve_gb, memory_fraction=memory_fraction,
                                per_gpu=f"on the {gpu.name}")
    usable = float(fit["memory_usable_bytes"])
    reserve = float(fit["reserve_bytes"])
    tp = replica_tp(model=model, gpu=gpu, weights=weights, kv_dtype=kv_dtype,
                    context_tokens=context_tokens, usable=usable, reserve=reserve)
    n = tp or 1
    kv_seq_gpu = context_tokens * (kv_per_token_gpu_model(model=model, kv_dtype=kv_dtype,
                                                          tp=n) or kv_per_token)
    free = usable - weights / n - reserve
    batch_max = max(0, math.floor(free / kv_seq_gpu)) if tp and free > 0 else 0
    batch = min(concurrency, batch_max)
    rate = format_rate_get(gpu=gpu, dtype=dtype)
    point = {
        "gpu": gpu, "tp": tp, "weights": weights, "usable": usable, "free": free,
        "kv_per_seq_gpu": kv_seq_gpu,
        "batch_max": batch_max, "batch": batch, "fits": batch_max > 0,
        "weights_fit": usable - weights - reserve >= 0,
        "capped": batch_max < concurrency, "waiting": concurrency - batch,
        "tpot_capped": False, "tpot_unmet": False,
        "rate": rate, "ridge": rate / gpu.bandwidth_bytes_per_second if rate else None,
        "price": price, "replica_price": price * n, "fit_steps": fit_steps, "decode": None,
        "prefill": None, "tokens_per_second": None, "tokens_per_second_per_user": None,
        "tokens_per_dollar": None, "dollars_per_million": None,
        "tokens_per_second_per_kw": None, "intensity": None, "achieved_flops": None,
    }
    if rate is None or batch == 0:
        return point

    def step(b: int) -> dict:
        return replica_decode(model=model, gpu=gpu, dtype=dtype, embedding=embedding,
                              kv_dtype=kv_dtype, kv_per_token=kv_per_token, tp=n, batch=b,
                              context_tokens=context_tokens, mfu=mfu,
                              bandwidth_efficiency=bandwidth_efficiency)

    pre = prefill_point_model(
        model=model, gpu=gpu, dtype=dtype, embedding=embedding, kv_bytes_per_token=kv_per_token,
        tokens=context_tokens, mfu=mfu, bandwidth_efficiency=bandwidth_efficiency)
    if n > 1:
        pre = {**pre, "compute": pre["compute"] / n, "memory": pre["memory"] / n,
               "flops": pre["flops"] / n,
               "seconds": max(pre["compute"], pre["memory"]) / n
               + tp_comm_seconds(model=model, gpu=gpu, tp=n, tokens=context_tokens)}
    point["prefill"] = pre
    decode = step(batch)
    if tpot_seconds is not None and decode["seconds"] > tpot_seconds:
        # The step grows with the batch: the largest batch that meets the target, by bisection.
        low, high = 0, batch
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if step(middle)["seconds"] <= tpot_seconds else (
                low, middle)
        point.update(tpot_capped=True, tpot_unmet=low == 0, batch=low,
                     waiting=concurrency - low)
        batch = low
        if batch == 0:
            return point
        decode = step(batch)
    tokens_per_second = batch / decode["seconds"]
    return {
        **point, "decode": decode, "tokens_per_second": tokens_per_second,
        "tokens_per_second_per_user": 1 / decode["seconds"],
        "tokens_per_dollar": tokens_per_second * HOUR / (price * n),
        "dollars_per_million": price * n / (tokens_per_second * HOUR) * MILLION,
        "tokens_per_second_per_kw": tokens_per_second / (n * gpu.power_watts / KILOWATT),
        "intensity": decode["flops"] / decode["bytes"],
        "achieved_flops": decode["flops"] / decode["seconds"],
    }


def gpu_compare(
    *,
    model: str = "llama-3.1-8b",
    dtype: str = "fp8",
    kv_dtype: str | None = None,
    context_tokens: int = 8192,
    concurrency: int = 64,
    mfu: float = 0.5,
    bandwidth_efficiency: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    price_h100: float | None = None,
    price_h200: float | None = None,
    price_b200: float | None = None,
    price_l40s: float | None = None,
    tpot_ms: float | None = None,
    gpus: tuple[str, ...] = GPUS_COMPARED,
) -> Result:
    """For each of `gpus`: fit, largest batch at `context_tokens`, the batch that runs (the
    smaller of that and `concurrency`), the decode step (bytes, memory and compute time, bound),
    output tokens/s, prefill of one `context_tokens` prompt (bound), output tokens per dollar and
    dollars per million output tokens at the hourly price (the catalog's example unless given),
    tokens/s per kW of board power, the decode step's intensity and the GPU's ridge
    (values["gpus"]); plus the all-reduce traffic of one decode step split over two GPUs.

    Each GPU is costed per replica: the fewest GPUs (tensor parallelism within a node) that hold
    the model and one sequence, priced at that many GPU-hours. With `tpot_ms`, a target time
    per output token, the batch stops where the step would exceed it; each GPU also reports the
    tokens per second one user sees (1 ÷ the step)."""
    m = model_get(model)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    concurrency = count_check(concurrency, field="concurrency", maximum=CONCURRENCY_MAX)
    mfu = fraction_check(mfu, field="mfu")
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    tpot_seconds = None
    if tpot_ms is not None:
        tpot_seconds = number_check(tpot_ms, field="tpot_ms", minimum=0.1,
                                    maximum=TPOT_MS_MAX) / 1e3
    given = {"h100-sxm": ("price_h100", price_h100), "h200": ("price_h200", price_h200),
             "b200": ("price_b200", price_b200), "l40s": ("price_l40s", price_l40s)}
    points = []
    for gid in gpus:
        field, price = given.get(gid, (f"price_{gid}", None))
        points.append(gpu_point_model(
            model=m, gpu=gpu_get(gid, field="gpus"), dtype=d, kv_dtype=kv_d,
            context_tokens=context_tokens, concurrency=concurrency, mfu=mfu,
            bandwidth_efficiency=bandwidth_efficiency, memory_fraction=memory_fraction,
            reserve_gb=reserve_gb, price=price_resolve(gpu=gid, price=price, field=field),
            tpot_seconds=tpot_seconds))
    embedding = embedding_dtype_resolve(model=m, dtype=d)
    weights = weight_bytes_model(model=m, dtype=d, embedding=embedding)["total"]
    read = weights_read_model(model=m, tokens=1, dtype=d, embedding=embedding)["total"]
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    kv_per_seq = context_tokens * kv_per_token
    flops_per_seq = decode_flops_per_sequence(m, context_tokens)
    tp_bytes = tp_allreduce_bytes(layers=m.layers, hidden=m.hidden, tokens=concurrency, group=2)
    values_per_layer, kv_expression = kv_values_per_token_layer(m)
    prefill_any = next((p["prefill"] for p in points if p["prefill"]), None)

    def gpu_values(p: dict) -> dict:
        g, dec, pre = p["gpu"], p["decode"], p["prefill"]
        return {
            "gpu": g.id, "name": g.name, "short_name": g.short_name or g.name,
            "tp": p["tp"], "replica_price_per_hour": p["replica_price"],
            "tokens_per_second_per_user": p["tokens_per_second_per_user"],
            "tpot_capped": p["tpot_capped"], "tpot_unmet": p["tpot_unmet"],
            "architecture": g.architecture, "weights_bytes": p["weights"],
            "usable_bytes": p["usable"], "free_bytes": p["free"], "fits": p["fits"],
            "weights_fit": p["weights_fit"],
            "batch_max": p["batch_max"], "batch": p["batch"], "capped": p["capped"],
            "waiting": p["waiting"], "rate": p["rate"], "ridge": p["ridge"],
            "path": p["rate"] is not None,
            "decode_bytes": dec["bytes"] if dec else None,
            "decode_kv_bytes": dec["kv_gpu"] if dec else None,
            "decode_memory_seconds": dec["memory"] if dec else None,
            "decode_compute_seconds": dec["compute"] if dec else None,
            "decode_seconds": dec["seconds"] if dec else None,
            "decode_bound": dec["bound"] if dec else None,
            "prefill_seconds": pre["seconds"] if pre else None,
            "prefill_compute_seconds": pre["compute"] if pre else None,
            "prefill_memory_seconds": pre["memory"] if pre else None,
            "prefill_bound": pre["bound"] if pre else None,
            "prefill_flops_per_second": pre["flops"] / pre["seconds"] if pre else None,
            "tokens_per_second": p["tokens_per_second"],
            "price_per_hour": p["price"], "tokens_per_dollar": p["tokens_per_dollar"],
            "dollars_per_million": p["dollars_per_million"],
            "tokens_per_second_per_kw": p["tokens_per_second_per_kw"],
            "intensity": p["intensity"], "achieved_flops": p["achieved_flops"],
            "power_watts": g.power_watts,
        }

    steps = [
        Step("Weights",
             f"{m.name} in {d.name} (embedding and head in {embedding.name})", weights, "B",
             bytes_format(weights)),
        Step("Weights read per decode step", "the layers and the output head, not the "
             "embedding table (a lookup gathers only the batch's rows)", read, "B",
             bytes_format(read)),
        Step("KV per sequence",
             f"{m.layers} layers × {kv_expression} × {number_format(kv_d.bytes)} B "
             f"({kv_d.kv_label}) × {count_format(context_tokens, 'token')}",
             kv_per_seq, "B", bytes_format(kv_per_seq)),
        Step("Decode FLOPs per sequence",
             f"2 × the layers' and head's weights + attention over "
             f"{count_format(context_tokens, 'token')}", flops_per_seq, "FLOP",
             flops_format(flops_per_seq)),
    ]
    if prefill_any:
        steps.append(Step("Prefill FLOPs of one prompt",
                          f"{flops_format(prefill_any['linear_flops'])} linear + "
                          f"{flops_format(prefill_any['attention_flops'])} causal attention "
                          f"over {count_format(context_tokens, 'token')}",
                          prefill_any["flops"], "FLOP", flops_format(prefill_any["flops"])))
    for p in points:
        g, dec, pre = p["gpu"], p["decode"], p["prefill"]
        name = g.short_name or g.name
        steps.append(p["fit_steps"][1])
        n = p["tp"] or 1
        if n > 1:
            steps.append(Step(
                f"{name}: GPUs per replica", f"one {name} cannot hold the weights and one "
                f"sequence; {n} can, the weights split over them (tensor parallelism)", n,
                "GPUs", f"{n} GPUs (TP {n})"))
        steps.append(Step(
            f"{name}: largest batch at this context",
            f"⌊({bytes_short(p['usable'])} − {bytes_short(p['weights'])} weights"
            + (f" ÷ {n}" if n > 1 else "") + f" − {bytes_short(reserve_gb * 1e9)} reserve) ÷ "
            f"{bytes_short(p['kv_per_seq_gpu'])} per sequence"
            + (" per GPU" if n > 1 else "") + f"⌋; {count_phrase(p['batch'], 'sequence')} run "
            f"of {concurrency:,}"
            + (" (the most whose step meets the time-per-token target)" if p["tpot_capped"]
               else ""),
            p["batch_max"], "sequences", count_format(p["batch_max"], "sequence")
            if p["fits"] else ("no room for one sequence's KV" if p["weights_fit"]
                               else "weights do not fit")))
        if p["rate"] is None:
            steps.append(Step(f"{name}: {d.name}", NO_PATH, 0.0, "s", NO_PATH))
            continue
        if dec is not None:
            unit = "OP" if d.compute == "int8" else "FLOP"
            steps.append(Step(
                f"{name}: decode step ({dec['bound']}-bound"
                + (", floor)" if dec["bound"] == "memory" and bandwidth_efficiency >= 1
                   else ")"),
                f"max({bytes_short(dec['bytes'])}" + (" per GPU" if n > 1 else "") + " ÷ "
                f"({bandwidth_format(g.bandwidth_bytes_per_second)} × "
                f"{number_format(bandwidth_efficiency)}) = {seconds_format(dec['memory'])}; "
                f"{flops_format(dec['linear_flops'])} at {rate_of_format(p['rate'], unit=unit)} "
                f"+ {flops_format(dec['attention_flops'])} at BF16"
                + (f", ÷ {n} GPUs" if n > 1 else "") + f", × {number_format(mfu)} MFU "
                f"= {seconds_format(dec['compute'])})"
                + (f" + {seconds_format(dec['comm'])} of all-reduces" if n > 1 else ""),
                dec["seconds"], "s", seconds_format(dec["seconds"])))
            steps.append(Step(
                f"{name}: tokens/s one user sees",
                f"1 ÷ {seconds_format(dec['seconds'])} (every sequence gets one token a step)",
                p["tokens_per_second_per_user"], "tokens/s",
                rate_format(p["tokens_per_second_per_user"], "tokens/s")))
            steps.append(Step(
                f"{name}: output tokens/s",
                f"{count_format(p['batch'], 'sequence')} ÷ {seconds_format(dec['seconds'])}",
                p["tokens_per_second"], "tokens/s",
                rate_format(p["tokens_per_second"], "tokens/s")))
            steps.append(Step(
                f"{name}: dollars per million output tokens",
                f"{money_format(p['price'])}/h" + (f" × {n} GPUs" if n > 1 else "")
                + f" ÷ ({number_format(p['tokens_per_second'])} "
                "tokens/s × 3,600 s) × 10⁶ (output tokens only; prefill's GPU time is not "
                "charged here)",
                p["dollars_per_million"], "USD", money_format(p["dollars_per_million"],
                                                              significant=3)))
            steps.append(Step(
                f"{name}: tokens/s per kW of board power",
                f"{number_format(p['tokens_per_second'])} tokens/s ÷ "
                + (f"{n} × " if n > 1 else "")
                + f"{g.power_watts / KILOWATT:g} kW (the board's power limit, not measured draw)",
                p["tokens_per_second_per_kw"], "tokens/s/kW",
                number_format(p["tokens_per_second_per_kw"])))
        if pre is None:
            continue
        steps.append(Step(
            f"{name}: prefill of one {context_tokens:,}-token prompt ({pre['bound']}-bound)",
            f"max(linear FLOPs at {peak_describe(gpu=g, dtype=d)} + attention at BF16, × "
            f"{number_format(mfu)} MFU = {seconds_format(pre['compute'])}; "
            f"{bytes_short(pre['bytes'])} moved = {seconds_format(pre['memory'])})",
            pre["seconds"], "s", seconds_format(pre["seconds"])))
    steps.append(Step(
        "Tensor parallelism over 2 GPUs: bytes each sends per decode step",
        f"2 all-reduces × {m.layers} layers × ring 2(n − 1)/n = 1 × "
        f"{count_format(concurrency, 'sequence')} × {m.hidden:,} hidden × 2 B",
        tp_bytes, "B", bytes_format(tp_bytes)))
    return Result(
        values={
            "gpus": [gpu_values(p) for p in points],
            "weights_bytes": weights,
            "weights_read_bytes": read,
            "kv_bytes_per_token": kv_per_token,
            "kv_bytes_per_sequence": kv_per_seq,
            "kv_values_per_token_layer": values_per_layer,
            "decode_flops_per_sequence": flops_per_seq,
            # The model's, on any GPU: counted even where no GPU runs the prefill.
            "prefill_flops": prefill_flops_model(m, context_tokens)["total"],
            "prefill_bytes": prefill_any["bytes"] if prefill_any else 0.0,
            "tp_allreduces": 2 * m.layers,
            "tp_bytes": tp_bytes,
        },
        steps=tuple(steps),
    )


def gpu_rooflines(**inputs: object) -> Result:
    """The roofline of each GPU in `gpu_compare`'s comparison, in the chosen format (its peak,
    bandwidth and ridge), with the workload on it: each GPU's decode step at the batch that
    runs there, and one prefill of `context_tokens` (intensity in FLOP/B, achieved FLOP/s,
    bound). Same inputs as gpu_compare."""
    compared = gpu_compare(**inputs)
    d = dtype_get(str(inputs.get("dtype", "fp8")))
    prefill_intensity = (float(compared["prefill_flops"]) / float(compared["prefill_bytes"])
                         if compared["prefill_bytes"] else 0.0)
    steps = []
    for p in compared["gpus"]:
        g = gpu_get(p["gpu"])
        name = p["short_name"]
        if p["rate"] is None:
            steps.append(Step(f"{name}: {d.name}", NO_PATH, 0.0, "FLOP/B", NO_PATH))
            continue
        steps.append(Step(
            f"{name}: ridge point",
            f"{peak_describe(gpu=g, dtype=d)} ÷ {bandwidth_format(g.bandwidth_bytes_per_second)}",
            p["ridge"], "FLOP/B", f"{number_format(p['ridge'])} FLOP/B"))
        if p["intensity"] is not None:
            steps.append(Step(
                f"{name}: decode step ({p['decode_bound']}-bound)",
                f"{count_format(p['batch'], 'sequence')}: {number_format(p['intensity'])} FLOP/B "
                f"{'<' if p['intensity'] < p['ridge'] else '≥'} the ridge; achieved "
                f"{flops_format(p['decode_bytes'] * p['intensity'])} ÷ "
                f"{seconds_format(p['decode_seconds'])}",
                p["achieved_flops"], "FLOP/s", rate_of_format(p["achieved_flops"])))
        else:
            steps.append(Step(f"{name}: decode step", "the weights do not fit", 0.0, "FLOP/s",
                              "does not fit"))
        if p["prefill_seconds"] is None:
            continue
        steps.append(Step(
            f"{name}: prefill of one {int(inputs.get('context_tokens', 8192)):,}-token prompt "
            f"({p['prefill_bound']}-bound)",
            f"{number_format(prefill_intensity)} FLOP/B; "
            f"{flops_format(float(compared['prefill_flops']))} ÷ "
            f"{seconds_format(p['prefill_seconds'])}",
            p["prefill_flops_per_second"], "FLOP/s", rate_of_format(p["prefill_flops_per_second"])))
    return Result(values={**compared.values, "prefill_intensity": prefill_intensity},
                  steps=tuple(steps))
