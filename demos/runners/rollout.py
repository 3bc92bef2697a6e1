"""Demo `rollout` (problem 19): a canary of a new model version with gates and automatic
rollback, live on two versions of the shipped model.

An experiment on engines of its own (the experiments queue). The current version is the shipped
model as loaded; the candidate is a quantized copy (worker/quantization.py: INT8 per channel,
or INT4 with groups of 128, the embedding too) or the small draft model, a deliberately worse
release sharing the tokenizer. Each version gets its own engine; loading the candidate is
timed. Both are scored on held-out text first (worker/evaluation.py): bits per byte, and how
often the candidate's next-token choice agrees with the current model's. That is the offline
gate, checked before any request reaches the candidate: bits per byte up by more than the
allowance, or next-token agreement below the floor, rolls the candidate back with no traffic
served (a release that fails its evaluation set never meets a user).

Then traffic: requests (prompts cut from held-out documents the evaluation did not use) go to
the candidate with the canary probability, the rest to the current version, each served alone
(batch one) so both versions' latencies are measured alike; every canary prompt is mirrored to
the current version (untimed) and the two greedy answers compared. An injected
failure rate makes some canary requests fail, as a bad deployment's would. After each wave of
requests the gate checks its live rules in order, and the first that fails rolls the candidate
back: errors (a one-sided two-proportion z-test against the current version at the stated
confidence), latency (the candidate's p95 time to first token above the current version's by
more than the tolerance, once each has served 20 requests), mirrored answers (the share of the
current version's greedy tokens the candidate matched before their first difference, below the
floor). With every wave passed, the candidate is promoted.

Events, in order: started; version_loaded (current, then candidate); evaluated; window (after
each wave: per version requests, errors, latency percentiles; mirrored agreement; none when the
offline gate stops the candidate); gate (the decision and the rule); plot; then the task
publishes finished with the summary.
"""

import math
import time

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.rollout import canary_requests, z_of
from problems.arithmetic.units import number_format, percent_format
from problems.plots import (
    BarPlot,
    BarSeries,
    Line,
    Mark,
    Plot,
    Series,
    plot_figure,
    plot_table,
)

CANDIDATES = (("int8", "INT8 per channel (a faithful copy)"),
              ("int4", "INT4, groups of 128, embedding too (a heavy cut)"),
              ("draft", "the draft model (a much smaller, worse model)"))
EVAL_DOCUMENTS = 8
MAX_TOKENS = 12
PROMPT_TOKENS = 16
WAVE = 8
CONFIDENCE = 0.95
POWER = 0.8
LATENCY_TOLERANCE = 1.0  # p95 may be up to twice the current version's
BPB_ALLOWANCE = 0.05  # bits per byte
AGREEMENT_FLOOR = 0.9
MIRROR_FLOOR = 0.5
MIN_CANARY = 4  # candidate requests before the live gates judge anything
# The p95 of fewer than 20 requests is just the slowest of them (nearest rank): one request
# slowed by a busy CPU would roll a release back. The latency rule waits for 20 on each side.
LATENCY_MIN_REQUESTS = 20

PARAMS = ParamSchema(
    specs=(
        ParamSpec("candidate", "Candidate version", "choice", "int8", choices=CANDIDATES),
        ParamSpec("canary_percent", "Canary share of traffic", "whole", 25, minimum=5,
                  maximum=50, unit="%"),
        ParamSpec("requests", "Requests to send", "whole", 48, minimum=16, maximum=64,
                  help="Each a short completion of a held-out text."),
        ParamSpec("inject_error_rate", "Failure rate injected into the candidate", "real", 0.0,
                  minimum=0.0, maximum=0.5, unit="fraction",
                  help="As a bad deployment would fail (0: none)."),
    ),
    work=lambda values: values["requests"] * (PROMPT_TOKENS + MAX_TOKENS) * 2,
)


def _stop_check(ctx: RunContext, done: dict) -> None:
    ctx.check_time()
    cancels = ctx.cancels()
    if "all" in cancels:
        raise RunCancelled(cancels["all"], summary=done)


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0–1) of `values`, nearest rank (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def baseline_rate_floor(*, baseline_errors: int, baseline_n: int) -> float:
    """The baseline error rate the gate's margin uses: at least one error in n + 1."""
    return max(baseline_errors, 1) / (baseline_n + 1)


def predicted_requests(*, baseline_errors: int, baseline_n: int, inject: float,
                       share: float) -> float | None:
    """Canary requests problem 19's formula needs to catch the injected failure rate with the
    gate's own baseline rate (floored as the gate floors it, so a clean baseline does not
    predict a sample of two or three): None when the injected rate is not above it."""
    base = baseline_rate_floor(baseline_errors=baseline_errors, baseline_n=baseline_n)
    if inject <= base:
        return None
    return canary_requests(p0=base, p1=inject, k=(1 - share) / share, confidence=CONFIDENCE,
                           power=POWER)


def error_threshold(*, baseline_errors: int, baseline_n: int, canary_n: int,
                    confidence: float = CONFIDENCE) -> float:
    """The candidate error rate above which the one-sided two-proportion z-test fires: the
    baseline's rate plus z × √(p(1 − p)(1/n_canary + 1/n_baseline)), with p the baseline's rate
    but at least one error in n + 1, so a clean baseline still leaves a margin."""
    if canary_n == 0 or baseline_n == 0:
        return 1.0
    p = baseline_rate_floor(baseline_errors=baseline_errors, baseline_n=baseline_n)
    return baseline_errors / baseline_n + z_of(confidence) * math.sqrt(
        p * (1 - p) * (1 / canary_n + 1 / baseline_n))


def quality_gate(quality: dict) -> tuple[str, str] | None:
    """The offline gate on the evaluation set, checked before any traffic: (rule, why) for the
    first failure, or None."""
    q = quality["candidate"]
    delta = q["bpb"] - quality["reference"]["bpb"]
    if delta > BPB_ALLOWANCE:
        return ("quality", f"bits per byte on the evaluation set rose by "
                f"{number_format(delta, digits=3)}, more than the "
                f"{number_format(BPB_ALLOWANCE)} allowed, so no request reached the candidate")
    if q["agreement"] < AGREEMENT_FLOOR:
        return ("quality", f"next-token agreement with the current model on the "
                f"evaluation set is {percent_format(q['agreement'])}, below "
                f"{percent_format(AGREEMENT_FLOOR)}, so no request reached the candidate")
    return None


def gate_check(*, stats: dict, mirror: dict) -> tuple[str, str] | None:
    """The first live rule that fails, as (rule, why), or None."""
    cur, cand = stats["current"], stats["candidate"]
    if cand["n"] >= 1:
        threshold = error_threshold(baseline_errors=cur["errors"], baseline_n=cur["n"],
                                    canary_n=cand["n"])
        rate = cand["errors"] / cand["n"]
        if cand["errors"] and rate > threshold:
            return ("errors", f"candidate error rate {percent_format(rate)} over "
                    f"{cand['n']} requests is above the gate's {percent_format(threshold)} "
                    f"(current {cur['errors']} of {cur['n']}, one-sided "
                    f"{percent_format(CONFIDENCE)})")
    if cand["n"] >= MIN_CANARY:
        served = list(cand["ttft"])
        if len(served) >= LATENCY_MIN_REQUESTS and len(cur["ttft"]) >= LATENCY_MIN_REQUESTS:
            c95, b95 = percentile(served, 0.95), percentile(cur["ttft"], 0.95)
            if c95 > b95 * (1 + LATENCY_TOLERANCE):
                return ("latency", f"candidate p95 time to first token "
                        f"{number_format(c95 * 1000)} ms is more than "
                        f"{number_format(1 + LATENCY_TOLERANCE)}× the current version's "
                        f"{number_format(b95 * 1000)} ms")
        if mirror["n"] >= MIN_CANARY and mirror["agreement"] < MIRROR_FLOOR:
            return ("mirrored answers", f"on mirrored prompts the candidate matched "
                    f"{percent_format(mirror['agreement'])} of the current version's greedy "
                    f"tokens before their first difference, below "
                    f"{percent_format(MIRROR_FLOOR)}")
    return None


def _candidate_build(engine, kind: str, machine: dict):  # noqa: ANN001, ANN202
    """The candidate's engine and facts: a quantized copy of the current model, or the draft."""
    from pathlib import Path

    from worker.demo_engine import engine_build
    from worker.quantization import model_quantize

    started = time.perf_counter()
    if kind == "draft":
        path = Path(__file__).resolve().parents[2] / "worker" / "models" / "course-lm-draft"
        candidate = engine_build(str(path), device=machine.get("device", "cpu"))
        if candidate.config.vocab_size != engine.config.vocab_size:
            raise ValueError("the draft model does not share this model's vocabulary")
        weight_bytes = sum(p.numel() * p.element_size()
                           for p in candidate.runner.model.parameters())
        name = "draft model"
    else:
        candidate = engine_build(machine["model_path"], device=machine.get("device", "cpu"))
        fmt, group = ("int8", 128) if kind == "int8" else ("int4", 128)
        quantized = model_quantize(engine.runner.model, format=fmt, group_size=group,
                                   quantize_embedding=kind == "int4")
        candidate.runner.model = quantized.model
        weight_bytes = quantized.model_bytes
        name = dict(CANDIDATES)[kind].split(" (")[0]
    return candidate, {"name": name, "weight_bytes": int(weight_bytes),
                       "load_seconds": time.perf_counter() - started}


def _serve(engine, prompt: list[int], sampling) -> dict:  # noqa: ANN001
    """One request alone on `engine`, to the end: its tokens and the engine's metrics. Alone,
    so both versions' latencies are measured the same way (batch one, nothing else running)."""
    request_id = engine.add_request(list(prompt), sampling)
    tokens: list[int] = []
    while engine.has_unfinished():
        for event in engine.step():
            if event.get("request_id") != request_id:
                continue
            if event["type"] == "token":
                tokens.append(event["token_id"])
            elif event["type"] == "finished":
                return {"tokens": tokens, "metrics": event["metrics"]}
    raise RuntimeError("the engine stopped before the request finished")


def rollout_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _rollout_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _rollout_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    import random

    from worker.engine import SamplingParams
    from worker.evaluation import documents_encode, heldout_texts, quality_versions

    kind = params["candidate"]
    share = params["canary_percent"] / 100
    total = params["requests"]
    inject = float(params["inject_error_rate"])
    ctx.publish("started", {"candidate": kind, "canary_share": share, "requests": total,
                            "inject_error_rate": inject, "wave": WAVE,
                            "at_ms": ctx.elapsed_ms()})
    current_bytes = sum(p.numel() * p.element_size() for p in engine.runner.model.parameters())
    ctx.publish("version_loaded", {"version": "current", "name": "shipped model (FP32)",
                                   "weight_bytes": int(current_bytes),
                                   "load_seconds": None, "at_ms": ctx.elapsed_ms()})
    candidate, facts = _candidate_build(engine, kind, machine)
    ctx.publish("version_loaded", {"version": "candidate", **facts, "at_ms": ctx.elapsed_ms()})
    _stop_check(ctx, {"stage": "loaded"})

    texts = heldout_texts()
    documents = documents_encode(engine.tokenizer, texts[:EVAL_DOCUMENTS])
    quality = quality_versions(reference=engine.runner.model, reference_config=engine.config,
                               candidate=candidate.runner.model,
                               candidate_config=candidate.config, documents=documents)
    ctx.publish("evaluated", {
        "documents": len(documents), "positions": quality["reference"]["positions"],
        "bpb_current": quality["reference"]["bpb"], "bpb_candidate": quality["candidate"]["bpb"],
        "agreement": quality["candidate"]["agreement"], "kl_mean": quality["candidate"]["kl_mean"],
        "at_ms": ctx.elapsed_ms()})

    offline = quality_gate(quality)
    decision = None if offline is None else {
        "decision": "rollback", "rule": offline[0], "why": offline[1]}

    prompts = []
    for text in texts[EVAL_DOCUMENTS:]:
        ids = engine.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) >= PROMPT_TOKENS:
            prompts.append([engine.tokenizer.bos_token_id, *ids[:PROMPT_TOKENS]])
    rng = random.Random(f"rollout-{kind}-{share}-{total}-{inject}")
    sampling = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    stats = {v: {"n": 0, "errors": 0, "ttft": [], "e2e": []} for v in ("current", "candidate")}
    mirror = {"n": 0, "matched": 0, "tokens": 0, "exact": 0, "agreement": 1.0}
    path = []  # candidate requests served → cumulative error rate and the gate's threshold
    sent = 0
    while sent < total and decision is None:
        wave = []
        for _ in range(min(WAVE, total - sent)):
            prompt = prompts[sent % len(prompts)]
            version = "candidate" if rng.random() < share else "current"
            failed = version == "candidate" and rng.random() < inject
            wave.append((prompt, version, failed))
            sent += 1
        answers: dict[str, dict] = {}
        for index, (prompt, version, failed) in enumerate(wave):
            if failed:
                continue
            _stop_check(ctx, {"stage": "traffic", "sent": sent})
            answers[f"{index}:{version}"] = _serve(
                candidate if version == "candidate" else engine, prompt, sampling)
            if version == "candidate":
                # The mirrored copy: the current version's answer to the same prompt, for
                # comparison only (its latency is not counted).
                answers[f"{index}:mirror"] = _serve(engine, prompt, sampling)
        for index, (_prompt, version, failed) in enumerate(wave):
            s = stats[version]
            s["n"] += 1
            if failed:
                s["errors"] += 1
            else:
                metrics = answers[f"{index}:{version}"]["metrics"]
                s["ttft"].append(metrics["ttft"])
                s["e2e"].append(metrics["e2e"])
                if version == "candidate":
                    mine = answers[f"{index}:candidate"]["tokens"]
                    theirs = answers[f"{index}:mirror"]["tokens"]
                    same = 0
                    for a, b in zip(mine, theirs, strict=False):
                        if a != b:
                            break
                        same += 1
                    mirror["n"] += 1
                    mirror["matched"] += same
                    mirror["tokens"] += max(len(theirs), 1)
                    mirror["exact"] += mine == theirs
                    mirror["agreement"] = mirror["matched"] / mirror["tokens"]
            if version == "candidate":
                c, b = stats["candidate"], stats["current"]
                path.append({"n": c["n"], "rate": c["errors"] / c["n"],
                             "threshold": error_threshold(baseline_errors=b["errors"],
                                                          baseline_n=b["n"], canary_n=c["n"])})
        ctx.publish("window", {
            "sent": sent, "of": total,
            "versions": {v: {"n": s["n"], "errors": s["errors"],
                             "ttft_p50": percentile(s["ttft"], 0.5),
                             "ttft_p95": percentile(s["ttft"], 0.95),
                             "ttft_p99": percentile(s["ttft"], 0.99),
                             "e2e_p50": percentile(s["e2e"], 0.5),
                             "e2e_p99": percentile(s["e2e"], 0.99)}
                         for v, s in stats.items()},
            "mirror": {k: mirror[k] for k in ("n", "exact", "agreement")},
            "at_ms": ctx.elapsed_ms()})
        fired = gate_check(stats=stats, mirror=mirror)
        if fired is not None:
            decision = {"decision": "rollback", "rule": fired[0], "why": fired[1]}
    if decision is None:
        decision = {"decision": "promote", "rule": "all gates passed",
                    "why": f"the candidate served {stats['candidate']['n']} requests with every "
                           "gate passing"}
    decision.update({"sent": sent, "candidate_requests": stats["candidate"]["n"],
                     "at_ms": ctx.elapsed_ms()})
    ctx.publish("gate", decision)

    predicted = None
    if inject > 0:
        predicted = predicted_requests(baseline_errors=stats["current"]["errors"],
                                       baseline_n=stats["current"]["n"], inject=inject,
                                       share=share)
    ctx.publish("plot", {"figures": rollout_plots(stats=stats, path=path, predicted=predicted,
                                                  decision=decision, quality=quality),
                         "at_ms": ctx.elapsed_ms()})
    return RunOutcome(state="finished", summary={
        "candidate": kind, "decision": decision["decision"], "rule": decision["rule"],
        "why": decision["why"], "requests": {v: s["n"] for v, s in stats.items()},
        "errors": {v: s["errors"] for v, s in stats.items()},
        "bpb": {"current": quality["reference"]["bpb"],
                "candidate": quality["candidate"]["bpb"]},
        "agreement": quality["candidate"]["agreement"],
        "mirror_agreement": mirror["agreement"],
        "predicted_requests": math.ceil(predicted) if predicted else None,
        "device": machine.get("device", "cpu"),
    })


def rollout_plots(*, stats: dict, path: list[dict], predicted: float | None, decision: dict,
                  quality: dict) -> list[dict]:
    """The closing figures: the candidate's error rate against the gate's threshold as its
    requests accumulate (with the arithmetic's predicted sample), and latency percentiles; or,
    when the offline gate stopped the candidate before any traffic, its evaluation scores."""
    if stats["candidate"]["n"] == 0 and stats["current"]["n"] == 0:
        return [quality_plot(quality=quality, decision=decision)]
    xs = tuple(float(p["n"]) for p in path) or (0.0,)
    marks = []
    if predicted is not None:
        marks.append(Mark(float(math.ceil(predicted)), "predicted sample"))
    if decision["decision"] == "rollback":
        marks.append(Mark(float(decision["candidate_requests"]),
                          f"rolled back ({decision['rule']})"))
    errors = Plot(
        title="Canary error rate against the gate's threshold",
        x_title="Candidate requests served", y_title="Error rate (fraction of candidate requests)",
        series=(Series("candidate error rate (measured)", xs,
                       tuple(p["rate"] for p in path) or (0.0,), markers=True),
                Series("rollback threshold at this sample", xs,
                       tuple(min(1.0, p["threshold"]) for p in path) or (1.0,), dash=True)),
        marks=tuple(marks))
    names = ("current", "candidate")
    latency = BarPlot(
        title="Time to first token by version (measured)", categories=("p50", "p95", "p99"),
        value_title="ms",
        series=tuple(BarSeries(f"{v} ({stats[v]['n']} requests)",
                               tuple(percentile(stats[v]["ttft"], q) * 1000
                                     for q in (0.5, 0.95, 0.99)))
                     for v in names))
    note = ("The threshold is the current version's error rate plus the test's margin at "
            "this sample: wide after a few requests, narrowing as they accumulate. ")
    if predicted is not None:
        note += (f"The arithmetic (problem 19's normal formula, uncorrected like the gate's "
                 f"z-test, at {percent_format(CONFIDENCE)} "
                 f"confidence and {percent_format(POWER)} power) predicts about "
                 f"{math.ceil(predicted)} canary requests to catch the injected rate; ")
        if decision["decision"] == "rollback" and decision["rule"] == "errors":
            note += (f"the gate fired after {decision['candidate_requests']}. They differ "
                     "because failures arrive at random, the formula is a normal "
                     "approximation that is rough at a handful of requests, the gate looks "
                     "again after every wave instead of once at a fixed sample (which lets it "
                     "fire sooner, and falsely more often), and the "
                     "prediction is the sample that catches the regression four times in five, "
                     "not the sample at which it happens to be caught this time.")
        else:
            note += ("the run ended before the error gate fired: fewer canary requests than "
                     "that, or the random failures came late.")
    else:
        note += "No failure was injected, so the error gate only guards against real failures."
    q = quality
    scored = number_format(q["candidate"]["bpb"], digits=4)
    quality_note = (f"On the evaluation set the candidate scored {scored} "
                    f"bits per byte against {number_format(q['reference']['bpb'], digits=4)}, "
                    f"agreeing with the current model's next token "
                    f"{percent_format(q['candidate']['agreement'])} of the time. Both versions "
                    "share this worker's CPU and each request runs alone (batch one), so the "
                    "latencies compare the two versions' own speed on a CPU, not a GPU's: a "
                    "quantized copy here computes in FP32 after reading its codes back, so it "
                    "is no faster; the smaller draft model is. Under real load, batching and "
                    "queueing add to both (problem 17). With a few dozen requests a version's "
                    "p99 is simply its slowest request or two.")
    return [
        {"figure": plot_figure(errors), "table": plot_table(errors), "note": note},
        {"figure": plot_figure(latency), "table": plot_table(latency), "note": quality_note},
    ]


def quality_plot(*, quality: dict, decision: dict) -> dict:
    """The evaluation set's bits per byte by version against the gate's allowance, with the
    next-token agreement and KL beside them in the table."""
    ref, cand = quality["reference"], quality["candidate"]
    limit = ref["bpb"] + BPB_ALLOWANCE
    figure = BarPlot(
        title="Evaluation set: bits per byte by version (measured)",
        categories=("current", "candidate"), value_title="Bits per byte",
        series=(BarSeries("bits per byte on held-out text", (ref["bpb"], cand["bpb"]),
                          labels=(number_format(ref["bpb"], digits=4),
                                  number_format(cand["bpb"], digits=4))),),
        lines=(Line(limit, f"gate: current + {number_format(BPB_ALLOWANCE)}"),),
        columns=(("Next-token agreement with the current model",
                  (percent_format(1.0), percent_format(cand["agreement"]))),
                 ("Mean KL from the current model (nats)",
                  ("0", number_format(cand["kl_mean"], digits=3)))))
    note = (f"The offline gate decided before any traffic: {decision['why']}. Its floor is "
            f"{percent_format(AGREEMENT_FLOOR)} agreement and "
            f"its allowance {number_format(BPB_ALLOWANCE)} bits per byte, both on "
            f"{ref['positions']:,} predicted tokens of held-out text the model never trained "
            "on. Bits per byte can barely move while agreement falls: a model can be almost as "
            "good at predicting text on average and still pick a different next token often, "
            "which users see as different answers. Pick the INT8 copy to watch the live gates.")
    return {"figure": plot_figure(figure), "table": plot_table(figure), "note": note}


from demos.runners import runner_register  # noqa: E402

runner_register("rollout", rollout_run, engine="own", params=PARAMS)
