"""Demo `benchmark` (problem 18): the project's benchmark client (demos/benchmark_client.py)
measures two backends on the worker, behind the same OpenAI-compatible interface, on the same
model and the same prompts: this course's engine (continuous batching) and Hugging Face
`generate` with static batches (worker/bench_backends.py).

Held equal: the weights and precision (the shipped model in float32 on the worker's device),
the tokenizer and the token ids of every prompt (one tokenizer for both), greedy decoding,
exactly `output_tokens` per request (ignore_eos), streaming, the client and where it measures,
a warm-up for each backend, fresh prompts for every load point (the same ones for both), and
no prefix cache for either. The backends run one at a time, taking turns at each load point,
so a noisy machine treats them alike.

Events, in order: started (the methodology); warmup (one per backend); point (one per backend
per load point, levels in order, backends alternating which goes first); the task then
publishes finished with the summary (plots, methodology, note), or cancelled.
"""

import math
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamError, ParamSchema, ParamSpec

RATES = (("1", "1"), ("2", "2"), ("4", "4"), ("8", "8"), ("16", "16"),
         ("inf", "all at once"))
CONCURRENCIES = (("1", "1"), ("2", "2"), ("4", "4"), ("8", "8"), ("16", "16"))
WARMUP_REQUESTS = 2
# The share of the run's time limit that a sweep's arrivals alone may take (both backends).
ARRIVALS_SHARE_OF_LIMIT = 1 / 3

def arrivals_seconds(values: dict) -> float:
    """Seconds a rate sweep spends sending at its Poisson rates, both backends together: each
    point's requests span (requests − 1) gaps of mean 1 ÷ rate ("all at once" takes none)."""
    if values["mode"] != "rate":
        return 0.0
    rates = [float(r) for r in values["rates"] if r != "inf"]
    return 2 * sum((values["requests"] - 1) / rate for rate in rates)


def _sweep_check(values: dict) -> None:
    from demos.conf import demo_setting

    budget = float(demo_setting("DEMO_RUN_TIME_LIMIT")) * ARRIVALS_SHARE_OF_LIMIT
    needed = arrivals_seconds(values)
    if needed > budget:
        # The view shows "<field> <message>" beside the field: "rates would take about ...".
        raise ParamError("rates", f"would take about {needed:.0f} s just to send "
                         f"{values['requests']} requests a point on both backends, more than "
                         f"the {budget:.0f} s a run can spare: choose higher rates or fewer "
                         "requests")


PARAMS = ParamSchema(
    specs=(
        ParamSpec("mode", "Load", "choice", "rate",
                  choices=(("rate", "a request-rate sweep (Poisson arrivals)"),
                           ("concurrency", "fixed concurrency (closed loop)"))),
        ParamSpec("rates", "Request rates (requests/s)", "choices", ["2", "8", "inf"],
                  choices=RATES, help="Used for a request-rate sweep."),
        ParamSpec("concurrencies", "Concurrency levels", "choices", ["1", "4"],
                  choices=CONCURRENCIES, help="Used at fixed concurrency."),
        ParamSpec("requests", "Requests per load point", "whole", 12, minimum=4, maximum=32),
        ParamSpec("input_tokens", "Prompt", "whole", 32, minimum=8, maximum=64, unit="tokens"),
        ParamSpec("output_tokens", "Output", "whole", 16, minimum=2, maximum=32,
                  unit="tokens"),
        ParamSpec("static_batch", "Hugging Face batch size", "whole", 8, minimum=1, maximum=16,
                  unit="requests"),
        ParamSpec("slo_ttft_ms", "SLO: TTFT at most", "real", 1000.0, minimum=1.0,
                  maximum=60_000.0, unit="ms"),
        ParamSpec("slo_tpot_ms", "SLO: TPOT at most", "real", 200.0, minimum=1.0,
                  maximum=10_000.0, unit="ms"),
    ),
    work=lambda v: 2 * (len(v["rates"] if v["mode"] == "rate" else v["concurrencies"])
                        * v["requests"] + WARMUP_REQUESTS)
    * (v["input_tokens"] + v["output_tokens"]),
    check=_sweep_check,
)


def _levels(params: dict) -> list[float]:
    chosen = params["rates"] if params["mode"] == "rate" else params["concurrencies"]
    return [math.inf if v == "inf" else float(v) for v in chosen]


def _level_label(mode: str, level: float) -> str:
    if mode == "rate":
        return "all at once" if math.isinf(level) else f"{level:g} req/s"
    return f"{level:g} in flight"


def methodology(*, params: dict, machine: dict, client_label: str) -> list[list[str]]:
    """What was held equal and what differs, as rows: aspect, engine, Hugging Face."""
    device = str(machine.get("device", "cpu"))
    model = Path(str(machine.get("model_path", "model"))).name
    dtype = str(machine.get("dtype", "float32"))
    same = "same"
    mode = params["mode"]
    load = ("Poisson arrivals at each rate" if mode == "rate"
            else "a fixed number of requests in flight (closed loop)")
    return [
        ["model and weights", f"{model}, {dtype}", same],
        ["device", device, same],
        ["tokenizer and prompt token ids", "one tokenizer for both, every prompt tokenized "
         "before the measurement", same],
        ["prompts", f"held-out documents cut to {params['input_tokens']} tokens, fresh at "
         "each load point", same],
        ["output length", f"exactly {params['output_tokens']} tokens (ignore_eos)", same],
        ["decoding", "greedy (temperature 0)", same],
        ["graphs and compilation", "none: eager PyTorch", same],
        ["client", client_label, same],
        ["where it is measured", "at the client, streaming", same],
        ["warm-up", f"{WARMUP_REQUESTS} requests, discarded", same],
        ["load", f"{load}, {params['requests']} requests per point", same],
        ["prefix cache", "off (salted per request)", "none"],
        ["batching", "continuous: requests join at every step",
         f"static: batches of up to {params['static_batch']}, formed when one starts"],
        ["SLO for goodput", f"TTFT ≤ {params['slo_ttft_ms']:g} ms and TPOT ≤ "
         f"{params['slo_tpot_ms']:g} ms", same],
    ]


def benchmark_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Warm both backends up, then measure every load point on each, taking turns."""
    from demos.benchmark_client import load_point, prompts_make, run_sync
    from worker.bench_backends import CompletionServer, EngineBackend, HFStaticBackend

    model_path = str(machine["model_path"])
    model_id = Path(model_path).name
    mode, levels = params["mode"], _levels(params)
    n, out = int(params["requests"]), int(params["output_tokens"])
    slo_ttft, slo_tpot = params["slo_ttft_ms"] / 1e3, params["slo_tpot_ms"] / 1e3
    from tokenizers import Tokenizer

    engine_backend = EngineBackend(engine)
    tokenizer_client = engine_backend.loop.client(owner="bench-tokenizer")

    token_ids: dict[str, list[int]] = {}  # every prompt's ids, tokenized before measuring

    def tokenize(text: str) -> list[int]:
        # A prompt tokenized up front costs both servers a lookup; any other text takes the
        # engine's lock, which waits for the step under way while the engine is being measured.
        if text not in token_ids:
            token_ids[text] = tokenizer_client.encode_prompt(text, chat=False)
        return token_ids[text]

    # A tokenizer of its own for the HF backend's text: never shared across threads.
    decoder = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
    config = getattr(getattr(engine, "runner", None), "config", None)
    try:
        hf_backend = HFStaticBackend(
            model_path, batch_size=int(params["static_batch"]), decode=decoder.decode,
            eos_token_id=getattr(config, "eos_token_id", None),
            device=str(machine.get("device", "cpu")))
    except BaseException:
        engine_backend.stop()
        raise
    servers = [CompletionServer(engine_backend, tokenize=tokenize, model_id=model_id).start(),
               CompletionServer(hf_backend, tokenize=tokenize, model_id=model_id).start()]
    rows = methodology(params=params, machine=machine,
                       client_label="demos/benchmark_client.py (OpenAI client, async)")
    ctx.publish("started", {"mode": mode, "levels": [_level_label(mode, x) for x in levels],
                            "backends": [{"name": s.backend.name, "title": s.backend.title}
                                         for s in servers], "methodology": rows})
    points: list[dict] = []
    try:
        prompts = prompts_make(count=WARMUP_REQUESTS + n * len(levels),
                               input_tokens=int(params["input_tokens"]),
                               tokenizer_path=str(Path(model_path) / "tokenizer.json"))
        for prompt in prompts:
            tokenize(prompt)
        for server in servers:
            _check(ctx)
            warm = run_sync(load_point(base_url=server.base_url, model=model_id,
                                          prompts=prompts[:WARMUP_REQUESTS], output_tokens=out))
            ctx.publish("warmup", {"backend": server.backend.name,
                                   "seconds": warm["duration_s"], "failed": warm["failed"]})
        for i, level in enumerate(levels):
            batch = prompts[WARMUP_REQUESTS + i * n:WARMUP_REQUESTS + (i + 1) * n]
            order = servers if i % 2 == 0 else servers[::-1]
            for server in order:
                _check(ctx)
                summary = run_sync(load_point(
                    base_url=server.base_url, model=model_id, prompts=batch,
                    output_tokens=out, request_rate=level if mode == "rate" else math.inf,
                    max_concurrency=int(level) if mode == "concurrency" else None,
                    seed=i, ttft_slo_s=slo_ttft, tpot_slo_s=slo_tpot))
                point = _point(summary, backend=server.backend.name, mode=mode, level=level,
                               output_tokens=out)
                points.append(point)
                ctx.publish("point", point)
    finally:
        for server in servers:
            server.stop()
    return RunOutcome(state="finished", summary={
        "mode": mode, "points": points, "methodology": rows,
        "hf_batches": hf_backend.batches[-64:],
        "plots": _plots(points, mode=mode, levels=levels, slo_ttft_s=slo_ttft),
        "note": _note(points, mode=mode, levels=levels, batch=int(params["static_batch"])),
        "slo": {"ttft_ms": params["slo_ttft_ms"], "tpot_ms": params["slo_tpot_ms"]},
    })


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _point(summary: dict, *, backend: str, mode: str, level: float, output_tokens: int) -> dict:
    from problems.arithmetic.benchmarking import expected_output_throughput

    keep = ("completed", "failed", "duration_s", "request_throughput", "output_throughput",
            "output_tokens", "prompt_tokens", "good", "goodput", "good_share", "errors")
    stats = {k: summary[k] for k in keep}
    for name in ("ttft", "tpot", "itl", "e2e"):
        for key in (f"mean_{name}", f"p50_{name}", f"p90_{name}", f"p99_{name}"):
            stats[key] = summary[key]
    sent = summary.get("achieved_send_rate")
    return {"backend": backend, "mode": mode, "level": None if math.isinf(level) else level,
            "label": _level_label(mode, level),
            # The rate this point's draw really sent at: its n − 1 gaps over the time from the
            # first send (at zero) to the last, (n − 1) ÷ last send (the client's summary).
            "sent_rate": sent if sent is not None and math.isfinite(sent) else None,
            "predicted_output_throughput": expected_output_throughput(
                mode=mode, level=level, output_tokens=output_tokens,
                mean_e2e_s=summary["mean_e2e"]),
            **stats}


def _plots(points: list[dict], *, mode: str, levels: list[float],
           slo_ttft_s: float) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

    nan = float("nan")
    backends = ("engine", "hf-static")
    names = {"engine": "this engine (continuous)", "hf-static": "HF generate (static)"}
    labels = [_level_label(mode, x) for x in levels]

    def by(backend: str, key: str) -> tuple[float, ...]:
        rows = {p["label"]: p for p in points if p["backend"] == backend}
        return tuple((rows[label][key] if label in rows and rows[label][key] is not None
                      else nan) for label in labels)

    curve = []
    for backend in backends:
        xs = by(backend, "output_throughput")
        curve.append(Series(names[backend], xs, tuple(v * 1e3 for v in by(backend, "p99_ttft")),
                            markers=True, labels=tuple(labels)))
    finite = [x for s in curve for x in s.x if math.isfinite(x)]
    if finite:
        curve.append(Series("TTFT SLO", (0.0, max(finite) * 1.1),
                            (slo_ttft_s * 1e3, slo_ttft_s * 1e3), dash=True))
    frontier = Plot(title="Throughput against p99 TTFT, measured at the client",
                    x_title="Output throughput (tokens/s)", y_title="p99 TTFT (ms)",
                    series=tuple(curve))
    predicted = tuple(nan if v is None else v for v in
                      (next((p["predicted_output_throughput"] for p in points
                             if p["label"] == label and p["backend"] == "engine"), None)
                       for label in labels))
    throughput = BarPlot(
        title="Output throughput: measured against what the load predicts",
        categories=tuple(labels), value_title="tokens/s", category_title="load point",
        series=(BarSeries(names["engine"], by("engine", "output_throughput")),
                BarSeries(names["hf-static"], by("hf-static", "output_throughput")),
                BarSeries("predicted if the server keeps up", predicted, outline=True)),
        columns=(("prediction", tuple("rate × output length" if mode == "rate" and
                                      math.isfinite(x) else
                                      "none (no rate)" if mode == "rate" else
                                      "concurrency × output ÷ mean E2E (engine)"
                                      for x in levels)),))
    goodput = BarPlot(
        title="Goodput: requests per second within the SLO", categories=tuple(labels),
        value_title="requests/s", category_title="load point",
        series=(BarSeries(names["engine"], by("engine", "goodput")),
                BarSeries(names["hf-static"], by("hf-static", "goodput"))))
    return [{"figure": plot_figure(p), "table": plot_table(p)}
            for p in (frontier, throughput, goodput)]


def _note(points: list[dict], *, mode: str, levels: list[float], batch: int) -> str:
    """What the run showed, in its own numbers, and why measured and predicted differ."""
    def get(backend: str, label: str) -> dict | None:
        return next((p for p in points if p["backend"] == backend and p["label"] == label),
                    None)

    last = _level_label(mode, levels[-1])
    e, h = get("engine", last), get("hf-static", last)
    text = ""
    if e and h and e["p99_ttft"] and h["p99_ttft"]:
        text += (f"At {last}, p99 TTFT was {e['p99_ttft'] * 1e3:.3g} ms on this engine and "
                 f"{h['p99_ttft'] * 1e3:.3g} ms with static batches, for "
                 f"{e['output_throughput']:.3g} and {h['output_throughput']:.3g} output "
                 "tokens/s. ")
    text += ("A static batch admits nobody until its longest request is done, so a request "
             "that arrives meanwhile waits for a whole batch of decoding before its first token, "
             f"and a batch (here up to {batch}) starts with only the requests already waiting; "
             "continuous batching adds a new request at the next step. ")
    if mode == "rate":
        draws = [(x, get("engine", _level_label(mode, x))) for x in levels if math.isfinite(x)]
        sent = [f"{p['sent_rate']:.3g} against {x:g}" for x, p in draws
                if p and p.get("sent_rate")]
        text += ("Measured throughput can sit above or below the prediction (rate × output "
                 "length). Above: the client sends its first request at once, so a point's "
                 "requests span one gap fewer than their number, and a short Poisson draw runs "
                 "fast or slow"
                 + (f" (this run's draws sent at {', '.join(sent)} requests/s)" if sent else "")
                 + ". Below: the decoding after the last send counts in the time, and a backend "
                 "that cannot keep up falls behind as its queue grows.")
    else:
        text += ("At fixed concurrency the prediction is Little's law with each backend's "
                 "own mean E2E (the bars show the engine's), so each backend matches its own "
                 "almost by construction, apart from the start and the end of the run; a "
                 "closed loop never offers more than its concurrency, so the slower backend "
                 "simply receives fewer requests per second instead of a queue.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("benchmark", benchmark_run, engine="own", params=PARAMS)
