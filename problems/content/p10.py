"""Problem 10, when speculative decoding helps or hurts: expected tokens per target step and the
speedup against γ for an editable α and draft cost, the speedup against batch from the
roofline, and every figure the prose quotes, computed at render time by problems/arithmetic.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.speculative import (
    DRAFT_TOKENS_MAX,
    NEARLY_FREE,
    TREE_NODES_MAX,
    speculative,
    speedup_memory_bound,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import bytes_in, count_format, number_format, percent_format
from problems.arithmetic.wording import amount_phrase, count_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    bandwidth_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "speculative-plan"
PREFIX = "p10-spec"
GAMMA_PLOT_MAX = DRAFT_TOKENS_MAX // 4
# Leviathan et al., Table 2 (T5-XXL on TPU-v4, batch 1): a few rows as (task, draft, temp,
# γ, α, speed-up), and the bigram draft of section 4.
PAPER_ROWS = (("EnDe", "T5-small", 0, 7, 0.75, 3.4), ("EnDe", "T5-large", 0, 7, 0.82, 1.7),
              ("CNNDM", "T5-small", 1, 5, 0.53, 2.3))
BIGRAM = {"alpha": 0.2, "gamma": 3, "speedup": 1.25}
# Reported speedups (FACTS.md): Medusa-1 "over 2.2x" (arXiv 2401.10774); EAGLE "2.7x-3.5x"
# latency speedup on LLaMA2-Chat 70B (arXiv 2401.15077).
MEDUSA1_SPEEDUP = 2.2
EAGLE_SPEEDUP = (2.7, 3.5)
EAGLE_MODEL = "LLaMA2-Chat 70B"
PAPER_DRAFT_COST_MAX = 0.05  # "c ... always less than 0.05" for T5-small drafts


def _speculative(**inputs) -> Result:
    """`speculative` with the form's 0 for "a chain" turned into the default γ + 1."""
    return speculative(**{**inputs, "verify_tokens": inputs.get("verify_tokens") or None})


def gamma_plot(*, inputs: dict, result: Result) -> Plot:
    """Speedup against γ while verification is free, for the learner's α and two around it."""
    gammas = tuple(range(1, GAMMA_PLOT_MAX + 1))
    alphas = sorted({inputs["acceptance"], max(0.0, inputs["acceptance"] - 0.2),
                     min(0.95, inputs["acceptance"] + 0.2)})
    series = [Series(f"α = {number_format(a)}", gammas,
                     tuple(speedup_memory_bound(acceptance=a, draft_tokens=g,
                                                draft_cost=inputs["draft_cost"])
                           for g in gammas), markers=True, dash=a != inputs["acceptance"])
              for a in alphas]
    series.append(Series("No gain (1×)", (1, GAMMA_PLOT_MAX), (1.0, 1.0), dash=True))
    return Plot(title=f"Speedup against drafted tokens γ, draft cost c = "
                      f"{number_format(inputs['draft_cost'])}, verification free",
                x_title="Drafted tokens per step γ", y_title="Speedup (×)",
                series=tuple(series), marks=(Mark(inputs["draft_tokens"], "your γ"),))


BATCH_PLOT_MAX = 1_024  # the batch plot's right end when memory holds more (or nothing)


def batch_plot(*, inputs: dict, result: Result) -> Plot:
    """Speedup against batch from the roofline at the learner's γ, over the batches the GPU's
    memory holds (a batch that does not fit is no operating point); all up to 1,024 when none
    fits, as floors for the work the page's caution describes."""
    held = result["memory_batch"]
    top = min(BATCH_PLOT_MAX, held) if held >= 2 else BATCH_PLOT_MAX
    xs = sorted({*sweep_whole(1, top, count=16), inputs["batch"]})
    ys = []
    for b in xs:
        try:
            ys.append(_speculative(**{**inputs, "batch": b})["speedup"])
        except (ArithmeticError, ValueError):
            ys.append(float("nan"))
    marks = [Mark(inputs["batch"], "your batch")]
    if result["costly_batch"]:
        marks.append(Mark(result["costly_batch"], "verification no longer free"))
    if 1 <= held <= BATCH_PLOT_MAX:
        marks.append(Mark(held, "memory's limit"))
    return Plot(title=f"Speedup against batch at γ = {inputs['draft_tokens']}, "
                      f"α = {number_format(inputs['acceptance'])}",
                x_title="Batch (sequences)", y_title="Speedup over plain decoding (×)",
                x_log=True,
                series=(Series("Speedup", tuple(xs), tuple(ys), markers=True),
                        Series("No gain (1×)", (xs[0], xs[-1]), (1.0, 1.0), dash=True)),
                marks=tuple(marks))


INPUTS = (
    real_input("acceptance", "Acceptance rate α", unit="fraction", initial=0.7, api=0.7,
               maximum=1.0, help="The chance the target keeps each drafted token."),
    whole_input("draft_tokens", "Drafted tokens per step γ", unit="tokens", initial=4, api=4,
                maximum=DRAFT_TOKENS_MAX),
    real_input("draft_cost", "Draft step cost c", unit="× a plain target step", initial=0.05,
               api=0.05, maximum=1e3,
               help="One draft forward pass as a fraction of one plain target step: a few "
                    "hundredths for a small draft model, about 0 for prompt lookup."),
    model_input(initial="llama-3-8b", api="llama-3-8b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("batch", "Batch", unit="sequences", initial=1, api=1, maximum=USERS_MAX),
    whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                api=1_000, maximum=TOKENS_MAX),
    dtype_input(), kv_dtype_input(), mfu_input(initial=0.5, api=0.5), bandwidth_input(),
    *memory_inputs(),
    whole_input("verify_tokens", "Positions checked per sequence (a tree)", unit="tokens",
                initial=0, api=0, minimum=0, maximum=TREE_NODES_MAX,
                help="0 checks a chain of drafts, γ + 1 positions. A tree of candidates "
                     "(Medusa, EAGLE-2) checks every node in one pass: give the node count."),
)
TREE_EXAMPLE = 64  # tree nodes, an example of a tree verified in one pass (dozens of nodes)


def plan_compute(**inputs) -> Result:
    from problems.arithmetic.speculative import speculative_plan

    return speculative_plan(**{**inputs, "verify_tokens": inputs.get("verify_tokens") or None})


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Speculative decoding: when it pays",
    explanation=("Expected tokens per target step (1 − α^(γ+1)) ÷ (1 − α), the cost of γ "
                 "draft steps and one verification step, and the speedup: against γ while "
                 "verification costs what a plain step does (the paper's assumption), and "
                 "against the batch with the verification step costed as a roofline bound."),
    inputs=INPUTS,
    compute=plan_compute,
    plots=lambda *, inputs, result: (gamma_plot(inputs=inputs, result=result),
                                     batch_plot(inputs=inputs, result=result)),
    order=71,
    api_path="/speculative-plan",
    api_summary="Speculative decoding: best γ, speedup at a batch, where it stops paying",
))

SOURCES: list[tuple[str, str]] = [
    ("Leviathan, Kalman and Matias, 'Fast Inference from Transformers via Speculative "
     "Decoding' (ICML 2023: eq. 1, Theorem 3.8, Corollary 3.9, Table 2)",
     "https://arxiv.org/abs/2211.17192"),
    ("Chen et al., 'Accelerating Large Language Model Decoding with Speculative Sampling' "
     "(DeepMind, the same acceptance rule, Chinchilla 70B)", "https://arxiv.org/abs/2302.01318"),
    ("Li et al., 'EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty' "
     "(draft head on the target's features; its speedups on LLaMA2-Chat 70B)",
     "https://arxiv.org/abs/2401.15077"),
    ("Cai et al., 'Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding "
     "Heads' (ICML 2024: extra heads, tree attention; Medusa-1's speedup; §2.3.1 typical "
     "acceptance, a threshold on the original model's probability with the first token taken "
     "greedily; Appendix A: no exact match to the model's distribution is sought; rejection "
     "sampling as the distribution-preserving alternative)", "https://arxiv.org/abs/2401.10774"),
    ("Saxena, 'Prompt Lookup Decoding' (n-gram drafts from the prompt, no draft model)",
     "https://github.com/apoorvumang/prompt-lookup-decoding"),
    ("DeepSeek-AI, 'DeepSeek-V3 Technical Report' (a multi-token prediction module, reused for "
     "speculative decoding)", "https://arxiv.org/abs/2412.19437"),
    ("vLLM documentation: speculative decoding (draft models, n-gram, EAGLE, MTP; acceptance "
     "metrics; 'Lossless guarantees of speculative decoding': theoretically lossless up to the "
     "precision limits of hardware numerics, with batch shape and floating-point effects able "
     "to change outputs)", "https://docs.vllm.ai/en/latest/features/spec_decode.html"),
    ("Li et al., 'EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees' (a "
     "draft tree of many candidate tokens verified in one pass, reshaped per context)",
     "https://arxiv.org/abs/2406.16858"),
    ("Miao et al., 'SpecInfer: Accelerating Generative LLM Serving with Tree-based Speculative "
     "Inference and Verification' (tree verification in one pass)",
     "https://arxiv.org/abs/2305.09781"),
    ("Liu et al., 'Optimizing Speculative Decoding for Serving Large Language Models Using "
     "Goodput' (SmartSpec: the speculation length chosen per step from the load)",
     "https://arxiv.org/abs/2406.14066"),
    ("Meta Llama 3 8B config.json (model dimensions)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, dense BF16 rate)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 10's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:
        inputs = CALCULATOR.defaults()
        r = plan_compute(**inputs)
    m, g, d = model_get(inputs["model"]), gpu_get(inputs["gpu"]), dtype_get(inputs["dtype"])
    alpha, gamma, cost = inputs["acceptance"], inputs["draft_tokens"], inputs["draft_cost"]
    # A batch well past the break-even one, to show the loss (memory permitting or not: the
    # figures are floors for the work).
    big = 2 * r["slower_batch"] if r["slower_batch"] else 0
    at_big = _speculative(**{**inputs, "batch": big}) if big else None
    try:  # the example tree's positions must fit the model's context beside the prompt
        tree = plan_compute(**{**inputs, "verify_tokens": max(TREE_EXAMPLE, gamma + 1)})
    except ArithmeticInputError:
        tree = None
    # Not one sequence fits beside the weights (Llama 3.1 405B on an L4): no batch to search.
    one = _speculative(**{**inputs, "batch": 1})
    positions = [{"j": j + 1, "p_text": percent_format(p)}
                 for j, p in enumerate(r["acceptance_by_position"])]
    return {
        "calculator_slug": SLUG, "calculator_prefix": PREFIX, "inputs_followed": followed,
        "model_name": m.name, "gpu_name": g.name, "dtype_name": d.name,
        "alpha_text": number_format(alpha), "gamma": gamma,
        "cost_text": number_format(cost),
        "batch": f"{inputs['batch']:,}", "context_tokens": f"{inputs['context_tokens']:,}",
        "expected_text": number_format(r["expected_tokens_per_step"]),
        "expected_n": amount_phrase(r["expected_tokens_per_step"], "tokens"),
        "context_tokens_n": count_phrase(inputs["context_tokens"], "token"),
        "step_cost_text": number_format(r["step_cost"]),
        "speedup_text": f"{number_format(r['speedup'])}×",
        "slowdown": r["speedup"] < 1,
        "paper_text": f"{number_format(r['memory_bound_speedup'])}×",
        "floor_text": f"{number_format(r['paper_floor_speedup'])}×",
        "alpha_above_cost": alpha > cost,
        "verify_ratio_text": number_format(r["verify_ratio"]),
        "verify_ratio_plural": "" if number_format(r["verify_ratio"]) == "1" else "s",
        "step_cost_plural": "" if number_format(r["step_cost"]) == "1" else "s",
        # At batch one verification often costs what a plain step does: then the speedup is
        # the paper's, and 'with verification free it would be' the same figure reads oddly.
        "verify_as_paper": number_format(r["speedup"]) == number_format(
            r["memory_bound_speedup"]),
        "verify_bound": r["verify_bound"],
        "best_gamma": r["best_gamma"],
        # At α = 1 the formula is 0 ÷ 0 (every guess kept); and a best γ at the search's end
        # is a bound, not an optimum, when the speedup still rises past it.
        "alpha_one": inputs["acceptance"] >= 1,
        "alpha_zero": inputs["acceptance"] <= 0,
        "best_at_limit": r["best_gamma"] == DRAFT_TOKENS_MAX,
        "best_text": f"{number_format(r['best_gamma_speedup'])}×",
        "positions": positions,
        "last_kept_text": positions[-1]["p_text"],
        "nearly_free_text": number_format(NEARLY_FREE),
        "costly_text": count_format(r["costly_batch"], "sequence") if r["costly_batch"]
        else "never",
        "slower_text": count_format(r["slower_batch"], "sequence") if r["slower_batch"]
        else "never",
        "slower_at_one": r["slower_batch"] == 1,
        "never_costly": not r["costly_batch"],
        "paper_below_one": r["memory_bound_speedup"] < 1,
        "never_slower": not r["slower_batch"],
        "big_batch": f"{big:,}" if big and r["slower_batch"] > 1 else "",
        "slower_fits": bool(_speculative(**{**inputs, "batch": r["slower_batch"]})["fits"])
        if r["slower_batch"] else True,
        "big_speedup_text": f"{number_format(at_big['speedup'])}×" if at_big else "",
        "big_verify_text": number_format(at_big["verify_ratio"]) if at_big else "",
        "big_verify_plural": "" if at_big and number_format(at_big["verify_ratio"]) == "1"
        else "s",
        "fits": r["fits"],
        "none_fit": not one["fits"],
        "one_needed_text": bytes_in(one["memory_needed_bytes"], "GB"),
        "one_usable_text": bytes_in(one["memory_usable_bytes"], "GB"),
        "paper_rows": [{"task": t, "draft": dr, "temp": te, "gamma": ga,
                        "alpha_text": number_format(a), "speedup_text": f"{number_format(s)}×"}
                       for t, dr, te, ga, a, s in PAPER_ROWS],
        "bigram_alpha_text": number_format(BIGRAM["alpha"]),
        "bigram_gamma": BIGRAM["gamma"],
        "bigram_text": f"{number_format(BIGRAM['speedup'])}×",
        "paper_cost_text": number_format(PAPER_DRAFT_COST_MAX),
        "medusa1_text": f"{number_format(MEDUSA1_SPEEDUP)}×",
        "eagle_low_text": f"{number_format(EAGLE_SPEEDUP[0])}×",
        "eagle_high_text": f"{number_format(EAGLE_SPEEDUP[1])}×",
        "eagle_model": EAGLE_MODEL,
        "no_gamma": r["best_gamma"] == 0,
        "memory_text": count_phrase(r["memory_batch"], "sequence") if r["memory_batch"]
        else "",
        "memory_binds": bool(r["memory_batch"]),
        "memory_none": r["memory_batch"] == 0 and not r["fits"] and inputs["batch"] == 1,
        "tree_nodes": f"{TREE_EXAMPLE:,}",
        "tree_fits": tree is not None,
        "tree_costly_text": count_phrase(tree["costly_batch"], "sequence")
        if tree and tree["costly_batch"] else "",
        "tree_slower_text": count_phrase(tree["slower_batch"], "sequence")
        if tree and tree["slower_batch"] else "",
        "chain_positions": gamma + 1,
        "tree_input": bool(inputs.get("verify_tokens")),
        "checked_text": f"{inputs.get('verify_tokens') or gamma + 1:,}",
    }
