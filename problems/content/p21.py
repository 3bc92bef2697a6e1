"""Problem 21, multi-tenant fairness and admission control: the calculator for one heavy tenant
and several light ones on one replica (each tenant's wait under first come first served and
under fair sharing, what a queue bound refuses, the token bucket that caps a tenant at its
share), the sweep of waits against the heavy tenant's rate, and every figure the prose quotes.
"""

import functools
import math

from django.http import HttpRequest

from problems.arithmetic.queueing import TENANTS_MAX, tenant_fairness
from problems.arithmetic.units import (
    count_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import ratio_phrase, share_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import real_input, whole_input
from problems.plots import Mark, Plot, Series, sweep_points

SLUG = "tenant-fairness"
PREFIX = "p21-tenants"
SWEEP_SLUG = "tenant-waits"
SWEEP_PREFIX = "p21-sweep"
# A refused share below this reads "almost nothing" (share_phrase writes it "under 0.1%").
REFUSED_NOTED = 0.001
MS = 1e3
RATE_FIELD_MAX = 1e6
# VTC's linear cost in its paper's experiments and its artifact's default (vtc_req_queue.py:
# input_price=1, output_price=2): an output token counts twice an input token, after OpenAI's
# price list.
VTC_WEIGHTS = {"input": 1, "output": 2}


@functools.cache
def _at(**inputs):
    return tenant_fairness(**inputs)


def waits_plot(*, inputs: dict, result) -> Plot:
    """Each tenant's mean wait as the heavy tenant sends more, under FCFS and fair sharing."""
    mu = result["service_rate"]
    light = inputs["light_tenants"] * inputs["light_rate"]
    xs = sweep_points(0.05 * mu, 1.3 * mu, count=40)
    fcfs, fair_light, fair_heavy = [], [], []
    for x in xs:
        r = _at(**{**inputs, "heavy_rate": x})
        # One transient model on both sides of capacity: the wait after the overload period
        # from an empty queue (the steady M/M/1 wait once it has settled).
        fcfs.append(r["fcfs_wait_after_overload_seconds"] * MS)
        fair_light.append(r["light_wait_seconds"] * MS)
        fair_heavy.append(r["heavy_wait_seconds"] * MS)
    return Plot(title="Mean wait in queue as the heavy tenant sends more, after the overload "
                      "period from an empty queue (fair: the lighter tenants served first)",
                x_title="Heavy tenant's rate (requests/s)", y_title="Mean wait (ms)",
                y_log=True,
                series=(Series("FCFS: everyone",
                               tuple(xs), tuple(fcfs)),
                        Series("fair: light", tuple(xs), tuple(fair_light),
                               dash=True),
                        Series("fair: heavy", tuple(xs),
                               tuple(fair_heavy))),
                marks=(Mark(inputs["heavy_rate"], "your heavy tenant"),
                       Mark(mu - light, "capacity left by the light tenants")))


def refused_plot(*, inputs: dict, result) -> Plot:
    """Share of the heavy tenant's requests refused, fair queue bound against a token bucket at
    its share."""
    mu = result["service_rate"]
    xs = sweep_points(0.05 * mu, 1.5 * mu, count=40)
    bound, bucket = [], []
    for x in xs:
        r = _at(**{**inputs, "heavy_rate": x})
        bound.append(r["heavy_refused_share"])
        bucket.append(r["capped_refused_rate"] / x)
    return Plot(title="The heavy tenant's refusals: fair sharing with a queue bound against a "
                      "token bucket at its share",
                x_title="Heavy tenant's rate (requests/s)", y_title="Share refused (429)",
                series=(Series("queue bound",
                               tuple(xs), tuple(bound)),
                        Series("token bucket",
                               tuple(xs), tuple(bucket), dash=True)),
                marks=(Mark(inputs["heavy_rate"], "your heavy tenant"),))


INPUTS = (
    real_input("capacity_tokens_per_s", "Replica capacity", unit="tokens/s", initial=20_000.0,
               api=20_000.0, maximum=1e9,
               help="Tokens per second the replica serves when saturated (problem 6's batch at "
                    "its step time)."),
    real_input("tokens_per_request", "Tokens per request", unit="tokens", initial=500.0,
               api=500.0, maximum=1e7, help="Prompt and output tokens a request costs."),
    real_input("heavy_rate", "Heavy tenant's rate", unit="requests/s", initial=36.0, api=36.0,
               maximum=RATE_FIELD_MAX),
    real_input("light_rate", "Each light tenant's rate", unit="requests/s", initial=2.0,
               api=2.0, maximum=RATE_FIELD_MAX),
    whole_input("light_tenants", "Light tenants", unit="tenants", initial=3, api=3,
                maximum=TENANTS_MAX),
    whole_input("queue_bound", "Queue bound per tenant", unit="requests", initial=64, api=64,
                maximum=10**9, help="Past it, a tenant's new requests get 429."),
    real_input("burst_seconds", "Token bucket burst", unit="seconds of its rate", initial=2.0,
               api=2.0, maximum=86_400.0),
    real_input("overload_seconds", "Length of the overload", unit="s", initial=60.0, api=60.0,
               maximum=86_400.0, help="How long FCFS's backlog grows before you look."),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="One heavy tenant and several light ones",
    explanation=("Poisson arrivals into one replica that serves μ requests/s. Under first come "
                 "first served all tenants share one queue and one wait; under fair sharing "
                 "each tenant is guaranteed μ ÷ k while it has work, and what one leaves unused "
                 "goes to the others. A queue bound turns the heavy tenant's excess into 429s; "
                 "a token bucket caps its rate at its share."),
    inputs=INPUTS,
    compute=lambda **k: tenant_fairness(**k),
    plots=lambda *, inputs, result: (waits_plot(inputs=inputs, result=result),
                                     refused_plot(inputs=inputs, result=result)),
    order=140,
    api_path="/tenant-fairness",
    api_summary="Tenants under FCFS and fair sharing: waits, refusals, token bucket",
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


def _rate(value: float) -> str:
    # "1 request/s", never "1 requests/s" (the phrasing helper keeps unit symbols such as
    # "tokens/s" as they are, so the singular is said here).
    return rate_format(value, "request/s" if number_format(value) == "1" else "requests/s")


def context(*, request: HttpRequest) -> dict:
    """The figures problem 21's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request)
    n = inputs["light_tenants"]
    return {
        "calculator_prefix": PREFIX,
        "inputs_valid": valid,
        "capacity_text": rate_format(inputs["capacity_tokens_per_s"], "tokens/s"),
        "size_text": count_format(inputs["tokens_per_request"], "token"),
        "heavy_rate_text": _rate(inputs["heavy_rate"]),
        "light_rate_text": _rate(inputs["light_rate"]),
        "light_tenants_text": count_format(n, "light tenant"),
        "one_light": n == 1,
        "tenants": f"{n + 1:,}",
        "bound_text": count_format(inputs["queue_bound"], "request"),
        "burst_text": seconds_format(inputs["burst_seconds"]),
        "overload_text": seconds_format(inputs["overload_seconds"]),
        "mu_text": _rate(r["service_rate"]),
        "lambda_text": _rate(r["total_rate"]),
        "utilization_text": percent_format(r["utilization"]),
        "heavy_load_share_text": percent_format(inputs["heavy_rate"] / r["total_rate"]),
        "fcfs_stable": r["fcfs_stable"],
        "fcfs_wait_text": seconds_format(r["fcfs_wait_seconds"]) if r["fcfs_stable"] else "",
        "fcfs_settled": r["fcfs_settled"],
        "growth_text": number_format(r["fcfs_wait_growth"]),
        # λ = μ exactly: no drift for the backlog, only the diffusion's √t.
        "at_capacity": math.isclose(r["total_rate"], r["service_rate"], rel_tol=1e-9),
        # The heavy tenant sends exactly what the light tenants leave: no excess, all bursts.
        "heavy_at_capacity": math.isclose(inputs["heavy_rate"], r["heavy_capacity_rate"],
                                          rel_tol=1e-9),
        "backlog_text": number_format(r["fcfs_backlog_requests"]),
        "fcfs_after_text": seconds_format(r["fcfs_wait_after_overload_seconds"]),
        "share_text": _rate(r["fair_share_rate"]),
        "heavy_is_heavier": r["heavy_is_heavier"],
        "rates_equal": inputs["heavy_rate"] == inputs["light_rate"],
        "light_wait_text": seconds_format(r["light_wait_seconds"]),
        "light_bound_text": seconds_format(r["light_wait_bound_seconds"]),
        "light_vs_fcfs": ratio_phrase(r["light_wait_seconds"],
                                      r["fcfs_wait_after_overload_seconds"],
                                      more="longer than", less="shorter than",
                                      same="about the same as"),
        "heavy_capacity_text": _rate(r["heavy_capacity_rate"]),
        "heavy_stable": r["heavy_stable"],
        "heavy_limit": r["heavy_wait_limit"],
        "heavy_wait_text": seconds_format(r["heavy_wait_seconds"]),
        "heavy_vs_fcfs": ratio_phrase(r["heavy_wait_seconds"],
                                      r["fcfs_wait_after_overload_seconds"],
                                      more="longer than", less="shorter than",
                                      same="about the same as"),
        "conserved": r["fair_mean_wait_seconds"] is not None,
        "fair_mean_text": (seconds_format(r["fair_mean_wait_seconds"])
                           if r["fair_mean_wait_seconds"] is not None else ""),
        "excess_text": _rate(r["heavy_excess_rate"]),
        "refused_text": share_phrase(r["heavy_refused_share"]),
        "fluid_refused_text": percent_format(r["heavy_fluid_refused_share"]),
        # An M/M/1/K queue refuses a little even below capacity; under a tenth of a percent
        # is "almost nothing".
        "refuses_some": r["heavy_refused_share"] >= REFUSED_NOTED,
        "bucket_rate_text": rate_format(r["bucket_rate_tokens"], "tokens/s"),
        "bucket_depth_text": count_format(r["bucket_depth_tokens"], "token"),
        "retry_after_text": seconds_format(r["retry_after_seconds"]),
        # The header's own value, in whole seconds (seconds_format would say "3.33 min").
        "retry_after_header_text": f"{r['retry_after_header_seconds']:,} s",
        "capped_refused_text": _rate(r["capped_refused_rate"]),
        "capped_refuses": r["capped_refused_rate"] > 0,
        "vtc_input_weight": VTC_WEIGHTS["input"],
        "vtc_output_weight": VTC_WEIGHTS["output"],
    }


SOURCES: list[tuple[str, str]] = [
    ("Sheng et al., 'Fairness in Serving Large Language Models' (OSDI 2024: the Virtual Token "
     "Counter, service measured by a cost function of input and output tokens, work-conserving; "
     "its experiments weight an output token 2 and an input token 1, after OpenAI's prices)",
     "https://www.usenix.org/conference/osdi24/presentation/sheng"),
    ("VTC artifact, slora/server/router/vtc_req_queue.py (linear cost with input_price=1 and "
     "output_price=2 by default, or a cost fitted to profiled GPU time; a returning client's "
     "counter raised to the smallest among clients with requests waiting)",
     "https://github.com/Ying1123/VTC-artifact"),
    ("Demers, Keshav and Shenker, 'Analysis and Simulation of a Fair Queueing Algorithm' "
     "(SIGCOMM 1989)", "https://doi.org/10.1145/75247.75248"),
    ("Parekh and Gallager, 'A Generalized Processor Sharing Approach to Flow Control in "
     "Integrated Services Networks: The Single-Node Case' (IEEE/ACM ToN 1993: a session's "
     "guaranteed rate bounds its delay)", "https://doi.org/10.1109/90.234856"),
    ("Harchol-Balter, 'Performance Modeling and Design of Computer Systems' (2013), ch. 14: "
     "M/M/1 mean wait ρ ÷ (μ − λ); part VII: scheduling, non-preemptive priority "
     "classes", "https://doi.org/10.1017/CBO9781139226424"),
    ("Kleinrock, 'A Conservation Law for a Wide Class of Queueing Disciplines' (Naval Research "
     "Logistics Quarterly, 1965: for work-conserving disciplines that do not use service "
     "times, the load-weighted mean wait does not depend on the discipline)",
     "https://doi.org/10.1002/nav.3800120206"),
    ("Cobham, 'Priority Assignment in Waiting Line Problems' (Operations Research, 1954: "
     "mean waits of non-preemptive priority classes)", "https://doi.org/10.1287/opre.2.1.70"),
    ("Abate and Whitt, 'Transient behavior of regulated Brownian motion, I: Starting at the "
     "origin' (Advances in Applied Probability, 1987: the diffusion approximation of a queue "
     "that starts empty, its mean rising towards the steady state)",
     "https://www.cambridge.org/core/journals/advances-in-applied-probability/article/"
     "transient-behavior-of-regulated-brownian-motion-i-starting-at-the-origin/"
     "6CF42AE2D9A336415672BF82B40A5C98"),
    ("IETF RFC 6585, section 4: 429 Too Many Requests (may include Retry-After)",
     "https://www.rfc-editor.org/rfc/rfc6585#section-4"),
    ("IETF RFC 9110, section 10.2.3: Retry-After (an HTTP-date or a whole number of seconds)",
     "https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3"),
    ("OpenAI API documentation, rate limits (requests and tokens per minute per organisation)",
     "https://platform.openai.com/docs/guides/rate-limits"),
    ("vLLM source: the V1 scheduler (priority scheduling and preemption)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/scheduler.py"),
    ("vLLM engine arguments (--scheduling-policy: fcfs or priority, requests ordered by their "
     "priority value)", "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("vLLM docs, Automatic Prefix Caching design (a per-request cache_salt mixed into the first "
     "block's hash isolates cached prefixes)",
     "https://docs.vllm.ai/en/latest/design/prefix_caching/"),
    ("TensorRT-LLM pull request 13793 (cache_salt_id: requests with different salts cannot "
     "reuse each other's cached KV blocks)", "https://github.com/NVIDIA/TensorRT-LLM/pull/13793"),
    ("Kubernetes blog, 'Introducing Gateway API Inference Extension' (2025-06-05: model-aware "
     "routing, request criticality, flow control and load shedding at the gateway)",
     "https://kubernetes.io/blog/2025/06/05/introducing-gateway-api-inference-extension/"),
]
