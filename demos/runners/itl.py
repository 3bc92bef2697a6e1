"""Demo `itl` (problem 9): time per output token and throughput at batch sizes 1 to 32 on an
engine of the run's own, the measured TPOT–throughput curve beside the arithmetic's for this
machine (the forward pass's roofline floor at the worker's measured matmul rate and memory
bandwidth), then the same sweep with one lever on, to show the points move. Each plain row also
carries the arithmetic's cost of verifying γ + 1 positions per sequence against a plain step's
(`verify_floor_ratio`), which the note sets beside what speculation measured.

Levers: `speculation` (the course's draft model, γ = 2: more tokens per step), `ngram`
(prompt lookup, γ = 2, no draft model), or `bf16` (the weights held in BF16: half the bytes
each step reads, the lever the page predicts moves the curve where bytes set the step; its
floor is the arithmetic's at two bytes a weight). Prompts are random token ids, greedy, EOS ignored;
TPOT is the time from every sequence's first token to the last step, over the tokens each
produced in it (prefill is not measured).

Events, in order: started; batch (one per batch size, plain); lever_batch (one per batch size,
with the lever on); then the task publishes finished with the summary (plots included), or
cancelled.
"""

import time
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.runners.utilization import _abort_all, _prompts
from demos.schema import ParamSchema, ParamSpec

BATCHES = (1, 2, 4, 8, 16, 32)
LEVERS = (("speculation", "speculative decoding with the draft model, γ = 2"),
          ("ngram", "speculative decoding with prompt lookup, γ = 2"),
          ("bf16", "weights in BF16: half the bytes each step reads"))
LEVER_NAMES = {"speculation": "speculation (draft model)", "ngram": "speculation (prompt lookup)",
               "bf16": "BF16 weights"}
GAMMA = 2

PARAMS = ParamSchema(
    specs=(
        ParamSpec("lever", "Lever", "choice", "speculation", choices=LEVERS),
        ParamSpec("prompt_tokens", "Prompt per sequence", "whole", 32, minimum=8, maximum=40,
                  unit="tokens", help="Random token ids; prefill is not measured."),
        ParamSpec("output_tokens", "Tokens timed per sequence", "whole", 12, minimum=4,
                  maximum=16, unit="tokens"),
    ),
    # Prompt and generated tokens of every sequence, plain and with the lever.
    work=lambda v: 2 * sum(BATCHES) * (v["prompt_tokens"] + v["output_tokens"] + 1),
)


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _measure(engine, *, prompts: list[list[int]], tokens: int, ctx: RunContext) -> dict:  # noqa: ANN001
    """Decode `tokens` tokens per sequence after each has its first: seconds per token and
    tokens/s over that stretch, and the steps it took."""
    from worker.engine import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=tokens + 1, ignore_eos=True)
    ids = [engine.add_request(p, params) for p in prompts]
    first: set[str] = set()
    done: set[str] = set()
    try:
        while len(first) < len(ids):
            _check(ctx)
            for e in engine.step():
                if e["type"] == "token":
                    first.add(e["request_id"])
                elif e["type"] == "finished":
                    done.add(e["request_id"])
        started, steps = time.perf_counter(), 0
        while len(done) < len(ids):
            _check(ctx)
            for e in engine.step():
                if e["type"] == "finished":
                    done.add(e["request_id"])
                elif e["type"] == "step":
                    steps += 1
        seconds = time.perf_counter() - started
    except RunCancelled:
        _abort_all(engine, ids)
        raise
    engine.step()
    produced = len(ids) * tokens
    return {"tpot_s": seconds / tokens, "tokens_per_s": produced / seconds, "steps": steps}


def verify_floor_ratio(*, machine: dict, batch: int, context_tokens: float,
                       gamma: int) -> float:
    """The arithmetic's floor for a verification pass over a plain decode step's, on the
    measured machine: γ + 1 positions for each of `batch` sequences run through every matmul
    and attend over the sequence's context, while the weights and each sequence's KV are read
    once, as problem 10's arithmetic counts it. Each step's floor is its kernel groups' bounds
    summed, as the itl floor is."""
    from demos.estimate import machine_model
    from problems.arithmetic.memory import kv_values_per_token_layer
    from problems.arithmetic.utilization import decode_groups_model

    model, dtype = machine_model(machine)
    if model is None:
        raise ValueError("the model's config.json could not be read")

    def floor(queries: int) -> float:
        groups = decode_groups_model(
            model=model, batch=batch, context_tokens=context_tokens,
            weight_bytes_per_param=dtype.bytes,
            kv_bytes_per_token=model.layers * kv_values_per_token_layer(model)[0] * dtype.bytes,
            bandwidth_bytes_per_second=float(machine["memory_bytes_per_s"]),
            peak_flops=float(machine["matmul_flops_per_s"]), queries_per_sequence=queries)
        return sum(g["seconds"] for g in groups)

    return floor(gamma + 1) / floor(1)


def itl_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    from worker.cpu_threads import one_thread

    with one_thread():
        return _itl_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _itl_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    """The plain sweep, the sweep with the lever, and the arithmetic's floor for each batch."""
    from demos.estimate import utilization_estimate
    from worker.demo_engine import engine_build, engine_warm_up

    lever, prompt_len, tokens = (str(params["lever"]), int(params["prompt_tokens"]),
                                 int(params["output_tokens"]))
    draft = Path(machine["model_path"]).parent / "course-lm-draft"
    if lever == "speculation" and not (draft / "config.json").is_file():
        lever = "ngram"
    device = str(machine.get("device", "cpu"))
    ctx.publish("started", {"lever": lever, "batches": list(BATCHES), "device": device,
                            "prompt_tokens": prompt_len, "output_tokens": tokens})
    if lever == "bf16":
        levered = engine_build(machine["model_path"], device=device, dtype="bfloat16")
        lever_machine = {**machine, "dtype": "bfloat16"}
    else:
        spec_kw = ({"speculative_model": str(draft)} if lever == "speculation"
                   else {"speculative_method": "ngram"})
        levered = engine_build(machine["model_path"], device=device,
                               num_speculative_tokens=GAMMA, **spec_kw)
        lever_machine = machine
    engine_warm_up(engine)
    engine_warm_up(levered)
    vocab = int(engine.runner.config.vocab_size)
    plain_rows, lever_rows = [], []
    for name, eng, rows, mach in (("batch", engine, plain_rows, machine),
                                  ("lever_batch", levered, lever_rows, lever_machine)):
        for batch in BATCHES:
            prompts = _prompts(count=batch, length=prompt_len, vocab=vocab, seed=batch)
            m = _measure(eng, prompts=prompts, tokens=tokens, ctx=ctx)
            context = prompt_len + 1 + (tokens - 1) / 2
            floor = utilization_estimate(machine=mach, batch=batch,
                                         context_tokens=context)["floor_seconds"]
            row = {"batch": batch, "tpot_ms": m["tpot_s"] * 1e3,
                   "tokens_per_s": m["tokens_per_s"], "steps": m["steps"],
                   "tokens_per_step": batch * tokens / m["steps"] if m["steps"] else 0.0,
                   "floor_ms": floor * 1e3, "floor_tokens_per_s": batch / floor,
                   "verify_floor_ratio": verify_floor_ratio(machine=machine, batch=batch,
                                                            context_tokens=context,
                                                            gamma=GAMMA)}
            if name == "lever_batch":
                row["lever"] = LEVER_NAMES[lever]
            rows.append(row)
            ctx.publish(name, row)
    stats = levered.stats()
    drafted = stats["spec_decode_num_draft_tokens"]
    alpha = stats["spec_decode_num_accepted_tokens"] / drafted if drafted else 0.0
    return RunOutcome(state="finished", summary={
        "lever": lever, "plain": plain_rows, "levered": lever_rows, "acceptance": alpha,
        "plots": _plots(plain_rows, lever_rows, lever=lever),
        "note": _note(plain_rows, lever_rows, lever=lever, alpha=alpha),
        "stats": {k: engine.stats()[k] for k in ("kv_blocks_free", "kv_blocks_total")},
    })


def _plots(plain: list[dict], levered: list[dict], *, lever: str) -> list[dict]:
    from problems.plots import Plot, Series, plot_figure, plot_table

    name = LEVER_NAMES[lever]
    lever_floor = ((Series("arithmetic: forward floor, BF16 weights",
                           tuple(r["floor_ms"] for r in levered),
                           tuple(r["floor_tokens_per_s"] for r in levered), dash=True,
                           markers=True, hollow=True),) if lever == "bf16" else ())
    curve = Plot(
        title="Throughput against time per output token, batch 1 to 32 along each line",
        x_title="Time per output token (ms)", y_title="Output tokens/s",
        series=(Series("measured, plain", tuple(r["tpot_ms"] for r in plain),
                       tuple(r["tokens_per_s"] for r in plain), markers=True,
                       labels=tuple(f"B={r['batch']}" for r in plain)),
                Series(f"measured, {name}", tuple(r["tpot_ms"] for r in levered),
                       tuple(r["tokens_per_s"] for r in levered), markers=True),
                Series("arithmetic: forward floor, this machine's peaks",
                       tuple(r["floor_ms"] for r in plain),
                       tuple(r["floor_tokens_per_s"] for r in plain), dash=True,
                       markers=True, hollow=True), *lever_floor),
        x_log=True, y_log=True)
    xs = tuple(float(r["batch"]) for r in plain)
    tpot = Plot(
        title="Time per output token against batch: measured and the floor",
        x_title="Sequences in the step", y_title="ms per output token", x_log=True,
        series=(Series("measured, plain", xs, tuple(r["tpot_ms"] for r in plain),
                       markers=True),
                Series(f"measured, {name}", xs, tuple(r["tpot_ms"] for r in levered),
                       markers=True),
                Series("arithmetic floor (one step per token)", xs,
                       tuple(r["floor_ms"] for r in plain), dash=True),
                *((Series("arithmetic floor, BF16 weights", xs,
                          tuple(r["floor_ms"] for r in levered), dash=True),)
                  if lever == "bf16" else ())))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (curve, tpot)]


def verify_said(plain: list[dict]) -> str:
    """What the arithmetic says verifying γ + 1 positions costs at each batch of the sweep, by
    the rows' `verify_floor_ratio`: nearly free (problem 10's measure) while the weights' reads
    set the floor, dearer from the first batch where the matmuls' compute comes into it."""
    from problems.arithmetic.speculative import NEARLY_FREE

    first, last = plain[0], plain[-1]
    text = (f"On this machine's measured rates the arithmetic puts a verification pass "
            f"({GAMMA + 1} positions per sequence, the weights and each sequence's KV read "
            f"once) at {first['verify_floor_ratio']:.3g}× a plain step's floor at batch 1")
    text += (f" and {last['verify_floor_ratio']:.3g}× at batch {last['batch']}"
             if len(plain) > 1 else "")
    dear = next((r for r in plain if r["verify_floor_ratio"] > NEARLY_FREE), None)
    most = f"{GAMMA + 1}×, every position's full compute"
    if dear is None:
        return (text + f": nearly free (at most {NEARLY_FREE:g}× a plain step) at every batch "
                "here, where the weights' reads set the floor. ")
    if dear is first:
        return (text + ": not nearly free even at batch 1, where the matmuls' compute already "
                f"weighs in the floor on these rates (at most {most}). ")
    cheap = plain[plain.index(dear) - 1]["batch"]
    upto = "at batch 1" if cheap == 1 else f"up to batch {cheap}"
    return (text + f": nearly free (at most {NEARLY_FREE:g}× a plain step) {upto}, where the "
            f"weights' reads set the floor, and dearer from batch {dear['batch']} on, as the "
            f"matmuls' compute comes into it (at most {most}). ")


def bf16_said(plain: list[dict], levered: list[dict]) -> str:
    """The weight-format lever, predicted against measured: how far the arithmetic's floor
    fell with half the weight bytes (it falls most where the weights' reads set the floor),
    how far the measured TPOT moved at each batch, and why they part where they do."""
    first, last = (plain[0], levered[0]), (plain[-1], levered[-1])
    moved = [r["batch"] for r, p in zip(levered, plain, strict=True) if r["tpot_ms"] < p["tpot_ms"]]
    text = (f"With BF16 weights the arithmetic's floor fell to "
            f"{first[1]['floor_ms'] / first[0]['floor_ms']:.2f}× the FP32 floor at batch 1 and "
            f"{last[1]['floor_ms'] / last[0]['floor_ms']:.2f}× at batch {last[0]['batch']}: "
            "half the weight bytes, so the prediction is that the curve moves left where "
            "reading the weights sets the step. Measured, TPOT went from "
            f"{first[0]['tpot_ms']:.3g} to {first[1]['tpot_ms']:.3g} ms at batch 1 and from "
            f"{last[0]['tpot_ms']:.3g} to {last[1]['tpot_ms']:.3g} ms at batch "
            f"{last[0]['batch']}; it was lower at "
            f"{len(moved)} of {len(plain)} batch sizes"
            + (f" ({', '.join(map(str, moved))})" if moved else "") + ". ")
    text += ("Where it did not follow: this model's weights fit in the CPU's caches, so bytes "
             "from memory are rarely what a step waits for, and a CPU without BF16 matrix "
             "instructions widens each weight back to 32 bits before multiplying, which costs "
             "compute the floor does not count. On a GPU, where a decode step waits on HBM, "
             "half the bytes is close to half the step at small batches.")
    return text


def _note(plain: list[dict], levered: list[dict], *, lever: str, alpha: float) -> str:
    first, last = plain[0], plain[-1]
    gain = last["tokens_per_s"] / first["tokens_per_s"]
    cost = last["tpot_ms"] / first["tpot_ms"]
    moved = [r for r, p in zip(levered, plain, strict=True) if r["tpot_ms"] < p["tpot_ms"]]
    above_first = first["tpot_ms"] / first["floor_ms"]
    above_last = last["tpot_ms"] / last["floor_ms"]
    text = (f"From batch 1 to {last['batch']} throughput rose {gain:.3g}× for {cost:.3g}× the "
            f"time per token: the same curve, travelled along. The measured TPOT sat "
            f"{above_first:.3g}× above the floor at batch 1 and {above_last:.3g}× at batch "
            f"{last['batch']}: the floor counts only the forward pass at the best matmul rate "
            "and memory bandwidth this worker measured, while each step here also pays the "
            "host (scheduling, sampling, Python) and a fixed cost for each of the model's "
            "kernels. ")
    if len(plain) > 1:
        text += ("A step's fixed costs change little with the batch while the floor grows "
                 "with it, so the gap closed. " if above_last < above_first else
                 "The gap grew with the batch: the host's work (packing the batch, sampling, "
                 "detokenizing) grows with every sequence, and the floor counts none of it. ")
    if lever == "bf16":
        return text + bf16_said(plain, levered)
    text += (f"With speculation (γ = {GAMMA}) the target kept {alpha:.0%} of guesses; "
             f"it lowered TPOT at {len(moved)} of {len(plain)} batch sizes. ")
    drafting = ("the draft model's own steps" if lever == "speculation"
                else "the prompt lookup, on the host")
    text += verify_said(plain)
    text += (f"A speculative step also pays what no floor counts: {drafting}, and every "
             "step's fixed costs (the host's work, a call for each kernel). On a GPU at small "
             "batches the verification pass rides on the weight reads, fixed costs are a small "
             "share of a step, and the points move left.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("itl", itl_run, engine="own", params=PARAMS)
