"""Demo `profile` (problem 13): a few engine steps under the PyTorch profiler, on an engine of
the run's own.

The engine names its phases (`engine.schedule`, `engine.prepare_inputs`, `engine.forward`,
`engine.attention` once per layer, `engine.sample`, `engine.detokenize`; worker/engine/
profiling.py), so the profile splits each step into them. Prompts are random token ids from a
seeded generator: no tokenizer work pollutes the first step.

Events, in order: started; step (one per profiled engine step); profile (the timeline of named
ranges per step, the top operators, operators per step, kernels per step on a GPU, the trace's
download link); estimate (each step's forward pass against the arithmetic's floor on this
machine's measured rates); the task then publishes finished with the summary (plots
included), or cancelled.
"""

import gzip
import random
import tempfile
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

PHASES = ("schedule", "prepare_inputs", "forward", "attention", "sample", "detokenize")
HOST_PHASES = ("schedule", "prepare_inputs", "sample", "detokenize")
TOP_OPERATORS = 10
# The runner's own range around each engine step, so the profile knows where steps begin.
STEP_RANGE = "demo.step"
WARM_UP_PROMPT, WARM_UP_TOKENS = 8, 4

PARAMS = ParamSchema(
    specs=(
        ParamSpec("num_sequences", "Sequences decoded together", "whole", 4, minimum=1,
                  maximum=16),
        ParamSpec("prompt_tokens", "Prompt per sequence", "whole", 64, minimum=8, maximum=192,
                  unit="tokens",
                  help="Random token ids: the first profiled step carries the prefill."),
        ParamSpec("profile_steps", "Engine steps profiled", "whole", 6, minimum=2, maximum=12),
    ),
    work=lambda v: v["num_sequences"] * (v["prompt_tokens"] + v["profile_steps"] + 1),
)


# What counts as an operator: PyTorch's, and the engine's own CPU kernels, which record a
# `cpu_fused::<name>` range each while a profiler records (worker/engine/kernels/cpu.py).
OPERATOR_PREFIXES = ("aten::", "cpu_fused::")


def _phase(name: str) -> str | None:
    """"forward" for the engine's range `engine.forward` (None for any other event)."""
    if not name.startswith("engine."):
        return None
    short = name.removeprefix("engine.")
    return short if short in PHASES else None


def profile_timeline(events) -> list[dict]:  # noqa: ANN001 (profiler FunctionEvents)
    """Per profiled step (a `demo.step` range), the engine's named ranges inside it: start
    and duration in ms from the step's start; the per-layer attention ranges are merged into
    one total with their count; operators per step (top-level aten calls) and, on a GPU,
    kernels per step."""
    steps = sorted((e for e in events if e.name == STEP_RANGE),
                   key=lambda e: e.time_range.start)
    timeline = []
    for index, step in enumerate(steps):
        start, end = step.time_range.start, step.time_range.end
        inside = [e for e in events if start <= e.time_range.start and e.time_range.end <= end
                  and e is not step]
        ranges: dict[str, dict] = {}
        for e in sorted(inside, key=lambda e: e.time_range.start):
            phase = _phase(e.name)
            if phase is None or _device(e):
                continue
            duration = (e.time_range.end - e.time_range.start) / 1e3
            if phase in ranges:
                ranges[phase]["dur_ms"] += duration
                ranges[phase]["count"] += 1
            else:
                ranges[phase] = {"name": phase,
                                 "start_ms": (e.time_range.start - start) / 1e3,
                                 "dur_ms": duration, "count": 1}
        operators = sum(1 for e in inside if e.name.startswith(OPERATOR_PREFIXES)
                        and not _device(e)
                        and not (e.cpu_parent is not None
                                 and e.cpu_parent.name.startswith(OPERATOR_PREFIXES)))
        kernels = sum(1 for e in inside if _device(e))
        timeline.append({
            "index": index,
            "step_ms": (end - start) / 1e3,
            "ranges": [ranges[p] for p in PHASES if p in ranges],
            "operators": operators,
            "kernels": kernels,
        })
    return timeline


def _device(event) -> bool:  # noqa: ANN001
    return getattr(getattr(event, "device_type", None), "name", "CPU") != "CPU"


def top_operators(averages, *, device: bool) -> list[dict]:  # noqa: ANN001
    """The operators that took the most self time (device time on a GPU), the engine's own
    ranges and the profiler's step markers left out (ms)."""
    rows = [a for a in averages if not a.key.startswith(("engine.", "ProfilerStep", "demo."))]
    key = "self_device_time_total" if device else "self_cpu_time_total"
    rows.sort(key=lambda a: getattr(a, key, 0.0), reverse=True)
    return [{"name": a.key, "calls": int(a.count),
             "self_cpu_ms": a.self_cpu_time_total / 1e3,
             "cpu_total_ms": a.cpu_time_total / 1e3,
             "self_device_ms": (getattr(a, "self_device_time_total", 0.0) / 1e3
                                if device else None)}
            for a in rows[:TOP_OPERATORS]]


def _prompts(*, count: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(count)]


def profile_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Profile `profile_steps` engine steps of `num_sequences` sequences and report where each
    step's time went, against the arithmetic's floor for its forward pass."""
    from demos.estimate import profile_estimate
    from worker.engine import SamplingParams
    from worker.engine.profiling import profiler_activities, profiler_range, profiler_start

    n, prompt_len, steps = (int(params["num_sequences"]), int(params["prompt_tokens"]),
                            int(params["profile_steps"]))
    device = str(machine.get("device", "cpu"))
    on_gpu = device.startswith("cuda")
    vocab = int(engine.runner.config.vocab_size)
    activities = profiler_activities(cuda=on_gpu)
    ctx.publish("started", {"device": device, "model": Path(machine["model_path"]).name,
                            "num_sequences": n, "prompt_tokens": prompt_len,
                            "profile_steps": steps,
                            "activities": [a.name for a in activities]})
    # Warm up under a profiler whose record is thrown away: first-call allocations, on a GPU
    # lazy initialisation, and the profiler's own start-up, which made a first profiled step
    # many times slower than the rest.
    with profiler_start(activities):
        engine.generate(_prompts(count=1, length=WARM_UP_PROMPT, vocab=vocab, seed=1),
                        SamplingParams(temperature=0, max_tokens=WARM_UP_TOKENS,
                                       ignore_eos=True))
    sampling = SamplingParams(temperature=0.8, top_p=0.95, seed=0, ignore_eos=True,
                              max_tokens=steps + 1)
    ids = [engine.add_request(p, sampling) for p in _prompts(count=n, length=prompt_len,
                                                              vocab=vocab)]
    step_events: list[dict] = []
    with profiler_start(activities) as prof:
        for index in range(steps):
            if "all" in ctx.cancels():
                for request_id in ids:
                    engine.abort(request_id)
                freed = sum(e.get("blocks_freed", 0) for e in engine.step()
                            if e.get("type") == "aborted")
                raise RunCancelled(ctx.cancels()["all"], summary={"blocks_freed": freed})
            ctx.check_time()
            with profiler_range(STEP_RANGE):
                events = engine.step()
            step = next(e for e in events if e["type"] == "step")
            record = {"index": index, "num_prefill_tokens": step["num_prefill_tokens"],
                      "num_decode_tokens": step["num_decode_tokens"],
                      "num_seqs": step["num_seqs"], "step_ms": step["seconds"] * 1e3,
                      "model_ms": step["model_seconds"] * 1e3}
            step_events.append(record)
            ctx.publish("step", record)
    for request_id in ids:
        engine.abort(request_id)
    engine.step()  # hand the aborts out, so every block is back
    timeline = profile_timeline(prof.events())
    operators = top_operators(prof.key_averages(), device=on_gpu)
    trace = _trace_keep(prof, ctx)
    profile_data = {
        "steps": timeline,
        "top_ops": operators,
        "ops_per_step": [s["operators"] for s in timeline],
        "kernels_per_step": [s["kernels"] for s in timeline] if on_gpu else None,
        "trace": trace,
    }
    ctx.publish("profile", profile_data)
    estimate = profile_estimate(machine=machine, steps=step_events, prompt_tokens=prompt_len,
                                timeline=timeline)
    ctx.publish("estimate", estimate)
    return RunOutcome(state="finished", summary={
        "device": device, "num_sequences": n, "prompt_tokens": prompt_len,
        "profile_steps": steps, "step_events": step_events, "profile": profile_data,
        "estimate": estimate,
        "plots": _plots(timeline=timeline, estimate=estimate),
        "note": _note(timeline=timeline, estimate=estimate, on_gpu=on_gpu,
                      own_kernels=own_cpu_kernels(engine)),
        "stats": {k: engine.stats()[k] for k in ("kv_blocks_free", "kv_blocks_total")},
    })


def _trace_keep(prof, ctx: RunContext) -> dict:  # noqa: ANN001
    """The Chrome-format trace, gzipped, kept for download (Perfetto opens it); its link and
    size, or why there is none."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace.json"
        prof.export_chrome_trace(str(path))
        data = gzip.compress(path.read_bytes())
    url = ctx.keep_file("trace.json.gz", data) if ctx.keep_file else None
    return {"url": url, "bytes": len(data),
            "reason": None if url else "the trace is larger than the demos keep"
            if ctx.keep_file else "this worker keeps no files"}


def _plots(*, timeline: list[dict], estimate: dict) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, plot_figure, plot_table

    labels = tuple(f"step {s['index'] + 1}" for s in timeline)
    series = []
    for phase in PHASES:
        found = [next((r for r in s["ranges"] if r["name"] == phase), None) for s in timeline]
        if not any(found):
            continue
        name = "attention (summed over layers, drawn from forward's start)" \
            if phase == "attention" else phase.replace("_", " ")
        forward = [next((r for r in s["ranges"] if r["name"] == "forward"), None)
                   for s in timeline]
        base = tuple((f_["start_ms"] if phase == "attention" and f_ else r["start_ms"])
                     if r else float("nan") for r, f_ in zip(found, forward, strict=True))
        series.append(BarSeries(name, tuple(r["dur_ms"] if r else float("nan") for r in found),
                                base=base))
    title = "Each profiled step by the engine's named ranges"
    if not series:
        # An engine without named ranges: the step's own timing, forward and the rest.
        rows = estimate["steps"]
        series = [BarSeries("forward", tuple(r["measured_forward_ms"] for r in rows),
                            base=tuple(0.0 for _ in rows)),
                  BarSeries("rest of the step (host)", tuple(r["host_ms"] for r in rows),
                            base=tuple(r["measured_forward_ms"] for r in rows))]
        title = "Each profiled step: forward and the rest (this engine names no ranges)"
    timeline_plot = BarPlot(
        title=title,
        categories=labels, value_title="ms from the step's start", series=tuple(series),
        mode="overlay", horizontal=True,
        columns=(("step (ms)", tuple(f"{s['step_ms']:.3g}" for s in timeline)),
                 ("operators", tuple(str(s["operators"]) for s in timeline))))
    rows = estimate["steps"]
    measured = BarPlot(
        title="Forward pass measured against the arithmetic's floor, and host time",
        categories=tuple(f"step {r['index'] + 1} ({r['kind']})" for r in rows),
        value_title="ms", mode="group",
        series=(BarSeries("forward, measured", tuple(r["measured_forward_ms"] for r in rows)),
                BarSeries("forward, floor", tuple(r["predicted_forward_ms"] for r in rows),
                          outline=True),
                BarSeries("outside forward (host)", tuple(r["host_ms"] for r in rows))),
        columns=(("measured ÷ floor", tuple(f"{r['ratio']:.3g}×" for r in rows)),
                 ("bound", tuple(r["bound"] for r in rows))))
    return [{"figure": plot_figure(p), "table": plot_table(p)}
            for p in (timeline_plot, measured)]


def host_ranges_mean(*, timeline: list[dict], estimate: dict) -> dict[str, float]:
    """Mean ms per decode step of each host-side named range (schedule, prepare inputs,
    sample, detokenize), over the profiled steps that only decoded; {} without ranges."""
    decode = {r["index"] for r in estimate["steps"] if r["kind"] == "decode"}
    steps = [s for s in timeline if s["index"] in decode and s["ranges"]]
    if not steps:
        return {}
    return {phase: sum(r["dur_ms"] for s in steps for r in s["ranges"] if r["name"] == phase)
            / len(steps) for phase in HOST_PHASES}


def _host_ranges_said(*, timeline: list[dict], estimate: dict) -> str:
    means = host_ranges_mean(timeline=timeline, estimate=estimate)
    if not means:
        return ""
    parts = sorted(means.items(), key=lambda kv: kv[1], reverse=True)
    return " (by the engine's ranges, per decode step: " + ", ".join(
        f"{name.replace('_', ' ')} {ms:.3g} ms" for name, ms in parts) + ")"


def own_cpu_kernels(engine) -> bool:  # noqa: ANN001
    """Whether the engine's forward pass ran its own compiled CPU kernels (kernels/cpu.py),
    listed in the profile as `cpu_fused::` operators, rather than PyTorch's."""
    kernels = getattr(getattr(engine.runner, "model", None), "cpu_kernels", None)
    return kernels is not None and kernels is not False


def _note(*, timeline: list[dict], estimate: dict, on_gpu: bool,
          own_kernels: bool = False) -> str:
    """Why the measured forward pass sits where it does against the floor, from this run."""
    decodes = [r for r in estimate["steps"] if r["kind"] == "decode"] or estimate["steps"]
    ratio = sum(r["ratio"] for r in decodes) / len(decodes)
    ops = sum(s["operators"] for s in timeline) / max(len(timeline), 1)
    host = sum(r["host_ms"] for r in decodes) / sum(r["step_ms"] for r in decodes)
    below = (" Where a step ran faster than its floor, the rates this worker measured when it "
             "started were low (other work was sharing its cores then): a floor is only as good "
             "as the peaks it divides by." if ratio < 1 else "")
    text = (f"The decode steps' forward passes took {ratio:.3g}× the floor on average. The "
            "floor assumes every matmul runs at the rate of the large matmul this worker timed "
            "at start-up and every byte moves at the memory bandwidth it measured; "
            + (f"each of the {ops:.0f} or so operators a step ran pays a fixed cost that no "
               "floor counts: the engine's own CPU kernels (`cpu_fused::`: four matrix "
               "multiplies and four other fused calls a layer, plus one attention call for "
               "each group of sequences that attend together) and PyTorch's operators around "
               "them (allocations, sampling and the rest). " if own_kernels else
               f"this small model's matmuls are far smaller, and each of its {ops:.0f} or so "
               "operators per step pays a fixed cost that no floor counts. ")
            + f"{host:.0%} of each decode step was outside the forward pass: scheduling, "
            "preparing inputs, sampling and detokenizing, host work a GPU would wait for"
            + _host_ranges_said(timeline=timeline, estimate=estimate) + ". The "
            "profiler itself adds a cost to every operator it records, so these steps are "
            "slower than unprofiled ones." + below)
    if on_gpu and timeline:
        kernels = sum(s["kernels"] for s in timeline) / len(timeline)
        text += f" Kernels per step on this GPU: about {kernels:.0f}."
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("profile", profile_run, engine="own", params=PARAMS)
