"""The metrics of a serving system (problem 16): each request's latencies from its token times,
percentiles (exact, and as Prometheus estimates them from histogram buckets), goodput at an
SLO, and cost per request from an hourly GPU price, measured throughput and utilisation, with
what a drop in prefix-cache hit rate costs.

Definitions used throughout (times in seconds, measured where the caller says: at the client
or in the engine):
- TTFT: from the request's arrival to its first output token.
- ITL: each gap between consecutive output tokens of one request (a list per request).
- TPOT: the mean of a request's gaps, (last token − first token) ÷ (output tokens − 1).
- E2E: from arrival to the last token.
"""

import math
from collections.abc import Sequence

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    money_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

PRICE_MAX = 1e4
THROUGHPUT_MAX = 1e9
REQUESTS_PER_DAY_MAX = 1e12
SECONDS_PER_HOUR = 3600
DAYS_PER_MONTH = 30


def request_latencies(*, arrival: float, token_times: Sequence[float]) -> dict:
    """One request's TTFT, TPOT, ITL and E2E (seconds) from its arrival time and the time each
    output token was seen (same clock). TPOT and ITL need two tokens; with one they are None
    and []."""
    if not token_times:
        raise ValueError("a request with no output token has no TTFT")
    gaps = [b - a for a, b in zip(token_times, token_times[1:], strict=False)]
    n = len(token_times)
    return {
        "ttft": token_times[0] - arrival,
        "tpot": (token_times[-1] - token_times[0]) / (n - 1) if n > 1 else None,
        "itl": gaps,
        "e2e": token_times[-1] - arrival,
        "output_tokens": n,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) by linear interpolation between closest ranks (numpy's
    default, the one `vllm bench serve` prints): rank q·(n − 1) counted from 0."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 1:
        raise ValueError("q must be between 0 and 1")
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile: `buckets` are (upper bound, cumulative count) pairs in
    increasing order, the last bound +Inf. The answer is interpolated linearly inside the
    bucket holding rank q·total (the first bucket from 0); a rank in the +Inf bucket returns
    the highest finite bound. None when there are no observations."""
    if not 0 <= q <= 1:
        raise ValueError("q must be between 0 and 1")
    if not buckets or buckets[-1][1] <= 0:
        return None
    if not math.isinf(buckets[-1][0]):
        raise ValueError("the last bucket must be +Inf")
    total = buckets[-1][1]
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return previous_bound
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                count - previous_count)
        previous_bound, previous_count = bound, count
    return previous_bound


def goodput(requests: Sequence[dict], *, duration_s: float, ttft_slo_s: float | None = None,
            tpot_slo_s: float | None = None, e2e_slo_s: float | None = None) -> dict:
    """Requests that met every SLO given (TTFT, TPOT, E2E, each in seconds; None = not
    checked), their share, and goodput: those requests per second of `duration_s`. A request
    with a single token has no TPOT and passes that check."""
    number_check(duration_s, field="duration_s")

    def met(r: dict) -> bool:
        return ((ttft_slo_s is None or r["ttft"] <= ttft_slo_s)
                and (tpot_slo_s is None or r["tpot"] is None or r["tpot"] <= tpot_slo_s)
                and (e2e_slo_s is None or r["e2e"] <= e2e_slo_s))

    good = sum(1 for r in requests if met(r))
    return {"good": good, "total": len(requests),
            "share": good / len(requests) if requests else 0.0,
            "goodput": good / duration_s}


def measured_cost(*, price_per_hour: float, seconds: float, requests: int,
                  output_tokens: int) -> dict:
    """What a measured stretch of serving cost (USD): the machine paid by the hour for
    `seconds` of wall time, whatever it did meanwhile, shared among the `requests` it finished
    and their `output_tokens`. Per request and per million output tokens are None when there
    is nothing to share it among."""
    dollars = price_per_hour / SECONDS_PER_HOUR * seconds
    return {"dollars": dollars,
            "per_request": dollars / requests if requests else None,
            "per_million_output_tokens": dollars / output_tokens * 1e6 if output_tokens
            else None}


def metrics_prediction(*, rate: float, output_tokens: int, prompt_tokens: int,
                       prefix_share: float, prefix_tokens: int, block_size: int,
                       mean_e2e_s: float) -> dict:
    """What simple arithmetic predicts for a run: output tokens/s = rate × output length;
    requests in the engine = rate × mean E2E (Little's law); prefix-cache hit rate = the shared
    share × the prefix's whole cache blocks ÷ the prompt."""
    cached = (prefix_tokens // block_size) * block_size
    return {"tokens_per_s": rate * output_tokens, "in_system": rate * mean_e2e_s,
            "hit_rate": prefix_share * cached / prompt_tokens}


def _price_check(price_per_hour: float) -> float:
    return number_check(price_per_hour, field="price_per_hour", maximum=PRICE_MAX)


def request_cost(
    *,
    price_per_hour: float,
    gpus: int,
    prompt_tokens: int,
    output_tokens: int,
    prefill_tokens_per_second: float,
    decode_tokens_per_second: float,
    utilization: float,
    cache_hit_rate: float,
    hit_rate_drop: float,
    requests_per_day: float,
) -> Result:
    """Dollars per request and per million tokens for one replica of `gpus` GPUs at
    `price_per_hour` each, and what a drop of `hit_rate_drop` (a fraction of prompt tokens,
    absolute: 0.2 takes a 50% hit rate to 30%) in the prefix-cache hit rate costs.

    Replica time per request = uncached prompt tokens ÷ prefill throughput + output tokens ÷
    decode throughput, both measured on this replica (tokens/s while it does only that work,
    at its usual batch). Every paid hour counts, so busy time is divided by `utilization`
    (the share of paid time the replica is serving).
    """
    price = _price_check(price_per_hour)
    gpus = count_check(gpus, field="gpus", maximum=100_000)
    prompt = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX, minimum=0)
    output = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    prefill_rate = number_check(prefill_tokens_per_second, field="prefill_tokens_per_second",
                                maximum=THROUGHPUT_MAX)
    decode_rate = number_check(decode_tokens_per_second, field="decode_tokens_per_second",
                               maximum=THROUGHPUT_MAX)
    util = fraction_check(utilization, field="utilization")
    hit = fraction_check(cache_hit_rate, field="cache_hit_rate", allow_zero=True,
                         allow_one=False)
    drop = fraction_check(hit_rate_drop, field="hit_rate_drop", allow_zero=True)
    if drop > hit:
        raise ArithmeticInputError(field="hit_rate_drop",
                                   message=f"cannot be more than the hit rate ({hit:g})")
    daily = number_check(requests_per_day, field="requests_per_day",
                         maximum=REQUESTS_PER_DAY_MAX)
    replica_per_hour = price * gpus
    after = hit - drop

    def side(rate: float) -> dict:
        uncached = prompt * (1 - rate)
        prefill_s = uncached / prefill_rate
        decode_s = output / decode_rate
        busy = prefill_s + decode_s
        dollars = replica_per_hour / SECONDS_PER_HOUR * busy / util
        return {"uncached": uncached, "prefill_s": prefill_s, "decode_s": decode_s,
                "busy_s": busy, "dollars": dollars,
                "requests_per_hour": SECONDS_PER_HOUR * util / busy}

    b, a = side(hit), side(after)
    per_m_output = b["dollars"] / output * 1e6
    per_m_total = b["dollars"] / (prompt + output) * 1e6
    extra = a["dollars"] - b["dollars"]
    increase = extra / b["dollars"]
    capacity_loss = 1 - a["requests_per_hour"] / b["requests_per_hour"]
    extra_month = extra * daily * DAYS_PER_MONTH
    replicas_before = daily / 24 / b["requests_per_hour"]
    replicas_after = daily / 24 / a["requests_per_hour"]
    steps = (
        Step("Replica price", f"{money_format(price)}/h × {gpus:,} GPU{'s' * (gpus != 1)}",
             replica_per_hour, "USD/h", f"{money_format(replica_per_hour)}/h"),
        Step("Prompt tokens to prefill",
             f"{count_phrase(prompt, 'token')} × (1 − {percent_format(hit)} cached)",
             b["uncached"], "tokens", f"{number_format(b['uncached'])} tokens"),
        Step("Prefill time per request",
             f"{number_format(b['uncached'])} tokens ÷ "
             f"{rate_format(prefill_rate, 'tokens/s')}",
             b["prefill_s"], "s", seconds_format(b["prefill_s"])),
        Step("Decode time per request",
             f"{count_phrase(output, 'token')} ÷ {rate_format(decode_rate, 'tokens/s')}",
             b["decode_s"], "s", seconds_format(b["decode_s"])),
        Step("Replica time per request", f"{seconds_format(b['prefill_s'])} + "
             f"{seconds_format(b['decode_s'])}", b["busy_s"], "s", seconds_format(b["busy_s"])),
        Step("Requests per paid hour",
             f"3,600 s × {percent_format(util)} utilisation ÷ {seconds_format(b['busy_s'])}",
             b["requests_per_hour"], "requests/h",
             rate_format(b["requests_per_hour"], "requests/h")),
        Step("Cost per request",
             f"{money_format(replica_per_hour)}/h ÷ "
             f"{number_format(b['requests_per_hour'])} requests/h", b["dollars"], "USD",
             money_format(b["dollars"], significant=3)),
        Step("Per million output tokens", f"{money_format(b['dollars'], significant=3)} ÷ "
             f"{count_phrase(output, 'token')} × 1,000,000", per_m_output, "USD",
             money_format(per_m_output, significant=3)),
        Step("Per million tokens, prompt and output", f"{money_format(b['dollars'], significant=3)}"
             f" ÷ {count_phrase(prompt + output, 'token')} × 1,000,000", per_m_total, "USD",
             money_format(per_m_total, significant=3)),
        Step("Hit rate after the drop", f"{percent_format(hit)} − {percent_format(drop)}",
             after, "fraction", percent_format(after)),
        Step("Prompt tokens to prefill after it",
             f"{count_phrase(prompt, 'token')} × (1 − {percent_format(after)})", a["uncached"],
             "tokens", f"{number_format(a['uncached'])} tokens"),
        Step("Replica time per request after it",
             f"{seconds_format(a['prefill_s'])} + {seconds_format(a['decode_s'])}",
             a["busy_s"], "s", seconds_format(a["busy_s"])),
        Step("Cost per request after it",
             f"{money_format(replica_per_hour)}/h × {seconds_format(a['busy_s'])} ÷ "
             f"{percent_format(util)} ÷ 3,600 s", a["dollars"], "USD",
             money_format(a["dollars"], significant=3)),
        Step("What the drop costs per request",
             f"{money_format(a['dollars'], significant=3)} − "
             f"{money_format(b['dollars'], significant=3)}", extra, "USD",
             f"{money_format(extra, significant=3)} ({percent_format(increase)} more)"),
        Step("Capacity lost", f"1 − {number_format(a['requests_per_hour'])} ÷ "
             f"{number_format(b['requests_per_hour'])} requests/h", capacity_loss, "fraction",
             percent_format(capacity_loss)),
        Step("What the drop costs per month",
             f"{money_format(extra, significant=3)} × {number_format(daily)} requests/day × "
             f"{DAYS_PER_MONTH} days", extra_month, "USD", money_format(extra_month)),
    )
    return Result(values={
        "replica_price_per_hour": replica_per_hour,
        "uncached_tokens": b["uncached"], "prefill_seconds": b["prefill_s"],
        "decode_seconds": b["decode_s"], "busy_seconds": b["busy_s"],
        "requests_per_hour": b["requests_per_hour"], "dollars_per_request": b["dollars"],
        "dollars_per_million_output_tokens": per_m_output,
        "dollars_per_million_tokens": per_m_total,
        "hit_rate_after": after, "uncached_tokens_after": a["uncached"],
        "prefill_seconds_after": a["prefill_s"], "busy_seconds_after": a["busy_s"],
        "requests_per_hour_after": a["requests_per_hour"],
        "dollars_per_request_after": a["dollars"], "extra_dollars_per_request": extra,
        "cost_increase": increase, "capacity_loss": capacity_loss,
        "extra_dollars_per_month": extra_month,
        "replicas_before": replicas_before, "replicas_after": replicas_after,
    }, steps=steps)
