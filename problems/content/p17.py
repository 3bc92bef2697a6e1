"""Problem 17, p99 is 10× p50: queueing near saturation (M/M/1 and M/M/c percentiles of the wait
and the response at 50–95% utilisation) and the spread that output lengths alone give; every
figure the prose quotes, computed at render time by problems/arithmetic.
"""

from django.http import HttpRequest

from problems.arithmetic.queueing import (
    SERVERS_MAX,
    UTILIZATIONS_TABLE,
    kingman_wait,
    queue_percentiles,
    tail_latency,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import count_format, number_format, percent_format, seconds_format
from problems.arithmetic.wording import SAME_WITHIN, count_phrase, share_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import inputs_normalise, real_input, whole_input
from problems.plots import Mark, Plot, Series, sweep_points

SLUG = "tail-latency"
PREFIX = "p17-tail"
QUESTION_RATIO = 10  # the question's "10×"
SATURATION_NEAR = 0.8  # from here on the answer quotes the load asked as "near saturation"


def percentile_plot(*, inputs: dict, result: Result) -> Plot:
    """p50 and p99 of the response against utilisation, one server and `servers` seats."""
    rhos = tuple(sweep_points(0.05, 0.97, count=30))
    mu = 1 / inputs["mean_service_seconds"]
    one = queue_percentiles(service_rate=mu, servers=1, utilizations=rhos)
    many = queue_percentiles(service_rate=mu, servers=inputs["servers"], utilizations=rhos)
    xs = tuple(r * 100 for r in rhos)
    c = inputs["servers"]
    return Plot(
        title="Response time percentiles against utilisation (M/M/1 and M/M/c)",
        x_title="Utilisation (%)", y_title="Response time (s)", y_log=True,
        series=(Series("M/M/1 p99", xs, tuple(r["p99_response_seconds"] for r in one)),
                Series("M/M/1 p50", xs, tuple(r["p50_response_seconds"] for r in one),
                       dash=True),
                Series(f"M/M/{c} p99", xs, tuple(r["p99_response_seconds"] for r in many)),
                Series(f"M/M/{c} p50", xs, tuple(r["p50_response_seconds"] for r in many),
                       dash=True)),
        marks=(Mark(inputs["utilization"] * 100, "your load"),))


INPUTS = (
    real_input("mean_service_seconds", "Mean service time", unit="s", initial=4.0, api=4.0,
               minimum=0.001, maximum=1e6,
               help="How long one request holds its seat: here TTFT plus the mean output "
                    "length × TPOT."),
    whole_input("servers", "Seats c", unit="requests at once", initial=16, api=16,
                maximum=SERVERS_MAX,
                help="Requests served at once (a replica's batch slots); 1 gives M/M/1."),
    real_input("utilization", "Utilisation ρ", unit="fraction", initial=0.9, api=0.9,
               minimum=0.01, maximum=0.999),
    real_input("ttft_ms", "TTFT without queueing", unit="ms", initial=200.0, api=200.0,
               maximum=1e7),
    real_input("tpot_ms", "TPOT", unit="ms", initial=20.0, api=20.0, minimum=0.001,
               maximum=1e6),
    whole_input("p50_output_tokens", "Median output length", unit="tokens", initial=200,
                api=200, maximum=10**7),
    whole_input("p99_output_tokens", "99th-percentile output length", unit="tokens",
                initial=2_000, api=2_000, maximum=10**7,
                help="An example of a long tail: chat answers whose 99th percentile is ten "
                     "times the median. Measure your own traffic's."),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Tail latency: queueing and output lengths",
    explanation=("Poisson arrivals and exponential service: the p50 and p99 of the wait and of "
                 "the response at 50%, 80%, 90% and 95% utilisation, for one server (M/M/1) and "
                 "for c seats (M/M/c, Erlang C), and the end-to-end spread that output lengths "
                 "alone give, with no queue."),
    inputs=INPUTS,
    compute=lambda **k: tail_latency(**k),
    plot=percentile_plot,
    order=81,
    api_path="/tail-latency",
    api_summary="p50 and p99 of wait and response at 50–95% load, and the length-only tail",
))

SOURCES: list[tuple[str, str]] = [
    ("Harchol-Balter, 'Performance Modeling and Design of Computer Systems: Queueing Theory in "
     "Action' (Cambridge, 2013), chapters 13 and 14 (M/M/1; M/M/k and Erlang C) and its "
     "M/G/1 chapter (the Pollaczek–Khinchine mean wait)",
     "https://www.cs.cmu.edu/~harchol/PerformanceModeling/book.html"),
    ("Dean and Barroso, 'The Tail at Scale' (Communications of the ACM, 2013)",
     "https://research.google/pubs/the-tail-at-scale/"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (SOSP 2023: preemption by recomputation or swapping)",
     "https://arxiv.org/abs/2309.06180"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(OSDI 2024: generation stalls from prefills, chunked prefill)",
     "https://arxiv.org/abs/2403.02310"),
    ("Zhong et al., 'DistServe' (OSDI 2024: prefill–decode interference, goodput under SLOs)",
     "https://arxiv.org/abs/2401.09670"),
    ("vLLM documentation: metrics (vllm:time_to_first_token_seconds, "
     "vllm:request_queue_time_seconds, vllm:num_preemptions_total)",
     "https://docs.vllm.ai/en/latest/usage/metrics/"),
    ("Little, 'A Proof for the Queuing Formula: L = λW' (Operations Research, 1961)",
     "https://doi.org/10.1287/opre.9.3.383"),
    ("Kingman, 'The single server queue in heavy traffic' (Mathematical Proceedings of the "
     "Cambridge Philosophical Society, 1961: the G/G/1 wait approximation)",
     "https://doi.org/10.1017/S0305004100036094"),
    ("Tene, 'How NOT to Measure Latency' (coordinated omission: a load generator that waits "
     "for each response stops sending while the server stalls and hides the queueing tail)",
     "https://www.infoq.com/presentations/latency-response-time/"),
    ("vLLM benchmarks: serving benchmark with --request-rate (open-loop Poisson arrivals, or "
     "gamma-distributed with --burstiness)",
     "https://docs.vllm.ai/en/latest/contributing/benchmarks.html"),
    ("vLLM documentation, 'Optimization and Tuning', preemption (V1 preempts by recomputation; "
     "swapping to CPU memory was a V0 option)",
     "https://docs.vllm.ai/en/latest/configuration/optimization.html"),
    ("ShareGPT conversations as used by vLLM's serving benchmark (a measured distribution of "
     "output lengths to replace an example tail)",
     "https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered"),
]


# An example of bursty arrivals: gaps whose standard deviation is twice their mean (Ca² = 4),
# as retries or batch jobs give; Poisson arrivals have Ca² = 1.
BURSTY_CA2 = 4.0
HEDGE_PERCENTILE = 0.95  # hedge a request still unanswered past this percentile (an example)


def wait_share_text(probability: float) -> str:
    """The chance an arrival waits, as a share a reader can use: Erlang C is above zero at any
    load, so a value that underflows or sits far below 0.1% reads "under 0.1%", not
    "1.98×10⁻²³³%" or a "0%" beside a larger load's nonzero share."""
    return share_phrase(max(probability, 1e-12))


def _row(r: dict) -> dict:
    return {"util_text": percent_format(r["utilization"]),
            "wait_prob_text": wait_share_text(r["wait_probability"]),
            "p50_wait_text": seconds_format(r["p50_wait_seconds"]),
            "p99_wait_text": seconds_format(r["p99_wait_seconds"]),
            "p50_text": seconds_format(r["p50_response_seconds"]),
            "p99_text": seconds_format(r["p99_response_seconds"]),
            "ratio_text": f"{number_format(r['response_ratio'])}×"}


def context(*, request: HttpRequest) -> dict:
    """The figures problem 17's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:
        inputs = CALCULATOR.defaults()
        r = tail_latency(**inputs)
    table_rhos = set(UTILIZATIONS_TABLE)
    one = [_row(x) for x in r["mm1"] if x["utilization"] in table_rhos]
    many = [_row(x) for x in r["mmc"] if x["utilization"] in table_rhos]
    m1, mc = r["mine_mm1"], r["mine_mmc"]
    answer_row = (mc if inputs["utilization"] >= SATURATION_NEAR and mc["p99_wait_seconds"] > 0
                  else max(r["mmc"], key=lambda x: x["utilization"]))
    low = r["mm1"][0]
    bursty = kingman_wait(utilization=inputs["utilization"], arrival_cv2=BURSTY_CA2,
                          service_cv2=1.0, mean_service=inputs["mean_service_seconds"])
    return {
        "calculator_slug": SLUG, "calculator_prefix": PREFIX, "inputs_followed": followed,
        "question_ratio": QUESTION_RATIO,
        "bursty_ca2": number_format(BURSTY_CA2),
        "bursty_ca": number_format(BURSTY_CA2 ** 0.5),
        "bursty_wait_text": seconds_format(bursty),
        "bursty_factor": number_format((BURSTY_CA2 + 1) / 2),
        "idle_queue": inputs["utilization"] == 0,
        "hedge_percentile": f"{HEDGE_PERCENTILE * 100:.0f}",
        "hedge_extra_text": percent_format(1 - HEDGE_PERCENTILE),
        "service_text": seconds_format(inputs["mean_service_seconds"]),
        "servers": f"{inputs['servers']:,}",
        "seats_text": count_format(inputs["servers"], "seat"),
        "many_seats": inputs["servers"] > 1,
        "util_text": percent_format(inputs["utilization"]),
        "rows": [{"one": a, "many": b} for a, b in zip(one, many, strict=True)],
        "low_util_text": percent_format(low["utilization"]),
        "low_p99_text": seconds_format(low["p99_response_seconds"]),
        "m1_p50_text": seconds_format(m1["p50_response_seconds"]),
        "m1_p99_text": seconds_format(m1["p99_response_seconds"]),
        "m1_p99_wait_text": seconds_format(m1["p99_wait_seconds"]),
        # At ρ ≤ 1% the p99 arrival finds the server free; below half load most do, and the
        # 6.64× is the exponential service's spread, not the queue's.
        "m1_p99_no_wait": m1["p99_wait_seconds"] == 0,
        "m1_light": inputs["utilization"] < 0.5,
        "m1_mean_wait_text": seconds_format(m1["mean_wait_seconds"]),
        "mc_wait_prob_text": wait_share_text(mc["wait_probability"]),
        "mc_p50_text": seconds_format(mc["p50_response_seconds"]),
        "mc_p99_text": seconds_format(mc["p99_response_seconds"]),
        "mc_p99_wait_text": seconds_format(mc["p99_wait_seconds"]),
        "mc_ratio_text": f"{number_format(mc['response_ratio'])}×",
        # What many seats do depends on the load: under 1% waiting, nothing reaches the p99;
        # near one, most arrivals wait and the median leaves the service time far behind.
        "mc_p99_no_wait": mc["p99_wait_seconds"] == 0,
        "mc_median_near": mc["p50_response_seconds"] <= 1.5 * inputs["mean_service_seconds"],
        "mc_median_times_text":
        f"{number_format(mc['p50_response_seconds'] / inputs['mean_service_seconds'])}×",
        # The answer's queueing example: the load asked when it is near saturation (80% and
        # up), else the table's highest, so "near saturation" is never shown at 1%.
        "answer_util_text": percent_format(answer_row["utilization"]),
        "answer_p50_text": seconds_format(answer_row["p50_response_seconds"]),
        "answer_p99_text": seconds_format(answer_row["p99_response_seconds"]),
        "answer_no_wait": answer_row["p99_wait_seconds"] == 0,
        "mm1_ratio_text": f"{number_format(r['mm1_ratio'])}×",
        "ttft_text": seconds_format(inputs["ttft_ms"] / 1e3),
        "tpot_text": seconds_format(inputs["tpot_ms"] / 1e3),
        "p50_tokens": f"{inputs['p50_output_tokens']:,}",
        # Review: the mean output length the queue's service time implies, TTFT + (n − 1) × TPOT
        # = service; a long tail puts the mean above the median, so flag a mean below it.
        "implied_tokens": f"{r['implied_mean_output_tokens']:,.0f}",
        "service_below_median": r["implied_mean_output_tokens"] < inputs["p50_output_tokens"],
        # Shorter than TTFT, the service implies no answer at all (not "about 0 tokens").
        "service_below_ttft": inputs["mean_service_seconds"] < inputs["ttft_ms"] / 1e3,
        "p99_tokens": f"{inputs['p99_output_tokens']:,}",
        "p99_tokens_n": count_phrase(inputs["p99_output_tokens"], "token"),
        "p50_tokens_n": count_phrase(inputs["p50_output_tokens"], "token"),
        "implied_tokens_n": count_phrase(r["implied_mean_output_tokens"], "token",
                                         rounding="nearest"),
        "length_p50_text": seconds_format(r["length_p50_seconds"]),
        "length_p99_text": seconds_format(r["length_p99_seconds"]),
        # "X× the median", or "about the same as the median" within the phrasing helper's 5%
        # (a p99 of 200 tokens against a median of 200 read "1× the median").
        "length_ratio_text": ("about the same as" if r["length_ratio"] <= 1 + SAME_WITHIN
                              else f"{number_format(r['length_ratio'])}×"),
        "length_ratio_reaches": r["length_ratio"] >= QUESTION_RATIO,
        # Within 10% of the question's ratio counts as "nearly": 9.61× is not "short of" 10×.
        "length_ratio_close": r["length_ratio"] >= 0.9 * QUESTION_RATIO,
        "u50": percent_format(0.5), "u80": percent_format(0.8), "u95": percent_format(0.95),
        "one_percent": percent_format(0.01),
        "idle80": number_format(1 - 0.8), "idle95": number_format(1 - 0.95),
        # M/M/1 percentiles scale with 1 / (1 − ρ).
        "scale_50_95": f"{number_format((1 - 0.5) / (1 - 0.95))}×",
        "scale_80_95": f"{number_format((1 - 0.8) / (1 - 0.95))}×",
        "capacity_80_95": percent_format(0.95 / 0.8 - 1),
    }
