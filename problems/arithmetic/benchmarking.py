"""Benchmarking serving engines fairly (problem 18): how many requests a percentile needs
before it means anything, what a client's concurrency cap does to the offered rate (Little's
law), and the summary a benchmark client prints for one load point.

The summary is what `vllm bench serve` reports, measured at the client: request and output
token throughput over the run's wall time, TTFT, TPOT, ITL and end-to-end percentiles, and
goodput (requests per second that met every SLO given).
"""

import math
from collections.abc import Sequence

from problems.arithmetic.inputs import ArithmeticInputError, fraction_check, number_check
from problems.arithmetic.serving_metrics import goodput, percentile
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import number_format, rate_format, seconds_format
from problems.arithmetic.wording import count_phrase

# The two-sided 95% point of the normal distribution.
CONFIDENCE = 0.95
Z_95 = 1.959964
RATE_MAX = 1e6
DURATION_MAX = 86_400.0
LATENCY_MAX = 3_600.0
CONCURRENCY_MAX = 1_000_000
PERCENTILES = (0.5, 0.9, 0.99)
# A load point is judged on its median or a tail percentile: the counts below are of the
# requests beyond it, the smaller side from the median up.
PERCENTILE_MIN = 0.5
# The precision a p99 is usually wanted to: ±0.002 in quantile terms, p98.8 to p99.2, a fifth
# of its 1% tail (the count beyond it known to within a fifth: about 96 requests beyond it).
PRECISION_P99 = 0.002
# Every percentile's default keeps that share of its own side: a fifth of the requests beyond
# it (below it, under the median). A p99.9 gets a fifth of its 0.1%, ±0.02 points; a p50 a
# fifth of its half, ±10 points, since a median is pinned by the many requests either side.
PRECISION_TAIL_SHARE = 0.2


def percentile_label(q: float) -> str:
    """The percentile's name, "p99.9" for 0.999, with every digit it needs (never "p100" for
    0.9999)."""
    return f"p{number_format(q * 100, digits=8)}"


def percentile_level(value: float, *, half_width: float) -> str:
    """`value` (a quantile) as a percentile name with enough decimals that `value` ±
    `half_width` reads as two different percentiles: p99.88 and p99.92 at ±0.0002."""
    points = half_width * 100
    decimals = max(0, math.ceil(-math.log10(points))) + 1 if points > 0 else 2
    text = f"{value * 100:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"p{text}"


def squared_format(value: float) -> str:
    """`value`² as written in a formula, bracketed when it is in scientific notation
    ("(1×10⁻⁵)²", never "1×10⁻⁵²")."""
    text = number_format(value)
    return f"({text})²" if "×" in text else f"{text}²"


def precision_default(q: float) -> float:
    """The half-width a load point's percentile is pinned to when none is given: a fifth of the
    share of requests beyond the percentile (below it, under the median), so every percentile
    is pinned as tightly for its own side as ±0.002 pins a p99, and the interval stays between
    p0 and p100. p99: 0.002; p99.9: 0.0002; p99.99: 0.00002; p90: 0.02; p50: 0.1."""
    return round(PRECISION_TAIL_SHARE * min(q, 1 - q), 12)


def precision_check(precision: float | None, *, q: float) -> float:
    """The half-width to use: `precision` if it keeps q ± it between p0 and p100, the
    percentile's default when None. A wider one is refused with the widest this percentile
    allows and what a blank gives."""
    if precision is None:
        return precision_default(q)
    widest = round(min(q, 1 - q), 12)
    h = number_check(precision, field="precision", maximum=math.inf)
    if h > widest:
        side, edge = ("beyond", "p100") if q >= 0.5 else ("below", "p0")
        raise ArithmeticInputError(
            field="precision",
            message=(f"must be at most {number_format(widest, digits=6)} at the "
                     f"{percentile_label(q)}, the share of requests {side} it, or the interval "
                     f"reaches past {edge}; left blank it is "
                     f"±{number_format(precision_default(q), digits=6)}"))
    return h


def percentile_rank_interval(*, requests: float, q: float) -> tuple[float, float, float]:
    """How many of `requests` samples are expected beyond the true q-quantile, with a 95%
    interval (normal approximation to the binomial count n·(1 − q) ± z·√(n·q·(1 − q)))."""
    n = requests
    beyond = n * (1 - q)
    spread = Z_95 * math.sqrt(n * q * (1 - q))
    return beyond, beyond - spread, beyond + spread


def requests_for_bounded_percentile(q: float) -> int:
    """The fewest whole requests for which the 95% interval of the count beyond the q-quantile
    keeps its low end above zero (so a run is unlikely to hold no request at all beyond it):
    n·(1 − q) > z·√(n·q·(1 − q)), so n > z²·q ÷ (1 − q), the next whole number. A bare minimum
    for the estimate to exist, not a precision (`requests_for_percentile_precision` is that).
    p99: 1.96² × 0.99 ÷ 0.01 = 380.3, so 381."""
    return math.floor(Z_95**2 * q / (1 - q)) + 1


def percentile_order_interval(*, requests: int, q: float) -> tuple[int, int]:
    """The distribution-free 95% interval for the q-quantile from n sorted samples: the ranks
    (1-based, among n) of the two order statistics that bracket the true quantile,
    ⌊nq − z√(nq(1 − q))⌋ and ⌈nq + z√(nq(1 − q))⌉, clamped to 1…n (the normal approximation
    to the binomial rank; `percentile_order_open` says where an end was clamped, so that the
    sample bounds the quantile on that side not at all).
    p99 of 1,200: 1,188 ± 6.76 → ranks 1,181 and 1,195."""
    n = requests
    spread = Z_95 * math.sqrt(n * q * (1 - q))
    low = max(1, math.floor(n * q - spread))
    high = min(n, math.ceil(n * q + spread))
    return low, high


def percentile_order_open(*, requests: int, q: float) -> tuple[bool, bool]:
    """Whether the 95% interval's low end reaches below the fastest of n samples (rank under 1)
    and its high end beyond the slowest (rank over n): there the sample sets no lower (upper)
    bound on the q-quantile. p99.9 of 1,200: 1,198.8 + 2.14 is past 1,200, so no upper bound;
    p99 of 1,200: neither."""
    n = requests
    spread = Z_95 * math.sqrt(n * q * (1 - q))
    return math.floor(n * q - spread) < 1, math.ceil(n * q + spread) > n


def _below_format(value: float, *, whole: int) -> str:
    """`value` with the digits that keep it visibly below `whole`, the next whole number above
    it: 3,837.76 rather than "3,838" when the next whole number above it is 3,838."""
    digits = 3
    text = number_format(value, digits=digits)
    while float(text.replace(",", "")) >= whole and digits < 15:
        digits += 1
        text = number_format(value, digits=digits)
    return text


def requests_for_percentile_precision(*, q: float, half_width: float) -> int:
    """The fewest whole requests whose 95% order-statistic interval for the q-quantile spans at
    most ± `half_width` in quantile terms (±0.002 for p98.8 to p99.2): the sample quantile's
    rank has standard deviation √(nq(1 − q)), so n ≥ z²·q(1 − q) ÷ half_width².
    p99 to ±0.2 points: 1.96² × 0.0099 ÷ 0.002² = 9,507.6, so 9,508."""
    return math.ceil(Z_95**2 * q * (1 - q) / half_width**2)


def benchmark_plan(*, request_rate: float, duration_s: float, percentile_q: float,
                   e2e_latency_s: float, client_concurrency: int, output_tokens: int,
                   precision: float | None = None) -> Result:
    """One load point of a benchmark: requests sent, how well they pin down the percentile
    (to ± `precision` in quantile terms; None for `precision_default`), the concurrency the
    client needs to hold the rate (Little's law: in flight = rate × E2E), the rate a capped
    client really offers, and the output throughput expected if the server keeps up."""
    rate = number_check(request_rate, field="request_rate", maximum=RATE_MAX)
    duration = number_check(duration_s, field="duration_s", maximum=DURATION_MAX)
    q = fraction_check(percentile_q, field="percentile_q", allow_one=False)
    number_check(q, field="percentile_q", minimum=PERCENTILE_MIN, maximum=1.0,
                 allow_minimum=True)
    h = precision_check(precision, q=q)
    e2e = number_check(e2e_latency_s, field="e2e_latency_s", maximum=LATENCY_MAX)
    cap = int(number_check(client_concurrency, field="client_concurrency",
                           maximum=CONCURRENCY_MAX, minimum=1, allow_minimum=True,
                           integer=True))
    output = int(number_check(output_tokens, field="output_tokens", maximum=1e9, minimum=1,
                              allow_minimum=True, integer=True))
    n = rate * duration
    beyond, low, high = percentile_rank_interval(requests=n, q=q)
    needed = requests_for_bounded_percentile(q)
    whole = max(1, math.floor(n))
    rank_low, rank_high = percentile_order_interval(requests=whole, q=q)
    low_open, high_open = percentile_order_open(requests=whole, q=q)
    rank_spread = (rank_high - rank_low) / (2 * whole)
    precise = requests_for_percentile_precision(q=q, half_width=h)
    in_flight = rate * e2e
    offered = min(rate, cap / e2e)
    capped = cap < in_flight
    tokens_per_s = offered * output
    label = percentile_label(q)
    h_squared = squared_format(h)
    # q and its tail with every digit they have: 0.9999 is not "1", nor 1,199.88 "1,200"; the
    # tail rounded off its float error so that 1 − 0.9999 reads 0.0001, not 1×10⁻⁴.
    q_text, tail_text = number_format(q, digits=8), number_format(round(1 - q, 12), digits=8)
    # A Poisson load point's count is a mean: "1.5 requests on average", never "1.5 requests".
    requests_value = (f"{number_format(n)} requests" if n == int(n)
                      else f"{number_format(n)} requests on average")
    low_level = percentile_level(rank_low / whole, half_width=rank_spread)
    high_level = percentile_level(rank_high / whole, half_width=rank_spread)
    if low_open and high_open:
        interval_value = ("past both the fastest and the slowest request: no bound on either "
                          "side")
    elif high_open:
        interval_value = (f"rank {rank_low:,} up, the sample's {low_level}; past the slowest "
                          "request: no upper bound")
    elif low_open:
        interval_value = (f"up to rank {rank_high:,}, the sample's {high_level}; below the "
                          "fastest request: no lower bound")
    else:
        interval_value = (f"ranks {rank_low:,} to {rank_high:,}: between the sample's "
                          f"{low_level} and {high_level}")
    steps = (
        Step("Requests in this load point", f"{rate_format(rate, 'requests/s')} × "
             f"{seconds_format(duration)}", n, "requests", requests_value),
        Step(f"Requests expected beyond the true {label}",
             f"{number_format(n)} × (1 − {q_text})", beyond, "requests",
             f"about {number_format(beyond)} on average"),
        Step("95% range of that count", f"{number_format(beyond)} ± {Z_95:.2f} × √("
             f"{number_format(n)} × {q_text} × {tail_text})", high - low,
             "requests", f"about {number_format(max(low, 0))} to about "
             f"{number_format(high)}"),
        Step("Fewest requests for which that range clears zero (a bare minimum)",
             f"the next whole number above {Z_95:.2f}² × {q_text} ÷ "
             f"{tail_text} = {_below_format(Z_95**2 * q / (1 - q), whole=needed)}", needed,
             "requests", count_phrase(needed, "request")),
        Step(f"95% interval for the {label} (order statistics)",
             f"sorted ranks ⌊{number_format(whole * q, digits=8)} ∓ {Z_95:.2f} × √({whole:,} × "
             f"{q_text} × {tail_text})⌉ of {whole:,}",
             rank_high - rank_low, "ranks", interval_value),
        Step(f"Requests to pin the {label} to ±{number_format(h * 100)} "
             f"{'point' if h * 100 == 1 else 'points'}",
             f"{Z_95:.2f}² × {q_text} × {tail_text} ÷ "
             f"{h_squared}, rounded up", precise, "requests", f"{precise:,} requests"),
        Step("Requests in flight the client must hold (Little's law)",
             f"{rate_format(rate, 'requests/s')} × {seconds_format(e2e)}", in_flight,
             "requests", f"{number_format(in_flight)} requests on average"),
        Step("Rate the client offers, if E2E stayed at this rate's",
             f"min({rate_format(rate, 'requests/s')}, {cap:,} ÷ {seconds_format(e2e)})"
             + ("; a capped client's E2E falls with fewer in flight, so somewhat more"
                if capped else ""), offered, "requests/s",
             rate_format(offered, "requests/s")),
        Step("Output throughput if the server keeps up",
             f"{rate_format(offered, 'requests/s')} × {count_phrase(output, 'token')}",
             tokens_per_s, "tokens/s", rate_format(tokens_per_s, "tokens/s")),
    )
    return Result(values={
        "requests": n, "beyond": beyond, "beyond_low": max(low, 0.0), "beyond_high": high,
        "bounded": low > 0, "requests_needed": needed, "in_flight": in_flight,
        "rank_low": rank_low, "rank_high": rank_high, "rank_low_open": low_open,
        "rank_high_open": high_open, "precision": h,
        "requests_precise": precise, "precise_enough": n >= precise,
        "offered_rate": offered, "capped": capped, "output_tokens_per_second": tokens_per_s,
        "percentile_label": label,
    }, steps=steps)


def benchmark_summary(requests: Sequence[dict], *, duration_s: float,
                      ttft_slo_s: float | None = None, tpot_slo_s: float | None = None,
                      e2e_slo_s: float | None = None) -> dict:
    """A load point's summary from its requests as the client saw them: each a dict with
    `ok`, `ttft`, `tpot`, `itl` (list), `e2e` (seconds), `prompt_tokens`, `output_tokens`.
    Failed requests count in `failed` and nowhere else. Percentiles at 50, 90 and 99."""
    done = [r for r in requests if r.get("ok")]
    failed = len(requests) - len(done)
    out: dict = {"completed": len(done), "failed": failed, "duration_s": duration_s,
                 "request_throughput": len(done) / duration_s if duration_s > 0 else 0.0,
                 "output_tokens": sum(r["output_tokens"] for r in done),
                 "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in done)}
    out["output_throughput"] = out["output_tokens"] / duration_s if duration_s > 0 else 0.0
    series = {"ttft": [r["ttft"] for r in done],
              "tpot": [r["tpot"] for r in done if r.get("tpot") is not None],
              "itl": [gap for r in done for gap in r.get("itl", [])],
              "e2e": [r["e2e"] for r in done]}
    for name, values in series.items():
        out[f"mean_{name}"] = sum(values) / len(values) if values else None
        for q in PERCENTILES:
            key = f"p{round(q * 100)}_{name}"
            out[key] = percentile(values, q) if values else None
    g = goodput(done, duration_s=duration_s if duration_s > 0 else 1.0, ttft_slo_s=ttft_slo_s,
                tpot_slo_s=tpot_slo_s, e2e_slo_s=e2e_slo_s)
    out.update(good=g["good"], goodput=g["goodput"],
               good_share=g["good"] / len(requests) if requests else 0.0)
    return out





def expected_output_throughput(*, mode: str, level: float, output_tokens: int,
                               mean_e2e_s: float | None = None) -> float | None:
    """Output tokens/s a load point should show if the server keeps up. At a request rate λ:
    λ × output tokens (None for "all at once", which has no rate). At a fixed concurrency C,
    Little's law gives the request rate C ÷ mean E2E, so C × output tokens ÷ mean E2E."""
    if mode == "rate":
        return None if math.isinf(level) else level * output_tokens
    if mode == "concurrency":
        if not mean_e2e_s:
            return None
        return level * output_tokens / mean_e2e_s
    raise ValueError("mode must be 'rate' or 'concurrency'")
