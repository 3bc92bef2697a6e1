"""Demo `utilization` (problem 14): decode steps at batch sizes 1 to 32 on an engine of the run's
own, each split into model time (the forward pass) and host time (everything else in a step:
scheduling, preparing inputs, sampling, detokenizing), with the FLOPs and bytes the arithmetic
says each step needs set against this machine's measured peaks.

On a GPU worker the kernels' own busy time is measured too (the union of their intervals under
the profiler), which is what nvidia-smi's utilisation counts. On a CPU the host and the "device"
are the same cores, so the page shows the forward pass's share of each step instead.

The lever `lean_host` asks for fewer host-side operations per step: greedy sampling (an argmax
instead of the top-p sort and seeded random draws) and no detokenization
(SamplingParams(detokenize=False)). With it ticked, each batch size is measured both ways, the
usual host first and the lean one right after, so the comparison is made under the same load;
the lean pass sends the same prompts, whose blocks the prefix cache already holds (all but
the one with the last prompt token, computed again).

Events, in order: started; batch (one per batch size, in order); the task then publishes
finished with the summary (plots included), or cancelled.
"""

import random
import statistics
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

BATCHES = (1, 2, 4, 8, 16, 32)

PARAMS = ParamSchema(
    specs=(
        ParamSpec("prompt_tokens", "Prompt per sequence", "whole", 64, minimum=8, maximum=88,
                  unit="tokens", help="Random token ids; prefill is not measured."),
        ParamSpec("steps", "Decode steps measured per batch size", "whole", 8, minimum=4,
                  maximum=12),
        ParamSpec("lean_host", "Lean host: greedy sampling, no detokenization", "bool", False,
                  help="The lever: fewer host-side operations per step. Each batch size is "
                       "then measured both ways, so the run takes about twice as long."),
    ),
    # The lean pass sends the same prompts again: the prefix cache holds all their full blocks
    # but the one with the last token, which is computed again, then the decode steps. At the
    # limits (88 + 14, then 8 + 14 tokens per sequence, 63 sequences: 7,812) a run fits the
    # demos' queue of 8,000 tokens. Counted as on a CPU worker, as every schema demo's work is:
    # a GPU worker decodes `steps` more per pass under the profiler.
    work=lambda v: sum(BATCHES) * (v["prompt_tokens"] + v["steps"] + 2 + (
        lean_prefill_tokens(v["prompt_tokens"]) + v["steps"] + 2 if v["lean_host"] else 0)),
)
# The demos' engine's KV block (worker/demo_engine.BLOCK_SIZE; a test keeps the two equal).
CACHE_BLOCK_TOKENS = 16


def lean_prefill_tokens(prompt_tokens: int) -> int:
    """Prompt tokens the lean pass computes again (1 to a block): the prefix cache matches whole
    blocks and never the last token, so the block holding it is recomputed."""
    return prompt_tokens - CACHE_BLOCK_TOKENS * ((prompt_tokens - 1) // CACHE_BLOCK_TOKENS)
# The usual host: top-p sampling with a seeded generator per request, and text for each token.
SAMPLING_USUAL = {"temperature": 0.8, "top_p": 0.95, "seed": 0}
# The lean host: an argmax per sequence and no text.
SAMPLING_LEAN = {"temperature": 0, "detokenize": False}


def _prompts(*, count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(count)]


def kernel_busy_seconds(events) -> float:  # noqa: ANN001 (profiler FunctionEvents)
    """Seconds during which at least one kernel ran: the union of the device events' intervals
    (what nvidia-smi's utilisation counts), from a profile with CUDA activity."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events
                   if getattr(getattr(e, "device_type", None), "name", "CPU") == "CUDA")
    busy, current_start, current_end = 0.0, None, None
    for start, end in spans:
        if current_end is None or start > current_end:
            if current_end is not None:
                busy += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        busy += current_end - current_start
    return busy / 1e6  # the profiler's times are in µs


def _abort_all(engine, ids: list[str]) -> None:  # noqa: ANN001
    for request_id in ids:
        engine.abort(request_id)
    engine.step()  # hand the aborts out: every block is back


def utilization_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Measure decode steps at each batch size and report busy share, MFU and MBU."""
    from demos.estimate import utilization_estimate
    from worker.demo_engine import engine_warm_up
    from worker.engine import SamplingParams

    prompt_len, steps, lean = (int(params["prompt_tokens"]), int(params["steps"]),
                               bool(params["lean_host"]))
    device = str(machine.get("device", "cpu"))
    on_gpu = device.startswith("cuda")
    vocab = int(engine.runner.config.vocab_size)
    rates = {"matmul_flops_per_s": float(machine["matmul_flops_per_s"]),
             "memory_bytes_per_s": float(machine["memory_bytes_per_s"]),
             "matmul_how": str(machine.get("matmul_how", "a large matmul")),
             "memory_how": str(machine.get("memory_how", "a copy"))}
    ctx.publish("started", {"device": device, "model": Path(machine["model_path"]).name,
                            "batches": list(BATCHES), "steps": steps,
                            "prompt_tokens": prompt_len, "lean_host": lean, "machine": rates})
    # On a GPU the busy time is measured in a second, profiled pass of as many steps.
    max_tokens = (2 * steps if on_gpu else steps) + 2
    usual = SamplingParams(**SAMPLING_USUAL, ignore_eos=True, max_tokens=max_tokens)
    lean_sampling = SamplingParams(**SAMPLING_LEAN, ignore_eos=True, max_tokens=max_tokens)
    # First calls pay for thread pools, the allocator and new shapes: run them unmeasured.
    engine_warm_up(engine)
    results = []
    for batch in BATCHES:
        prompts = _prompts(count=batch, length=prompt_len, vocab=vocab, seed=batch)
        measured = _measure_batch(engine, prompts=prompts, sampling=usual, steps=steps,
                                  on_gpu=on_gpu, ctx=ctx)
        # The context each sequence holds, on average, over the measured steps.
        context = prompt_len + 1 + (steps - 1) / 2
        estimate = utilization_estimate(machine=machine, batch=batch, context_tokens=context)
        row = _row(batch=batch, measured=measured, estimate=estimate, rates=rates)
        if lean:
            lean_measured = _measure_batch(engine, prompts=prompts, sampling=lean_sampling,
                                           steps=steps, on_gpu=on_gpu, ctx=ctx)
            row["lean"] = _row(batch=batch, measured=lean_measured, estimate=estimate,
                               rates=rates)
        results.append(row)
        ctx.publish("batch", row)
    return RunOutcome(state="finished", summary={
        "device": device, "lean_host": lean, "prompt_tokens": prompt_len, "steps": steps,
        "batches": results, "machine": rates,
        "plots": _plots(results, on_gpu=on_gpu),
        "note": _note(results, lean=lean),
        "stats": {k: engine.stats()[k] for k in ("kv_blocks_free", "kv_blocks_total")},
    })


def _measure_batch(engine, *, prompts: list[list[int]], sampling, steps: int, on_gpu: bool,  # noqa: ANN001
                   ctx: RunContext) -> dict:
    """Queue `prompts` with `sampling`, measure their decode steps, then abort them all (every
    block back, cancelled or not)."""
    ids = [engine.add_request(p, sampling) for p in prompts]
    try:
        return _measure(engine, ids=ids, steps=steps, on_gpu=on_gpu, ctx=ctx)
    finally:
        _abort_all(engine, ids)


def _measure(engine, *, ids: list[str], steps: int, on_gpu: bool, ctx: RunContext) -> dict:  # noqa: ANN001
    """Step until every request has its first token (prefill is not measured), then `steps`
    decode steps: their wall and forward seconds; on a GPU, then `steps` more under the
    profiler for the kernels' busy seconds and the wall seconds of those same steps (the
    profiler slows the host, so its steps are kept out of the timings)."""
    first: set[str] = set()
    while len(first) < len(ids):
        _check(ctx)
        for event in engine.step():
            if event.get("type") == "token":
                first.add(event["request_id"])

    def run_steps() -> tuple[list[float], list[float]]:
        walls, models = [], []
        for _ in range(steps):
            _check(ctx)
            step = next(e for e in engine.step() if e["type"] == "step")
            walls.append(step["seconds"])
            models.append(step["model_seconds"])
        return walls, models

    walls, models = run_steps()
    busy = profiled_total = None
    if on_gpu:
        from worker.hardware import cuda_profiled

        (profiled_walls, _), events = cuda_profiled(run_steps)
        busy = kernel_busy_seconds(events)
        profiled_total = sum(profiled_walls)
    return {"wall_s": statistics.median(walls), "model_s": statistics.median(models),
            "wall_total_s": profiled_total, "busy_s": busy}


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _row(*, batch: int, measured: dict, estimate: dict, rates: dict) -> dict:
    wall, model = measured["wall_s"], measured["model_s"]
    peak, bandwidth = rates["matmul_flops_per_s"], rates["memory_bytes_per_s"]
    flops, size = estimate["flops"], estimate["bytes"]
    busy = measured["busy_s"]
    return {
        "batch": batch,
        "step_ms": wall * 1e3,
        "model_ms": model * 1e3,
        "host_ms": max(wall - model, 0.0) * 1e3,
        "forward_share": model / wall if wall else 0.0,
        "device_busy": busy / measured["wall_total_s"] if busy is not None else None,
        "flops": flops,
        "bytes": size,
        "mfu_model": flops / (model * peak) if model else 0.0,
        "mfu_wall": flops / (wall * peak) if wall else 0.0,
        "mbu_model": size / (model * bandwidth) if model else 0.0,
        "mbu_wall": size / (wall * bandwidth) if wall else 0.0,
        "predicted_floor_ms": estimate["floor_seconds"] * 1e3,
        "predicted_bound": estimate["bound"],
        "predicted_mfu": estimate["mfu_at_floor"],
        "forward_over_floor": model / estimate["floor_seconds"] if estimate["floor_seconds"]
        else 0.0,
    }


def _plots(rows: list[dict], *, on_gpu: bool) -> list[dict]:
    from problems.plots import Plot, Series, plot_figure, plot_table

    xs = tuple(float(r["batch"]) for r in rows)
    time_plot = Plot(
        title="Step time split, measured against the floor",
        x_title="Sequences in the step", y_title="ms per decode step", x_log=True,
        series=(Series("whole step, measured", xs, tuple(r["step_ms"] for r in rows),
                       markers=True),
                Series("forward pass, measured", xs, tuple(r["model_ms"] for r in rows),
                       markers=True),
                Series("host (outside forward), measured", xs,
                       tuple(r["host_ms"] for r in rows), markers=True),
                Series("forward floor (arithmetic, measured peaks)", xs,
                       tuple(r["predicted_floor_ms"] for r in rows), dash=True),
                *((Series("host with the lean host, measured", xs,
                          tuple(r["lean"]["host_ms"] for r in rows), markers=True),
                   Series("forward with the lean host, measured", xs,
                          tuple(r["lean"]["model_ms"] for r in rows), markers=True))
                  if rows and "lean" in rows[0] else ())))
    busy_name = ("kernels busy (what nvidia-smi counts)" if on_gpu
                 else "forward's share of the step")
    busy = tuple((r["device_busy"] if on_gpu else r["forward_share"]) * 100 for r in rows)
    share_plot = Plot(
        title="Busy share and MFU, against this machine's measured peak",
        x_title="Sequences in the step", y_title="%", x_log=True,
        series=(Series(busy_name, xs, busy, markers=True),
                Series("MFU over the whole step", xs, tuple(r["mfu_wall"] * 100 for r in rows),
                       markers=True),
                Series("MFU over the forward pass", xs,
                       tuple(r["mfu_model"] * 100 for r in rows), markers=True),
                Series("MFU at the floor (arithmetic)", xs,
                       tuple(r["predicted_mfu"] * 100 for r in rows), dash=True)))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (time_plot, share_plot)]


def _note(rows: list[dict], *, lean: bool) -> str:
    """Why the measured steps sit where they do against the floor, in this run's numbers."""
    first, last = rows[0], rows[-1]
    share_first, share_last = 1 - first["forward_share"], 1 - last["forward_share"]
    host_growth = last["host_ms"] / first["host_ms"] if first["host_ms"] > 0 else float("inf")
    batch_growth = last["batch"] / first["batch"]
    text = (f"At batch {first['batch']} the forward pass took {first['forward_over_floor']:.3g}× "
            f"its floor and the host added {first['host_ms']:.3g} ms ({share_first:.0%} of the "
            f"step); at batch {last['batch']} the forward took "
            f"{last['forward_over_floor']:.3g}× its floor and the host's share "
            f"{'fell' if share_last < share_first else 'rose'} to {share_last:.0%}. The floor "
            "assumes the best matmul rate and memory bandwidth this worker measured as it "
            "started; a step's fixed costs (a call for each kernel, the host's work) are left "
            "out, and they matter most at small batches. ")
    if min(first["forward_over_floor"], last["forward_over_floor"]) < 1:
        text += ("Where the forward pass ran faster than its floor, the rates this worker "
                 "measured when it started were low (other work was sharing its cores then): "
                 "a floor is only as good as the peaks it divides by. ")
    if host_growth < batch_growth:
        text += (f"The host time grew {host_growth:.3g}× while the batch grew "
                 f"{batch_growth:.3g}×, so larger batches spread it over more tokens")
    else:
        text += (f"The host time grew {host_growth:.3g}×, as fast as the batch: sampling and "
                 "detokenizing run per sequence, and on a loaded machine the timings are noisy")
    if not lean:
        return text + ("; tick the lean host to measure each batch size again with greedy "
                       "sampling and no detokenization, and compare the host times.")
    text += (". With the lean host (an argmax instead of top-p and seeded random draws, and no "
             "detokenization), measured right after the usual one at each batch size, the host "
             f"took {first['lean']['host_ms']:.3g} ms instead of {first['host_ms']:.3g} ms at "
             f"batch {first['batch']} and {last['lean']['host_ms']:.3g} ms instead of "
             f"{last['host_ms']:.3g} ms at batch {last['batch']}, while the forward pass, which "
             "the lever does not touch, took "
             f"{last['lean']['model_ms']:.3g} ms against {last['model_ms']:.3g} ms there (the "
             "same work; what differs is noise from other work on the machine).")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("utilization", utilization_run, engine="own", params=PARAMS)
