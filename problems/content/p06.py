"""Problem 6, continuous vs static batching: the calculator that compares the decode slots a
static batch wastes with continuous batching's full occupancy for an editable distribution of
output lengths, and every figure the prose quotes, from problems/arithmetic at render time.
"""

import functools

from django.http import HttpRequest

from problems.arithmetic.batching import (
    ANYSCALE_BENCHMARK,
    BATCH_SLOTS_MAX,
    ORCA_BENCHMARK,
    PUBLISHED_BATCHING_GAINS,
    occupancy_curve,
    static_vs_continuous,
)
from problems.arithmetic.inputs import TOKENS_MAX
from problems.arithmetic.units import count_format, number_format, percent_format
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import choice_input, whole_input
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "static-vs-continuous"
PREFIX = "p06-batching"
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The batches "what moves it" sets beside the chosen one: a larger one, or from it up a smaller.
OTHER_BATCH_LARGER = 256
OTHER_BATCH_SMALLER = 8
# The model answer's example: the calculator's starting inputs, uniform lengths.
ANSWER = {"batch": 32, "distribution": "uniform", "output_min": 16, "output_max": 1_024}


@functools.cache
def _at(**inputs) -> dict:
    return static_vs_continuous(**inputs).values


def gain_by_batch_plot(*, inputs: dict, result) -> Plot:
    """The throughput ratio as the batch grows, for both distributions at the same lengths."""
    xs = sorted(set(BATCHES) | {inputs["batch"]})
    series = []
    for dist, name in (("uniform", "uniform lengths"), ("exponential", "exponential tail")):
        values = []
        for x in xs:
            args = {**inputs, "batch": x, "distribution": dist}
            if dist == "exponential" and not (args["output_min"] <= args["output_mean"]
                                              <= args["output_max"]):
                args["output_mean"] = (args["output_min"] + args["output_max"]) // 2
            values.append(_at(**args)["throughput_ratio"])
        series.append(Series(name, tuple(xs), tuple(values), markers=True,
                             dash=dist != inputs["distribution"]))
    return Plot(title="Continuous over static: throughput ratio as the batch grows",
                x_title="Sequences per batch", y_title="Throughput ratio (×)", x_log=True,
                series=tuple(series), marks=(Mark(inputs["batch"], "your batch"),))


def convergence_plot(*, inputs: dict, result) -> Plot:
    """Static's useful share and the gain as the shortest output closes on the longest."""
    top = inputs["output_max"]
    xs = sweep_whole(1, top, count=24)
    rows = []
    for x in xs:
        args = {**inputs, "output_min": x}
        if args["distribution"] == "exponential":
            args["output_mean"] = max(x, min(args["output_mean"], top))
        rows.append(_at(**args))
    return Plot(title="As the spread of lengths closes, the two converge",
                x_title="Shortest output (tokens), the longest held fixed",
                y_title="Ratio (×) / share",
                series=(Series("throughput ratio, continuous ÷ static", tuple(xs),
                               tuple(r["throughput_ratio"] for r in rows)),
                        Series("static: useful share of slot-steps", tuple(xs),
                               tuple(r["static_useful_share"] for r in rows), dash=True)),
                marks=(Mark(inputs["output_min"], "your shortest"),))


INPUTS = (
    whole_input("batch", "Sequences per batch (static) = slots (continuous)", unit="sequences",
                initial=32, api=32, maximum=BATCH_SLOTS_MAX,
                help="How many sequences share each decode step."),
    choice_input("distribution", "Output lengths",
                 choices=(("uniform", "uniform between shortest and longest"),
                          ("exponential", "shortest + an exponential tail, cut at longest")),
                 initial="uniform", api="uniform"),
    whole_input("output_min", "Shortest output", unit="tokens", initial=16, api=16,
                maximum=TOKENS_MAX),
    whole_input("output_max", "Longest output (max_tokens)", unit="tokens", initial=1_024,
                api=1_024, maximum=TOKENS_MAX),
    whole_input("output_mean", "Mean output (exponential only, before the cut)", unit="tokens",
                initial=256, api=256, maximum=TOKENS_MAX),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Static vs continuous batching",
    explanation=("A static batch runs until its longest member ends, so its slots hold finished "
                 "sequences for the rest of the batch; continuous batching refills a freed slot "
                 "at the next step. The gain is the expected longest of the batch over the mean "
                 "length, at the same step time."),
    inputs=INPUTS,
    compute=lambda **k: static_vs_continuous(**k),
    plots=lambda *, inputs, result: (gain_by_batch_plot(inputs=inputs, result=result),
                                     convergence_plot(inputs=inputs, result=result)),
    order=120,
    api_path="/static-vs-continuous",
    api_summary="Static vs continuous batching: wasted slots, occupancy, throughput ratio",
))


OCCUPANCY_SLUG = "static-batch-occupancy"
OCCUPANCY_PREFIX = "p06-occupancy"


def occupancy_plot(*, inputs: dict, result) -> Plot:
    """A static batch's slots still busy at each step, against continuous batching's."""
    mean = inputs["output_mean"]
    if not inputs["output_min"] <= mean <= inputs["output_max"]:
        mean = (inputs["output_min"] + inputs["output_max"]) // 2
    xs, ys = occupancy_curve(distribution=inputs["distribution"],
                             output_min=inputs["output_min"], output_max=inputs["output_max"],
                             output_mean=mean)
    end = result["expected_longest_tokens"]
    return Plot(title="Slots doing useful work, step by step, in one batch's lifetime",
                x_title="Decode step", y_title="Share of the slots producing a token",
                series=(Series("static batch (expected)", tuple(xs), tuple(ys)),
                        Series("continuous (a waiting request refills each freed slot)",
                               (xs[0], max(xs[-1], end)), (1.0, 1.0), dash=True)),
                marks=(Mark(result["mean_output_tokens"], "mean length"),
                       Mark(end, f"the batch ends (longest of {inputs['batch']:,})")))


OCCUPANCY_CALCULATOR = calculator_register(Calculator(
    slug=OCCUPANCY_SLUG,
    title="A static batch's slots over its lifetime",
    explanation=("The share of a static batch's slots still producing tokens at each decode "
                 "step: every member runs until its own length, but the batch holds its slots "
                 "until the longest ends. The area under the curve is the useful work; the "
                 "rest of the rectangle is what continuous batching gives to waiting requests."),
    inputs=INPUTS,
    compute=lambda **k: static_vs_continuous(**k),
    plot=occupancy_plot,
    listed=False,
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


GAINS = PUBLISHED_BATCHING_GAINS


def _times(value: float) -> str:
    return f"{number_format(value)}×"


def _tokens(value: float) -> str:
    return count_format(value, "token")


def _waste_text(share: float) -> str:
    """A wasted share as a percentage; floating-point noise from a mean and a longest that are
    equal (a batch of one) reads as 0%, not as 6.88×10⁻¹³%."""
    return percent_format(0.0 if abs(share) < 1e-9 else share)


def context(*, request: HttpRequest) -> dict:
    """The figures problem 6's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request)
    batch = inputs["batch"]
    # The exponential set beside the uniform one takes the form's mean, held between the
    # shortest and the longest output; the page names the mean it really used.
    exp_mean = max(inputs["output_min"], min(inputs["output_mean"], inputs["output_max"]))
    exp = static_vs_continuous(batch=batch, distribution="exponential",
                               output_min=inputs["output_min"], output_max=inputs["output_max"],
                               output_mean=exp_mean)
    uni = static_vs_continuous(batch=batch, distribution="uniform",
                               output_min=inputs["output_min"], output_max=inputs["output_max"])
    # The batch set beside this one: a larger one below 256, a smaller one from 256 up (a
    # batch of 100,000 must not be told that "a larger batch" of 256 draws a longer longest).
    other_batch = OTHER_BATCH_LARGER if batch < OTHER_BATCH_LARGER else OTHER_BATCH_SMALLER
    big = static_vs_continuous(**{**inputs, "batch": other_batch})
    one = static_vs_continuous(**{**inputs, "batch": 1})
    return {
        "batch_draws_text": count_format(inputs["batch"], "draw"),
        "batch_slots_text": count_format(inputs["batch"], "slot"),
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_valid": valid,
        "uniform": inputs["distribution"] == "uniform",
        "batch": f"{batch:,}",
        "batch_text": count_format(batch, "sequence"),
        "output_min_text": _tokens(inputs["output_min"]),
        "output_max_text": _tokens(inputs["output_max"]),
        "output_mean_input_text": _tokens(inputs["output_mean"]),
        "mean_text": _tokens(r["mean_output_tokens"]),
        "longest_text": _tokens(r["expected_longest_tokens"]),
        "useful_text": percent_format(r["static_useful_share"]),
        "wasted_text": _waste_text(r["static_wasted_share"]),
        "ratio_text": f"{number_format(r['throughput_ratio'])}×",
        "held_text": _tokens(r["mean_output_held_tokens"]),
        "useful_tokens_text": _tokens(r["useful_tokens_per_batch"]),
        "slot_steps_text": f"{batch * r['expected_longest_tokens']:,.0f}",
        "uniform_ratio_text": f"{number_format(uni['throughput_ratio'])}×",
        "uniform_wasted_text": _waste_text(uni["static_wasted_share"]),
        "exp_ratio_text": f"{number_format(exp['throughput_ratio'])}×",
        "exp_mean_used_text": _tokens(exp_mean),
        # A mean at the shortest output leaves no tail: every length is the shortest.
        "exp_has_tail": exp_mean > inputs["output_min"],
        "exp_mean_clamped": exp_mean != inputs["output_mean"],
        "exp_wasted_text": _waste_text(exp["static_wasted_share"]),
        "exp_mean_text": _tokens(exp["mean_output_tokens"]),
        "exp_longest_text": _tokens(exp["expected_longest_tokens"]),
        "big_ratio_text": f"{number_format(big['throughput_ratio'])}×",
        "other_batch_text": count_format(other_batch, "sequence"),
        "other_batch_larger": other_batch > batch,
        # Every output the same length: nothing to spread, so nothing to wait for.
        "equal_lengths": inputs["output_min"] == inputs["output_max"],
        "one_ratio_text": f"{number_format(one['throughput_ratio'])}×",
        "answer_min_text": f"{ANSWER['output_min']:,}",
        "answer_max_text": f"{ANSWER['output_max']:,}",
        "answer_batch": f"{ANSWER['batch']:,}",
        "answer_ratio_text": number_format(
            static_vs_continuous(**ANSWER)["throughput_ratio"], digits=2),
        "token_states_text": (
            f"{percent_format(PUBLISHED_BATCHING_GAINS['token_states_low'])} to "
            f"{percent_format(PUBLISHED_BATCHING_GAINS['token_states_high'])}"),
        "occupancy_slug": OCCUPANCY_SLUG,
        "occupancy_prefix": OCCUPANCY_PREFIX,
        "orca_gain_text": _times(GAINS["orca_vs_fastertransformer"]),
        "orca_model_text": (f"{number_format(ORCA_BENCHMARK['parameters_billion'])}-billion-"
                            f"parameter {ORCA_BENCHMARK['model']}"),
        "anyscale_continuous_text": _times(GAINS["anyscale_continuous"]),
        "anyscale_vllm_text": _times(GAINS["anyscale_vllm"]),
        "anyscale_model": ANYSCALE_BENCHMARK["model"],
        "anyscale_gpu_text": (f"one {ANYSCALE_BENCHMARK['gpu']} with "
                              f"{ANYSCALE_BENCHMARK['gpu_memory_gb']} GB"),
        "vllm_range_text": (f"{number_format(PUBLISHED_BATCHING_GAINS['vllm_low'])}–"
                            f"{number_format(PUBLISHED_BATCHING_GAINS['vllm_high'])}×"),
    }


SOURCES: list[tuple[str, str]] = [
    ("NVIDIA Triton Inference Server docs, model configuration: Dynamic Batcher (requests "
     "combined into a batch, with preferred batch sizes and a maximum queue delay)",
     "https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/"
     "model_configuration.html#dynamic-batcher"),
    ("Yu et al., 'Orca: A Distributed Serving System for Transformer-Based Generative Models' "
     "(OSDI 2022: iteration-level scheduling and selective batching)",
     "https://www.usenix.org/conference/osdi22/presentation/yu"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (SOSP 2023: reserving max length wastes KV memory; paging lets more "
     "sequences share a batch)", "https://arxiv.org/abs/2309.06180"),
    ("Cade Daniel et al., Anyscale blog 'How continuous batching enables 23x throughput in LLM "
     "inference while reducing p50 latency' (2023-06-22): the gains over static batching with "
     "Hugging Face Pipelines from continuous batching (text-generation-inference, Ray Serve) "
     "and with vLLM; OPT-13B on one A100, output lengths exponential and capped",
     "https://www.anyscale.com/blog/continuous-batching-llm-inference"),
    ("David and Nagaraja, 'Order Statistics' (3rd ed., 2003): expected maximum of uniform and "
     "exponential samples (the exponential's is θ·H_B)", "https://doi.org/10.1002/0471722162"),
]
