"""Problem 18, benchmarking serving engines fairly: one load point of a benchmark (requests,
how well they pin down a percentile, the client concurrency Little's law asks for, the rate a
capped client really offers). Every figure the prose shows is computed here at render time by
problems/arithmetic.
"""

import math

from django.http import HttpRequest

from problems.arithmetic.benchmarking import (
    CONCURRENCY_MAX,
    CONFIDENCE,
    DURATION_MAX,
    LATENCY_MAX,
    PERCENTILE_MIN,
    PRECISION_P99,
    RATE_MAX,
    Z_95,
    benchmark_plan,
    percentile_label,
    percentile_level,
    percentile_rank_interval,
    precision_default,
    requests_for_bounded_percentile,
    requests_for_percentile_precision,
    squared_format,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import number_format, percent_format, rate_format, seconds_format
from problems.arithmetic.wording import count_phrase, ordinal
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import inputs_normalise, real_input, whole_input
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "benchmark-plan"
PREFIX = "p18-plan"
# OpenAI's completions API defaults max_tokens to 16 (the course's /v1 follows it), while
# chat completions run to the model's limit unless told: one of the quiet ways two
# benchmarks end up generating different amounts of text.
COMPLETIONS_MAX_TOKENS_DEFAULT = 16
# The precision the model answer quotes for comparing two engines' p99: ±0.2 points.
P99_PRECISION = PRECISION_P99
# The percentile the plot's caption invites the learner to try, beside the page's p99.
DEEPER_Q = 0.999


def plan_plot(*, inputs: dict, result: Result) -> Plot:
    """Requests beyond the true percentile in a sample of n, with its 95% range, against n."""
    q = inputs["percentile_q"]
    top = max(10_000, int(result["requests"] * 4))
    xs = sorted({*sweep_whole(10, top, count=30), int(result["requests"])})
    mid, low, high = [], [], []
    for n in xs:
        beyond, lo, hi = percentile_rank_interval(requests=n, q=q)
        mid.append(beyond)
        low.append(max(lo, 0.0))
        high.append(hi)
    label = result["percentile_label"]
    return Plot(
        title=f"How many requests lie beyond the true {label} in a sample",
        x_title="Requests in the load point", y_title="Requests beyond it", x_log=True,
        y_log=True,
        series=(Series("Expected", tuple(xs), tuple(mid)),
                Series("95% range, low", tuple(xs), tuple(low), dash=True),
                Series("95% range, high", tuple(xs), tuple(high), dash=True)),
        marks=(Mark(result["requests"], "your load point"),
               Mark(requests_for_bounded_percentile(q), "range clears zero")))


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="One load point of a benchmark: enough requests, enough concurrency",
    explanation=("How many requests a load point sends, how many of them are expected to lie "
                 "beyond the true percentile (and its 95% range, from the binomial count), the "
                 "fewest requests for which that range's low end stays above zero, the requests "
                 "in flight the client must hold (Little's law) and the rate a client capped "
                 "below that really offers."),
    inputs=(
        real_input("request_rate", "Request rate", unit="requests/s", initial=4.0, api=4.0,
                   maximum=RATE_MAX),
        real_input("duration_s", "Duration of the load point", unit="s", initial=300.0,
                   api=300.0, maximum=DURATION_MAX),
        real_input("percentile_q", "Percentile", unit="fraction", initial=0.99, api=0.99,
                   minimum=PERCENTILE_MIN, maximum=0.9999,
                   help="0.99 for p99; from the median (0.5) up, the percentiles a latency "
                        "target names."),
        real_input("e2e_latency_s", "Mean end-to-end latency at this rate", unit="s",
                   initial=8.0, api=8.0, maximum=LATENCY_MAX,
                   help="From a first short run: a long answer streamed at the measured TPOT."),
        whole_input("client_concurrency", "Client's concurrency cap", unit="requests",
                    initial=16, api=16, maximum=CONCURRENCY_MAX,
                    help="The most requests the client keeps in flight (a connection pool, "
                         "--max-concurrency)."),
        whole_input("output_tokens", "Output per request", unit="tokens", initial=256,
                    api=256, maximum=10**9),
        real_input("precision", "Precision wanted for the percentile", unit="± quantile",
                   initial=None, api=None, minimum=0.00001, maximum=0.5, required=False,
                   help="Half-width of the 95% interval in quantile terms: 0.002 pins a p99 "
                        "between p98.8 and p99.2. Blank: a fifth of the share of requests "
                        "beyond the percentile, as 0.002 is for a p99: 0.0002 for a p99.9, "
                        "0.02 for a p90, 0.1 for a p50."),
    ),
    compute=benchmark_plan,
    plot=plan_plot,
    order=81,
    api_path="/benchmark-plan",
    api_summary="One benchmark load point: requests, the percentile's 95% range, the client "
                "concurrency Little's law asks for",
))

SOURCES: list[tuple[str, str]] = [
    ("vLLM documentation: benchmark CLI, vllm bench serve (request rate, burstiness, "
     "max concurrency, goodput, ignore-eos, datasets)",
     "https://docs.vllm.ai/en/latest/cli/bench/serve.html"),
    ("vLLM source: vllm/benchmarks/serve.py (TTFT, TPOT excluding the first token, ITL, "
     "E2E measured in the client; Poisson arrivals)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/serve.py"),
    ("vLLM source: vllm/benchmarks/lib/endpoint_request_func.py (the client's clocks: TTFT at "
     "the first streamed chunk with a choice, ITL between such chunks, E2E at the last one)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/lib/"
     "endpoint_request_func.py"),
    ("NVIDIA GenAI-Perf (client-side LLM benchmarking of OpenAI-compatible endpoints: TTFT, "
     "ITL, throughput, concurrency or request-rate modes)",
     "https://github.com/triton-inference-server/perf_analyzer/tree/main/genai-perf"),
    ("GenAI-Perf source: genai_perf/profile_data_parser/llm_profile_data_parser.py (responses "
     "with no text removed before TTFT, inter-token latency and request latency are taken)",
     "https://github.com/triton-inference-server/perf_analyzer/blob/main/genai-perf/"
     "genai_perf/profile_data_parser/llm_profile_data_parser.py"),
    ("NVIDIA GenAI-Perf documentation: goodput (--goodput with TTFT and inter-token "
     "latency constraints) and its metric definitions",
     "https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/"
     "perf_analyzer/genai-perf/docs/goodput.html"),
    ("SGLang source: python/sglang/bench_serving.py (python -m sglang.bench_serving, one "
     "client for SGLang, vLLM, TensorRT-LLM and others)",
     "https://github.com/sgl-project/sglang/blob/main/python/sglang/bench_serving.py"),
    ("TensorRT-LLM documentation: performance benchmarking (trtllm-bench)",
     "https://nvidia.github.io/TensorRT-LLM/performance/perf-benchmarking.html"),
    ("NVIDIA NIM documentation: LLM benchmarking metrics (GenAI-Perf's and AIPerf's "
     "definitions: ITL as (E2E − TTFT) ÷ (output tokens − 1) per request; compare tools only "
     "where definitions align)", "https://docs.nvidia.com/nim/benchmarking/llm/latest/metrics.html"),
    ("TensorRT-LLM documentation: trtllm-serve (its OpenAI-compatible server)",
     "https://nvidia.github.io/TensorRT-LLM/latest/commands/trtllm-serve.html"),
    ("Zhong et al., 'DistServe', OSDI 2024 (goodput under TTFT and TPOT SLOs)",
     "https://arxiv.org/abs/2401.09670"),
    ("OpenAI API reference: completions (max_tokens defaults to 16)",
     "https://platform.openai.com/docs/api-reference/completions/create"),
    ("Gil Tene, 'How NOT to Measure Latency' (coordinated omission in closed-loop load "
     "generators)", "https://www.infoq.com/presentations/latency-response-time/"),
    ("Little, 'A Proof for the Queuing Formula: L = λW', Operations Research 1961",
     "https://doi.org/10.1287/opre.9.3.383"),
    ("EleutherAI lm-evaluation-harness (local-completions and local-chat-completions: "
     "evaluating any OpenAI-compatible endpoint)",
     "https://github.com/EleutherAI/lm-evaluation-harness"),
    ("vLLM documentation: engine arguments (--generation-config: 'auto' takes default "
     "sampling parameters from the model's generation_config.json, 'vllm' keeps vLLM's own)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("SGLang documentation: server arguments (--stream-interval, default 1: a smaller value "
     "streams more smoothly, a larger one raises throughput)",
     "https://docs.sglang.ai/advanced_features/server_arguments.html"),
    ("vLLM documentation: automatic prefix caching",
     "https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html"),
]


def _level(rank: int, *, low: int, high: int, requests: float) -> str:
    """A rank among the point's sorted requests as the sample percentile it is ("p98.42"),
    with the decimals that tell the interval's two ends apart."""
    whole = max(1, math.floor(requests))
    return percentile_level(rank / whole, half_width=(high - low) / (2 * whole))


def context(*, request: HttpRequest) -> dict:
    """The figures problem 18's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:
        inputs = CALCULATOR.defaults()
        r = benchmark_plan(**inputs)
    q = inputs["percentile_q"]
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "rate_text": rate_format(inputs["request_rate"], "requests/s"),
        "duration_text": seconds_format(inputs["duration_s"]),
        "label": r["percentile_label"],
        "q_text": number_format(q, digits=8),
        "tail_share_text": percent_format(1 - q),
        "e2e_text": seconds_format(inputs["e2e_latency_s"]),
        "cap": number_format(inputs["client_concurrency"]),
        "cap_requests": count_phrase(inputs["client_concurrency"], "request"),
        "output_tokens": number_format(inputs["output_tokens"]),
        "requests_text": number_format(r["requests"]),
        "beyond_text": number_format(r["beyond"]),
        "beyond_low_text": number_format(r["beyond_low"]),
        "beyond_high_text": number_format(r["beyond_high"]),
        "bounded": r["bounded"],
        "needed_text": count_phrase(r["requests_needed"], "request"),
        "needed_p99_text": f"{requests_for_bounded_percentile(0.99):,}",
        "rank_low": ordinal(r["rank_low"]), "rank_high": ordinal(r["rank_high"]),
        "rank_low_open": r["rank_low_open"], "rank_high_open": r["rank_high_open"],
        "rank_low_level": _level(r["rank_low"], low=r["rank_low"], high=r["rank_high"],
                                 requests=r["requests"]),
        "rank_high_level": _level(r["rank_high"], low=r["rank_low"], high=r["rank_high"],
                                  requests=r["requests"]),
        "precision_points": number_format(r["precision"] * 100),
        "precision_is_default": inputs.get("precision") is None,
        "is_p99": q == 0.99,
        "p99_tail_text": percent_format(1 - 0.99),
        "p99_precision_past_edge": P99_PRECISION > 1 - q,
        "precision_points_one": r["precision"] * 100 == 1,
        "precision_low": percentile_level(q - r["precision"], half_width=r["precision"]),
        "precision_high": percentile_level(q + r["precision"], half_width=r["precision"]),
        "precise_text": f"{r['requests_precise']:,}", "precise_enough": r["precise_enough"],
        "precise_p99_text": "{:,}".format(requests_for_percentile_precision(
            q=0.99, half_width=P99_PRECISION)),
        "precision_p99_points": number_format(P99_PRECISION * 100),
        "precision_squared": squared_format(r["precision"]), "z_text": f"{Z_95:.2f}",
        "deeper_label": percentile_label(DEEPER_Q),
        "deeper_needed_text": f"{requests_for_bounded_percentile(DEEPER_Q):,}",
        "deeper_precision_points": number_format(precision_default(DEEPER_Q) * 100),
        "deeper_precise_text": "{:,}".format(requests_for_percentile_precision(
            q=DEEPER_Q, half_width=precision_default(DEEPER_Q))),
        "deeper_q_text": number_format(DEEPER_Q),
        "requests_whole": r["requests"] == int(r["requests"]),
        "in_flight_text": number_format(r["in_flight"]),
        "offered_text": rate_format(r["offered_rate"], "requests/s"),
        "capped": r["capped"],
        "throughput_text": rate_format(r["output_tokens_per_second"], "tokens/s"),
        "completions_default": number_format(COMPLETIONS_MAX_TOKENS_DEFAULT),
        "confidence_text": percent_format(CONFIDENCE),
    }
