"""Demo `tail-latency` (problem 17): Poisson arrivals at a chosen fraction of this engine's
measured capacity, mixed prompt and output lengths, on an engine of the run's own with a small
KV pool (so memory pressure, and with it preemption, can happen).

1. Capacity: a burst of requests from the same mix, all queued at once; completed requests per
   second while saturated is the capacity μ.
2. Load: arrivals at λ = `utilization` × μ for `duration_s` seconds (the run waits for the last
   to finish). Each request's queue, prefill, decode and preempted time comes from its events.
3. Against a model of a batching server: M/M/c with c seats = capacity × the burst's measured
   mean service time (Little's law while saturated) and 1/μ = that mean service, at the run's
   arrival rate; and a replay of the run's own arrival times through c first-come seats with
   service times drawn from the burst's measured ones. p50, p90 and p99 of the response time
   (with tens of arrivals, the p99 is the slowest one or two).

Events, in order: started; capacity; tick (about once a second while requests run: the
percentiles so far and a histogram); then the task publishes finished with the summary (the
slowest requests broken down, plots included), or cancelled.
"""

import math
import random
import statistics
import time

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

# The mix: (prompt tokens, weight) and (output tokens, weight). Mostly short, a long tail.
PROMPT_MIX = ((16, 5), (48, 3), (160, 1), (400, 1))
OUTPUT_MIX = ((8, 4), (16, 3), (32, 2), (96, 1))
KV_BLOCKS = 64  # 1,024 tokens of KV: a handful of long requests fill it
BURST = 12
TICK_S = 1.0
SLOWEST = 5

PARAMS = ParamSchema(
    specs=(
        ParamSpec("utilization", "Load, as a fraction of measured capacity", "real", 0.8,
                  minimum=0.1, maximum=0.95),
        ParamSpec("duration_s", "Arrivals for", "real", 20.0, minimum=2.0, maximum=30.0,
                  unit="s"),
    ),
    # A guess at the tokens of work (the arrival rate is only known once capacity is
    # measured): the burst and about two arrivals a second, about a hundred tokens each.
    work=lambda v: int((BURST + 2 * v["duration_s"]) * 100),
)


def seats_measured(*, capacity: float, mean_service: float, arrival_rate: float) -> int:
    """Seats a batching engine behaves as (requests served at once): Little's law while the
    burst saturates it, capacity × mean service, rounded up, and at least one more than the
    arrivals need (a stable queue). 2.4 requests/s × 2.5 s of service each = 6 seats."""
    seats = max(1, math.ceil(capacity * mean_service - 1e-9))
    while arrival_rate * mean_service >= seats:
        seats += 1
    return seats


def replay_queue(*, arrivals: list[float], services: list[float], seats: int) -> list[float]:
    """Response times (seconds) of requests arriving at `arrivals` (sorted, seconds) with the
    given service times, served first come first served by `seats` servers: each starts when
    it arrives or when the earliest seat frees, whichever is later.
    Arrivals 0, 0, 0 with 1 s each on 2 seats: 1, 1, 2."""
    free = [0.0] * seats
    out = []
    for at, service in zip(arrivals, services, strict=True):
        seat = min(range(seats), key=lambda i: free[i])
        start = max(at, free[seat])
        free[seat] = start + service
        out.append(free[seat] - at)
    return out


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _pick(rng: random.Random, mix) -> int:  # noqa: ANN001
    return rng.choices([v for v, _ in mix], weights=[w for _, w in mix])[0]


def _request(rng: random.Random, vocab: int) -> tuple[list[int], int]:
    prompt = [rng.randrange(3, vocab) for _ in range(_pick(rng, PROMPT_MIX))]
    return prompt, _pick(rng, OUTPUT_MIX)


class _Tracker:
    """Per request: arrival, first scheduled, first token, finish, preempted time (seconds)."""

    def __init__(self) -> None:
        self.open: dict[str, dict] = {}
        self.done: list[dict] = []

    def add(self, request_id: str, *, prompt: int, output: int) -> None:
        self.open[request_id] = {"id": request_id, "prompt": prompt, "output": output,
                                 "arrived": time.perf_counter(), "preempted_s": 0.0,
                                 "preemptions": 0, "preempted_at": None, "first": False,
                                 "preempted_decode_s": 0.0}

    def see(self, event: dict, now: float) -> None:
        r = self.open.get(event.get("request_id"))
        if r is None:
            return
        kind = event["type"]
        if kind == "token":
            r["first"] = True
        elif kind == "preempted":
            r["preemptions"] += 1
            r["preempted_at"] = now
        elif kind == "admitted" and r["preempted_at"] is not None:
            r["preempted_s"] += now - r["preempted_at"]
            if r["first"]:  # preempted while decoding: not part of the TTFT
                r["preempted_decode_s"] += now - r["preempted_at"]
            r["preempted_at"] = None
        elif kind == "finished":
            m = event["metrics"]
            r.update(queue_s=m["queue_time"], prefill_s=m["prefill_time"], ttft_s=m["ttft"],
                     e2e_s=m["e2e"])
            r["decode_s"] = max(r["e2e_s"] - r["ttft_s"] - r["preempted_decode_s"], 0.0)
            self.done.append(self.open.pop(r["id"]))


def _drive(engine, tracker: _Tracker, ctx: RunContext, *, until_empty: bool) -> None:  # noqa: ANN001
    """One engine step (or a short sleep when nothing is running), events to the tracker."""
    if not engine.has_unfinished() and not engine.has_pending_events():
        if until_empty:
            return
        time.sleep(0.002)
        return
    events = engine.step()
    now = time.perf_counter()
    for e in events:
        tracker.see(e, now)


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    ordered = sorted(values)

    def q(p: float) -> float:  # nearest rank
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}


def tail_latency_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    from worker.cpu_threads import one_thread

    with one_thread():
        return _tail_latency_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _tail_latency_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    """Calibrate capacity, run Poisson load at the chosen utilisation, compare with M/M/c and
    a replay of the measured service times."""
    from problems.arithmetic.queueing import queue
    from worker.demo_engine import engine_build, engine_warm_up
    from worker.engine import SamplingParams

    rho, duration = float(params["utilization"]), float(params["duration_s"])
    device = str(machine.get("device", "cpu"))
    own = engine_build(machine["model_path"], device=device, num_kv_blocks=KV_BLOCKS)
    engine_warm_up(own)
    vocab = int(own.runner.config.vocab_size)
    rng = random.Random(17)
    ctx.publish("started", {"utilization": rho, "duration_s": duration, "device": device,
                            "kv_blocks": KV_BLOCKS, "prompt_mix": PROMPT_MIX,
                            "output_mix": OUTPUT_MIX})

    def params_for(n: int) -> SamplingParams:
        return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)

    # 1. Capacity: a burst, all at once; completions per second while saturated.
    calib = _Tracker()
    start = time.perf_counter()
    for _ in range(BURST):
        prompt, out = _request(rng, vocab)
        rid = own.add_request(prompt, params_for(out))
        calib.add(rid, prompt=len(prompt), output=out)
    while own.has_unfinished():
        _check(ctx)
        _drive(own, calib, ctx, until_empty=True)
    capacity = BURST / (time.perf_counter() - start)
    services = [r["e2e_s"] - r["queue_s"] for r in calib.done]
    mean_service = statistics.mean(services)
    lam = rho * capacity
    ctx.publish("capacity", {"requests_per_s": capacity, "arrival_rate": lam,
                             "mean_service_s": mean_service})

    # 2. Poisson arrivals for `duration` seconds.
    tracker = _Tracker()
    arrivals, t = [], 0.0
    while True:
        t += rng.expovariate(lam)
        if t > duration:
            break
        arrivals.append(t)
    if not arrivals:  # a short run at a low rate can draw none: keep the first arrival
        arrivals.append(min(t, duration))
    begin = time.perf_counter()
    next_tick = begin + TICK_S
    i = 0
    try:
        while i < len(arrivals) or own.has_unfinished():
            _check(ctx)
            now = time.perf_counter()
            while i < len(arrivals) and now - begin >= arrivals[i]:
                prompt, out = _request(rng, vocab)
                rid = own.add_request(prompt, params_for(out))
                tracker.add(rid, prompt=len(prompt), output=out)
                i += 1
            _drive(own, tracker, ctx, until_empty=False)
            if time.perf_counter() >= next_tick:
                next_tick += TICK_S
                ctx.publish("tick", _tick(tracker, elapsed=time.perf_counter() - begin,
                                          arrived=i, total=len(arrivals)))
    except RunCancelled:
        for rid in list(tracker.open):
            own.abort(rid)
        own.step()
        raise

    # 3. Against M/M/c with the measured seats and service, and a replay of this run's own
    # arrivals through those seats with the burst's measured service times.
    seats = seats_measured(capacity=capacity, mean_service=mean_service, arrival_rate=lam)
    mmc = queue(arrival_rate=lam, service_rate=1 / mean_service, servers=seats,
                percentile=0.9)
    replay = _percentiles(replay_queue(arrivals=arrivals,
                                       services=[rng.choice(services) for _ in arrivals],
                                       seats=seats))
    done = tracker.done
    e2e = _percentiles([r["e2e_s"] for r in done])
    ttft = _percentiles([r["ttft_s"] for r in done])
    slowest = sorted(done, key=lambda r: r["e2e_s"], reverse=True)[:SLOWEST]
    summary = {
        "utilization": rho, "capacity": capacity, "arrival_rate": lam, "requests": len(done),
        "mean_service_s": mean_service,
        "e2e": e2e, "ttft": ttft,
        "seats": seats,
        "predicted": {"p50": mmc["p50_response_seconds"],
                      "p90": mmc["percentile_response_seconds"],
                      "p99": mmc["p99_response_seconds"]},
        "replayed": replay,
        "preemptions": sum(r["preemptions"] for r in done),
        "slowest": [{k: r[k] for k in ("prompt", "output", "queue_s", "prefill_s", "decode_s",
                                       "preempted_s", "preemptions", "e2e_s")}
                    for r in slowest],
        "stats": {k: own.stats()[k] for k in ("kv_blocks_free", "kv_blocks_total")},
    }
    summary["plots"] = _plots(done, summary)
    summary["note"] = _note(summary)
    return RunOutcome(state="finished", summary=summary)


def _histogram(values: list[float], *, bins: int = 12) -> tuple[list[str], list[float]]:
    if not values:
        return [], []
    top = max(values)
    width = top / bins if top > 0 else 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v / width))] += 1
    labels = [f"{(j * width):.2f}–{((j + 1) * width):.2f}" for j in range(bins)]
    return labels, [float(c) for c in counts]


def _tick(tracker: _Tracker, *, elapsed: float, arrived: int, total: int) -> dict:
    from problems.plots import BarPlot, BarSeries, plot_figure, plot_table

    e2e = [r["e2e_s"] for r in tracker.done]
    ttft = [r["ttft_s"] for r in tracker.done]
    plots = []
    for values, title in ((ttft, "Time to first token so far"),
                          (e2e, "End-to-end latency so far")):
        labels, counts = _histogram(values)
        if labels:
            bar = BarPlot(title=title, categories=tuple(labels), value_title="requests",
                          category_title="seconds",
                          series=(BarSeries("finished requests", tuple(counts)),))
            plots.append({"figure": plot_figure(bar), "table": plot_table(bar)})
    return {"elapsed_s": elapsed, "arrived": arrived, "total": total,
            "finished": len(tracker.done), "running": len(tracker.open),
            "e2e": _percentiles(e2e), "ttft": _percentiles(ttft), "plots": plots}


def _plots(done: list[dict], s: dict) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, plot_figure, plot_table

    plots = []
    for key, title in (("ttft_s", "Time to first token"), ("e2e_s", "End-to-end latency")):
        labels, counts = _histogram([r[key] for r in done])
        plots.append(BarPlot(title=f"{title}: how many requests took how long",
                             categories=tuple(labels), value_title="requests",
                             category_title="seconds",
                             series=(BarSeries("finished requests", tuple(counts)),)))
    keys = ("p50", "p90", "p99")
    plots.append(BarPlot(
        title=f"Response time: measured against M/M/{s['seats']} and a replay on "
              f"{s['seats']} seats",
        categories=keys, value_title="seconds",
        series=(BarSeries("measured end to end", tuple(s["e2e"][k] for k in keys)),
                BarSeries(f"M/M/{s['seats']} (measured mean service)",
                          tuple(s["predicted"][k] for k in keys), outline=True),
                BarSeries("replay (measured service times)",
                          tuple(s["replayed"][k] for k in keys), outline=True))))
    slow = s["slowest"]
    cats = tuple(f"#{n + 1}: {r['prompt']}→{r['output']} tok" for n, r in enumerate(slow))
    plots.append(BarPlot(
        title="The slowest requests, broken down", categories=cats, value_title="seconds",
        mode="stack", horizontal=True,
        series=(BarSeries("queue", tuple(r["queue_s"] for r in slow)),
                BarSeries("prefill", tuple(r["prefill_s"] for r in slow)),
                BarSeries("decode", tuple(r["decode_s"] for r in slow)),
                BarSeries("preempted", tuple(r["preempted_s"] for r in slow)))))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in plots]


def _note(s: dict) -> str:
    e, p, r = s["e2e"], s["predicted"], s["replayed"]
    ratio = e["p99"] / e["p50"] if e["p50"] else 0.0
    slow = s["slowest"][0] if s["slowest"] else None
    seats = s["seats"]
    text = (f"{s['requests']} requests at {s['utilization']:.0%} of a measured capacity of "
            f"{s['capacity']:.3g} requests/s: p50 {e['p50']:.3g} s, p90 {e['p90']:.3g} s and "
            f"p99 {e['p99']:.3g} s end to end (p99 ÷ p50 = {ratio:.3g}). The engine batches, so "
            f"it is modelled as {seats} seat{'s' if seats != 1 else ''} (capacity × the "
            f"{s['mean_service_s']:.3g} s mean service measured in the burst), each request "
            f"holding one for that long: M/M/{seats} predicts p50 {p['p50']:.3g} s, p90 "
            f"{p['p90']:.3g} s and p99 {p['p99']:.3g} s; replaying this run's arrivals with "
            f"the burst's measured service times gives {r['p50']:.3g}, {r['p90']:.3g} and "
            f"{r['p99']:.3g} s. ")
    text += ("What is left between them: service times here follow each request's own output "
             f"length ({min(v for v, _ in OUTPUT_MIX)} to {max(v for v, _ in OUTPUT_MIX)} "
             "tokens), not an exponential; a step slows as the batch grows, so a seat is not a "
             "fixed server; and with "
             f"{s['requests']} requests the p99 is the slowest one or two, so read the p90. ")
    if slow:
        parts = {"queue": slow["queue_s"], "prefill": slow["prefill_s"],
                 "decode": slow["decode_s"], "preemption": slow["preempted_s"]}
        biggest = max(parts, key=parts.get)
        text += (f"The slowest request ({slow['prompt']} prompt tokens, {slow['output']} output "
                 f"tokens) spent most of its {slow['e2e_s']:.3g} s in {biggest}. ")
    text += (f"{s['preemptions']} preemption(s) happened in the {KV_BLOCKS}-block KV pool."
             if s["preemptions"] else
             f"No request was preempted in the {KV_BLOCKS}-block KV pool at this load.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("tail-latency", tail_latency_run, engine="own", params=PARAMS)
