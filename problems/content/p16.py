"""Problem 16, the metrics of a serving system: cost per request from an hourly GPU price, the
measured throughput and utilisation, and what a drop in prefix-cache hit rate costs; plus the
small examples the concepts quote (a mean against percentiles, a histogram's p99). Every figure
the prose shows is computed here at render time by problems/arithmetic.
"""

import math

from django.http import HttpRequest

from problems.arithmetic.catalog.prices import price_example_get
from problems.arithmetic.inputs import TOKENS_MAX
from problems.arithmetic.serving_metrics import (
    PRICE_MAX,
    REQUESTS_PER_DAY_MAX,
    THROUGHPUT_MAX,
    histogram_quantile,
    percentile,
    request_cost,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import (
    count_format,
    money_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import inputs_normalise, real_input, whole_input
from problems.plots import Mark, Plot, Series

SLUG = "request-cost"
PREFIX = "p16-cost"
H100_PRICE = price_example_get("h100-sxm")

# The concepts' example of why a mean hides the tail: most requests fast, two very slow.
TAIL_FAST_S, TAIL_FAST_N, TAIL_SLOW_S, TAIL_SLOW_N = 0.2, 98, 20.0, 2
# The concepts' histogram example: vLLM's TTFT bucket bounds around one second, and counts.
HISTOGRAM_EXAMPLE = ((0.5, 880), (0.75, 960), (1.0, 985), (2.5, 998), (5.0, 1000),
                     (math.inf, 1000))


def cost_plot(*, inputs: dict, result: Result) -> Plot:
    """Cost per request against the prefix-cache hit rate, with the two rates marked."""
    xs = tuple(round(i * 0.05, 2) for i in range(20))

    def at(x: float) -> float:
        r = request_cost(**{**inputs, "cache_hit_rate": x, "hit_rate_drop": 0.0})
        return r["dollars_per_request"] * 1000

    return Plot(
        title="Cost per thousand requests against the prefix-cache hit rate",
        x_title="Prefix-cache hit rate (share of prompt tokens)",
        y_title="Dollars per 1,000 requests",
        series=(Series("Cost per 1,000 requests", xs, tuple(at(x) for x in xs),
                       markers=True),),
        marks=(Mark(inputs["cache_hit_rate"], "before"),
               Mark(result["hit_rate_after"], "after the drop")))


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Cost per request, and what a lower cache hit rate costs",
    explanation=("One replica's time per request is its uncached prompt tokens at the "
                 "measured prefill throughput plus its output tokens at the measured decode "
                 "throughput; every paid hour counts, so busy time is divided by the "
                 "utilisation. Prefill and decode share steps in a real engine, so this is an "
                 "estimate from two throughputs you measure, not a roofline."),
    inputs=(
        real_input("price_per_hour", "GPU price", unit="$ per GPU-hour",
                   initial=round(H100_PRICE.dollars_per_hour, 2),
                   api=round(H100_PRICE.dollars_per_hour, 2), minimum=0.01, maximum=PRICE_MAX,
                   help=f"Example: {H100_PRICE.provider}'s on-demand H100 price "
                        f"({H100_PRICE.as_of}); put in your own."),
        whole_input("gpus", "GPUs per replica", unit="GPUs", initial=1, api=1,
                    maximum=100_000),
        whole_input("prompt_tokens", "Prompt per request", unit="tokens", initial=2_000,
                    api=2_000, minimum=0, maximum=TOKENS_MAX),
        whole_input("output_tokens", "Output per request", unit="tokens", initial=300,
                    api=300, maximum=TOKENS_MAX),
        real_input("prefill_tokens_per_second", "Measured prefill throughput",
                   unit="tokens/s", initial=20_000.0, api=20_000.0, maximum=THROUGHPUT_MAX,
                   help="Prompt tokens per second the replica prefills when that is all it "
                        "does. The default is an example for an 8B model on one H100, below "
                        "its compute-bound ceiling; replace it with your benchmark's."),
        real_input("decode_tokens_per_second", "Measured decode throughput",
                   unit="tokens/s", initial=3_000.0, api=3_000.0, maximum=THROUGHPUT_MAX,
                   help="Output tokens per second at your usual running batch, from a "
                        "benchmark (problem 18). The default is an example, not a "
                        "measurement."),
        real_input("utilization", "Utilisation", unit="fraction of paid time", initial=0.6,
                   api=0.6, minimum=0.01, maximum=1.0,
                   help="The share of paid GPU time spent serving: traffic is uneven and "
                        "capacity is sized for the peak."),
        real_input("cache_hit_rate", "Prefix-cache hit rate", unit="fraction of prompt tokens",
                   initial=0.5, api=0.5, minimum=0.0, maximum=0.99,
                   help="vLLM's vllm:prefix_cache_hits ÷ vllm:prefix_cache_queries (tokens)."),
        real_input("hit_rate_drop", "Drop in hit rate", unit="fraction, absolute",
                   initial=0.2, api=0.2, minimum=0.0, maximum=0.99,
                   help="Absolute: 0.2 takes a 50% hit rate to 30%."),
        whole_input("requests_per_day", "Requests per day", unit="requests",
                    initial=1_000_000, api=1_000_000, maximum=int(REQUESTS_PER_DAY_MAX)),
    ),
    compute=request_cost,
    plot=cost_plot,
    order=80,
    api_path="/request-cost",
    api_summary="Cost per request from a GPU price, measured throughput and utilisation, and "
                "what a drop in prefix-cache hit rate costs",
))

# Google SRE Workbook, "Alerting on SLOs", its recommended multi-window, multi-burn-rate
# alerts: (share of a 30-day budget spent, burn rate, long window, short window).
BURN_PAGE = (0.02, 14.4, "1 h", "5 min")
BURN_SLOW_PAGE = (0.05, 6.0, "6 h", "30 min")
BURN_TICKET = (0.10, 1.0, "3 days", "6 h")
SLO_EXAMPLE = 0.999  # an illustration, not a recommendation

SOURCES: list[tuple[str, str]] = [
    ("Google SRE Workbook, chapter 5, 'Alerting on SLOs' (error budgets, burn rates, and the "
     "multi-window, multi-burn-rate alerts: 2% of the budget in 1 hour, 5% in 6 hours, 10% in "
     "3 days)", "https://sre.google/workbook/alerting-on-slos/"),
    ("vLLM documentation: Production metrics (the names and types of vLLM's Prometheus "
     "metrics)", "https://docs.vllm.ai/en/latest/usage/metrics.html"),
    ("vLLM documentation: Metrics design (the engine's TTFT counted from arrival_time, which "
     "starts when tokenization begins; E2E to the final token)",
     "https://docs.vllm.ai/en/latest/design/metrics.html"),
    ("vLLM source: vllm/v1/metrics/loggers.py (metric names, histogram buckets)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/loggers.py"),
    ("vLLM source: vllm/v1/metrics/stats.py (a finished request's TPOT: decode time ÷ "
     "(output tokens − 1), 0 for a one-token answer)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/metrics/stats.py"),
    ("Prometheus documentation: Histograms and summaries (histogram_quantile, bucket "
     "interpolation, why summaries cannot be aggregated)",
     "https://prometheus.io/docs/practices/histograms/"),
    ("Prometheus documentation: Query functions, histogram_quantile()",
     "https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile"),
    ("Google SRE book, chapter 6 'Monitoring Distributed Systems' (the four golden signals; "
     "alert on symptoms)", "https://sre.google/sre-book/monitoring-distributed-systems/"),
    ("Zhong et al., 'DistServe', OSDI 2024 (goodput: requests per second within TTFT and "
     "TPOT SLOs)", "https://arxiv.org/abs/2401.09670"),
    ("Dean and Barroso, 'The Tail at Scale', CACM 2013 (why the tail, not the mean, sets "
     "user-visible latency)", "https://research.google/pubs/the-tail-at-scale/"),
    (f"{H100_PRICE.provider} pricing ({H100_PRICE.as_of}; the H100 example price)",
     H100_PRICE.source),
    ("NVIDIA DCGM exporter: default counters (GPU-level metrics beside the engine's)",
     "https://github.com/NVIDIA/dcgm-exporter/blob/main/etc/default-counters.csv"),
]


def _tail_example() -> dict:
    values = [TAIL_FAST_S] * TAIL_FAST_N + [TAIL_SLOW_S] * TAIL_SLOW_N
    mean = sum(values) / len(values)
    return {
        "tail_fast_n": number_format(TAIL_FAST_N), "tail_fast_text": seconds_format(TAIL_FAST_S),
        "tail_slow_n": number_format(TAIL_SLOW_N), "tail_slow_text": seconds_format(TAIL_SLOW_S),
        "tail_total": number_format(len(values)),
        "tail_mean_text": seconds_format(mean),
        "tail_p50_text": seconds_format(percentile(values, 0.5)),
        "tail_p99_text": seconds_format(percentile(values, 0.99)),
        "tail_mean_ratio": f"{number_format(mean / TAIL_FAST_S)}×",
    }


def _histogram_example() -> dict:
    total = HISTOGRAM_EXAMPLE[-1][1]
    p99 = histogram_quantile(0.99, HISTOGRAM_EXAMPLE)
    p50 = histogram_quantile(0.5, HISTOGRAM_EXAMPLE)
    low, high = next((prev[0], b) for prev, (b, c) in zip(HISTOGRAM_EXAMPLE,
                                                           HISTOGRAM_EXAMPLE[1:], strict=False)
                     if c >= 0.99 * total)
    rows = []
    previous = 0
    for bound, count in HISTOGRAM_EXAMPLE[:-1]:
        rows.append({"bound": seconds_format(bound), "cumulative": number_format(count),
                     "inside": number_format(count - previous)})
        previous = count
    return {
        "hist_total": number_format(total), "hist_rows": rows,
        "hist_rank": number_format(0.99 * total),
        "hist_p99_text": seconds_format(p99), "hist_p50_text": seconds_format(p50),
        "hist_low_text": seconds_format(low), "hist_high_text": seconds_format(high),
    }


# A fall in the hit rate that raises the cost per request by less than this is noise next to
# the other levers; the prose does not call the hit rate a lever then.
HIT_RATE_MATTERS = 0.01


def _cache_ceiling(inputs: dict) -> float:
    """The share of a request's cost a perfect prefix cache would remove (a fraction): the whole
    prompt's prefill time over the request's time with nothing cached. It bounds what any
    change of hit rate can move, whatever the drop."""
    prefill = inputs["prompt_tokens"] / inputs["prefill_tokens_per_second"]
    decode = inputs["output_tokens"] / inputs["decode_tokens_per_second"]
    return prefill / (prefill + decode)


def _loss_to_zero(inputs: dict, r: dict) -> float:
    """The rise in cost per request (a fraction) if the hit rate fell from today's to zero:
    the cached part of the prompt prefilled again, over today's replica time per request."""
    if r["busy_seconds"] <= 0:
        return 0.0
    full = inputs["prompt_tokens"] / inputs["prefill_tokens_per_second"]
    return (full - r["prefill_seconds"]) / r["busy_seconds"]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 16's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:
        inputs = CALCULATOR.defaults()
        r = request_cost(**inputs)
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "price_text": money_format(inputs["price_per_hour"]) + "/h",
        "gpus_text": count_format(inputs["gpus"], "GPU"),
        "gpus_many": inputs["gpus"] > 1,
        "replica_price_text": money_format(r["replica_price_per_hour"]) + "/h",
        "prompt_tokens": number_format(inputs["prompt_tokens"]),
        "output_tokens": number_format(inputs["output_tokens"]),
        "prefill_rate_text": rate_format(inputs["prefill_tokens_per_second"], "tokens/s"),
        "decode_rate_text": rate_format(inputs["decode_tokens_per_second"], "tokens/s"),
        "utilization_text": percent_format(inputs["utilization"]),
        "hit_text": percent_format(inputs["cache_hit_rate"]),
        "drop_text": percent_format(inputs["hit_rate_drop"]),
        "drop_points": number_format(inputs["hit_rate_drop"] * 100),
        "drop_points_text": count_format(inputs["hit_rate_drop"] * 100, "point"),
        "drop_moves": r["cost_increase"] > 0,
        # A drop that adds under this share per request is not worth calling a lever.
        "drop_matters": r["cost_increase"] >= HIT_RATE_MATTERS,
        "matters_text": percent_format(HIT_RATE_MATTERS),
        # The most the cache could ever save: the whole prompt's share of a request's time with
        # no cache at all. Under HIT_RATE_MATTERS the lengths, not the drop, make the hit rate
        # irrelevant; above it, a drop that costs little is small because the drop is.
        "lengths_minor": _cache_ceiling(inputs) < HIT_RATE_MATTERS,
        "cache_ceiling_text": percent_format(_cache_ceiling(inputs)),
        # Whether any fall from today's hit rate could matter: losing all of it (the hit rate
        # to zero) raises the cost per request by this share. Under HIT_RATE_MATTERS no larger
        # fall is possible that would show; only a higher hit rate would.
        "loss_can_matter": _loss_to_zero(inputs, r) >= HIT_RATE_MATTERS,
        "fleet_change_text": (
            f"grows from {number_format(r['replicas_before'])} to "
            f"{number_format(r['replicas_after'])} replicas' worth of GPU time"
            if number_format(r["replicas_before"]) != number_format(r["replicas_after"])
            else f"stays at about {number_format(r['replicas_after'])} replicas' worth of "
                 "GPU time"),
        "no_prompt": inputs["prompt_tokens"] == 0,
        "hit_after_text": percent_format(r["hit_rate_after"]),
        "uncached_text": number_format(r["uncached_tokens"]),
        "uncached_after_text": number_format(r["uncached_tokens_after"]),
        "prefill_text": seconds_format(r["prefill_seconds"]),
        "prefill_after_text": seconds_format(r["prefill_seconds_after"]),
        "decode_text": seconds_format(r["decode_seconds"]),
        "busy_text": seconds_format(r["busy_seconds"]),
        "busy_after_text": seconds_format(r["busy_seconds_after"]),
        "requests_per_hour_text": rate_format(r["requests_per_hour"], "requests/h"),
        "requests_per_hour_after_text": rate_format(r["requests_per_hour_after"],
                                                    "requests/h"),
        "per_request_text": money_format(r["dollars_per_request"], significant=3),
        "per_thousand_text": money_format(r["dollars_per_request"] * 1000, significant=3),
        "per_thousand_after_text": money_format(r["dollars_per_request_after"] * 1000,
                                                significant=3),
        "per_million_output_text": money_format(r["dollars_per_million_output_tokens"],
                                                significant=3),
        "per_million_total_text": money_format(r["dollars_per_million_tokens"], significant=3),
        "increase_text": percent_format(r["cost_increase"]),
        "capacity_loss_text": percent_format(r["capacity_loss"]),
        "requests_per_day_text": number_format(inputs["requests_per_day"]),
        "prompt_tokens_text": count_format(inputs["prompt_tokens"], "prompt token"),
        "output_tokens_text": count_format(inputs["output_tokens"], "output token"),
        "output_count_text": count_format(inputs["output_tokens"], "token"),
        "uncached_count_text": count_format(r["uncached_tokens"], "token"),
        "uncached_after_count_text": count_format(r["uncached_tokens_after"], "token"),
        "requests_per_day_count_text": count_format(inputs["requests_per_day"], "request"),
        "extra_month_text": money_format(r["extra_dollars_per_month"]),
        "replicas_before_text": number_format(r["replicas_before"]),
        "replicas_after_text": number_format(r["replicas_after"]),
        "slo_example_text": percent_format(SLO_EXAMPLE),
        "budget_example_text": percent_format(1 - SLO_EXAMPLE),
        "burn_page_budget_text": percent_format(BURN_PAGE[0]),
        "burn_page_rate_text": f"{number_format(BURN_PAGE[1])}×",
        "burn_page_short_text": BURN_PAGE[3],
        "burn_slow_budget_text": percent_format(BURN_SLOW_PAGE[0]),
        "burn_ticket_budget_text": percent_format(BURN_TICKET[0]),
        **_tail_example(),
        **_histogram_example(),
    }
