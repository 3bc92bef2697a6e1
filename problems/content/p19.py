"""Problem 19, rolling out a new model or quantisation with rollback: the canary calculator
(requests and minutes a canary needs to catch a regression in error rate or p99 latency, at a
traffic share and a request rate), its plots, and every figure the prose quotes, all from
problems/arithmetic/rollout.py at render time.
"""

import math

from django.http import HttpRequest

from problems.arithmetic.catalog import DTYPES, gpu_get, model_get
from problems.arithmetic.memory import embedding_dtype_resolve, weight_bytes_model
from problems.arithmetic.rollout import (
    FEW_EVENTS,
    canary,
    canary_checked,
    canary_model,
    errors_rule_of_three,
    requests_rate_text,
    z_of,
)
from problems.arithmetic.units import (
    bytes_in,
    money_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import SAME_WITHIN, count_phrase, ratio_phrase, times_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import Input, inputs_normalise, real_input, whole_input
from problems.plots import Mark, Plot, Series, sweep_points

SLUG = "canary"
PREFIX = "p19-canary"
SHARES = tuple(min(0.5, s) for s in sweep_points(0.005, 0.5, count=24, log=True))
# The two-versions-on-one-GPU example of the prose: Llama 3.1 8B in BF16 and an FP8 candidate
# on one H100 SXM, with a stated runtime reserve (activations, CUDA context, graphs).
TWO_VERSIONS = ("llama-3.1-8b", "bf16", "fp8", "h100-sxm")
RESERVE_BYTES = 5e9
# The rule of three's confidence (−ln 0.05 ≈ 3) and the follow-up's count of gates.
RULE_OF_THREE_CONFIDENCE = 0.95
GATES_MANY = 10

INPUTS: tuple[Input, ...] = (
    real_input("request_rate", "Requests to the model", unit="requests/s", initial=20.0,
               api=20.0, maximum=1e7, help="The whole fleet's traffic, at the hours the canary "
               "runs."),
    real_input("canary_share", "Canary share of traffic", unit="fraction", initial=0.05,
               api=0.05, minimum=0.001, maximum=0.5),
    real_input("error_rate", "Current error rate", unit="fraction", initial=0.005, api=0.005,
               maximum=0.5, help="Failed or refused requests over all requests, measured on "
                                 "the current version."),
    real_input("error_rate_regressed", "Error rate the gate must catch", unit="fraction",
               initial=0.01, api=0.01, maximum=1.0,
               help="The smallest regression worth rolling back for."),
    real_input("p50_ms", "Current p50 latency", unit="ms", initial=300.0, api=300.0,
               maximum=1e7, help="Time to first token, say, of the current version."),
    real_input("p99_ms", "Current p99 latency", unit="ms", initial=1500.0, api=1500.0,
               maximum=1e7),
    real_input("p99_regression", "Slowdown the gate must catch", unit="×", initial=1.25,
               api=1.25, minimum=1.0, maximum=100.0,
               help="Every request this much slower (1.25: p99 up by a quarter)."),
    real_input("confidence", "Confidence (one-sided)", unit="fraction", initial=0.95,
               api=0.95, minimum=0.5, maximum=0.9999,
               help="1 − the chance of rolling back a good release."),
    real_input("power", "Power", unit="fraction", initial=0.8, api=0.8, minimum=0.5,
               maximum=0.9999, help="The chance of catching a bad one."),
    whole_input("replicas", "Replicas in the fleet", unit="replicas", initial=20, api=20,
                maximum=100_000),
    whole_input("gpus_per_replica", "GPUs per replica", unit="GPUs", initial=2, api=2,
                maximum=1_024),
    real_input("price_per_hour", "GPU price", unit="$ per GPU-hour", initial=2.5, api=2.5,
               minimum=0.01, maximum=1_000.0, help="A round assumption, not a quote."),
)


def _durations(inputs: dict, share: float) -> tuple[float, float]:
    k = canary_checked(**{**inputs, "canary_share": share})
    c = canary_model(**k)
    rate = c["canary_rate"]
    return math.ceil(c["n_errors_cc"]) / rate / 60, math.ceil(c["n_latency_cc"]) / rate / 60


def canary_plots(*, inputs: dict, result) -> tuple[Plot, ...]:  # noqa: ANN001
    rows = [_durations(inputs, s) for s in SHARES]
    shares = tuple(s * 100 for s in SHARES)
    duration = Plot(
        title="How long the canary must run against its share of traffic",
        x_title="Canary share of traffic (%)", y_title="Minutes to reach the sample",
        x_log=True, y_log=True,
        series=(Series("error-rate gate", shares, tuple(r[0] for r in rows)),
                Series("p99 gate", shares, tuple(r[1] for r in rows), dash=True)),
        marks=(Mark(inputs["canary_share"] * 100, "your share"),))
    p0 = inputs["error_rate"]
    top = min(1.0, max(p0 * 6, p0 + 0.02))
    targets = [t for t in sweep_points(p0 + (top - p0) / 40, top, count=24, log=False)]
    needed = []
    for t in targets:
        k = canary_checked(**{**inputs, "error_rate_regressed": t})
        needed.append(float(math.ceil(canary_model(**k)["n_errors_cc"])))
    size = Plot(
        title="Smaller regressions need far more requests",
        x_title="Error rate to catch (%)", y_title="Canary requests", y_log=True,
        series=(Series("requests for the error-rate gate", tuple(t * 100 for t in targets),
                       tuple(needed)),),
        marks=(Mark(inputs["error_rate_regressed"] * 100, "your target"),))
    return duration, size


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Canary: how many requests, and how long, to catch a regression",
    explanation=("A one-sided two-proportion test between the canary and the rest of the "
                 "fleet, sized by the normal approximation and then continuity-corrected, "
                 "since a canary sees only a handful of errors. A p99 slowdown is tested as a "
                 "rise in the share of requests slower than today's p99, with latencies taken "
                 "as lognormal. Change the share and watch the duration fall; the requests "
                 "needed stay close while the baseline is many times the canary, and grow as "
                 "the canary nears half the traffic."),
    inputs=INPUTS, compute=canary, plots=canary_plots, listed=False, order=190,
    api_path="/canary",
    api_summary="Canary sample size and duration for error-rate and p99 gates"))


SOURCES: list[tuple[str, str]] = [
    ("Kurtic et al., '\"Give Me BF16 or Give Me Death\"? Accuracy-Performance Trade-Offs in "
     "LLM Quantization', ACL 2025 (over 500,000 evaluations: FP8 W8A8 lossless, tuned INT8 "
     "W8A8 within 1–3%, INT4 weight-only competitive with 8-bit)",
     "https://arxiv.org/abs/2411.02355"),
    ("Dutta et al., 'Accuracy is Not All You Need', NeurIPS 2024 (flips between a compressed "
     "model and its baseline at equal accuracy; flips and KL divergence as the metrics, well "
     "correlated)", "https://arxiv.org/abs/2407.09141"),
    ("Google SRE Workbook, chapter 16, 'Canarying Releases'",
     "https://sre.google/workbook/canarying-releases/"),
    ("Fleiss, Levin and Paik, 'Statistical Methods for Rates and Proportions', 3rd ed., Wiley "
     "2003, ch. 4 (sample sizes for comparing two proportions)",
     "https://onlinelibrary.wiley.com/doi/book/10.1002/0471445428"),
    ("Fleiss, Tytun and Ury, 'A Simple Approximation for Calculating Sample Sizes for "
     "Comparing Independent Proportions', Biometrics 36(2), 1980 (the continuity-corrected "
     "size for unequal arms)", "https://doi.org/10.2307/2529990"),
    ("Hanley and Lippman-Hand, 'If Nothing Goes Wrong, Is Everything All Right?', JAMA 249(13), "
     "1983 (the rule of three)", "https://doi.org/10.1001/jama.1983.03330370053031"),
    ("Argo Rollouts, 'Analysis & Progressive Delivery' (automated canary analysis and "
     "rollback)", "https://argo-rollouts.readthedocs.io/en/stable/features/analysis/"),
    ("Wald, 'Sequential Tests of Statistical Hypotheses', Annals of Mathematical Statistics "
     "16(2), 1945 (a test built for looking again as data arrive)",
     "https://doi.org/10.1214/aoms/1177731118"),
    ("Kullback and Leibler, 'On Information and Sufficiency', Annals of Mathematical "
     "Statistics 22(1), 1951", "https://doi.org/10.1214/aoms/1177729694"),
    ("vLLM documentation, 'Automatic Prefix Caching' (blocks found by a hash of their tokens "
     "and their prefix, in one engine serving one model)",
     "https://docs.vllm.ai/en/latest/design/prefix_caching.html"),
    ("Meta Llama 3.1 8B config.json",
     "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet",
     "https://www.nvidia.com/en-us/data-center/h100/"),
]


def _two_versions() -> dict:
    """Two versions of one model on one GPU (the prose's capacity example): bytes each, and
    what is left of the GPU for KV when both are loaded."""
    model_id, old, new, gpu_id = TWO_VERSIONS
    m, g = model_get(model_id), gpu_get(gpu_id)
    sizes = {}
    for dtype in (old, new):
        d = DTYPES[dtype]
        e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=None)
        sizes[dtype] = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    total = g.memory_total_bytes - RESERVE_BYTES
    return {"two_model": m.name, "two_gpu": g.name,
            "two_old_text": bytes_in(sizes[old], "GB"), "two_new_text": bytes_in(sizes[new], "GB"),
            "two_old_name": DTYPES[old].name, "two_new_name": DTYPES[new].name,
            "two_gpu_memory_text": bytes_in(g.memory_total_bytes, "GB"),
            "two_gpu_memory_label": g.memory_label,
            "two_reserve_text": bytes_in(RESERVE_BYTES, "GB"),
            "two_free_one_text": bytes_in(total - sizes[old], "GB"),
            "two_free_both_text": bytes_in(total - sizes[old] - sizes[new], "GB"),
            "two_kv_loss_text": percent_format(sizes[new] / (total - sizes[old]))}


# A baseline this many times the canary's size adds little noise of its own (its variance is
# 1/k of the canary's); "barely moves" means within this share.
BASELINE_LARGE = 10
BARELY = 0.1


# Kurtic et al. (SOURCES): the size of their sweep and the loss they found for tuned INT8 W8A8.
KURTIC_EVALUATIONS = 500_000
KURTIC_INT8_LOSS = (0.01, 0.03)


def figures(inputs: dict) -> dict:
    """Every figure of the prose at the calculator's normalised `inputs`."""
    r = canary(**inputs)
    k = canary_checked(**inputs)
    c = canary_model(**k)
    small = canary_model(**{**k, "canary_share": 0.01})
    p0, p1 = k["error_rate"], k["error_rate_regressed"]
    zero_errors_n = math.ceil(3 / p0) if p0 > 0 else 0
    gates = GATES_MANY
    return {
        "kurtic_evaluations": f"{KURTIC_EVALUATIONS:,}",
        "kurtic_int8_loss": f"{percent_format(KURTIC_INT8_LOSS[0]).rstrip('%')}–"
                            f"{percent_format(KURTIC_INT8_LOSS[1])}",
        "rule_confidence_text": percent_format(RULE_OF_THREE_CONFIDENCE),
        "z99_text": number_format(z_of(0.99), digits=4),
        "false_alarm_one_in": number_format(1 / (1 - k["confidence"])),
        "gates_many": gates, "confidence_plain": number_format(k["confidence"], digits=4),
        "gates_false_text": percent_format(1 - k["confidence"] ** gates),
        **_two_versions(),
        "rate_text": requests_rate_text(k["request_rate"]),
        "share_text": percent_format(k["canary_share"]),
        "canary_rate_text": requests_rate_text(c["canary_rate"]),
        "p0_text": percent_format(p0), "p1_text": percent_format(p1),
        "p50_text": f"{number_format(k['p50_ms'])} ms",
        "p99_text": f"{number_format(k['p99_ms'])} ms",
        "slowdown_text": f"{number_format(k['p99_regression'])}×",
        "p99_new_text": f"{number_format(c['p99_regressed_ms'])} ms",
        "confidence_text": percent_format(k["confidence"]),
        "power_text": percent_format(k["power"]),
        "z_conf_text": number_format(c["z_confidence"], digits=4),
        "z_power_text": number_format(c["z_power"], digits=4),
        "k_text": number_format(c["k"]),
        "n_errors_text": f"{r['requests_errors']:,}",
        "n_errors_count": count_phrase(r["requests_errors"], "request"),
        "n_latency_count": count_phrase(r["requests_latency"], "request"),
        "n_errors_cc_count": count_phrase(r["requests_errors_corrected"], "request"),
        "n_latency_cc_count": count_phrase(r["requests_latency_corrected"], "request"),
        "n_latency_text": f"{r['requests_latency']:,}",
        "n_text": f"{r['requests']:,}", "binding": r["binding"],
        "n_count": count_phrase(r["requests"], "request"),
        "expected_errors_text": number_format(r["expected_errors"]),
        # "Only about 8.31 errors" is a handful; "about 168" is not, and then the continuity
        # correction is a small adjustment rather than the rescue of a lumpy count.
        "errors_few": r["expected_errors"] < FEW_EVENTS,
        "above_few": c["expected_above"] < FEW_EVENTS,
        "any_few": min(r["expected_errors"], c["expected_above"]) < FEW_EVENTS,
        "few_events_text": number_format(FEW_EVENTS),
        "expected_above_text": number_format(c["expected_above"]),
        "n_errors_cc_text": f"{r['requests_errors_corrected']:,}",
        "n_latency_cc_text": f"{r['requests_latency_corrected']:,}",
        "sigma_text": number_format(c["sigma"]),
        "above_text": percent_format(c["above_p99"]),
        "duration_text": seconds_format(r["seconds"]),
        "small_share_text": percent_format(0.01),
        # Already at the 1% the comparison uses: nothing to compare with.
        "share_is_small": abs(k["canary_share"] - 0.01) < 1e-9,
        "p0_zero": p0 == 0,
        "small_duration_text": seconds_format(small["seconds"]),
        "extra_errors_text": number_format(r["extra_errors"], digits=2),
        "canary_replicas_text": count_phrase(r["canary_replicas"], "added replica"),
        "replicas_text": count_phrase(k["replicas"], "replica"),
        "fleet_with_canary": f"{k['replicas'] + r['canary_replicas']:,}",
        "replica_share_text": percent_format(r["replica_share"]),
        # Whole replicas give the canary its share only when the router does not weight it.
        "replica_share_off": abs(r["replica_share"] - k["canary_share"])
        > SAME_WITHIN * k["canary_share"],
        "canary_is_one_replica": r["canary_replicas"] == 1,
        "canary_vs_blue_green": times_phrase(r["canary_gpu_cost"], r["blue_green_cost"]),
        # The baseline is k times the canary: only when k is large is its noise negligible.
        "k_times_text": times_phrase(c["k"], 1.0),
        "k_large": c["k"] >= BASELINE_LARGE,
        "k_same": abs(c["k"] - 1) <= SAME_WITHIN,
        # The requests needed at a 1% share against this share: equal only when k ≫ 1.
        "small_n_text": f"{math.ceil(small['n']):,}",
        "n_barely_moves": abs(math.ceil(c["n"]) / math.ceil(small["n"]) - 1) <= BARELY,
        "n_change_text": ratio_phrase(math.ceil(c["n"]), math.ceil(small["n"])),
        "small_extra_errors_text": number_format(small["extra_errors"], digits=2),
        "blue_green_gpus": f"{r['blue_green_gpus']:,}",
        "blue_green_cost_text": money_format(r["blue_green_cost"]),
        "canary_cost_text": money_format(r["canary_gpu_cost"]),
        "zero_errors_n_text": f"{zero_errors_n:,}", "zero_errors_n": zero_errors_n,
        "zero_errors_bound_text": percent_format(errors_rule_of_three(requests=zero_errors_n))
        if zero_errors_n else "",
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 19's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        inputs = CALCULATOR.defaults()
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "inputs_valid": state.result is not None}
