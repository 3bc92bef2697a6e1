"""Queueing: why p99 explodes long before utilisation reaches 100%. M/M/c with Erlang C (c = 1
is M/M/1): Poisson arrivals, exponential service, c identical servers, first come first served.
Formulas: Harchol-Balter, 'Performance Modeling and Design of Computer Systems' (2013), ch. 14."""

import math

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, fraction_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import number_format, percent_format, rate_format, seconds_format

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
