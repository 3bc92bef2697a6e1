"""Demo `disagg` (problem 22): one workload, long prompts arriving among running streams, served
by two colocated engines (each taking alternate streams and long prompts) and then by a prefill
engine plus a decode engine with each request's KV cache handed over (the engine's export and
import, worker/engine/kv_transfer.py): two engines either way, so the layouts are compared on
the same hardware.

The engines take turns on the worker's CPU, each on a clock of its own advanced by its measured
step times (worker/replicas.py), as if each had its own machine. Each handoff is really moved:
its K and V tensors are written to one byte buffer and read back into new tensors, and that
copy's time (a host memory copy, not a link) delays the decode engine's import. Beside each
handoff, problems/arithmetic's time for the same bytes over NVLink, 400 Gb/s InfiniBand and
100 GbE: the bytes are the measured-against-predicted check; the times are of different
things. Events, in order: started; layout_done (colocated, then disaggregated); plot; then
the task publishes finished with the summary (plots and note included). No torch on import.
"""

import math
import random
import statistics

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic import kv_cache
from problems.arithmetic.catalog.models import DEMO_MODEL_ID
from problems.arithmetic.disagg import kv_handoff_links
from problems.arithmetic.units import bytes_format, seconds_format
from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

STREAM_PROMPT_TOKENS = 24
LONG_OUTPUT_TOKENS = 4
BLOCK_SIZE = 16
VOCAB_LOW = 5
WARM_STEPS = 6

PARAMS = ParamSchema(
    specs=(
        ParamSpec("streams", "Running streams", "whole", 4, minimum=1, maximum=8,
                  help="Conversations already decoding when the long prompts arrive."),
        ParamSpec("stream_tokens", "Tokens each stream generates", "whole", 64, minimum=16,
                  maximum=256, unit="tokens"),
        ParamSpec("long_prompts", "Long prompts arriving", "whole", 3, minimum=1, maximum=6),
        ParamSpec("long_tokens", "Long prompt length", "whole", 512, minimum=64, maximum=896,
                  unit="tokens"),
        ParamSpec("seed", "Random seed", "whole", 0, minimum=0, maximum=10**6),
    ),
    work=lambda v: 2 * (v["streams"] * (STREAM_PROMPT_TOKENS + v["stream_tokens"])
                        + v["long_prompts"] * (v["long_tokens"] + LONG_OUTPUT_TOKENS)),
)


def _stop_check(ctx: RunContext, done: dict) -> None:
    ctx.check_time()
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"], summary=done)


def _gaps_ms(times: list[float]) -> list[float]:
    return [(b - a) * 1e3 for a, b in zip(times, times[1:], strict=False)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def disagg_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _run(engine=engine, machine=machine, params=params, ctx=ctx)


def _engine(machine: dict, *, long_tokens: int):  # noqa: ANN202
    from worker.engine import Engine

    # Budget for a whole long prompt plus every stream's decode in one step: no chunking, so
    # the colocated engine shows the full interference a prefill causes.
    return Engine.from_pretrained(machine["model_path"], device=machine.get("device", "cpu"),
                                  block_size=BLOCK_SIZE, max_num_seqs=16,
                                  max_num_batched_tokens=long_tokens + 64)


def _layout_run(machine: dict, *, split: bool, streams: list, longs: list, arrivals: list,
                stream_out: int, long_len: int, sampling, check) -> tuple:  # noqa: ANN001
    """One layout's run: the requests' first records (the engine that made the first token),
    the decode engine's records (split only), the handoffs, and the requests each engine
    finished."""
    from worker.replicas import Cluster, Replica, handoff_move

    # Two engines in both layouts: split, one prefills and one decodes; colocated, each does
    # both for alternate streams and long prompts.
    replicas = [Replica(_engine(machine, long_tokens=long_len),
                        name="prefill" if split else "colocated A"),
                Replica(_engine(machine, long_tokens=long_len),
                        name="decode" if split else "colocated B")]

    def home(i: int) -> int:
        return 0 if split else i % 2
    transfers: list[dict] = []
    decoded: dict = {}
    first: dict = {}
    holder: dict = {}

    def finished(tracked, event, clock) -> None:  # noqa: ANN001
        if not split or tracked.replica != 0:
            return
        cluster = holder["cluster"]
        handoff = cluster.replicas[0].engine.kv_take(event["request_id"])
        moved, seconds = handoff_move(handoff)
        kind, index = tracked.tag["kind"], tracked.tag["index"]
        transfers.append({"kind": kind, "index": index, "bytes": handoff.nbytes,
                          "tokens": handoff.num_computed_tokens, "seconds": seconds})
        left = (stream_out if kind == "stream" else LONG_OUTPUT_TOKENS) - 1

        def land(now: float) -> None:
            decoded[(kind, index)] = cluster.submit(1, None, sampling(left), now=now,
                                                    tag=tracked.tag, kv=moved)

        if left > 0:
            cluster.at(clock + seconds, land)

    cluster = Cluster(replicas, check=check, on_finished=finished)
    holder["cluster"] = cluster
    for i, p in enumerate(streams):
        first[("stream", i)] = cluster.submit(
            home(i), p, sampling(1 if split else stream_out), now=0.0,
            tag={"kind": "stream", "index": i}, export_kv=split)

    def arrive(now: float, *, i: int, p: list[int]) -> None:
        first[("long", i)] = cluster.submit(
            home(i), p, sampling(1 if split else LONG_OUTPUT_TOKENS), now=now,
            tag={"kind": "long", "index": i}, export_kv=split)

    for i, (at, p) in enumerate(zip(arrivals, longs, strict=True)):
        cluster.at(at, lambda now, i=i, p=p: arrive(now, i=i, p=p))
    cluster.run()
    return first, decoded, transfers, [r.served for r in cluster.replicas]


def _run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.engine import SamplingParams

    rng = random.Random(params["seed"])
    vocab = engine.config.vocab_size
    n_streams, n_long = params["streams"], params["long_prompts"]
    stream_out, long_len = params["stream_tokens"], params["long_tokens"]
    streams = [[rng.randrange(VOCAB_LOW, vocab) for _ in range(STREAM_PROMPT_TOKENS)]
               for _ in range(n_streams)]
    longs = [[rng.randrange(VOCAB_LOW, vocab) for _ in range(long_len)] for _ in range(n_long)]

    def sampling(tokens: int) -> SamplingParams:
        return SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)

    # Warm-up on a colocated engine: the streams' decode step sets when the long prompts land
    # (spread over the middle of the streams' answers, the same times in both layouts).
    warm = _engine(machine, long_tokens=long_len)
    for p in streams:
        warm.add_request(p, sampling(WARM_STEPS + 1))
    steps = []
    while warm.has_unfinished():
        events = warm.step()
        steps.append(next(e for e in events if e["type"] == "step"))
    decode_step = statistics.median(s["seconds"] for s in steps if s["num_prefill_tokens"] == 0)
    span = stream_out * decode_step
    arrivals = [span * (i + 1) / (n_long + 1) for i in range(n_long)]
    ctx.publish("started", {"streams": n_streams, "stream_tokens": stream_out,
                            "long_prompts": n_long, "long_tokens": long_len,
                            "decode_step_ms": decode_step * 1e3,
                            "arrivals_ms": [a * 1e3 for a in arrivals],
                            "device": machine.get("device", "cpu"), "at_ms": ctx.elapsed_ms()})

    layouts = {}
    for layout in ("colocated", "disaggregated"):
        _stop_check(ctx, {"layouts": list(layouts)})
        split = layout == "disaggregated"
        first, decoded, transfers, served = _layout_run(
            machine, split=split, streams=streams, longs=longs, arrivals=arrivals,
            stream_out=stream_out, long_len=long_len, sampling=sampling,
            check=lambda: _stop_check(ctx, {"layouts": list(layouts)}))
        gaps, series = [], []
        for i in range(n_streams):
            t = decoded[("stream", i)] if split else first[("stream", i)]
            times = t.token_times
            gaps.extend(_gaps_ms(times))
            series.append(times)
        ttfts = [(first[("long", i)].token_times[0] - first[("long", i)].arrival) * 1e3
                 for i in range(n_long)]
        result = {"layout": layout, "itl_mean_ms": statistics.fmean(gaps),
                  "itl_p50_ms": _percentile(gaps, 0.5), "itl_p99_ms": _percentile(gaps, 0.99),
                  "itl_max_ms": max(gaps), "long_ttft_ms": ttfts,
                  "transfers": transfers, "stream0_times": series[0],
                  "engine_requests": served}
        layouts[layout] = result
        ctx.publish("layout_done", {k: v for k, v in result.items() if k != "stream0_times"}
                    | {"at_ms": ctx.elapsed_ms()})

    per_token = kv_cache(model=DEMO_MODEL_ID, tokens=1, dtype="fp32")["bytes_per_token"]
    for x in layouts["disaggregated"]["transfers"]:
        x["predicted_bytes"] = round(x["tokens"] * per_token)
        x["links"] = kv_handoff_links(nbytes=x["bytes"])
    plots = disagg_plots(layouts)
    note = disagg_note(layouts, decode_step_ms=decode_step * 1e3)
    ctx.publish("plot", {"figures": plots, "at_ms": ctx.elapsed_ms()})
    return RunOutcome(state="finished", summary={
        "itl_max_ms": {k: v["itl_max_ms"] for k, v in layouts.items()},
        "itl_p50_ms": {k: v["itl_p50_ms"] for k, v in layouts.items()},
        "long_ttft_ms": {k: v["long_ttft_ms"] for k, v in layouts.items()},
        "transfers": layouts["disaggregated"]["transfers"],
        "plots": plots, "note": note, "device": machine.get("device", "cpu"),
    })


def disagg_plots(layouts: dict) -> list[dict]:
    """A stream's inter-token gaps in both layouts; TTFT of the long prompts; each handoff's
    measured time against the arithmetic's for the same bytes on real links."""
    gaps = []
    for name, r in layouts.items():
        times = r["stream0_times"]
        gaps.append(Series(name, tuple(t * 1e3 for t in times[1:]),
                           tuple(_gaps_ms(times)), markers=True, dash=name == "disaggregated"))
    itl = Plot(title="One stream's inter-token gaps as the long prompts arrive",
               x_title="Time on the decoding engine's clock (ms)", y_title="Gap (ms)",
               series=tuple(gaps))
    n_long = len(layouts["colocated"]["long_ttft_ms"])
    ttft = BarPlot(title="Long prompts: time to first token", categories=tuple(
        f"prompt {i + 1}" for i in range(n_long)), value_title="TTFT (ms)",
        series=tuple(BarSeries(name, tuple(r["long_ttft_ms"])) for name, r in layouts.items()))
    moves = layouts["disaggregated"]["transfers"]
    xs = tuple(float(x["bytes"]) for x in moves)
    series = [Series("host memory copy here (not a link)", xs,
                     tuple(x["seconds"] * 1e3 for x in moves), lines=False, markers=True)]
    for i, link in enumerate(moves[0]["links"] if moves else []):
        series.append(Series(f"predicted: {link['name']}", xs, tuple(
            x["links"][i]["seconds"] * 1e3 for x in moves), lines=False, hollow=True))
    transfer = Plot(title="Each KV handoff's bytes: a host copy here, and real links predicted",

                    x_title="Bytes handed over", y_title="Transfer time (ms)", x_log=True,
                    y_log=True, series=tuple(series))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (itl, ttft, transfer)]


def disagg_note(layouts: dict, *, decode_step_ms: float) -> str:
    """Why measured and predicted differ, in words."""
    co, split = layouts["colocated"], layouts["disaggregated"]
    longs = [x for x in split["transfers"] if x["kind"] == "long"]
    exact = all(x["predicted_bytes"] == x["bytes"] for x in split["transfers"])
    big = max(longs, key=lambda x: x["bytes"]) if longs else None
    text = (f"Colocated, the largest gap between a stream's tokens was "
            f"{seconds_format(co['itl_max_ms'] / 1e3)} against a typical "
            f"{seconds_format(co['itl_p50_ms'] / 1e3)}: the step that carried a long prompt's "
            f"prefill. Split, the decode engine never runs a prefill, so its largest gap was "
            f"{seconds_format(split['itl_max_ms'] / 1e3)} (a lone decode step measured "
            f"{seconds_format(decode_step_ms / 1e3)} before the run). ")
    if big is not None:
        link = big["links"][-1]
        carried = ("exactly the bytes the arithmetic predicts" if exact else
                   f"{big['bytes']:,} bytes where the arithmetic predicts "
                   f"{big['predicted_bytes']:,}")
        text += (f"Each handoff carried {carried} (2 × layers × KV heads × head dim × 4 bytes "
                 f"per token of the prompt); the largest, "
                 f"{bytes_format(big['bytes'])}, took {seconds_format(big['seconds'])} through "
                 f"this worker's memory, where {link['name']} at line rate would take "
                 f"{seconds_format(link['seconds'])}. That time is a host memory copy, not a "
                 "check of any link's prediction: it measures this CPU's memory bandwidth, "
                 "shared with other work, plus Python's overhead per tensor; only the bytes are "
                 "compared with the arithmetic. Both layouts ran on two engines (colocated, "
                 "each took alternate streams and long prompts), so the difference in gaps is "
                 "the split itself, not more hardware.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("disagg", disagg_run, engine="own", params=PARAMS)
