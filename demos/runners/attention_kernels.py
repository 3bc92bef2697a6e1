"""Demo `attention-kernels` (problem 5): three causal attention implementations with the same
maths, timed on the worker across sequence lengths, with the peak memory of their intermediate
tensors, checked against each other, and set beside the arithmetic's prediction.

An experiment on the experiments queue (it needs no model: random Q, K, V of `heads` heads of
`head_dim`, FP32 on the worker's device). The implementations are in worker/attention_kernels.py:
naive (materialise the scores), tiled (the FlashAttention algorithm in plain PyTorch, the
source the page shows) and torch's scaled_dot_product_attention. For each length each runs
`repeats` times (the median is kept); its error is measured against a float64 naive reference,
and its intermediate memory from the allocator (CUDA) or the profiler's allocations (CPU).

Events, in order: started; length (one per sequence length, shortest first); then the task
publishes finished with the summary (plots included), or cancelled.
"""


from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

LENGTHS = (128, 256, 512, 1024, 2048)
# Largest difference from the float64 reference the three may show and still agree: FP32
# rounding over a few thousand terms stays near 10⁻⁶ on unit-scale random inputs.
AGREE_TOLERANCE = 1e-4
NAMES = {"naive": "naive (scores in memory)", "tiled": "tiled, online softmax (in PyTorch)",
         "sdpa": "torch SDPA (fused)"}

PARAMS = ParamSchema(
    specs=(
        ParamSpec("lengths", "Sequence lengths", "choices", ["128", "256", "512", "1024"],
                  choices=tuple((str(n), f"{n:,}") for n in LENGTHS), unit="tokens"),
        ParamSpec("heads", "Heads", "whole", 4, minimum=1, maximum=8),
        ParamSpec("head_dim", "Head dimension", "choice", "64",
                  choices=(("32", "32"), ("64", "64"), ("128", "128"))),
        ParamSpec("tile", "Tile of the tiled version", "choice", "64",
                  choices=(("32", "32"), ("64", "64"), ("128", "128")), unit="rows and columns"),
        ParamSpec("repeats", "Timed runs per length (median kept)", "whole", 3, minimum=1,
                  maximum=5),
    ),
    work=lambda v: sum(int(n) ** 2 for n in v["lengths"]) * v["heads"] * v["repeats"] // 4096,
)


def _check(ctx: RunContext) -> None:
    ctx.check_time()
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])


def attention_kernels_run(*, engine, machine: dict, params: dict,  # noqa: ANN001
                          ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        if not str(machine.get("device", "cpu")).startswith("cuda"):
            # The worker measured its peaks with all its threads; this run has one, so its
            # floors divide by the rates of that one thread (half or less on two cores).
            from worker.demo_engine import machine_measure

            machine = {**machine, **machine_measure(device="cpu")}
        return _run(machine=machine, params=params, ctx=ctx)


def _run(*, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from problems.arithmetic.attention_io import attention_kernels_predict
    from worker.attention_kernels import attention_kernels_measure

    device = str(machine.get("device", "cpu"))
    lengths = sorted(int(n) for n in params["lengths"])
    heads, d = int(params["heads"]), int(params["head_dim"])
    tile, repeats = int(params["tile"]), int(params["repeats"])
    peak = float(machine.get("matmul_flops_per_s") or 0) or None
    bandwidth = float(machine.get("memory_bytes_per_s") or 0) or None
    ctx.publish("started", {"lengths": lengths, "heads": heads, "head_dim": d, "tile": tile,
                            "repeats": repeats, "device": device,
                            "names": NAMES, "machine": {"matmul_flops_per_s": peak,
                                                       "memory_bytes_per_s": bandwidth}})
    rows = []
    for n, measured in attention_kernels_measure(lengths=lengths, heads=heads, head_dim=d,
                                                 tile=tile, repeats=repeats, device=device,
                                                 check=lambda: _check(ctx)):
        row = {"tokens": n, "kernels": {}}
        predicted = (attention_kernels_predict(tokens=n, heads=heads, head_dim=d, tile=tile,
                                               value_bytes=4, peak_flops=peak,
                                               bandwidth=bandwidth) if peak and bandwidth
                     else None)
        for name, cell in measured.items():
            if predicted:
                cell["predicted_seconds"] = predicted[name]["seconds"]
                cell["predicted_bound"] = predicted[name]["bound"]
                cell["predicted_intermediate_bytes"] = predicted[name].get("intermediate_bytes")
            row["kernels"][name] = cell
        rows.append(row)
        ctx.publish("length", row)
    worst = max(c["max_error"] for r in rows for c in r["kernels"].values())
    return RunOutcome(state="finished", summary={
        "rows": rows, "device": device, "max_error": worst, "agree": worst < AGREE_TOLERANCE,
        "machine": {"matmul_flops_per_s": peak, "memory_bytes_per_s": bandwidth},
        "plots": attention_plots(rows), "note": attention_note(rows, device=device),
    })


def attention_plots(rows: list[dict]) -> list[dict]:
    from problems.plots import Plot, Series, plot_figure, plot_table

    xs = tuple(float(r["tokens"]) for r in rows)
    time_series, memory_series = [], []
    for name, label in NAMES.items():
        time_series.append(Series(f"{label}, measured", xs,
                                  tuple(r["kernels"][name]["seconds"] * 1e3 for r in rows),
                                  markers=True))
        # A zero (SDPA's scratch, invisible on CPU) cannot sit on a log axis: left out.
        memory_series.append(Series(f"{label}, measured", xs, tuple(
            r["kernels"][name]["intermediate_bytes"] / 1e6
            if r["kernels"][name]["intermediate_bytes"] else float("nan") for r in rows),
            markers=True))
    if "predicted_seconds" in rows[0]["kernels"]["naive"]:
        for name in ("naive", "sdpa"):
            time_series.append(Series(
                f"{'naive' if name == 'naive' else 'fused'}: floor (arithmetic, the peaks "
                "measured for this run)", xs, tuple(r["kernels"][name]["predicted_seconds"] * 1e3
                                    for r in rows), dash=True))
    for name, label in (("naive", "naive: S, P and the mask (arithmetic)"),
                        ("tiled", "tiled: its tiles alone (arithmetic)")):
        memory_series.append(Series(label, xs, tuple(
            r["kernels"][name]["predicted_intermediate_bytes"] / 1e6
            if r["kernels"][name].get("predicted_intermediate_bytes") else float("nan")
            for r in rows), dash=True))
    timing = Plot(title="Time against sequence length", x_title="Sequence length (tokens)",
                  y_title="ms (median)", series=tuple(time_series), x_log=True, y_log=True)
    memory = Plot(title="Peak memory of the intermediate tensors",
                  x_title="Sequence length (tokens)", y_title="MB (10⁶ bytes)",
                  series=tuple(memory_series), x_log=True, y_log=True)
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (timing, memory)]


def attention_note(rows: list[dict], *, device: str) -> str:
    from problems.arithmetic.units import bytes_short, number_format

    last = rows[-1]
    k = last["kernels"]
    n = last["tokens"]
    ratio = k["naive"]["intermediate_bytes"] / max(k["tiled"]["intermediate_bytes"], 1)
    text = (f"At {n:,} tokens the naive version held "
            f"{bytes_short(k['naive']['intermediate_bytes'])} of scores and probabilities, "
            "the tiled one "
            f"{bytes_short(k['tiled']['intermediate_bytes'])} ({number_format(ratio)}× less), "
            "and the naive figure grows with the square of the length while the tiled one "
            "stays flat: that is the whole memory argument, measured. ")
    tiles = k["tiled"].get("predicted_intermediate_bytes")
    if tiles and k["tiled"]["intermediate_bytes"] > tiles:
        text += (f"The tiled version held {number_format(k['tiled']['intermediate_bytes'] / tiles)}"
                 f"× the {bytes_short(tiles)} its tiles need (a tile of scores, one of "
                 "probabilities, the query tile and the accumulator): each out-of-place PyTorch "
                 "operation (s − m, the exponential, acc × correction, p @ v) allocates a "
                 "temporary of a tile's size, which a fused kernel keeps in registers. Neither "
                 "figure depends on the length. ")
    pred = k["naive"].get("predicted_seconds")
    if pred:
        text += (f"The naive version took {number_format(k['naive']['seconds'] * 1e3)} ms against "
                 f"a floor of {number_format(pred * 1e3)} ms from the peaks measured "
                 + ("on this GPU. " if device.startswith("cuda") else
                    "on the one CPU thread this run uses. "))
    below = [r["tokens"] for r in rows for c in r["kernels"].values()
             if c.get("predicted_seconds") and c["seconds"] < c["predicted_seconds"]]
    if below:
        text += ("Where a measurement fell below its floor (at "
                 f"{', '.join(f'{t:,}' for t in sorted(set(below)))} tokens), the floor's inputs "
                 "were too pessimistic: either the peak rates measured for this run were low "
                 "(other work sharing the core when they were measured), or the bytes counted as "
                 "memory traffic stayed in the caches and never reached main memory. A floor is "
                 "only as good as the peak it divides by and the traffic it counts. ")
    worst = max(c["max_error"] for r in rows for c in r["kernels"].values())
    text += (f"All three agree to within {number_format(worst, digits=2)} of a float64 "
             "reference at every length. " if worst < AGREE_TOLERANCE else
             f"The implementations disagree: the largest error, {number_format(worst, digits=2)}"
             f", is past the {number_format(AGREE_TOLERANCE)} this demo allows. ")
    if device.startswith("cuda"):
        text += ("On a GPU the fused kernel keeps its tiles in on-chip SRAM and wins on time as "
                 "well as memory; the plain-PyTorch tiled version launches several kernels per "
                 "tile and pays for each launch.")
    else:
        text += ("On a CPU the gap in time is small or reversed: its caches already hold much "
                 "of the scores at these lengths, there is no separate HBM-to-SRAM hop for "
                 "tiling to save, and the tiled version pays Python's overhead for every tile. "
                 "The floors assume the rate of one large matmul; the many small tiles run "
                 "well below it. The time argument of FlashAttention is about a GPU's memory "
                 "hierarchy, which the worked answer computes. SDPA's CPU kernel frees its "
                 "scratch buffers inside one operator, which the profiler cannot see, so its "
                 "memory here is a floor.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("attention-kernels", attention_kernels_run, engine="own", params=PARAMS)
