"""Demo `speculative` (problem 10): speculative decoding on engines of the run's own.

1. A trace: one greedy answer with the chosen drafter (the course's small draft model, or
   prompt lookup, which needs no model) and γ = `draft_tokens`: each step's guesses, how many
   the target kept, and the token the target added (a replacement, or the bonus when all were
   kept).
2. Acceptance by position over a few prompts, against α^j with α the rate measured at the
   first position.
3. Speedup against γ (1 to `draft_tokens`), measured at batch 1 and at `large_batch` against
   the plain engine on the same prompts, beside Leviathan et al.'s formula with the measured α
   and the measured cost of a draft step.
4. Both drafters at batch 1 on a prompt that repeats itself, the case prompt lookup is built for
   (it pays off only when the answer repeats text already there).

Greedy throughout, so every speculative answer must equal the plain one (checked: `identical`).
Events, in order: started; trace; acceptance; speed (one per γ); compare; then the task
publishes finished with the summary (plots included), or cancelled.
"""

import statistics
import time
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

DRAFTERS = (("model", "a small draft model"), ("ngram", "prompt lookup (n-gram)"))
PROMPTS = (
    "Why is decode memory bound?",
    "What does the KV cache store for each token?",
    "How does continuous batching keep the GPU busy?",
    "Explain prefill and decode in two sentences.",
)
REPEATING = ("The block table maps logical blocks to physical blocks. "
             "The block table maps logical blocks to physical blocks, and the block table "
             "maps logical blocks to")
TRACE_STEPS_MAX = 16
# Below this acceptance the note says why prompt lookup's guesses were refused.
LOOKUP_LOW = 0.2
ROUNDS = 3

PARAMS = ParamSchema(
    specs=(
        ParamSpec("drafter", "Drafter", "choice", "model", choices=DRAFTERS),
        ParamSpec("draft_tokens", "Drafted tokens per step γ (largest measured)", "whole", 4,
                  minimum=1, maximum=4, unit="tokens"),
        ParamSpec("output_tokens", "Tokens generated per answer", "whole", 16, minimum=4,
                  maximum=32, unit="tokens"),
        ParamSpec("large_batch", "Large batch", "whole", 8, minimum=2, maximum=8,
                  unit="sequences", help="The second batch size the speedup is measured at."),
    ),
    # Tokens generated: the prompts twice, the draft alone, the comparison, and every round.
    work=lambda v: v["output_tokens"] * (
        2 * len(PROMPTS) + 6 + 2 * ROUNDS * v["draft_tokens"] * (1 + v["large_batch"])),
)


def _check(ctx: RunContext) -> None:
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])
    ctx.check_time()


def _generate(engine, prompts: list[str], params, ctx: RunContext) -> dict:  # noqa: ANN001
    """Run `prompts` to the end on `engine`, checking for cancel between steps: seconds from
    the first step to the last, each answer's token ids, the speculation events, the steps'
    forward seconds."""
    ids = [engine.add_request(p, params) for p in prompts]
    outputs = {i: [] for i in ids}
    spec, model_s, steps = [], 0.0, 0
    started = time.perf_counter()
    try:
        while engine.has_unfinished():
            _check(ctx)
            for event in engine.step():
                kind = event["type"]
                if kind == "token" and event["request_id"] in outputs:
                    outputs[event["request_id"]].append(event["token_id"])
                elif kind == "speculation":
                    spec.append(event)
                elif kind == "step":
                    model_s += event["model_seconds"]
                    steps += 1
    except RunCancelled:
        for request_id in ids:
            engine.abort(request_id)
        engine.step()
        raise
    return {"seconds": time.perf_counter() - started, "tokens": [outputs[i] for i in ids],
            "speculation": spec, "model_seconds": model_s, "steps": steps,
            "first_id": ids[0]}


def _engine(machine: dict, *, drafter: str, k: int):  # noqa: ANN202
    from worker.demo_engine import engine_build

    path = machine["model_path"]
    if drafter == "model":
        return engine_build(path, device=machine.get("device", "cpu"),
                            speculative_model=str(_draft_path(machine)),
                            num_speculative_tokens=k)
    return engine_build(path, device=machine.get("device", "cpu"), speculative_method="ngram",
                        num_speculative_tokens=k)


def _draft_path(machine: dict) -> Path:
    return Path(machine["model_path"]).parent / "course-lm-draft"


def speculative_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    from worker.cpu_threads import one_thread

    with one_thread():
        return _speculative_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _speculative_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    """Trace, acceptance by position, speedup against γ at two batch sizes, both drafters."""
    from problems.arithmetic.speculative import speedup_memory_bound
    from worker.demo_engine import engine_build, engine_warm_up
    from worker.engine import SamplingParams

    drafter, k_max = str(params["drafter"]), int(params["draft_tokens"])
    n_out, large = int(params["output_tokens"]), int(params["large_batch"])
    if drafter == "model" and not (_draft_path(machine) / "config.json").is_file():
        drafter = "ngram"  # another ENGINE_MODEL without the course's draft beside it
    greedy = SamplingParams(temperature=0, max_tokens=n_out, ignore_eos=True)
    ctx.publish("started", {"drafter": drafter, "draft_tokens": k_max, "output_tokens": n_out,
                            "large_batch": large, "device": str(machine.get("device", "cpu"))})
    engine_warm_up(engine)
    tokenizer = engine.tokenizer

    def text(token_id: int) -> str:
        return tokenizer.decode([token_id]) if tokenizer is not None else str(token_id)

    # 1. The trace, and 2. acceptance by position, on the engine with the largest γ.
    spec = _engine(machine, drafter=drafter, k=k_max)
    engine_warm_up(spec)
    first = _generate(spec, [PROMPTS[0]], greedy, ctx)
    trace = []
    for e in first["speculation"][:TRACE_STEPS_MAX]:
        kept = e["accepted"]
        trace.append({"drafts": [text(t) for t in e["drafts"]], "accepted": kept,
                      "token": text(e["token_id"]),
                      "bonus": bool(e["drafts"]) and kept == len(e["drafts"])})
    ctx.publish("trace", {"prompt": PROMPTS[0], "steps": trace})
    rest = _generate(spec, list(PROMPTS[1:]), greedy, ctx)
    after = spec.stats()
    drafted = after["spec_decode_num_drafts_by_position"]
    accepted = after["spec_decode_num_accepted_tokens_per_pos"]
    rates = [a / d if d else 0.0 for a, d in zip(accepted, drafted, strict=True)]
    alpha = rates[0] if rates else 0.0
    # A guess at position j is kept with α^j if each is kept independently with α.
    predicted = [alpha ** (j + 1) for j in range(k_max)]
    plain_all = _generate(engine, list(PROMPTS), greedy, ctx)
    identical = plain_all["tokens"] == first["tokens"] + rest["tokens"]
    ctx.publish("acceptance", {"measured": rates, "predicted": predicted, "alpha": alpha,
                               "drafted": drafted, "accepted": accepted,
                               "identical": identical})

    # The cost of a draft step against a target step, each alone at batch 1.
    c = 0.0
    if drafter == "model":
        draft_alone = engine_build(str(_draft_path(machine)), device=machine.get("device", "cpu"))
        engine_warm_up(draft_alone)
        t_draft = _generate(draft_alone, [PROMPTS[0]], greedy, ctx)
        t_plain = _generate(engine, [PROMPTS[0]], greedy, ctx)
        c = (t_draft["seconds"] / t_draft["steps"]) / (t_plain["seconds"] / t_plain["steps"])

    # 3. Speedup against γ at batch 1 and at the large batch.
    speeds = []
    for k in range(1, k_max + 1):
        spec_k = spec if k == k_max else _engine(machine, drafter=drafter, k=k)
        engine_warm_up(spec_k)
        row = {"k": k}
        for label, batch in (("one", 1), ("large", large)):
            prompts = [PROMPTS[i % len(PROMPTS)] for i in range(batch)]
            # Alternate plain and speculative runs and take medians: the machine is shared.
            plains, speds = [], []
            for _ in range(ROUNDS):
                plains.append(_generate(engine, prompts, greedy, ctx))
                speds.append(_generate(spec_k, prompts, greedy, ctx))
            plain_s = statistics.median(r["seconds"] for r in plains)
            sped_s = statistics.median(r["seconds"] for r in speds)
            row[f"speedup_{label}"] = plain_s / sped_s
            row[f"plain_step_ms_{label}"] = plain_s / plains[0]["steps"] * 1e3
            row[f"spec_step_ms_{label}"] = sped_s / speds[0]["steps"] * 1e3
            row[f"tokens_per_step_{label}"] = (batch * n_out) / speds[0]["steps"]
            identical = identical and speds[0]["tokens"] == plains[0]["tokens"]
            # The formula at the acceptance these very prompts had at the first position.
            firsts = [e["accepted"] > 0 for e in speds[0]["speculation"] if e["drafts"]]
            a1 = sum(firsts) / len(firsts) if firsts else 0.0
            row[f"alpha_{label}"] = a1
            row[f"predicted_{label}"] = speedup_memory_bound(acceptance=a1, draft_tokens=k,
                                                             draft_cost=c)
        speeds.append(row)
        ctx.publish("speed", row)

    # What the arithmetic says checking γ + 1 positions costs against a plain step here.
    verify_floor = {}
    try:
        from demos.runners.itl import verify_floor_ratio

        context = n_out / 2 + (statistics.mean(len(tokenizer.encode(p)) for p in PROMPTS)
                               if tokenizer is not None else 0)
        for label, batch in (("one", 1), ("large", large)):
            verify_floor[label] = verify_floor_ratio(machine=machine, batch=batch,
                                                     context_tokens=context, gamma=k_max)
    except (KeyError, ValueError):  # no measured rates, or no config.json to count from
        verify_floor = {}

    # 4. Both drafters on a prompt that repeats itself.
    compare = []
    plain_rep = _generate(engine, [REPEATING], greedy, ctx)
    for name in ("model", "ngram"):
        if name == "model" and not (_draft_path(machine) / "config.json").is_file():
            continue
        e = spec if name == drafter else _engine(machine, drafter=name, k=k_max)
        engine_warm_up(e)
        s0 = e.stats()
        run = _generate(e, [REPEATING], greedy, ctx)
        s1 = e.stats()
        d = s1["spec_decode_num_draft_tokens"] - s0["spec_decode_num_draft_tokens"]
        a = s1["spec_decode_num_accepted_tokens"] - s0["spec_decode_num_accepted_tokens"]
        compare.append({"drafter": name, "acceptance": a / d if d else 0.0,
                        "drafted": d, "speedup": plain_rep["seconds"] / run["seconds"],
                        "tokens_per_step": n_out / max(run["steps"], 1)})
        identical = identical and run["tokens"] == plain_rep["tokens"]
    ctx.publish("compare", {"prompt": REPEATING, "rows": compare})
    return RunOutcome(state="finished", summary={
        "drafter": drafter, "draft_tokens": k_max, "alpha": alpha, "draft_cost": c,
        "acceptance": rates, "predicted_acceptance": predicted, "speeds": speeds,
        "compare": compare, "identical": identical,
        "plots": _plots(rates, predicted, speeds, large=large),
        "verify_floor_ratio": verify_floor,
        "note": _note(alpha=alpha, c=c, speeds=speeds, large=large, drafter=drafter,
                      compare=compare, identical=identical, verify_floor=verify_floor,
                      rates=rates),
        "stats": {k: engine.stats()[k] for k in ("kv_blocks_free", "kv_blocks_total")},
    })


def _plots(rates: list[float], predicted: list[float], speeds: list[dict], *,
           large: int) -> list[dict]:
    from problems.plots import Plot, Series, plot_figure, plot_table

    positions = tuple(float(j + 1) for j in range(len(rates)))
    acceptance = Plot(
        title="Acceptance by draft position: measured against α^j",
        x_title="Position of the guess in its step (j)", y_title="Share kept (%)",
        series=(Series("measured: guesses kept at j (every earlier one kept too)", positions,
                       tuple(r * 100 for r in rates), markers=True),
                # What α^j assumes is the same at every j: the guess kept once j − 1 were.
                Series("measured: kept at j once j − 1 were kept", positions,
                       tuple(100 * r for r in _kept_given_previous(rates)), markers=True,
                       dash=True),
                Series("α^j with α measured at j = 1", positions,
                       tuple(p * 100 for p in predicted), dash=True, markers=True,
                       hollow=True)),
        x_integer=True)
    ks = tuple(float(r["k"]) for r in speeds)
    speed = Plot(
        title="Speedup against γ: measured at two batch sizes, and the formula",
        x_title="Drafted tokens per step γ", y_title="Speedup over plain decoding (×)",
        series=(Series("measured, batch 1", ks, tuple(r["speedup_one"] for r in speeds),
                       markers=True),
                Series(f"measured, batch {large}", ks,
                       tuple(r["speedup_large"] for r in speeds), markers=True),
                Series("formula, batch 1: E[tokens] ÷ (γc + 1), verification free", ks,
                       tuple(r["predicted_one"] for r in speeds), dash=True, markers=True,
                       hollow=True),
                Series(f"formula, batch {large}", ks,
                       tuple(r["predicted_large"] for r in speeds), dash=True, markers=True,
                       hollow=True),
                Series("no gain (1×)", (ks[0], ks[-1]), (1.0, 1.0), dash=True)))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (acceptance, speed)]


def _kept_given_previous(rates: list[float]) -> list[float]:
    """From the share of steps whose first j guesses were all kept (index j − 1), the share
    kept at j among the steps that reached j: 0.38, 0.36, 0.35 → 0.38, 0.947, 0.972 (NaN
    where no step reached j)."""
    out = []
    for j, rate in enumerate(rates):
        before = 1.0 if j == 0 else rates[j - 1]
        out.append(rate / before if before > 0 else float("nan"))
    return out


def _acceptance_words(*, rates: list[float], alpha: float) -> str:
    """Why the measured acceptance by position does or does not fall as α^j, in this run's
    numbers (empty with fewer than two positions or nothing kept)."""
    if len(rates) < 2 or alpha <= 0:
        return ""
    last = len(rates)
    given = _kept_given_previous(rates)[1:]
    later = [g for g in given if g == g]  # NaN: no step got that far
    if not later:
        return ""
    mean_later = sum(later) / len(later)
    text = (f"By position, {rates[-1]:.0%} of steps had all {last} guesses kept, where α^j "
            f"with α = {alpha:.0%} expects {alpha ** last:.0%}: ")
    if mean_later > alpha + 0.1:
        return text + (
            f"once a step's first guess was kept, each later one was kept {mean_later:.0%} of "
            "the time on average, not α. α^j treats every guess as a fresh coin toss; in fact "
            "the guesses of one step rise and fall together, because a draft model that "
            "matches the target's next token is usually on a stretch it can predict whole "
            "(a set phrase, text repeated from the prompt) and one that misses is lost for "
            "the step. So the curve falls less than α^j, and the speedup formula, which "
            "assumes α^j, undercounts the tokens a step yields on text like this. ")
    return text + (f"each later guess was kept {mean_later:.0%} of the time once the earlier "
                   "ones were, close to α, so the guesses behaved about as independent tosses. ")


def _note(*, alpha: float, c: float, speeds: list[dict], large: int, drafter: str,
          compare: list[dict], identical: bool, verify_floor: dict | None = None,
          rates: list[float] | None = None) -> str:
    """Why the measured speedups sit where they do against the formula, in this run's numbers.
    `verify_floor`: the arithmetic's floor for verifying γ + 1 positions over a plain step's,
    at batch 1 ("one") and at the large batch ("large"), on this machine's measured rates."""
    top = speeds[-1]
    verify = top["spec_step_ms_one"] / top["plain_step_ms_one"] if top["plain_step_ms_one"] else 0
    text = (f"Over the four prompts the target kept {alpha:.0%} of first guesses (α). "
            + _acceptance_words(rates=rates or [], alpha=alpha)
            + f"The speedups were timed on other runs, so the formula is fed each run's own "
            f"first-guess acceptance: at γ = {top['k']}, assuming verifying γ + 1 positions "
            f"costs one plain step, it predicts {top['predicted_one']:.3g}× at batch 1 (α = "
            f"{top['alpha_one']:.0%} on the batch-1 run's one prompt, against {alpha:.0%} over "
            f"all four) and {top['predicted_large']:.3g}× at batch {large} (α = "
            f"{top.get('alpha_large', top['alpha_one']):.0%}); measured: "
            f"{top['speedup_one']:.3g}× and {top['speedup_large']:.3g}×. ")
    text += (f"Here a speculative step (drafting included) took {verify:.3g}× a plain one at "
             f"batch 1{f', the draft model alone {c:.2g} of a target step' if c else ''}. ")
    if verify_floor:
        from problems.arithmetic.speculative import NEARLY_FREE

        one, big = verify_floor["one"], verify_floor["large"]
        text += (f"On this machine's measured rates the arithmetic puts verifying "
                 f"{top['k'] + 1} positions at {one:.3g}× a plain step's floor at batch 1 "
                 + ("(nearly free: the weights' reads set it, and the extra positions ride on "
                    "them)" if one <= NEARLY_FREE else
                    "(not nearly free: the matmuls' compute already weighs in)")
                 + f" and {big:.3g}× at batch {large}"
                 + (", where the matmuls' compute grows with every position. "
                    if big > NEARLY_FREE else ", still nearly free. "))
    text += ("What the measured step adds beyond that is what neither floor nor formula "
             "counts: every step's fixed costs (the host's work, a call for each kernel), "
             + ("paid again for each of the draft model's steps however small that model is"
                if drafter == "model" else "and the lookup's own work on the host")
             + ". On a GPU at batch 1 the "
             "step is memory-bound with fixed costs a small share, and the formula's "
             "assumption holds far better. ")
    ngram = next((r for r in compare if r["drafter"] == "ngram"), None)
    if ngram:
        text += (f"On the prompt that repeats itself, prompt lookup had its guesses kept "
                 f"{ngram['acceptance']:.0%} of the time at no drafting cost"
                 + ("" if drafter == "ngram" else ", against the draft model's "
                    f"{next((r['acceptance'] for r in compare if r['drafter'] == 'model'), 0):.0%}")
                 + ". ")
        if ngram["acceptance"] < LOOKUP_LOW:
            text += ("Its guesses are the tokens that followed an earlier occurrence of the "
                     "last few tokens, so they are kept only when the answer repeats text that "
                     "is already there; this small model's greedy answer mostly did not. ")
    text += ("Every speculative answer equalled the plain engine's, token for token."
             if identical else "Some speculative answer differed from the plain engine's: "
             "greedy near-ties can flip when the same step is computed in another batch shape.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("speculative", speculative_run, engine="own", params=PARAMS)
