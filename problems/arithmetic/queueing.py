"""Queueing: why p99 explodes long before utilisation reaches 100%. M/M/c with Erlang C (c = 1
is M/M/1): Poisson arrivals, exponential service, c identical servers, first come first served.
Formulas: Harchol-Balter, 'Performance Modeling and Design of Computer Systems' (2013), ch. 14."""

import math

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, fraction_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    count_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase, share_phrase

SERVERS_MAX = 100_000
RATE_MAX = 1e9


def erlang_c(*, servers: int, offered_load: float) -> float:
    """Probability an arrival waits (0–1) with `servers` and offered load a = λ/μ (erlangs).

    Built from Erlang B by its recurrence, which stays stable for thousands of servers.
    """
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    rho = offered_load / servers
    return b / (1 - rho * (1 - b))


def response_tail(*, t: float, service_rate: float, waiting: float, drain_rate: float) -> float:
    """P(response time > t) for M/M/c: service Exp(μ) plus, with probability `waiting`, a wait
    Exp(cμ − λ) (`drain_rate`)."""
    mu, theta = service_rate, drain_rate
    no_wait = math.exp(-mu * t)
    if math.isclose(theta, mu, rel_tol=1e-9):
        with_wait = (1 + mu * t) * math.exp(-mu * t)
    else:
        with_wait = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
    return (1 - waiting) * no_wait + waiting * with_wait


def response_percentile(
    *, q: float, service_rate: float, waiting: float, drain_rate: float
) -> float:
    """The q-quantile of response time (seconds), by bisection on the tail above."""
    target = 1 - q
    high = 1.0 / min(service_rate, drain_rate)
    while (
        response_tail(t=high, service_rate=service_rate, waiting=waiting, drain_rate=drain_rate)
        > target
    ):
        high *= 2
    low = 0.0
    for _ in range(200):
        mid = (low + high) / 2
        if (
            response_tail(t=mid, service_rate=service_rate, waiting=waiting, drain_rate=drain_rate)
            > target
        ):
            low = mid
        else:
            high = mid
    return (low + high) / 2


def queue(
    *, arrival_rate: float, service_rate: float, servers: int = 1, percentile: float = 0.99
) -> Result:
    """Utilisation, mean wait in queue, mean response and p50/p99 response (seconds).

    `arrival_rate` λ and `service_rate` μ (per server) are in requests/s. The queue is stable
    only while λ < c·μ; closer to it, the wait grows as 1 / (c·μ − λ) without bound.
    """
    lam = number_check(arrival_rate, field="arrival_rate", maximum=RATE_MAX)
    mu = number_check(service_rate, field="service_rate", maximum=RATE_MAX)
    c = count_check(servers, field="servers", maximum=SERVERS_MAX)
    q = fraction_check(percentile, field="percentile", allow_one=False)
    capacity = c * mu
    rho = lam / capacity
    if rho >= 1:
        raise ArithmeticInputError(
            field="arrival_rate",
            message=f"the queue is unstable: arrivals {number_format(lam)}/s reach the capacity "
            f"{number_format(capacity)}/s ({c} × {number_format(mu)}/s); waits grow without "
            "bound",
        )
    load = lam / mu
    waiting = erlang_c(servers=c, offered_load=load)
    drain = capacity - lam
    mean_wait = waiting / drain
    mean_response = mean_wait + 1 / mu
    p50 = response_percentile(q=0.5, service_rate=mu, waiting=waiting, drain_rate=drain)
    p99 = response_percentile(q=0.99, service_rate=mu, waiting=waiting, drain_rate=drain)
    pq = response_percentile(q=q, service_rate=mu, waiting=waiting, drain_rate=drain)
    model = "M/M/1" if c == 1 else f"M/M/{c}"
    return Result(
        values={
            "utilization": rho,
            "wait_probability": waiting,
            "mean_wait_seconds": mean_wait,
            "mean_response_seconds": mean_response,
            "p50_response_seconds": p50,
            "p99_response_seconds": p99,
            "percentile": q,
            "percentile_response_seconds": pq,
        },
        steps=(
            Step(
                "Utilisation ρ",
                f"{rate_format(lam, 'requests/s')} ÷ ({c} × {rate_format(mu, 'requests/s')})",
                rho,
                "",
                percent_format(rho),
            ),
            Step(
                f"Chance an arrival waits ({model}, Erlang C)",
                "ρ" if c == 1 else f"Erlang C with {c} servers and {number_format(load)} erlangs",
                waiting,
                "",
                percent_format(waiting),
            ),
            Step(
                "Mean wait in queue",
                f"{number_format(waiting)} ÷ ({number_format(capacity)} − {number_format(lam)})/s",
                mean_wait,
                "s",
                seconds_format(mean_wait),
            ),
            Step(
                "Mean response",
                f"{seconds_format(mean_wait)} wait + 1 ÷ {number_format(mu)}/s service",
                mean_response,
                "s",
                seconds_format(mean_response),
            ),
            Step("p50 response", "median of wait + service", p50, "s", seconds_format(p50)),
            Step(
                "p99 response", "99th percentile of wait + service", p99, "s", seconds_format(p99)
            ),
        ),
    )


# Many tenants on one replica (problem 21) -------------------------------------------------------

TENANTS_MAX = 10_000


def mm1_wait(*, arrival_rate: float, service_rate: float) -> float:
    """Mean wait in queue of an M/M/1 queue, ρ ÷ (μ − λ) (seconds); infinite when λ ≥ μ."""
    if arrival_rate >= service_rate:
        return math.inf
    return (arrival_rate / service_rate) / (service_rate - arrival_rate)


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def mm1_backlog_from_empty(*, arrival_rate: float, service_rate: float, seconds: float) -> float:
    """Mean number of requests in an M/M/1 system `seconds` after it started empty, on either
    side of capacity: the diffusion (reflected Brownian motion) approximation, drift θ = λ − μ
    and variance σ² = λ + μ per second, capped by the steady state ρ ÷ (1 − ρ) it tends to
    below capacity (the mean from empty rises towards it and never passes it).

    E[R(t)] = θt·Φ(a) + σ√t·φ(a) + σ²/(2θ)·(2Φ(a) − 1), a = θ√t ÷ σ (R(t) from 0 is
    distributed as the running maximum of the free Brownian motion up to t; Abate and Whitt,
    'Transient behavior of regulated Brownian motion, I', 1987); at θ = 0 it is σ√(2t/π).
    One formula on both sides of capacity, so the wait does not jump where the load crosses
    it: at λ = μ = 40/s after 60 s it is √(80 × 60 × 2/π) = 55.3 requests (an exact M/M/1
    computed step by step from empty gives 54.8); at λ = 42 it is 140, near the fluid
    (λ − μ)t = 120 plus the noise.
    """
    theta = arrival_rate - service_rate
    var = arrival_rate + service_rate
    t = seconds
    s = math.sqrt(var * t)
    if s == 0:
        return 0.0
    if abs(theta) * t < 1e-9 * s:
        diffusion = s * math.sqrt(2 / math.pi)
    else:
        a = theta * t / s
        phi = math.exp(-a * a / 2) / math.sqrt(2 * math.pi)
        diffusion = (theta * t * _normal_cdf(a) + s * phi
                     + var / (2 * theta) * (2 * _normal_cdf(a) - 1))
    if theta < 0:
        rho = arrival_rate / service_rate
        return min(rho / (1 - rho), diffusion)
    return diffusion


def mm1k_blocking(*, arrival_rate: float, service_rate: float, capacity: int) -> float:
    """The share of arrivals an M/M/1/K queue turns away: the chance that it already holds
    `capacity` requests, (1 − ρ) ρ^K ÷ (1 − ρ^(K+1)), or 1 ÷ (K + 1) at ρ = 1.

    Past capacity it tends to the fluid excess 1 − 1/ρ as K grows, and is always above it: a
    bound of 64 at ρ = 36/34 refuses 5.69% (fluid: 2/36 = 5.56%), a bound of 1 refuses
    ρ ÷ (1 + ρ) = 51.4%. Below capacity it is small but not zero."""
    rho = arrival_rate / service_rate
    k = capacity
    if abs(rho - 1) < 1e-12:
        return 1 / (k + 1)
    # In logs, so a bound of 10⁹ neither overflows nor loses the answer.
    log_rho = math.log(rho)
    if rho < 1:
        return (1 - rho) * math.exp(k * log_rho) / (1 - math.exp((k + 1) * log_rho))
    # ρ > 1: divide through by ρ^(K+1): (1 − 1/ρ) ÷ (1 − ρ^−(K+1)).
    return (1 - 1 / rho) / (1 - math.exp(-(k + 1) * log_rho))


def priority_waits(*, first_rate: float, second_rate: float,
                   service_rate: float) -> tuple[float, float]:
    """Mean waits in queue (seconds) of two classes sharing one server with the same
    exponential service, the first class always taken before the second but never
    interrupting a request in service (non-preemptive priority, Cobham 1954).

    W0 = mean residual service an arrival finds = ρ ÷ μ (1 ÷ μ when the server is always
    busy); W_first = W0 ÷ (1 − ρ₁); W_second = W0 ÷ ((1 − ρ₁)(1 − ρ)), infinite at ρ ≥ 1.
    The load-weighted mean of the two equals FCFS's ρ ÷ (μ − λ) (Kleinrock's conservation
    law): serving one class first only moves waiting to the other.
    """
    mu = service_rate
    rho_1 = first_rate / mu
    rho = (first_rate + second_rate) / mu
    w0 = min(rho, 1.0) / mu
    first = w0 / (1 - rho_1)
    second = math.inf if rho >= 1 else w0 / ((1 - rho_1) * (1 - rho))
    return first, second


def kingman_wait(*, utilization: float, arrival_cv2: float, service_cv2: float,
                 mean_service: float) -> float:
    """Kingman's G/G/1 approximation of the mean wait in queue (seconds):
    ρ ÷ (1 − ρ) × (Ca² + Cs²) ÷ 2 × E[S], with Ca² and Cs² the squared coefficients of variation
    of the gaps between arrivals and of the service times (1 each for Poisson arrivals and
    exponential service, which gives M/M/1's ρ ÷ (1 − ρ) × E[S] exactly). Bursts or retries
    raise Ca² just as a long-tailed service raises Cs². ρ 0.8, Ca² 4, Cs² 1, E[S] 2 s:
    4 × 2.5 × 2 = 20 s, against M/M/1's 8 s."""
    if not 0 <= utilization < 1:
        raise ValueError(f"a stable queue needs 0 ≤ ρ < 1, not {utilization}")
    return utilization / (1 - utilization) * (arrival_cv2 + service_cv2) / 2 * mean_service


def tenant_fairness(
    *,
    capacity_tokens_per_s: float = 20_000.0,
    tokens_per_request: float = 500.0,
    heavy_rate: float = 36.0,
    light_rate: float = 2.0,
    light_tenants: int = 3,
    queue_bound: int = 64,
    burst_seconds: float = 2.0,
    overload_seconds: float = 60.0,
) -> Result:
    """Each tenant's wait under first come first served and under equal-weight fair sharing,
    what a queue bound refuses, and the token bucket that caps the heavy tenant at its share.

    The replica is one server that finishes μ = capacity ÷ tokens per request requests/s (its
    saturated throughput), fed by Poisson arrivals: one heavy tenant at `heavy_rate` and
    `light_tenants` light ones at `light_rate` each (requests/s), every request the same
    exponential service.

    FCFS: every tenant sees the same wait, that of one M/M/1 queue `overload_seconds` after it
    started empty (`mm1_backlog_from_empty` ÷ μ): the steady ρ ÷ (μ − λ) well below capacity,
    growing with time near and past it, one model on both sides.

    Fair sharing (a counter per tenant, least served goes next, work-conserving): tenants that
    send less than the others are never behind for long, so the scheduler takes their requests
    first; the model is two-class non-preemptive priority, the tenants with the lower rate
    first (`priority_waits`), and FCFS for all when the rates are equal. Fairness therefore
    moves waiting from the light tenants to the heavy one at a fixed load; it cannot lower
    everyone's (the load-weighted mean stays FCFS's). A light tenant's wait is at most
    (1 ÷ μ) ÷ (1 − ρ_light), whatever the heavy tenant sends: one request's residual service
    plus the light tenants' own queue. The heavy tenant's queue holds at most `queue_bound`
    requests, so by Little's law it waits at most bound ÷ its throughput; what it sends beyond
    the capacity the light tenants leave is refused (429) once that queue is full.
    """
    capacity = number_check(capacity_tokens_per_s, field="capacity_tokens_per_s",
                            maximum=RATE_MAX)
    size = number_check(tokens_per_request, field="tokens_per_request", maximum=RATE_MAX)
    lam_h = number_check(heavy_rate, field="heavy_rate", maximum=RATE_MAX)
    lam_l = number_check(light_rate, field="light_rate", maximum=RATE_MAX)
    n = count_check(light_tenants, field="light_tenants", maximum=TENANTS_MAX)
    bound = count_check(queue_bound, field="queue_bound", maximum=10**9)
    burst = number_check(burst_seconds, field="burst_seconds", maximum=86_400.0)
    overload = number_check(overload_seconds, field="overload_seconds", maximum=86_400.0)
    mu = capacity / size
    k = n + 1
    share = mu / k
    if lam_l >= share:
        raise ArithmeticInputError(
            field="light_rate",
            message=f"must stay under a light tenant's fair share, {number_format(share)} "
                    f"requests/s (μ {number_format(mu)}/s ÷ {k} tenants)")
    lam_light = n * lam_l
    lam = lam_h + lam_light
    rho = lam / mu
    rho_light = lam_light / mu
    fcfs_stable = rho < 1
    fcfs_wait = mm1_wait(arrival_rate=lam, service_rate=mu)
    growth = max(0.0, (lam - mu) / mu)  # seconds of wait added per second of overload
    backlog = mm1_backlog_from_empty(arrival_rate=lam, service_rate=mu, seconds=overload)
    fcfs_wait_after = backlog / mu
    fcfs_settled = fcfs_stable and fcfs_wait_after >= fcfs_wait * (1 - 1e-9)
    heavy_capacity = mu - lam_light
    heavy_stable = lam_h < heavy_capacity
    heavy_is_heavier = lam_h > lam_l
    if heavy_is_heavier:
        light_wait, heavy_steady = priority_waits(first_rate=lam_light, second_rate=lam_h,
                                                  service_rate=mu)
    elif lam_h < lam_l:
        heavy_steady, light_wait = priority_waits(first_rate=lam_h, second_rate=lam_light,
                                                  service_rate=mu)
    else:
        light_wait = heavy_steady = fcfs_wait
    light_wait_bound = (1 / mu) / (1 - rho_light)
    heavy_throughput = min(lam_h, heavy_capacity)
    # The heavy tenant's queue never holds more than the bound (Little's law caps its wait),
    # nor more than the whole replica's backlog after the overload period.
    by_bound = bound / heavy_throughput
    by_backlog = backlog / heavy_capacity
    heavy_wait = min(heavy_steady, by_bound, by_backlog)
    heavy_capped = heavy_wait < heavy_steady
    heavy_limit = (None if not heavy_capped else
                   "bound" if by_bound <= by_backlog else "backlog")
    excess = max(0.0, lam_h - heavy_capacity)
    # The heavy tenant's own queue, served at what the light tenants leave and holding at most
    # `bound` requests, as an M/M/1/K: what it turns away, below capacity as well as past it
    # (the fluid excess ÷ λ_h alone said 5.56% at a bound of 1, against 51.4%).
    refused_share = mm1k_blocking(arrival_rate=lam_h, service_rate=heavy_capacity,
                                  capacity=bound)
    fluid_refused_share = excess / lam_h
    fair_mean = ((lam_light * light_wait + lam_h * heavy_wait) / lam
                 if fcfs_stable and not heavy_capped else None)
    bucket_rate = share * size
    bucket_depth = bucket_rate * burst
    retry_after = size / bucket_rate
    # HTTP's Retry-After carries whole seconds (RFC 9110, delay-seconds): round up, so a client
    # that obeys it never returns before the bucket has refilled. A whole number of seconds
    # must not be pushed up by floating-point noise (100 tokens at a third of 100 tokens/s
    # computes as 3.0000000000000004 s).
    retry_after_header = math.ceil(retry_after * (1 - 1e-12))
    capped_refused = max(0.0, lam_h - share)
    if heavy_is_heavier:
        light_formula = (f"W0 ÷ (1 − ρ_light), W0 = {number_format(min(rho, 1.0))} ÷ "
                         f"{number_format(mu)}/s, ρ_light = {number_format(rho_light)}: the "
                         "light tenants go first")
        heavy_formula = ("W0 ÷ ((1 − ρ_light)(1 − ρ)): it waits behind the light tenants"
                         if not heavy_capped else
                         f"at most {bound:,} queued ÷ {number_format(heavy_throughput)}/s "
                         "(Little's law at the bound)"
                         if heavy_limit == "bound" else
                         "the replica's backlog after the overload ÷ what the heavy tenant "
                         "is served")
    elif lam_h < lam_l:
        light_formula = ("W0 ÷ ((1 − ρ_heavy)(1 − ρ)): the heavy tenant sends less, so it goes "
                         "first")
        heavy_formula = "W0 ÷ (1 − ρ_heavy)"
    else:
        light_formula = heavy_formula = "equal rates: nobody is favoured, FCFS's wait"
    return Result(
        values={
            "service_rate": mu,
            "total_rate": lam,
            "utilization": rho,
            "fcfs_stable": fcfs_stable,
            "fcfs_wait_seconds": fcfs_wait if fcfs_stable else None,
            "fcfs_wait_growth": growth,
            "fcfs_backlog_requests": backlog,
            "fcfs_wait_after_overload_seconds": fcfs_wait_after,
            "fcfs_settled": fcfs_settled,
            "fair_share_rate": share,
            "heavy_is_heavier": heavy_is_heavier,
            "light_wait_seconds": light_wait,
            "light_wait_bound_seconds": light_wait_bound,
            "heavy_capacity_rate": heavy_capacity,
            "heavy_stable": heavy_stable,
            "heavy_wait_seconds": heavy_wait,
            "heavy_wait_capped": heavy_capped,
            "heavy_wait_limit": heavy_limit,
            "fair_mean_wait_seconds": fair_mean,
            "heavy_excess_rate": excess,
            "heavy_refused_share": refused_share,
            "heavy_fluid_refused_share": fluid_refused_share,
            "bucket_rate_tokens": bucket_rate,
            "bucket_depth_tokens": bucket_depth,
            "retry_after_seconds": retry_after,
            "retry_after_header_seconds": retry_after_header,
            "capped_refused_rate": capped_refused,
        },
        steps=(
            Step("Service rate μ", f"{number_format(capacity)} tokens/s ÷ "
                 f"{amount_phrase(size, 'tokens')} per request", mu, "requests/s",
                 rate_format(mu, "requests/s")),
            Step("Offered load λ", f"{number_format(lam_h)} heavy + {n} × "
                 f"{number_format(lam_l)} light", lam, "requests/s",
                 rate_format(lam, "requests/s")),
            Step("Utilisation ρ", f"{number_format(lam)} ÷ {number_format(mu)}", rho, "",
                 percent_format(rho)),
            Step("FCFS: requests in the system after the overload period, from empty",
                 f"diffusion with drift λ − μ = {number_format(lam - mu)}/s over "
                 f"{seconds_format(overload)}"
                 + (", capped by the steady state ρ ÷ (1 − ρ)" if fcfs_stable else ""),
                 backlog, "requests", number_format(backlog)),
            Step("FCFS: every tenant's mean wait then",
                 f"{number_format(backlog)} requests ÷ {number_format(mu)}/s"
                 + (" (the steady M/M/1 wait ρ ÷ (μ − λ))" if fcfs_settled else ""),
                 fcfs_wait_after, "s", seconds_format(fcfs_wait_after)),
            Step("Fair share per tenant", f"{number_format(mu)} ÷ {k} tenants", share,
                 "requests/s", rate_format(share, "requests/s")),
            Step("Fair: a light tenant's mean wait", light_formula, light_wait, "s",
                 seconds_format(light_wait)),
            Step("Fair: a light tenant's wait whatever the heavy tenant sends, at most",
                 f"(1 ÷ {number_format(mu)}/s) ÷ (1 − {number_format(rho_light)})",
                 light_wait_bound, "s", seconds_format(light_wait_bound)),
            Step("Fair: what the heavy tenant can be served",
                 f"{number_format(mu)} − {n} × {number_format(lam_l)} (the light tenants' "
                 "unused share is handed on)", heavy_capacity, "requests/s",
                 rate_format(heavy_capacity, "requests/s")),
            Step("Fair: the heavy tenant's excess",
                 f"max(0, {number_format(lam_h)} − {number_format(heavy_capacity)})", excess,
                 "requests/s", rate_format(excess, "requests/s")),
            Step("Fair: the heavy tenant's mean wait", heavy_formula, heavy_wait, "s",
                 seconds_format(heavy_wait)),
            Step("Share of the heavy tenant's requests refused (429)",
                 f"M/M/1/K: ρ_h = {number_format(lam_h)} ÷ {number_format(heavy_capacity)}, "
                 f"K = {bound:,}: (1 − ρ_h) ρ_h^K ÷ (1 − ρ_h^(K+1)) (the fluid excess alone: "
                 f"{number_format(excess)} ÷ {number_format(lam_h)} = "
                 f"{percent_format(fluid_refused_share)})", refused_share, "",
                 share_phrase(refused_share)),
            Step("Token bucket rate for the heavy tenant's share",
                 f"{number_format(share)} requests/s × {amount_phrase(size, 'tokens')}",
                 bucket_rate, "tokens/s", rate_format(bucket_rate, "tokens/s")),
            Step("Bucket depth (burst)", f"{number_format(bucket_rate)} tokens/s × "
                 f"{number_format(burst)} s", bucket_depth, "tokens",
                 count_format(bucket_depth, "token")),
            Step("Retry-After for one request on an empty bucket",
                 f"{amount_phrase(size, 'tokens')} ÷ {number_format(bucket_rate)} tokens/s",
                 retry_after, "s", seconds_format(retry_after)),
            Step("Retry-After header (whole seconds)",
                 f"⌈{number_format(retry_after)} s⌉: the header carries whole seconds",
                 retry_after_header, "s", f"{retry_after_header:,} s"),
        ),
    )


def seat_waits_steps(*, heavy: int, seats: int, service_steps: int,
                     arrivals: list[int]) -> dict[str, list[float]]:
    """Engine steps each late request waits for a seat, behind a burst of `heavy` requests
    queued at step 0, all holding a seat for `service_steps` (the fairness demo's workload).

    The burst runs in waves of `seats`: wave k holds the seats over steps [k·L, (k+1)·L).
    FCFS: a request arriving at step a behind p earlier requests starts with wave ⌊p ÷ seats⌋,
    so it waits max(0, ⌊p ÷ seats⌋·L − a). Fair share (a tenant with no running request goes
    first): it takes the next seat to free, at the next multiple of L: ⌈a ÷ L⌉·L − a. Requests
    are numbered in arrival order; every earlier late request counts in p as well.
    """
    heavy = count_check(heavy, field="heavy", minimum=0)
    seats = count_check(seats, field="seats")
    length = count_check(service_steps, field="service_steps")
    fcfs, fair = [], []
    for i, a in enumerate(sorted(arrivals)):
        position = heavy + i
        fcfs.append(float(max(0, (position // seats) * length - a)))
        fair.append(float(-(-a // length) * length - a) if a < math.ceil(heavy / seats) * length
                    else 0.0)
    return {"fcfs": fcfs, "fair": fair}
UTILIZATIONS_TABLE = (0.5, 0.8, 0.9, 0.95)


def wait_percentile(*, q: float, waiting: float, drain_rate: float) -> float:
    """The q-quantile of the wait in queue (seconds) for M/M/c: P(W > t) = C·e^(−(cμ − λ)t),
    with C the chance of waiting (`waiting`) and cμ − λ the `drain_rate`; 0 when at least a
    fraction q of arrivals never wait. M/M/1 at ρ 0.9, μ 10/s: p99 = ln(0.9/0.01)/1 = 4.4998 s.
    """
    if waiting <= 1 - q:
        return 0.0
    return math.log(waiting / (1 - q)) / drain_rate


def queue_percentiles(*, service_rate: float, servers: int = 1,
                      utilizations: tuple[float, ...] = UTILIZATIONS_TABLE) -> list[dict]:
    """p50 and p99 of the wait and of the response (wait + service) at each utilisation, for
    M/M/c with `servers` servers of `service_rate` each (seconds). In M/M/1 the response is
    exponential with rate μ − λ, so its p99/p50 is ln 100 / ln 2 = 6.64 at every load."""
    mu = number_check(service_rate, field="service_rate", maximum=RATE_MAX)
    c = count_check(servers, field="servers", maximum=SERVERS_MAX)
    rows = []
    for rho in utilizations:
        lam = rho * c * mu
        waiting = erlang_c(servers=c, offered_load=lam / mu)
        drain = c * mu - lam
        row = {"utilization": rho, "wait_probability": waiting,
               "mean_wait_seconds": waiting / drain}
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            row[f"{name}_wait_seconds"] = wait_percentile(q=q, waiting=waiting, drain_rate=drain)
            row[f"{name}_response_seconds"] = response_percentile(
                q=q, service_rate=mu, waiting=waiting, drain_rate=drain)
        row["response_ratio"] = row["p99_response_seconds"] / row["p50_response_seconds"]
        rows.append(row)
    return rows


def length_tail(*, ttft_seconds: float, tpot_seconds: float, p50_output_tokens: int,
                p99_output_tokens: int) -> dict[str, float]:
    """End-to-end latency at the median and the 99th percentile of output length, with no
    queueing at all (seconds): TTFT + (n − 1) × TPOT is increasing in n, so the percentiles of
    the length map straight onto percentiles of latency. 0.2 s, 20 ms, 200 and 2,000 tokens:
    4.18 s and 40.18 s, a ratio of 9.61."""
    def e2e(n: int) -> float:
        return ttft_seconds + (n - 1) * tpot_seconds

    p50, p99 = e2e(p50_output_tokens), e2e(p99_output_tokens)
    return {"p50_seconds": p50, "p99_seconds": p99, "ratio": p99 / p50}


def tail_latency(
    *,
    mean_service_seconds: float = 4.0,
    servers: int = 16,
    utilization: float = 0.9,
    ttft_ms: float = 200.0,
    tpot_ms: float = 20.0,
    p50_output_tokens: int = 200,
    p99_output_tokens: int = 2_000,
) -> Result:
    """Where p99 ≫ p50 comes from (seconds): queueing near saturation, for one server (M/M/1)
    and for `servers` seats (M/M/c), at the table's utilisations and at `utilization`; and
    the spread that output lengths alone give, with no queue at all."""
    s = number_check(mean_service_seconds, field="mean_service_seconds", maximum=1e6)
    c = count_check(servers, field="servers", maximum=SERVERS_MAX)
    rho = fraction_check(utilization, field="utilization", allow_one=False)
    ttft = number_check(ttft_ms, field="ttft_ms", minimum=0.0, maximum=1e7,
                        allow_minimum=True) / 1e3
    tpot = number_check(tpot_ms, field="tpot_ms", maximum=1e6) / 1e3
    p50n = count_check(p50_output_tokens, field="p50_output_tokens", maximum=10**7)
    p99n = count_check(p99_output_tokens, field="p99_output_tokens", maximum=10**7)
    if p99n < p50n:
        raise ArithmeticInputError(field="p99_output_tokens",
                                   message="the 99th percentile cannot be below the median")
    mu = 1 / s
    levels = tuple(sorted({*UTILIZATIONS_TABLE, rho}))
    one = queue_percentiles(service_rate=mu, servers=1, utilizations=levels)
    many = queue_percentiles(service_rate=mu, servers=c, utilizations=levels)
    mine1 = next(r for r in one if r["utilization"] == rho)
    minec = next(r for r in many if r["utilization"] == rho)
    lengths = length_tail(ttft_seconds=ttft, tpot_seconds=tpot, p50_output_tokens=p50n,
                          p99_output_tokens=p99n)
    ratio_mm1 = math.log(100) / math.log(2)
    steps = (
        Step("Service rate per server μ", f"1 ÷ {seconds_format(s)} mean service",
             mu, "requests/s", rate_format(mu, "requests/s")),
        Step(f"M/M/1 at {percent_format(rho)}: p99 wait",
             f"P(wait > t) = ρ·e^(−(μ − λ)t); p50 {seconds_format(mine1['p50_wait_seconds'])}",
             mine1["p99_wait_seconds"], "s", seconds_format(mine1["p99_wait_seconds"])),
        Step(f"M/M/1 at {percent_format(rho)}: p99 response",
             f"response ~ Exp(μ − λ): p50 = ln 2 ÷ (μ − λ) = "
             f"{seconds_format(mine1['p50_response_seconds'])}; p99 = ln 100 ÷ (μ − λ)",
             mine1["p99_response_seconds"], "s",
             seconds_format(mine1["p99_response_seconds"])),
        Step("M/M/1 p99 ÷ p50 of response, at any load", "ln 100 ÷ ln 2", ratio_mm1, "×",
             f"{number_format(ratio_mm1)}×"),
        Step(f"M/M/{c} at {percent_format(rho)}: chance an arrival waits (Erlang C)",
             f"{count_phrase(c, 'server')}, {number_format(rho * c)} erlangs",
             minec["wait_probability"], "",
             percent_format(minec["wait_probability"])),
        Step(f"M/M/{c} at {percent_format(rho)}: p99 wait and response",
             f"p99 wait {seconds_format(minec['p99_wait_seconds'])}; p50 response "
             f"{seconds_format(minec['p50_response_seconds'])}",
             minec["p99_response_seconds"], "s",
             seconds_format(minec["p99_response_seconds"])),
        Step(f"M/M/{c}: p99 ÷ p50 of response",
             f"{seconds_format(minec['p99_response_seconds'])} ÷ "
             f"{seconds_format(minec['p50_response_seconds'])}", minec["response_ratio"], "×",
             f"{number_format(minec['response_ratio'])}×"),
        Step("Output lengths alone: p50 end to end",
             f"{seconds_format(ttft)} TTFT + ({p50n:,} − 1) × {seconds_format(tpot)}",
             lengths["p50_seconds"], "s", seconds_format(lengths["p50_seconds"])),
        Step("Output lengths alone: p99 end to end",
             f"{seconds_format(ttft)} TTFT + ({p99n:,} − 1) × {seconds_format(tpot)}",
             lengths["p99_seconds"], "s", seconds_format(lengths["p99_seconds"])),
        Step("Output lengths alone: p99 ÷ p50", "no queue, no contention: only the lengths",
             lengths["ratio"], "×", f"{number_format(lengths['ratio'])}×"),
    )
    return Result(values={
        "service_rate": mu, "mm1": one, "mmc": many, "utilization": rho,
        "mm1_ratio": ratio_mm1,
        "mine_mm1": mine1, "mine_mmc": minec,
        "length_p50_seconds": lengths["p50_seconds"],
        "length_p99_seconds": lengths["p99_seconds"], "length_ratio": lengths["ratio"],
        # The mean output length the mean service time implies, from s = TTFT + (n − 1) × TPOT
        # (0 when the service is shorter than TTFT): 4 s, 0.2 s, 20 ms → 191 tokens.
        "implied_mean_output_tokens": (s - ttft) / tpot + 1 if s >= ttft else 0.0,
    }, steps=steps)
