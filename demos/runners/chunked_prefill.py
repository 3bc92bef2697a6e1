"""Demo `chunked-prefill` (problem 7): several streams decode; then a long prompt (most of the
shipped model's context) arrives. Once with one-pass prefill (the step budget holds the whole
prompt) and once with a chosen token budget (chunked prefill): every stream's gap between tokens
over time, and the newcomer's time to first token, against the arithmetic's floors.

An experiment on engines of its own (the experiments queue), one per mode, with the same streams
and the same long prompt (random token ids; EOS ignored). The streams decode a few steps first,
so the gaps before the arrival show the decode-only pace.

Events, in order: started; for each mode (one pass first): gap (one per engine step from the
long prompt's arrival: the time since the arrival, the largest gap any stream saw in that step,
the prompt tokens the step computed), mode (the newcomer's TTFT, the largest and the median
gap, the chunks); the task then publishes finished with the summary (plots and a note).
"""

import random
import statistics
import time

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.units import seconds_format

MODES = ("one-pass", "chunked")
WARM_TOKENS = 3  # tokens each stream makes before the long prompt arrives
TAIL_STEPS = 4  # decode-only steps recorded after the long prompt's first token

PARAMS = ParamSchema(
    specs=(
        ParamSpec("streams", "Streams decoding", "whole", 4, minimum=1, maximum=8,
                  unit="sequences"),
        ParamSpec("long_prompt_tokens", "The long prompt", "whole", 768, minimum=64,
                  maximum=960, unit="tokens",
                  help="The shipped model's context is 1,024 tokens."),
        ParamSpec("token_budget", "Token budget per step (chunked run)", "whole", 64,
                  minimum=16, maximum=512, unit="tokens",
                  help="Every token a step computes counts: the streams' one each, the rest "
                       "goes to the prompt's chunk."),
        ParamSpec("stream_prompt_tokens", "Each stream's prompt", "whole", 16, minimum=4,
                  maximum=64, unit="tokens"),
    ),
    work=lambda v: 2 * (v["long_prompt_tokens"] + v["streams"] * (v["stream_prompt_tokens"]
                                                                   + 64)),
)



def _ms(milliseconds: float) -> str:
    """A duration given in ms, as the notes print it: "572 ms", "1.31 s"."""
    return seconds_format(milliseconds / 1e3)

def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _run_mode(*, mode: str, machine: dict, params: dict, prompts: dict,
              ctx: RunContext) -> dict:
    from worker.demo_engine import engine_build, engine_warm_up
    from worker.engine import SamplingParams

    streams, long_len = int(params["streams"]), int(params["long_prompt_tokens"])
    budget = (long_len + streams if mode == "one-pass" else int(params["token_budget"]))
    engine = engine_build(machine["model_path"], device=machine.get("device", "cpu"),
                          max_num_batched_tokens=budget, max_num_seqs=streams + 1)
    engine_warm_up(engine)
    stream_params = SamplingParams(temperature=0, max_tokens=512, ignore_eos=True)
    ids = [engine.add_request(p, stream_params, request_id=f"stream-{i}")
           for i, p in enumerate(prompts["streams"])]
    last: dict[str, float] = {}
    made: dict[str, int] = {}
    try:
        while min((made.get(i, 0) for i in ids), default=0) < WARM_TOKENS:
            _check(ctx)
            now_events = engine.step()
            at = time.perf_counter()
            for e in now_events:
                if e["type"] == "token":
                    last[e["request_id"]] = at
                    made[e["request_id"]] = made.get(e["request_id"], 0) + 1
        long_id = engine.add_request(prompts["long"], SamplingParams(
            temperature=0, max_tokens=1, ignore_eos=True), request_id="long")
        arrived = time.perf_counter()
        gaps, ttft, after = [], None, 0
        while after < TAIL_STEPS:
            _check(ctx)
            events = engine.step()
            at = time.perf_counter()
            step = next(e for e in events if e["type"] == "step")
            seen = []
            for e in events:
                if e["type"] == "token":
                    if e["request_id"] == long_id:
                        ttft = at - arrived
                    elif e["request_id"] in last:
                        seen.append(at - last[e["request_id"]])
                        last[e["request_id"]] = at
            row = {"mode": mode, "t_ms": (at - arrived) * 1e3,
                   "gap_ms": max(seen) * 1e3 if seen else 0.0,
                   "prefill_tokens": step["num_prefill_tokens"],
                   "step_ms": step["seconds"] * 1e3}
            gaps.append(row)
            ctx.publish("gap", row)
            if ttft is not None:
                after += 1
    finally:
        for request_id in ids:
            engine.abort(request_id)
        engine.step()  # hand out the aborts: every block back
    during = [g for g in gaps if g["prefill_tokens"]]
    summary = {
        "mode": mode, "budget": budget, "chunks": len(during),
        "ttft_ms": ttft * 1e3 if ttft is not None else 0.0,
        "max_gap_ms": max(g["gap_ms"] for g in gaps),
        "median_gap_ms": statistics.median(g["gap_ms"] for g in gaps),
        "decode_gap_ms": statistics.median(g["gap_ms"] for g in gaps[-TAIL_STEPS:]),
        "kv_blocks_free": engine.stats()["kv_blocks_free"],
        "kv_blocks_total": engine.stats()["kv_blocks_total"],
    }
    ctx.publish("mode", summary)
    return {"summary": summary, "gaps": gaps}


def chunked_prefill_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _chunked_prefill_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _chunked_prefill_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    vocab = int(engine.runner.config.vocab_size)
    rng = random.Random(7)
    streams, long_len = int(params["streams"]), int(params["long_prompt_tokens"])
    stream_len = int(params["stream_prompt_tokens"])
    prompts = {"streams": [[rng.randrange(3, vocab) for _ in range(stream_len)]
                           for _ in range(streams)],
               "long": [rng.randrange(3, vocab) for _ in range(long_len)]}
    budget = int(params["token_budget"])
    ctx.publish("started", {"modes": list(MODES), "streams": streams,
                            "long_prompt_tokens": long_len, "token_budget": budget,
                            "chunk_tokens": budget - streams,
                            "device": str(machine.get("device", "cpu"))})
    runs = {mode: _run_mode(mode=mode, machine=machine, params=params, prompts=prompts,
                            ctx=ctx) for mode in MODES}
    predicted = prediction(machine=machine, streams=streams, long_len=long_len,
                           chunk=budget - streams, context=stream_len + WARM_TOKENS + 1)
    return RunOutcome(state="finished", summary={
        "modes": {m: runs[m]["summary"] for m in MODES},
        "predicted": predicted,
        "plots": _plots(runs, predicted=predicted),
        "note": _note(runs, predicted=predicted),
    })


def prediction(*, machine: dict, streams: int, long_len: int, chunk: int,
               context: int) -> dict:
    """The arithmetic's floors on this machine's measured rates (ms): a decode-only step, the
    one-pass step, each chunk's step (its attention to the earlier chunks added) and the
    newcomer's TTFT both ways."""
    from demos.estimate import forward_floor_model, machine_model
    from problems.arithmetic.compute import attention_flops_per_token_pair

    model, dtype = machine_model(machine)
    if model is None:
        return {"available": False}
    rate = float(machine["matmul_flops_per_s"])
    pair = attention_flops_per_token_pair(model)

    def step(tokens: int, start: int) -> float:
        floor = forward_floor_model(model=model, dtype=dtype, machine=machine,
                                    prefill_tokens=tokens, prefill_sequences=1 if tokens else 0,
                                    decode_sequences=streams, decode_context=context)
        # The chunk also attends to the `start` prompt tokens before it.
        return floor["seconds"] + pair * tokens * start / rate

    decode = step(0, 0)
    whole = step(long_len, 0)
    chunks = [step(min(chunk, long_len - s), s) for s in range(0, long_len, chunk)]
    return {"available": True, "decode_ms": decode * 1e3, "one_pass_gap_ms": whole * 1e3,
            "one_pass_ttft_ms": whole * 1e3, "chunked_max_gap_ms": max(chunks) * 1e3,
            "chunked_ttft_ms": sum(chunks) * 1e3, "chunks": len(chunks)}


def _plots(runs: dict, *, predicted: dict) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

    gaps = Plot(
        title="Every stream's gap between tokens after the long prompt arrives",
        x_title="Time since the long prompt arrived (ms)", y_title="Gap before the token (ms)",
        y_log=True,
        series=tuple(Series(mode, tuple(g["t_ms"] for g in runs[mode]["gaps"]),
                            tuple(max(g["gap_ms"], 1e-3) for g in runs[mode]["gaps"]),
                            markers=True, dash=mode == "one-pass") for mode in MODES))
    plots = [gaps]
    if predicted.get("available"):
        one, chunked = runs["one-pass"]["summary"], runs["chunked"]["summary"]
        plots.append(BarPlot(
            title="Measured against the arithmetic's floor on this machine",
            categories=("largest gap, one pass", "largest gap, chunked",
                        "newcomer's TTFT, one pass", "newcomer's TTFT, chunked"),
            value_title="ms",
            series=(BarSeries("measured", (one["max_gap_ms"], chunked["max_gap_ms"],
                                           one["ttft_ms"], chunked["ttft_ms"])),
                    BarSeries("floor (arithmetic)", (
                        predicted["one_pass_gap_ms"], predicted["chunked_max_gap_ms"],
                        predicted["one_pass_ttft_ms"], predicted["chunked_ttft_ms"]),
                        outline=True))))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in plots]


def _note(runs: dict, *, predicted: dict) -> str:
    one, chunked = runs["one-pass"]["summary"], runs["chunked"]["summary"]
    text = (f"In one pass the streams waited {_ms(one['max_gap_ms'])} for a token while the "
            f"whole prompt ran; chunked into {chunked['chunks']} steps, their largest gap was "
            f"{_ms(chunked['max_gap_ms'])}, against {_ms(chunked['decode_gap_ms'])} for a "
            f"decode-only step. The newcomer's first token came after {_ms(one['ttft_ms'])} "
            f"in one pass and {_ms(chunked['ttft_ms'])} chunked. ")
    if predicted.get("available"):
        text += (f"The arithmetic's floors on this machine's measured rates are "
                 f"{_ms(predicted['one_pass_gap_ms'])} and "
                 f"{_ms(predicted['chunked_max_gap_ms'])} for the largest gaps, "
                 f"{_ms(predicted['one_pass_ttft_ms'])} and "
                 f"{_ms(predicted['chunked_ttft_ms'])} for the TTFTs, and "
                 f"{_ms(predicted['decode_ms'])} for a decode-only step. ")
        big = one["max_gap_ms"] / predicted["one_pass_gap_ms"]
        small = chunked["decode_gap_ms"] / predicted["decode_ms"]
        text += (f"The big prefill step ran at {big:.2g}× its floor"
                 + (" (below it: the rates were measured once, with a 512 × 512 matmul on a "
                    "shared machine, and the prompt's larger matmuls run faster than that, so "
                    "this floor is only as good as the rates it divides by)" if big < 1 else "")
                 + f", while a decode-only step took {small:.2g}× its floor: a small step is "
                 "mostly fixed costs the floor leaves out (a call for each kernel, scheduling, "
                 "sampling, detokenizing), and every chunk pays them again, which is why "
                 "chunking costs the newcomer more here than on a GPU, where a step's fixed "
                 "costs are a smaller share.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("chunked-prefill", chunked_prefill_run, engine="own", params=PARAMS)
