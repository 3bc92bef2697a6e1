"""Rolling out a new model version (problem 19): how many requests a canary must serve, and for
how long at a given traffic share, before a gate can tell a regression from noise.

Two regressions, one test. A rise in the error rate from p₀ to p₁ is a difference of two
proportions. A rise in p99 latency becomes one too: by definition 1% of the current version's
requests are slower than its p99, and a candidate that is slower by a factor m has a larger
share of its requests above that same line. With latencies lognormal (σ from the current
version's p50 and p99), that share is 1 − Φ(z₀.₉₉ − ln m ÷ σ).

The canary arm of n requests is compared with the baseline arm of k·n (k = (1 − f) ÷ f at a
canary share f). A one-sided test at confidence 1 − α that detects the regression with power
1 − β needs (the normal approximation, unequal arms; Fleiss, Statistical Methods for Rates and
Proportions, ch. 4):

    n = [z₁₋α √(p₀(1 − p₀)(1 + 1/k)) + z₁₋β √(p₁(1 − p₁) + p₀(1 − p₀)/k)]² ÷ (p₁ − p₀)²

Fleiss writes the first term with the pooled rate p̄ = (p₁ + k·p₀) ÷ (1 + k); here it is the
baseline's p₀, as the demo's gate (demos/runners/rollout.py, error_threshold) tests against the
baseline's rate. With the large baseline arm of a small canary they differ little: 0.5% → 1%
at k = 19 needs 1,663 requests here, 1,711 with p̄ (3% more); at k = 1 (a 50% share), 2,846
against 3,681; they agree as k → ∞.

With k → ∞ (a baseline so large its rate is known) it is the one-sample formula. Zero errors in
n requests bound the rate below about 3 ÷ n at 95% (the "rule of three").

The normal approximation needs enough events: with n·p₀ of about ten or fewer expected in the
canary, a count of errors is lumpy and skewed and the formula asks too few requests. The
continuity correction (Fleiss, Tytun and Ury, Biometrics 36, 1980, for unequal arms) adds most
of the gap back:

    n′ = n ÷ 4 × [1 + √(1 + 2(k + 1) ÷ (k · n · (p₁ − p₀)))]²

For 1% → 2% against a known baseline (k → ∞), 95% and 80%: 792.4 by the normal formula, 889.5
corrected, and 905 by the exact binomial test (the smallest n whose one-sided test at 5% has 80%
power: reject at 15 or more errors). The canary's plan uses the corrected figure.
"""

import math
from statistics import NormalDist

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    count_format,
    money_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, times_phrase

NORMAL = NormalDist()
P99 = 0.99
CANARY_SHARE_MIN = 0.001


def requests_rate_text(rate: float) -> str:
    """A request rate for people: "1 request/s", "2.5 requests/s"."""
    text = number_format(rate)
    return f"{text} request/s" if text == "1" else f"{text} requests/s"


# Below this many expected events a count is a handful, lumpy and skewed, and the normal
# formula's sample size runs short without the continuity correction.
FEW_EVENTS = 20


def z_of(probability: float) -> float:
    """The standard normal quantile: z with Φ(z) = `probability` (0 < probability < 1)."""
    return NORMAL.inv_cdf(probability)


def canary_requests(*, p0: float, p1: float, k: float, confidence: float, power: float) -> float:
    """Requests the canary must serve (requests, not rounded) to detect a rise in a proportion
    from `p0` to `p1` (0–1, p1 > p0) against a baseline arm `k` times larger (k may be
    math.inf), one-sided at `confidence` with `power`: the module docstring's formula. p₀ = 1%,
    p₁ = 2%, k = ∞, 95%, 80%: 792.4."""
    if not 0 <= p0 < p1 <= 1:
        raise ValueError("need 0 ≤ p0 < p1 ≤ 1")
    za, zb = z_of(confidence), z_of(power)
    inv_k = 0.0 if math.isinf(k) else 1.0 / k
    null = za * math.sqrt(p0 * (1 - p0) * (1 + inv_k))
    alternative = zb * math.sqrt(p1 * (1 - p1) + p0 * (1 - p0) * inv_k)
    return (null + alternative) ** 2 / (p1 - p0) ** 2


def canary_requests_corrected(*, n: float, p0: float, p1: float, k: float) -> float:
    """Fleiss's continuity-corrected sample size (requests) from the normal formula's `n`:
    n ÷ 4 × [1 + √(1 + 2(k + 1) ÷ (k n (p₁ − p₀)))]², with (k + 1) ÷ k → 1 as k → ∞.
    792.4 for 1% → 2%, k = ∞: 889.5."""
    ratio = 1.0 if math.isinf(k) else (k + 1) / k
    return n / 4 * (1 + math.sqrt(1 + 2 * ratio / (n * (p1 - p0)))) ** 2


def lognormal_sigma(*, p50: float, p99: float) -> float:
    """σ of a lognormal whose median is `p50` and 99th percentile `p99` (same unit): ln(p99 ÷
    p50) ÷ z₀.₉₉. 200 ms and 1 s: ln 5 ÷ 2.3263 = 0.6918."""
    return math.log(p99 / p50) / z_of(P99)


def share_above_p99(*, sigma: float, slowdown: float) -> float:
    """The share of a candidate's requests slower than the current version's p99 when every
    latency is `slowdown` times longer (lognormal, `sigma`): 1 − Φ(z₀.₉₉ − ln m ÷ σ). 1 for m = 1
    gives 1%; σ 0.6918 and m 1.2 give 1.957%."""
    return 1 - NORMAL.cdf(z_of(P99) - math.log(slowdown) / sigma)


def errors_rule_of_three(*, requests: float) -> float:
    """The 95% upper bound on an error rate after `requests` requests with no error: 3 ÷ n
    (−ln 0.05 ≈ 2.996, rounded to 3)."""
    return 3.0 / requests


def canary_model(*, request_rate: float, canary_share: float, error_rate: float,
                 error_rate_regressed: float, p50_ms: float, p99_ms: float,
                 p99_regression: float, confidence: float, power: float, replicas: int,
                 gpus_per_replica: int, price_per_hour: float) -> dict:
    """The canary's sample size and duration for checked inputs (requests, s, USD): see the
    module docstring. `canary_share` is f; `replicas` the current fleet."""
    f = canary_share
    k = (1 - f) / f
    n_errors = canary_requests(p0=error_rate, p1=error_rate_regressed, k=k,
                               confidence=confidence, power=power)
    sigma = lognormal_sigma(p50=p50_ms, p99=p99_ms)
    above = share_above_p99(sigma=sigma, slowdown=p99_regression)
    n_latency = canary_requests(p0=1 - P99, p1=above, k=k, confidence=confidence, power=power)
    n_normal = max(n_errors, n_latency)
    # The plan uses the continuity-corrected sizes: a canary expects only a handful of events.
    n_errors_cc = canary_requests_corrected(n=n_errors, p0=error_rate, p1=error_rate_regressed,
                                            k=k)
    n_latency_cc = canary_requests_corrected(n=n_latency, p0=1 - P99, p1=above, k=k)
    n = max(n_errors_cc, n_latency_cc)
    canary_rate = request_rate * f
    seconds = math.ceil(n) / canary_rate
    # The canary's replicas are added beside the fleet, which keeps serving as the baseline:
    # c of them take c ÷ (replicas + c) of an unweighted router's traffic. The count is the one
    # whose natural share is nearest f, and never less than one whole replica; a router that
    # weights by request, not by replica, sets the share to f exactly.
    canary_replicas = max(1, round(f * replicas / (1 - f)))
    return {
        "k": k, "z_confidence": z_of(confidence), "z_power": z_of(power),
        "n_errors": n_errors, "n_latency": n_latency, "n_normal": n_normal,
        "n_errors_cc": n_errors_cc, "n_latency_cc": n_latency_cc, "n": n,
        "expected_errors": n_errors * error_rate, "expected_above": n_latency * (1 - P99),
        "binding": "error rate" if n_errors_cc >= n_latency_cc else "p99 latency",
        "sigma": sigma, "above_p99": above,
        "p99_regressed_ms": p99_ms * p99_regression,
        "canary_rate": canary_rate, "seconds": seconds,
        "extra_errors": math.ceil(n) * (error_rate_regressed - error_rate),
        "rule_of_three": 3.0 / error_rate if error_rate > 0 else math.inf,
        "canary_replicas": canary_replicas,
        "replica_share": canary_replicas / (replicas + canary_replicas),
        "blue_green_gpus": replicas * gpus_per_replica,
        "canary_gpu_cost": canary_replicas * gpus_per_replica * price_per_hour * seconds / 3600,
        "blue_green_cost": replicas * gpus_per_replica * price_per_hour * seconds / 3600,
    }


def canary_checked(*, request_rate: float, canary_share: float, error_rate: float,
                   error_rate_regressed: float, p50_ms: float, p99_ms: float,
                   p99_regression: float, confidence: float, power: float, replicas: int,
                   gpus_per_replica: int, price_per_hour: float) -> dict:
    """Every input range-checked, each error naming its field."""
    given = {
        "request_rate": number_check(request_rate, field="request_rate", maximum=1e7),
        "canary_share": number_check(canary_share, field="canary_share",
                                     minimum=CANARY_SHARE_MIN, maximum=0.5, allow_minimum=True),
        "error_rate": number_check(error_rate, field="error_rate", minimum=0.0, maximum=0.5,
                                   allow_minimum=True),
        "error_rate_regressed": number_check(error_rate_regressed,
                                             field="error_rate_regressed", maximum=1.0),
        "p50_ms": number_check(p50_ms, field="p50_ms", maximum=1e7),
        "p99_ms": number_check(p99_ms, field="p99_ms", maximum=1e7),
        "p99_regression": number_check(p99_regression, field="p99_regression", minimum=1.0,
                                       maximum=100.0),
        "confidence": number_check(confidence, field="confidence", minimum=0.5, maximum=0.9999,
                                   allow_minimum=True),
        "power": number_check(power, field="power", minimum=0.5, maximum=0.9999,
                              allow_minimum=True),
        "replicas": count_check(replicas, field="replicas", maximum=100_000),
        "gpus_per_replica": count_check(gpus_per_replica, field="gpus_per_replica",
                                        maximum=1_024),
        "price_per_hour": number_check(price_per_hour, field="price_per_hour", maximum=1_000),
    }
    if given["error_rate_regressed"] <= given["error_rate"]:
        raise ArithmeticInputError(field="error_rate_regressed",
                                   message="must be above the current error rate")
    if given["p99_ms"] <= given["p50_ms"]:
        raise ArithmeticInputError(field="p99_ms", message="must be above the p50")
    return given


def canary(**inputs: object) -> Result:
    """How many requests, and how long, a canary needs to catch a regression in error rate or
    in p99 latency (requests, s): see the module docstring."""
    k = canary_checked(**inputs)
    c = canary_model(**k)
    f, p0, p1 = k["canary_share"], k["error_rate"], k["error_rate_regressed"]
    conf, power = percent_format(k["confidence"]), percent_format(k["power"])
    k_text = number_format(c["k"])
    za = number_format(c["z_confidence"], digits=4)
    zb = number_format(c["z_power"], digits=4)
    z99 = number_format(z_of(P99), digits=4)
    steps = (
        Step("Canary traffic", f"{requests_rate_text(k['request_rate'])} × "
             f"{percent_format(f)}; the baseline arm, k = {k_text}, carries "
             f"{times_phrase(c['k'], 1.0)} the canary's traffic",
             c["canary_rate"], "requests/s", requests_rate_text(c["canary_rate"])),
        Step("z values", f"one-sided {conf} confidence: z = {za}; {power} power: z = {zb}",
             c["z_confidence"], "", za),
        Step("Requests to see errors rise from "
             f"{percent_format(p0)} to {percent_format(p1)}",
             f"[{za} √({number_format(p0)} × "
             f"{number_format(1 - p0)} × (1 + 1/{k_text})) + {zb} "
             f"√({number_format(p1)} × {number_format(1 - p1)} + {number_format(p0)} × "
             f"{number_format(1 - p0)}/{k_text})]² ÷ {number_format(p1 - p0)}²",
             c["n_errors"], "requests", count_format(math.ceil(c["n_errors"]), "request")),
        Step("Latency spread (lognormal)", f"σ = ln({number_format(k['p99_ms'])} ms ÷ "
             f"{number_format(k['p50_ms'])} ms) ÷ {z99}", c["sigma"], "",
             number_format(c["sigma"])),
        Step(f"Share of requests above today's p99 if {number_format(k['p99_regression'])}× "
             "slower", f"1 − Φ({z99} − ln "
             f"{number_format(k['p99_regression'])} ÷ {number_format(c['sigma'])}): p99 "
             f"{number_format(k['p99_ms'])} → {number_format(c['p99_regressed_ms'])} ms",
             c["above_p99"], "fraction", percent_format(c["above_p99"])),
        Step("Requests to see p99 rise", f"the same test, 1% → "
             f"{percent_format(c['above_p99'])} of requests above {number_format(k['p99_ms'])} "
             "ms", c["n_latency"], "requests",
             count_format(math.ceil(c["n_latency"]), "request")),
        Step("Few events: the normal approximation runs short"
             if min(c["expected_errors"], c["expected_above"]) < FEW_EVENTS
             else "Continuity correction (enough events: a small adjustment)",
             "if nothing changed the canary would expect "
             + (f"about {number_format(c['expected_errors'])} errors" if c["expected_errors"] > 0
                else "no errors (the current version never fails)")
             + " and about "
             f"{number_format(c['expected_above'])} requests above the p99 in "
             "those samples; Fleiss's continuity correction n ÷ 4 × [1 + √(1 + 2(k + 1) ÷ "
             f"(k n (p₁ − p₀)))]² gives {number_format(math.ceil(c['n_errors_cc']))} and "
             f"{number_format(math.ceil(c['n_latency_cc']))}",
             math.ceil(c["n_errors_cc"]), "requests",
             count_format(math.ceil(c["n_errors_cc"]), "request")),
        Step(f"Canary needs (the {c['binding']} binds)",
             f"max({number_format(math.ceil(c['n_errors_cc']))}, "
             f"{number_format(math.ceil(c['n_latency_cc']))}), corrected", math.ceil(c["n"]),
             "requests", count_format(math.ceil(c["n"]), "request")),
        Step("Canary duration", f"{count_format(math.ceil(c['n']), 'request')} ÷ "
             f"{requests_rate_text(c['canary_rate'])}", c["seconds"], "s",
             seconds_format(c["seconds"])),
        Step("Extra failed requests if it is a bad release",
             f"{number_format(math.ceil(c['n']))} × ({percent_format(p1)} − "
             f"{percent_format(p0)})", c["extra_errors"], "requests",
             number_format(c["extra_errors"], digits=2)),
        Step("Canary replicas, added beside the fleet",
             f"the count nearest {percent_format(f)} × {k['replicas']:,} ÷ "
             f"{percent_format(1 - f)} (at least one): "
             f"{count_format(c['canary_replicas'], 'replica')} of "
             f"{k['replicas'] + c['canary_replicas']:,} take "
             f"{percent_format(c['replica_share'])} of the traffic unless the router weights "
             "it", c["canary_replicas"], "replicas",
             count_format(c["canary_replicas"], "replica")),
        Step("Blue-green instead: a second fleet during the switch",
             f"{k['replicas']:,} × {count_phrase(k['gpus_per_replica'], 'GPU')}, "
             f"{money_format(c['blue_green_cost'])} over the same duration against "
             f"{money_format(c['canary_gpu_cost'])} for the canary", c["blue_green_gpus"],
             "GPUs", count_format(c["blue_green_gpus"], "GPU")),
    )
    values = {
        "canary_rate": c["canary_rate"], "requests_errors": math.ceil(c["n_errors"]),
        "requests_latency": math.ceil(c["n_latency"]),
        "requests_errors_corrected": math.ceil(c["n_errors_cc"]),
        "requests_latency_corrected": math.ceil(c["n_latency_cc"]),
        "expected_errors": c["expected_errors"], "requests": math.ceil(c["n"]),
        "binding": c["binding"], "sigma": c["sigma"], "share_above_p99": c["above_p99"],
        "p99_regressed_ms": c["p99_regressed_ms"], "seconds": c["seconds"],
        "extra_errors": c["extra_errors"], "canary_replicas": c["canary_replicas"],
        "replica_share": c["replica_share"], "blue_green_gpus": c["blue_green_gpus"],
        "canary_gpu_cost": c["canary_gpu_cost"], "blue_green_cost": c["blue_green_cost"],
        "z_confidence": c["z_confidence"], "z_power": c["z_power"],
        "rule_of_three_requests": c["rule_of_three"] if math.isfinite(c["rule_of_three"])
        else 0.0,
    }
    return Result(values=values, steps=steps)


__all__ = ["canary", "canary_checked", "canary_model", "canary_requests",
           "canary_requests_corrected", "requests_rate_text",
           "errors_rule_of_three", "lognormal_sigma", "share_above_p99", "z_of"]
