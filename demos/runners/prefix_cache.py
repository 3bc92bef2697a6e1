"""Demo `prefix-cache` (problem 8): prefix caching for real, on one engine and then on a fleet of
engine replicas behind three routers.

Part one: requests that share one long system prompt, each with its own short question, run one
after another on an engine with prefix caching on and on one with it off; each request's cached
tokens (the engine's `admitted` event) and TTFT. Part two: several replicas of the shipped model
(worker/replicas.py steps them in turn, each on its own clock), each with a KV pool that holds
only a few applications' prefixes, serve a workload of several applications (each its own
system prompt, equally popular, arriving at random) routed round-robin, by prefix affinity, and
by prefix affinity with a load limit. Hit rate, TTFT and requests per replica for each policy,
against the hit rates problems/arithmetic/caching.py predicts.

Events, in order: started; request_done (part one, one per request, caching off then on);
policy_done (one per policy); plot; then the task publishes finished with the summary (the
plots and the note included). Importing this module imports no torch.
"""

import math
import random

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.caching import prefix_hit_rates, prefix_reusable_tokens
from problems.arithmetic.units import number_format, percent_format
from problems.arithmetic.wording import count_phrase
from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

BLOCK_SIZE = 16
USER_TOKENS = 8  # each request's own question after the system prompt
OUTPUT_TOKENS = 4
MAX_NUM_SEQS = 4
POLICIES = (("round-robin", "Round-robin"), ("affine", "Prefix-affine"),
            ("affine-limit", "Prefix-affine with a load limit"))
# Arrivals keep each replica about this busy under round-robin (measured miss time × rate).
TARGET_LOAD = 0.7
VOCAB_LOW = 5  # token ids below this are special in the shipped tokenizer

PARAMS = ParamSchema(
    specs=(
        ParamSpec("system_tokens", "System prompt length", "whole", 64, minimum=32,
                  maximum=512, unit="tokens",
                  help="Shared by every request of one application."),
        ParamSpec("requests", "Requests in part one", "whole", 4, minimum=2, maximum=16),
        ParamSpec("replicas", "Replicas in part two", "whole", 3, minimum=2, maximum=4),
        ParamSpec("applications", "Applications (system prompts)", "whole", 4, minimum=1,
                  maximum=12),
        ParamSpec("cached_prefixes", "Prefixes each replica's KV pool can keep", "whole", 2,
                  minimum=1, maximum=6),
        ParamSpec("fleet_requests", "Requests in part two, per policy", "whole", 30,
                  minimum=8, maximum=96),
        ParamSpec("load_limit", "Load limit (requests in flight at the home replica)",
                  "whole", 2, minimum=1, maximum=8,
                  help="Above it, the request goes to the least-loaded replica instead."),
        ParamSpec("seed", "Random seed", "whole", 0, minimum=0, maximum=10**6),
    ),
    # Every request's prompt and answer, in both parts (each policy runs the whole workload).
    work=lambda v: (v["requests"] * 2 + v["fleet_requests"] * len(POLICIES))
    * (v["system_tokens"] + USER_TOKENS + OUTPUT_TOKENS),
)


def _stop_check(ctx: RunContext, done: dict) -> None:
    ctx.check_time()
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"], summary=done)


def prefix_blocks(system_tokens: int) -> int:
    """KV blocks one cached system prompt fills (its full blocks)."""
    return system_tokens // BLOCK_SIZE


def pool_blocks(*, system_tokens: int, cached_prefixes: int) -> int:
    """A replica's KV pool: room for `cached_prefixes` prefixes plus each running request's own
    blocks (question, answer, the partial block the prefix ends in)."""
    own = math.ceil((system_tokens + USER_TOKENS + OUTPUT_TOKENS) / BLOCK_SIZE) \
        - prefix_blocks(system_tokens)
    return cached_prefixes * prefix_blocks(system_tokens) + MAX_NUM_SEQS * own


def route(policy: str, *, app: int, loads: list[int], counter: int, limit: int) -> int:
    """The replica a request goes to. Round-robin ignores the prefix; affinity sends each
    application to its home (its number modulo the replicas, standing in for consistent
    hashing); with a load limit, a home with `limit` or more requests in flight passes the
    request to the least-loaded replica (lowest number on a tie)."""
    n = len(loads)
    if policy == "round-robin":
        return counter % n
    home = app % n
    if policy == "affine-limit" and loads[home] >= limit:
        return min(range(n), key=lambda i: (loads[i], i))
    return home


def cold_misses(policy: str, *, apps: list[int], replicas: int) -> int | None:
    """Requests that are an application's first visit to its replica (requests), which miss
    whatever the steady state says: round-robin sends request k to replica k mod n, affinity
    application a to a mod n. With a load limit the replica depends on the timing, so None.
    Thirty requests over four applications, three replicas: affinity has 4 first visits (one
    per application), so at most 26 of 30 can hit; round-robin up to 4 × 3 = 12."""
    if policy not in ("round-robin", "affine"):
        return None
    seen = set()
    for k, app in enumerate(apps):
        seen.add((app, k % replicas if policy == "round-robin" else app % replicas))
    return len(seen)


def _prompts(rng: random.Random, *, count: int, length: int, vocab: int) -> list[list[int]]:
    return [[rng.randrange(VOCAB_LOW, vocab) for _ in range(length)] for _ in range(count)]


def _policy_run(cluster, *, policy: str, arrivals: list[float], work: list, systems: list,  # noqa: ANN001
                sampling, limit: int) -> list:  # noqa: ANN001
    """One policy's workload through the cluster; the requests' records in arrival order."""
    done: list = []
    counter = iter(range(len(arrivals)))

    def arrive(now: float, *, app: int, question: list[int]) -> None:
        loads = [r.outstanding for r in cluster.replicas]
        index = route(policy, app=app, loads=loads, counter=next(counter), limit=limit)
        done.append(cluster.submit(index, systems[app] + question, sampling, now=now,
                                   tag={"app": app}))

    for at, (app, question) in zip(arrivals, work, strict=True):
        cluster.at(at, lambda now, app=app, question=question: arrive(
            now, app=app, question=question))
    cluster.run()
    return done


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def prefix_cache_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _run(engine=engine, machine=machine, params=params, ctx=ctx)


def _engine(machine: dict, *, blocks: int, caching: bool):  # noqa: ANN202
    from worker.engine import Engine

    return Engine.from_pretrained(machine["model_path"], device=machine.get("device", "cpu"),
                                  block_size=BLOCK_SIZE, num_kv_blocks=blocks,
                                  max_num_seqs=MAX_NUM_SEQS, enable_prefix_caching=caching)


def _run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.engine import SamplingParams
    from worker.replicas import Cluster, Replica

    system = params["system_tokens"]
    vocab = engine.config.vocab_size
    rng = random.Random(params["seed"])
    sampling = SamplingParams(temperature=0, max_tokens=OUTPUT_TOKENS, ignore_eos=True)
    prompt_tokens = system + USER_TOKENS
    reusable = prefix_reusable_tokens(prefix_tokens=system, prompt_tokens=prompt_tokens,
                                      block_size=BLOCK_SIZE)
    ctx.publish("started", {
        "system_tokens": system, "user_tokens": USER_TOKENS, "block_size": BLOCK_SIZE,
        "reusable_tokens": reusable, "requests": params["requests"],
        "replicas": params["replicas"], "applications": params["applications"],
        "cached_prefixes": params["cached_prefixes"],
        "pool_blocks": pool_blocks(system_tokens=system,
                                   cached_prefixes=params["cached_prefixes"]),
        "device": machine.get("device", "cpu"), "at_ms": ctx.elapsed_ms()})

    # Part one: one engine, requests one at a time, caching off and on.
    shared = _prompts(rng, count=1, length=system, vocab=vocab)[0]
    questions = _prompts(rng, count=params["requests"], length=USER_TOKENS, vocab=vocab)
    part_one: dict[str, list[dict]] = {}
    for caching in (False, True):
        label = "on" if caching else "off"
        eng = _engine(machine, blocks=4 * math.ceil((prompt_tokens + OUTPUT_TOKENS)
                                                    / BLOCK_SIZE), caching=caching)
        cluster = Cluster([Replica(eng, name=label)],
                          check=lambda: _stop_check(ctx, {"part": 1}))
        rows: list[dict] = []
        for i, question in enumerate(questions):
            t = cluster.submit(0, shared + question, sampling, now=cluster.replicas[0].clock,
                               tag={"index": i})
            cluster.run()
            row = {"caching": label, "index": i, "prompt_tokens": t.prompt_tokens,
                   "cached_tokens": t.cached_tokens,
                   "predicted_cached": reusable if caching and i > 0 else 0,
                   "ttft_ms": (t.token_times[0] - t.arrival) * 1e3}
            rows.append(row)
            ctx.publish("request_done", {**row, "at_ms": ctx.elapsed_ms()})
        part_one[label] = rows
    miss_ms = sorted(r["ttft_ms"] for r in part_one["off"])[len(part_one["off"]) // 2]

    # Part two: replicas behind three routers.
    n, apps, limit = params["replicas"], params["applications"], params["load_limit"]
    blocks = pool_blocks(system_tokens=system, cached_prefixes=params["cached_prefixes"])
    systems = _prompts(rng, count=apps, length=system, vocab=vocab)
    count = params["fleet_requests"]
    # Service time of a miss (prefill plus the answer's steps) sets the arrival rate.
    service = miss_ms / 1e3 * 2
    gap = service / (n * TARGET_LOAD)
    work = [(rng.randrange(apps), _prompts(rng, count=1, length=USER_TOKENS, vocab=vocab)[0])
            for _ in range(count)]
    arrivals = []
    t = 0.0
    for _ in range(count):
        t += rng.expovariate(1 / gap)
        arrivals.append(t)
    predicted = prefix_hit_rates(capacity=params["cached_prefixes"], applications=apps,
                                 replicas=n)
    results = []
    for policy, name in POLICIES:
        replicas = [Replica(_engine(machine, blocks=blocks, caching=True), name=f"replica {i}")
                    for i in range(n)]
        cluster = Cluster(replicas, check=lambda: _stop_check(ctx, {"part": 2}))
        done = _policy_run(cluster, policy=policy, arrivals=arrivals, work=work,
                           systems=systems, sampling=sampling, limit=limit)
        ttfts = [(x.token_times[0] - x.arrival) * 1e3 for x in done]
        hit = sum(x.cached_tokens for x in done) / (reusable * len(done))
        served = [r.served for r in cluster.replicas]
        steady = {"round-robin": predicted["random"], "affine": predicted["affine"]}.get(policy)
        cold = cold_misses(policy, apps=[app for app, _ in work], replicas=n)
        # Every request but a first visit hits at the steady-state rate.
        row = {"policy": policy, "name": name, "hit_rate": hit,
               "predicted_steady": steady, "cold_misses": cold,
               "predicted_hit_rate": None if steady is None
               else steady * (count - cold) / count,
               "ttft_mean_ms": sum(ttfts) / len(ttfts),
               "ttft_p90_ms": _percentile(ttfts, 0.9),
               "served": served, "busiest_share": max(served) / count}
        results.append(row)
        ctx.publish("policy_done", {**row, "at_ms": ctx.elapsed_ms()})

    plots = prefix_cache_plots(part_one=part_one, results=results, predicted=predicted,
                               replicas=n, busiest=predicted["busiest_share"])
    note = prefix_cache_note(part_one=part_one, results=results, params=params,
                             reusable=reusable)
    ctx.publish("plot", {"figures": plots, "at_ms": ctx.elapsed_ms()})
    return RunOutcome(state="finished", summary={
        "reusable_tokens": reusable,
        "cached_tokens_on": [r["cached_tokens"] for r in part_one["on"]],
        "cached_tokens_off": [r["cached_tokens"] for r in part_one["off"]],
        "policies": [{k: r[k] for k in ("policy", "hit_rate", "predicted_hit_rate",
                                        "predicted_steady", "cold_misses",
                                        "ttft_mean_ms", "ttft_p90_ms", "served")}
                     for r in results],
        "plots": plots, "note": note, "device": machine.get("device", "cpu"),
    })


def prefix_cache_plots(*, part_one: dict, results: list[dict], predicted: dict,
                       replicas: int, busiest: float) -> list[dict]:
    """Part one's cached tokens and TTFT per request; part two's hit rate (measured and
    predicted), TTFT and requests per replica for each policy."""
    on, off = part_one["on"], part_one["off"]
    index = tuple(float(r["index"] + 1) for r in on)
    cached = Plot(
        title="Part one: cached tokens per request, measured and predicted",
        x_title="Request", y_title="Tokens from the cache",
        series=(Series("caching on, measured", index, tuple(float(r["cached_tokens"])
                                                             for r in on), markers=True),
                Series("caching on, predicted (full blocks)", index,
                       tuple(float(r["predicted_cached"]) for r in on), lines=False,
                       hollow=True),
                Series("caching off, measured", index,
                       tuple(float(r["cached_tokens"]) for r in off), markers=True,
                       dash=True)))
    ttft = Plot(
        title="Part one: time to first token per request",
        x_title="Request", y_title="TTFT (ms)",
        series=(Series("caching on", index, tuple(r["ttft_ms"] for r in on), markers=True),
                Series("caching off", index, tuple(r["ttft_ms"] for r in off), markers=True,
                       dash=True)))
    names = tuple(r["name"] for r in results)
    hits = BarPlot(
        title="Part two: prefix-cache hit rate by routing, measured and predicted",
        categories=names, value_title="Hit rate (% of reusable prefix tokens)",
        series=(BarSeries("measured", tuple(r["hit_rate"] * 100 for r in results),
                          labels=tuple(percent_format(r["hit_rate"]) for r in results)),
                BarSeries("predicted (steady state less cold misses)", tuple(
                    math.nan if r["predicted_hit_rate"] is None else r["predicted_hit_rate"] * 100
                    for r in results), outline=True)))
    latency = BarPlot(
        title="Part two: TTFT by routing", categories=names, value_title="TTFT (ms)",
        series=(BarSeries("mean", tuple(r["ttft_mean_ms"] for r in results)),
                BarSeries("p90", tuple(r["ttft_p90_ms"] for r in results))))
    load = BarPlot(
        title="Part two: requests served by each replica", categories=names,
        value_title="Requests",
        series=tuple(BarSeries(f"replica {i}", tuple(float(r["served"][i]) for r in results))
                     for i in range(replicas)),
        mode="stack")
    return [{"figure": plot_figure(p), "table": plot_table(p)}
            for p in (cached, ttft, hits, latency, load)]


def prefix_cache_note(*, part_one: dict, results: list[dict], params: dict,
                      reusable: int) -> str:
    """Why what was measured differs from what the arithmetic predicts, in words."""
    by = {r["policy"]: r for r in results}
    on = part_one["on"]
    exact = all(r["cached_tokens"] == r["predicted_cached"] for r in on)
    first = (f"Part one: {'every' if exact else 'not every'} request after the first reused "
             f"exactly the {reusable} tokens the block rule predicts (whole "
             f"{BLOCK_SIZE}-token blocks of the system prompt; the rest, and always the last "
             f"token, is computed). ")
    rr, af = by["round-robin"], by["affine"]
    return (first + f"Part two: round-robin reached {percent_format(rr['hit_rate'])} "
            f"against a predicted {percent_format(rr['predicted_hit_rate'])}, prefix-affine "
            f"{percent_format(af['hit_rate'])} against {percent_format(af['predicted_hit_rate'])}"
            f", and the load limit {percent_format(by['affine-limit']['hit_rate'])}. Each "
            "prediction is the steady-state rate (equally popular applications, a cache of "
            f"exactly {params['cached_prefixes']} idle prefixes) on every request except an "
            "application's first visit to a replica, which misses: "
            f"{count_phrase(rr['cold_misses'], 'cold miss')} under round-robin, "
            f"{count_phrase(af['cold_misses'], 'cold miss')} under affinity in this run. "
            "What is left between them: the random arrivals are "
            "not exactly equal across applications, and the pool also holds running requests' "
            "own blocks, which lets a little more or less than that stay cached. TTFT follows "
            "the hits, plus queueing wherever one replica takes more "
            f"than its share: the busiest took {number_format(af['busiest_share'] * 100)}% of "
            "requests under affinity.")


from demos.runners import runner_register  # noqa: E402

runner_register("prefix-cache", prefix_cache_run, engine="own", params=PARAMS)
