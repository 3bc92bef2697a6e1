"""Demo `metrics` (problem 16): a load the learner sets runs on the worker's shared engine, and
a dashboard is fed by the engine's own metrics as it runs.

Requests arrive as a Poisson process at `rate` for `duration_s` (at least one); each prompt is
`prompt_tokens` random token ids, and a `prefix_share` of the requests start with the same
`prefix_tokens` (a common system prompt). Every output runs to exactly `output_tokens`
(ignore_eos). The run's prefix-cache salt is its own, so nothing is cached when it starts.

Every `TICK_S` the runner publishes a `tick`: the engine's state (waiting and running requests,
KV-cache usage, the prefix-cache hit rate over the tick, all from `engine.stats()`, the same
numbers the worker's /metrics registry reads), this run's latency percentiles over the last
`WINDOW_S` of finished requests (TTFT, TPOT, E2E as the engine measured them: the values its
histograms observe), tokens per second and cost per request so far, and the worker's /metrics
lines for the dashboard's families at that moment (what a scrape of /metrics reads, within
the second the worker takes to publish them). The engine is shared, so other visitors'
requests show in the engine's gauges as they would in production.

A load this worker cannot keep up with is cut short `CUT_MARGIN_S` before the run's time limit
(no more sends, the rest aborted) and summarised with what finished, so a queue that grows
without end still ends in a dashboard rather than a failed run.

Events, in order: started; tick (several); the task then publishes finished with the summary
(the dashboard's plots, measured against predicted, a sentence on why they differ, and the
worker's /metrics lines for the same counters), or cancelled.
"""

import random
import time
import uuid

from demos.runners.base import RunCancelled, RunContext, RunOutcome, engine_error_raise
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.catalog.prices import price_example_get
from problems.arithmetic.serving_metrics import metrics_prediction

TICK_S = 0.5
WINDOW_S = 2.0
GAUGE_SAMPLE_S = 0.05  # how often the engine's gauges are read for the time-averaged queue
CUT_MARGIN_S = 10.0  # seconds left for the summary when a load is cut short
VOCAB_LOW, VOCAB_HIGH = 3, 1000  # ordinary token ids of the shipped model's vocabulary
H100_PRICE = price_example_get("h100-sxm")

PARAMS = ParamSchema(
    specs=(
        ParamSpec("rate", "Request rate", "real", 8.0, minimum=0.5, maximum=20.0,
                  unit="requests/s", help="Poisson arrivals: random and independent."),
        ParamSpec("duration_s", "Arrivals for", "real", 4.0, minimum=1.0, maximum=5.0,
                  unit="s"),
        ParamSpec("prompt_tokens", "Prompt", "whole", 48, minimum=8, maximum=64,
                  unit="tokens"),
        ParamSpec("output_tokens", "Output", "whole", 24, minimum=2, maximum=32,
                  unit="tokens", help="Every request generates exactly this many."),
        ParamSpec("prefix_share", "Share with a common prefix", "real", 0.5, minimum=0.0,
                  maximum=1.0, unit="fraction"),
        ParamSpec("prefix_tokens", "Common prefix", "whole", 32, minimum=1, maximum=63,
                  unit="tokens", help="At most the prompt less one token."),
        ParamSpec("price_per_hour", "Price of this worker", "real",
                  round(H100_PRICE.dollars_per_hour, 2), minimum=0.01, maximum=1000.0,
                  unit="$ per hour", help="As if it were one rented H100 "
                  f"({H100_PRICE.provider}, {H100_PRICE.as_of})."),
    ),
    work=lambda v: max(1, int(round(v["rate"] * v["duration_s"]))) * (v["prompt_tokens"]
                                                                       + v["output_tokens"]),
)


def arrivals_draw(*, rate: float, duration_s: float, seed: int) -> list[float]:
    """Poisson arrival times in [0, duration_s): exponential gaps of mean 1/rate. A draw with no
    arrival is drawn again (a Poisson process conditioned on at least one arrival), so even the
    smallest load sends a request: at 0.5 requests/s for 1 s, 61% of plain draws are empty."""
    for attempt in range(1000):
        rng = random.Random(seed + 7919 * attempt)
        times, t = [], rng.expovariate(rate)
        while t < duration_s:
            times.append(t)
            t += rng.expovariate(rate)
        if times:
            return times
    return [duration_s / 2]  # not reached in practice: 1,000 empty draws in a row


def prompts_build(*, count: int, prompt_tokens: int, prefix_tokens: int, share: float,
                  seed: int) -> tuple[list[list[int]], list[bool]]:
    """`count` prompts of random ids; a `share` of them (chosen at random) start with one
    common prefix of `prefix_tokens` (at most the prompt less one token)."""
    rng = random.Random(seed)
    prefix_len = min(prefix_tokens, prompt_tokens - 1)
    prefix = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(prefix_len)]
    prompts, shared = [], []
    for _ in range(count):
        is_shared = rng.random() < share
        head = prefix if is_shared else []
        tail = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(prompt_tokens - len(head))]
        prompts.append(head + tail)
        shared.append(is_shared)
    return prompts, shared


def _quantiles(values: list[float]) -> dict:
    from problems.arithmetic.serving_metrics import percentile

    if not values:
        return {"p50": None, "p99": None}
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99)}


def metrics_run(*, client, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Run the load on the shared engine and publish the dashboard as it goes."""
    from worker.engine import SamplingParams

    rate, duration = float(params["rate"]), float(params["duration_s"])
    prompt_len, output_len = int(params["prompt_tokens"]), int(params["output_tokens"])
    share, price = float(params["prefix_share"]), float(params["price_per_hour"])
    seed = random.randrange(2**31)
    arrivals = arrivals_draw(rate=rate, duration_s=duration, seed=seed)
    prompts, shared = prompts_build(count=len(arrivals), prompt_tokens=prompt_len,
                                    prefix_tokens=int(params["prefix_tokens"]), share=share,
                                    seed=seed + 1)
    prefix_len = min(int(params["prefix_tokens"]), prompt_len - 1)
    salt = f"metrics-{uuid.uuid4().hex}"  # this run's cache: cold at the start
    sampling = SamplingParams(temperature=0.8, top_p=0.95, seed=seed, max_tokens=output_len,
                              ignore_eos=True)
    stats0 = client.stats()
    block = int(stats0["block_size"])
    ctx.publish("started", {
        "requests": len(arrivals), "rate": rate, "duration_s": duration,
        "prompt_tokens": prompt_len, "output_tokens": output_len, "prefix_share": share,
        "prefix_tokens": prefix_len, "block_size": block, "price_per_hour": price,
        "tick_s": TICK_S, "window_s": WINDOW_S,
    })

    start = time.perf_counter()
    sent = 0
    requests: dict[str, dict] = {}  # request id -> what the run knows of it
    finished: list[dict] = []
    token_times: list[float] = []  # seconds from the start, every output token of this run
    ticks: list[dict] = []
    # (seconds, running + waiting) every GAUGE_SAMPLE_S while requests arrive: the engine's
    # gauges, time-averaged for Little's law.
    gauge_samples: list[tuple[float, int]] = []
    next_tick, next_gauge = TICK_S, 0.0
    cut_at: float | None = None
    last_prefix = (stats0["prefix_cache_queries"], stats0["prefix_cache_hits"])
    try:
        while sent < len(arrivals) or requests:
            now = time.perf_counter() - start
            while sent < len(arrivals) and arrivals[sent] <= now:
                request_id = client.add_request(prompts[sent], sampling, cache_salt=salt)
                requests[request_id] = {"sent_at": time.perf_counter() - start,
                                        "shared": shared[sent], "cached": None}
                sent += 1
            if "all" in ctx.cancels():
                raise RunCancelled(ctx.cancels()["all"], summary={
                    "sent": sent, "finished": len(finished)})
            ctx.check_time()
            if time.perf_counter() - ctx.started > ctx.time_limit_s - CUT_MARGIN_S:
                cut_at = time.perf_counter() - start
                client.close()  # the unfinished requests return their blocks at once
                break
            wait = min(0.02, max(0.0, (arrivals[sent] - now) if sent < len(arrivals) else 0.02))
            for event in client.events(timeout=max(wait, 0.001)):
                engine_error_raise(event)
                kind, request_id = event.get("type"), event.get("request_id")
                if kind == "admitted" and request_id in requests:
                    requests[request_id]["cached"] = int(event.get("cached_tokens", 0))
                elif kind == "token":
                    token_times.append(time.perf_counter() - start)
                elif kind == "finished" and request_id in requests:
                    info = requests.pop(request_id)
                    m = event.get("metrics", {})
                    itl = list(m.get("itl") or [])
                    finished.append({
                        "done_at": time.perf_counter() - start, "ttft": m.get("ttft"),
                        "tpot": sum(itl) / len(itl) if itl else None, "e2e": m.get("e2e"),
                        "queue_time": m.get("queue_time"), "shared": info["shared"],
                        "cached": info["cached"] or 0, "output_tokens":
                        int(event.get("num_output_tokens", 0)),
                    })
            now = time.perf_counter() - start
            if now < duration and now >= next_gauge:
                stats = client.stats()  # waits for the engine's lock, between two steps
                gauge_samples.append((now, int(stats["num_requests_running"])
                                      + int(stats["num_requests_waiting"])))
                next_gauge = now + GAUGE_SAMPLE_S
            if now >= next_tick:
                # One read of the engine's state per tick, as a Prometheus scrape samples
                # gauges: each read waits for the engine's lock, between two steps.
                stats = client.stats()
                tick = _tick(now=now, stats=stats, last_prefix=last_prefix, finished=finished,
                             token_times=token_times, sent=sent, price=price)
                last_prefix = (stats["prefix_cache_queries"], stats["prefix_cache_hits"])
                ticks.append(tick)
                ctx.publish("tick", tick)
                next_tick += TICK_S
    except BaseException:
        client.close()  # every request this run still has in the engine returns its blocks
        raise
    end = time.perf_counter() - start
    stats = client.stats()
    final = _tick(now=end, stats=stats, last_prefix=last_prefix, finished=finished,
                  token_times=token_times, sent=sent, price=price)
    ticks.append(final)
    ctx.publish("tick", final)  # the dashboard's last sample, even for a run under a tick
    summary = _summary(
        params=params, arrivals=arrivals, finished=finished, token_times=token_times,
        ticks=ticks, gauge_samples=gauge_samples, duration=duration, end=end, block=block,
        prefix_len=prefix_len, price=price, stats=stats)
    if cut_at is not None:
        summary["cut_short"] = {"at_s": cut_at, "sent": sent, "unfinished": sent - len(finished)}
        summary["note"] = (
            f"This load was cut short at {cut_at:.3g} s, {CUT_MARGIN_S:g} s before the run's "
            f"time limit: {sent} of {len(arrivals)} requests had been sent and "
            f"{sent - len(finished)} were still waiting or running (aborted, their blocks "
            "freed). This worker could not keep up with it, which is what a queue that only "
            "grows looks like on a dashboard. " + summary["note"])
    return RunOutcome(state="finished", summary=summary)


def _tick(*, now: float, stats: dict, last_prefix: tuple, finished: list[dict],
          token_times: list[float], sent: int, price: float) -> dict:
    """One dashboard sample: the engine's gauges and hit rate over the tick, and this run's
    latency percentiles over the trailing window."""
    queries = stats["prefix_cache_queries"] - last_prefix[0]
    hits = stats["prefix_cache_hits"] - last_prefix[1]
    recent = [r for r in finished if r["done_at"] >= now - WINDOW_S]
    tokens = sum(1 for t in token_times if t >= now - WINDOW_S)
    from problems.arithmetic.serving_metrics import measured_cost

    span = min(WINDOW_S, now) or 1e-9
    done = len(finished)
    return {
        "t": round(now, 3), "sent": sent, "finished": done,
        "waiting": int(stats["num_requests_waiting"]),
        "running": int(stats["num_requests_running"]),
        "kv_usage": float(stats["kv_cache_usage_perc"]),
        "hit_rate": hits / queries if queries > 0 else None,
        "tokens_per_s": tokens / span,
        "ttft": _quantiles([r["ttft"] for r in recent if r["ttft"] is not None]),
        "tpot": _quantiles([r["tpot"] for r in recent if r["tpot"] is not None]),
        "e2e": _quantiles([r["e2e"] for r in recent if r["e2e"] is not None]),
        # The worker priced as one rented GPU, paid for the whole run so far.
        "cost_per_request": measured_cost(price_per_hour=price, seconds=now, requests=done,
                                          output_tokens=0)["per_request"],
        "metrics_text": _metrics_lines(),
    }


def _summary(*, params: dict, arrivals: list[float], finished: list[dict],
             token_times: list[float], ticks: list[dict], gauge_samples: list[tuple],
             duration: float, end: float, block: int, prefix_len: int, price: float,
             stats: dict) -> dict:
    from problems.arithmetic.serving_metrics import measured_cost, percentile

    n = len(finished)
    offered = len(arrivals) / duration
    e2e = [r["e2e"] for r in finished if r["e2e"] is not None]
    mean_e2e = sum(e2e) / len(e2e) if e2e else 0.0
    predicted = metrics_prediction(
        rate=offered, output_tokens=int(params["output_tokens"]),
        prompt_tokens=int(params["prompt_tokens"]), prefix_share=float(params["prefix_share"]),
        prefix_tokens=prefix_len, block_size=block, mean_e2e_s=mean_e2e)
    in_window = sum(1 for t in token_times if t < duration)
    prompt_total = n * int(params["prompt_tokens"])
    cached_total = sum(r["cached"] for r in finished)
    in_system = gauges_time_average(gauge_samples, end=duration)
    measured = {"tokens_per_s": in_window / duration, "in_system": in_system,
                "hit_rate": cached_total / prompt_total if prompt_total else 0.0}

    def q(name: str, p: float) -> float | None:
        values = [r[name] for r in finished if r[name] is not None]
        return percentile(values, p) if values else None

    latency = {name: {"p50": q(name, 0.5), "p90": q(name, 0.9), "p99": q(name, 0.99),
                      "mean": (sum(v) / len(v)) if (v := [r[name] for r in finished
                                                           if r[name] is not None]) else None}
               for name in ("ttft", "tpot", "e2e", "queue_time")}
    output_total = sum(r["output_tokens"] for r in finished)
    cost = measured_cost(price_per_hour=price, seconds=end, requests=n,
                         output_tokens=output_total)
    return {
        "requests": len(arrivals), "finished": n, "offered_rate": offered,
        "duration_s": duration, "wall_s": end, "latency": latency,
        "predicted": predicted, "measured": measured,
        "cost": {"price_per_hour": price, "run_dollars": cost["dollars"],
                 "per_request": cost["per_request"],
                 "per_million_output_tokens": cost["per_million_output_tokens"]},
        "kv_blocks_free": int(stats["kv_blocks_free"]),
        "kv_blocks_total": int(stats["kv_blocks_total"]),
        "plots": _plots(ticks, predicted=predicted, measured=measured),
        "note": _note(predicted=predicted, measured=measured, block=block,
                      prefix_len=prefix_len, duration=duration, mean_e2e=mean_e2e),
        "metrics_text": _metrics_lines(),
    }


def gauges_time_average(samples: list[tuple[float, int]], *, end: float) -> float:
    """The time average over [first sample, end) of a gauge read at the given times, each value
    held until the next read (0 when there is no sample)."""
    if not samples:
        return 0.0
    area = sum(value * (t_next - t) for (t, value), (t_next, _) in
               zip(samples, samples[1:] + [(max(end, samples[-1][0]), 0)], strict=True))
    span = max(end, samples[-1][0]) - samples[0][0]
    return area / span if span > 0 else float(samples[0][1])


def _plots(ticks: list[dict], *, predicted: dict, measured: dict) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, Line, Plot, Series, plot_figure, plot_table

    xs = tuple(t["t"] for t in ticks)

    def line(name: str, values: list, scale: float = 1.0) -> Series:
        return Series(name, xs, tuple(v * scale if v is not None else float("nan")
                                      for v in values), markers=True)

    latency = Plot(
        title=f"Latency percentiles over the last {WINDOW_S:g} s of finished requests",
        x_title="Seconds into the run", y_title="ms",
        series=(line("TTFT p50", [t["ttft"]["p50"] for t in ticks], 1e3),
                line("TTFT p99", [t["ttft"]["p99"] for t in ticks], 1e3),
                line("TPOT p50", [t["tpot"]["p50"] for t in ticks], 1e3),
                line("TPOT p99", [t["tpot"]["p99"] for t in ticks], 1e3),
                line("E2E p50", [t["e2e"]["p50"] for t in ticks], 1e3),
                line("E2E p99", [t["e2e"]["p99"] for t in ticks], 1e3)))
    # One axis per unit: requests counted on one plot, shares of the cache on another (on a
    # shared axis a 0–100% line flattened the requests, which are a handful at most).
    requests = Plot(
        title="Requests in the engine",
        x_title="Seconds into the run", y_title="requests",
        series=(line("waiting (vllm:num_requests_waiting)", [t["waiting"] for t in ticks]),
                line("running (vllm:num_requests_running)", [t["running"] for t in ticks])))
    cache = Plot(
        title="The KV cache: blocks in use and prefix hits",
        x_title="Seconds into the run", y_title="%",
        series=(line("KV-cache usage, % of blocks (vllm:kv_cache_usage_perc)",
                     [t["kv_usage"] for t in ticks], 100),
                line("prefix-cache hit rate over the tick, % of prompt tokens",
                     [t["hit_rate"] for t in ticks], 100)))
    throughput = Plot(
        title=f"Output tokens per second over the last {WINDOW_S:g} s",
        x_title="Seconds into the run", y_title="tokens/s",
        series=(line("this run's output tokens/s", [t["tokens_per_s"] for t in ticks]),))
    # Three quantities in three units (tokens/s, requests, %): set each against its own
    # prediction, so one axis carries them all and 1 means "as predicted".
    quantities = (
        ("output tokens/s", "tokens_per_s", 1.0, "tokens/s", "rate × output length"),
        ("requests in the engine", "in_system", 1.0, "requests",
         "rate × mean E2E (Little's law)"),
        ("prefix-cache hit rate", "hit_rate", 100.0, "%", "shared share × cached blocks ÷ prompt"),
    )

    def ratio(key: str) -> float:
        return measured[key] / predicted[key] if predicted[key] else float("nan")

    def shown(value: float, scale: float, unit: str) -> str:
        return f"{value * scale:.3g}%" if unit == "%" else f"{value * scale:.3g} {unit}"

    compare = BarPlot(
        title="Measured ÷ predicted (1 = as predicted)",
        categories=tuple(q[0] for q in quantities), value_title="measured ÷ predicted",
        series=(BarSeries("measured ÷ predicted", tuple(ratio(q[1]) for q in quantities)),),
        lines=(Line(1.0, "as predicted"),),
        columns=(("measured", tuple(shown(measured[q[1]], q[2], q[3]) for q in quantities)),
                 ("predicted", tuple(shown(predicted[q[1]], q[2], q[3]) for q in quantities)),
                 ("prediction", tuple(q[4] for q in quantities))))
    return [{"figure": plot_figure(p), "table": plot_table(p)}
            for p in (latency, requests, cache, throughput, compare)]


def _note(*, predicted: dict, measured: dict, block: int, prefix_len: int, duration: float,
          mean_e2e: float) -> str:
    """Why what was measured differs from the prediction, in this run's numbers."""
    tp_ratio = (measured["tokens_per_s"] / predicted["tokens_per_s"]
                if predicted["tokens_per_s"] else 0.0)
    text = (f"Output came at {tp_ratio:.0%} of the predicted rate during the arrivals: the "
            f"first requests' tokens only start after their TTFT, and each request's last "
            f"tokens fall after the {duration:g} s window, which the prediction ignores "
            f"(about {mean_e2e:.2g} s of edge on each side of a {duration:g} s run). ")
    if tp_ratio < 0.7:
        text += ("That is well below: this worker could not keep up with the rate, so a queue "
                 "grew (see the waiting requests) and latency rose with it, which no "
                 "steady-state prediction allows for. ")
    if prefix_len < block:
        text += (f"The common prefix ({prefix_len} tokens) is shorter than one cache block "
                 f"({block} tokens), so nothing can hit: only whole blocks are cached. ")
    else:
        hit_diff = measured["hit_rate"] - predicted["hit_rate"]
        text += (f"The hit rate came out {abs(hit_diff) * 100:.2g} points "
                 f"{'below' if hit_diff < 0 else 'above'} the prediction: only whole "
                 f"{block}-token blocks are cached, the first shared request finds the cache "
                 "cold, a shared request admitted before the first one's prefill finished "
                 "finds nothing yet, and the draw of which requests share is random. ")
    text += ("The requests in the engine are the engine's gauges read every "
             f"{GAUGE_SAMPLE_S * 1e3:g} ms while requests arrive and averaged over that time; "
             "they include other visitors' requests and the start, when the engine is still "
             "filling, "
             "while Little's law holds exactly only for averages over a long steady run.")
    return text


# The /metrics families the dashboard reads, as the worker's registry serves them.
METRIC_NAMES = ("vllm:num_requests_running", "vllm:num_requests_waiting",
                "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total",
                "vllm:prefix_cache_hits_total", "vllm:generation_tokens_total",
                "vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_sum",
                "vllm:request_time_per_output_token_seconds_count",
                "vllm:e2e_request_latency_seconds_count")


def _metrics_lines() -> str:
    """This worker's /metrics text for the dashboard's families (no buckets): what a
    Prometheus scrape of the course's /metrics reads for this worker right now."""
    from worker.demo_engine import serving_metrics_text

    text = serving_metrics_text()
    if text is None:
        return ""
    lines = [line for line in text.decode().splitlines()
             if line and not line.startswith("#") and line.split("{")[0] in METRIC_NAMES]
    return "\n".join(lines)


from demos.runners import runner_register  # noqa: E402

runner_register("metrics", metrics_run, engine="shared", params=PARAMS)
