"""Demo `fairness` (problem 21): a heavy tenant and one to three light tenants submit to the
engine, once under first come first served and once under the fair policy (the tenant with the
fewest running requests, then the fewest tokens served, is admitted next; preemption takes the
heaviest tenant's newest request). Per-tenant TTFT, tokens served over time, and the requests
refused by admission control when a per-tenant queue bound is set.

An experiment on engines of its own (the experiments queue), one per policy, with the same
workload: the heavy tenant queues a burst at the start; each light tenant sends its requests
one at a time, spread over the burst's lifetime. Every request has a random prompt and a fixed
output length (EOS ignored). A refused request (QueueFullError, what an API answers with 429)
is counted, not retried.

Events, in order: started; for each policy (FCFS first): request (one per finished request:
tenant, TTFT), refused (one per refusal), policy (per-tenant summary); the task then publishes
finished with the summary (plots: mean TTFT per tenant, every request's TTFT, tokens served
over time, and the light tenants' TTFT against the seat arithmetic; a note on why they differ).
"""

import random
import statistics
import time

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.units import seconds_format

POLICIES = ("fcfs", "fair")
PROMPT_TOKENS = 12

PARAMS = ParamSchema(
    specs=(
        ParamSpec("heavy_requests", "Heavy tenant's burst", "whole", 16, minimum=2, maximum=32,
                  unit="requests"),
        ParamSpec("light_tenants", "Light tenants", "whole", 2, minimum=1, maximum=3),
        ParamSpec("light_requests", "Requests per light tenant", "whole", 3, minimum=1,
                  maximum=8, help="Sent one at a time, spread over the burst."),
        ParamSpec("seats", "Seats (max_num_seqs)", "whole", 4, minimum=1, maximum=8,
                  unit="sequences"),
        ParamSpec("output_tokens", "Output per request", "whole", 24, minimum=4, maximum=64,
                  unit="tokens"),
        ParamSpec("queue_bound", "Queue bound per tenant (0 = none)", "whole", 0, minimum=0,
                  maximum=32, unit="requests",
                  help="Admission control: a tenant's request that finds this many of its own "
                       "already waiting is refused (429)."),
    ),
    work=lambda v: 2 * (v["heavy_requests"] + v["light_tenants"] * v["light_requests"])
    * (PROMPT_TOKENS + v["output_tokens"]),
)



def _ms(milliseconds: float) -> str:
    """A duration given in ms, as the notes print it: "572 ms", "1.31 s"."""
    return seconds_format(milliseconds / 1e3)

def arrivals(*, light_tenants: int, light_requests: int, heavy: int, seats: int,
             output_tokens: int) -> list[tuple[int, str]]:
    """(step, tenant) of each light request: spread evenly over the burst's lifetime."""
    lifetime = max(1, -(-heavy // seats)) * output_tokens
    spacing = max(1, lifetime // (light_requests + 1))
    return sorted((spacing * (j + 1) + k, f"light-{k + 1}")
                  for k in range(light_tenants) for j in range(light_requests))


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _run_policy(*, policy: str, machine: dict, params: dict, plan: list, vocab: int,
                ctx: RunContext) -> dict:
    from worker.demo_engine import engine_build, engine_warm_up
    from worker.engine import QueueFullError, SamplingParams

    seats, output = int(params["seats"]), int(params["output_tokens"])
    bound = int(params["queue_bound"]) or None
    engine = engine_build(machine["model_path"], device=machine.get("device", "cpu"),
                          max_num_seqs=seats, policy=policy)
    engine_warm_up(engine)  # its batch of four would trip a small bound: set the bound after
    engine.scheduler.max_queued_per_tenant = bound
    rng = random.Random(21)
    sampling = SamplingParams(temperature=0, max_tokens=output, ignore_eos=True)
    tenant_of: dict[str, str] = {}
    arrived_step: dict[str, int] = {}
    refused: dict[str, int] = {}

    def submit(tenant: str, step: int) -> None:
        prompt = [rng.randrange(3, vocab) for _ in range(PROMPT_TOKENS)]
        try:
            rid = engine.add_request(prompt, sampling, tenant=tenant)
        except QueueFullError as full:
            refused[tenant] = refused.get(tenant, 0) + 1
            ctx.publish("refused", {"policy": policy, "tenant": tenant, "step": step,
                                    "queued": full.queued, "limit": full.limit})
            return
        tenant_of[rid] = tenant
        arrived_step[rid] = step

    for _ in range(int(params["heavy_requests"])):
        submit("heavy", 0)
    pending = list(plan)
    start = time.perf_counter()
    step_index, done = 0, []
    served: dict[str, int] = {}
    timeline: list[dict] = []
    step_seconds: list[float] = []
    try:
        while engine.has_unfinished() or pending:
            _check(ctx)
            while pending and pending[0][0] <= step_index:
                submit(pending.pop(0)[1], step_index)
            events = engine.step()
            step_index += 1
            for e in events:
                if e["type"] == "token" and e["request_id"] in tenant_of:
                    tenant = tenant_of[e["request_id"]]
                    served[tenant] = served.get(tenant, 0) + 1
                elif e["type"] == "finished":
                    row = {"policy": policy, "tenant": tenant_of[e["request_id"]],
                           "ttft_ms": e["metrics"]["ttft"] * 1e3,
                           "arrived_step": arrived_step[e["request_id"]]}
                    done.append(row)
                    ctx.publish("request", row)
                elif e["type"] == "step":
                    step_seconds.append(e["seconds"])
            timeline.append({"t": time.perf_counter() - start, **served})
    except RunCancelled:
        for request_id in list(tenant_of):
            engine.abort(request_id)
        raise
    tenants = sorted({r["tenant"] for r in done} | set(refused), key=lambda t: (t != "heavy", t))
    per_tenant = {}
    for tenant in tenants:
        ttfts = [r["ttft_ms"] for r in done if r["tenant"] == tenant]
        per_tenant[tenant] = {
            "served": len(ttfts), "refused": refused.get(tenant, 0),
            "ttft_mean_ms": statistics.fmean(ttfts) if ttfts else 0.0,
            "ttft_max_ms": max(ttfts) if ttfts else 0.0,
            "tokens": served.get(tenant, 0),
        }
    summary = {"policy": policy, "tenants": per_tenant, "steps": step_index,
               "step_ms": statistics.median(step_seconds) * 1e3 if step_seconds else 0.0,
               "preemptions": engine.stats()["num_preemptions"],
               "refused": sum(refused.values()),
               "kv_blocks_free": engine.stats()["kv_blocks_free"],
               "kv_blocks_total": engine.stats()["kv_blocks_total"]}
    ctx.publish("policy", summary)
    return {"summary": summary, "requests": done, "timeline": timeline}


def fairness_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _fairness_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _fairness_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from problems.arithmetic.queueing import seat_waits_steps

    heavy, seats = int(params["heavy_requests"]), int(params["seats"])
    output = int(params["output_tokens"])
    plan = arrivals(light_tenants=int(params["light_tenants"]),
                    light_requests=int(params["light_requests"]), heavy=heavy, seats=seats,
                    output_tokens=output)
    ctx.publish("started", {"policies": list(POLICIES), "heavy_requests": heavy,
                            "light_tenants": int(params["light_tenants"]),
                            "light_requests": int(params["light_requests"]), "seats": seats,
                            "output_tokens": output, "queue_bound": int(params["queue_bound"]),
                            "arrivals": [{"step": s, "tenant": t} for s, t in plan]})
    vocab = int(engine.runner.config.vocab_size)
    runs = {p: _run_policy(policy=p, machine=machine, params=params, plan=plan, vocab=vocab,
                           ctx=ctx) for p in POLICIES}
    # A seat is held for the request's prefill step and its output steps after it.
    predicted = {}
    for policy in POLICIES:
        # The burst as admitted: requests refused by a queue bound never take a seat.
        accepted = runs[policy]["summary"]["tenants"]["heavy"]["served"]
        waits = seat_waits_steps(heavy=accepted, seats=seats, service_steps=output,
                                 arrivals=[s for s, _ in plan])
        step_ms = runs[policy]["summary"]["step_ms"]
        # TTFT = the wait for a seat plus the request's own prefill step.
        predicted[policy] = (statistics.fmean(waits[policy]) + 1) * step_ms if waits[policy] \
            else 0.0
    measured = {p: _light_mean(runs[p]["summary"]) for p in POLICIES}
    return RunOutcome(state="finished", summary={
        "policies": {p: runs[p]["summary"] for p in POLICIES},
        "light_ttft_measured_ms": measured, "light_ttft_predicted_ms": predicted,
        "plots": _plots(runs, measured=measured, predicted=predicted),
        "note": _note(runs, measured=measured, predicted=predicted,
                      bound=int(params["queue_bound"])),
    })


def _light_mean(summary: dict) -> float:
    rows = [(v["ttft_mean_ms"], v["served"]) for t, v in summary["tenants"].items()
            if t != "heavy" and v["served"]]
    total = sum(n for _, n in rows)
    return sum(m * n for m, n in rows) / total if total else 0.0


def _plots(runs: dict, *, measured: dict, predicted: dict) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

    tenants = list(runs["fcfs"]["summary"]["tenants"])
    ttft = BarPlot(
        title="Mean time to first token per tenant",
        categories=tuple(tenants), value_title="ms",
        series=tuple(BarSeries(p.upper() if p == "fcfs" else "fair",
                               tuple(runs[p]["summary"]["tenants"].get(t, {}).get(
                                   "ttft_mean_ms", float("nan")) for t in tenants))
                     for p in POLICIES))
    series = []
    for p in POLICIES:
        line = runs[p]["timeline"]
        for t in tenants:
            series.append(Series(f"{t} ({'FCFS' if p == 'fcfs' else 'fair'})",
                                 tuple(r["t"] for r in line),
                                 tuple(float(r.get(t, 0)) for r in line),
                                 dash=p == "fcfs"))
    tokens = Plot(title="Output tokens served per tenant over time",
                  x_title="Time since the burst (s)", y_title="Tokens served",
                  series=tuple(series))
    each = []
    for p in POLICIES:
        for t in tenants:
            rows = [r for r in runs[p]["requests"] if r["tenant"] == t]
            if rows:
                each.append(Series(f"{t} ({'FCFS' if p == 'fcfs' else 'fair'})",
                                   tuple(float(r["arrived_step"]) for r in rows),
                                   tuple(r["ttft_ms"] for r in rows), lines=False,
                                   markers=True, hollow=p == "fcfs"))
    spread = Plot(title="Every request's TTFT, by the step it arrived",
                  x_title="Arrival (engine step)", y_title="TTFT (ms)", series=tuple(each))
    compared = BarPlot(
        title="Light tenants' mean TTFT: measured against the seat arithmetic",
        categories=("FCFS", "fair"), value_title="ms",
        series=(BarSeries("measured", (measured["fcfs"], measured["fair"])),
                BarSeries("predicted (waves of seats × measured step)",
                          (predicted["fcfs"], predicted["fair"]), outline=True)))
    return [{"figure": plot_figure(p), "table": plot_table(p)}
            for p in (ttft, spread, tokens, compared)]


def _note(runs: dict, *, measured: dict, predicted: dict, bound: int) -> str:
    fcfs, fair = runs["fcfs"]["summary"], runs["fair"]["summary"]
    text = (f"The light tenants' requests waited {_ms(measured['fcfs'])} on average for their "
            f"first token under FCFS and {_ms(measured['fair'])} under the fair policy; the "
            f"seat arithmetic predicts {_ms(predicted['fcfs'])} and {_ms(predicted['fair'])} "
            "(under FCFS a late request waits for every earlier request to take a seat, wave by "
            "wave; under the fair policy it takes the next seat to free). ")
    text += ("They differ because the arithmetic holds each seat for exactly the output's "
             "steps at one median step time, while real steps vary (prefill steps are longer, "
             "steps get cheaper as the batch empties), seats free one at a time rather than in "
             "waves, and the light requests' own earlier requests hold seats too. ")
    if bound:
        light_refused = sum(v["refused"] for p in (fcfs, fair)
                            for t, v in p["tenants"].items() if t != "heavy")
        text += (f"With a queue bound of {bound} per tenant, FCFS refused {fcfs['refused']} "
                 f"requests and the fair run {fair['refused']}, "
                 + ("all of them the heavy tenant's: its burst hit its own bound, while the "
                    "light tenants never had that many waiting." if not light_refused else
                    f"{light_refused} of them light tenants' (a bound this small refuses even "
                    "a light tenant's second request while its first still waits)."))
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("fairness", fairness_run, engine="own", params=PARAMS)
