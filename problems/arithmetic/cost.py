"""Cost: dollars per million tokens from a GPU's hourly price and throughput, and capacity
planning from daily users to peak load, GPUs and a monthly bill."""

import math

from problems.arithmetic.catalog import gpu_get
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import money_format, number_format, rate_format

HOURS_PER_MONTH = 730  # 24 × 365 ÷ 12
PRICE_MAX = 1e4
THROUGHPUT_MAX = 1e9


def _price(gpu_id: str, price_per_hour: float | None) -> tuple[float, str]:
    g = gpu_get(gpu_id)
    if price_per_hour is None:
        return (
            g.price_per_hour_assumed,
            f"{g.name} at an assumed {money_format(g.price_per_hour_assumed)}/h",
        )
    price = number_check(price_per_hour, field="price_per_hour", maximum=PRICE_MAX)
    return price, f"{g.name} at {money_format(price)}/h"


def cost_per_million(
    *, gpu: str, tokens_per_second: float, price_per_hour: float | None = None
) -> Result:
    """Dollars per million tokens (USD) for one `gpu` producing `tokens_per_second`.

    `price_per_hour` defaults to the catalog's assumed price, which the learner should change.
    """
    price, what = _price(gpu, price_per_hour)
    rate = number_check(tokens_per_second, field="tokens_per_second", maximum=THROUGHPUT_MAX)
    per_hour = rate * 3600
    dollars = price / per_hour * 1e6
    return Result(
        values={
            "dollars_per_million_tokens": dollars,
            "tokens_per_hour": per_hour,
            "price_per_hour": price,
        },
        steps=(
            Step(
                "Tokens per hour",
                f"{rate_format(rate, 'tokens/s')} × 3,600 s",
                per_hour,
                "tokens",
                f"{number_format(per_hour)} tokens",
            ),
            Step(
                "Dollars per million tokens",
                f"{what} ÷ {number_format(per_hour)} tokens × 1,000,000",
                dollars,
                "USD",
                money_format(dollars),
            ),
        ),
    )


def capacity_plan(
    *,
    daily_users: int,
    requests_per_user: float,
    output_tokens: int,
    tokens_per_second_per_gpu: float,
    gpu: str,
    input_tokens: int = 0,
    peak_to_average: float = 3.0,
    target_utilization: float = 0.7,
    price_per_hour: float | None = None,
) -> Result:
    """Peak requests/s, peak output tokens/s, GPUs needed and monthly cost (USD).

    Traffic is `daily_users` × `requests_per_user` spread over a day, times `peak_to_average`
    at the busiest time. GPUs are sized to run at `target_utilization` of their output
    throughput at that peak, leaving headroom so queues (and p99) stay short.
    """
    users = count_check(daily_users, field="daily_users", maximum=USERS_MAX * 10)
    per_user = number_check(requests_per_user, field="requests_per_user", maximum=1e5)
    out = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    inp = count_check(input_tokens, field="input_tokens", maximum=TOKENS_MAX, minimum=0)
    throughput = number_check(
        tokens_per_second_per_gpu, field="tokens_per_second_per_gpu", maximum=THROUGHPUT_MAX
    )
    peak_ratio = number_check(
        peak_to_average, field="peak_to_average", minimum=1.0, maximum=1e3, allow_minimum=True
    )
    target = fraction_check(target_utilization, field="target_utilization")
    price, what = _price(gpu, price_per_hour)
    average_rps = users * per_user / 86_400
    peak_rps = average_rps * peak_ratio
    peak_tokens = peak_rps * out
    peak_input_tokens = peak_rps * inp
    gpus = max(1, math.ceil(peak_tokens / (throughput * target)))
    monthly = gpus * price * HOURS_PER_MONTH
    return Result(
        values={
            "average_requests_per_second": average_rps,
            "peak_requests_per_second": peak_rps,
            "peak_tokens_per_second": peak_tokens,
            "peak_input_tokens_per_second": peak_input_tokens,
            "gpus": gpus,
            "monthly_cost": monthly,
        },
        steps=(
            Step(
                "Average requests/s",
                f"{users:,} users × {number_format(per_user)} requests ÷ 86,400 s",
                average_rps,
                "requests/s",
                rate_format(average_rps, "requests/s"),
            ),
            Step(
                "Peak requests/s",
                f"{number_format(average_rps)} × {number_format(peak_ratio)} peak-to-average",
                peak_rps,
                "requests/s",
                rate_format(peak_rps, "requests/s"),
            ),
            Step(
                "Peak output tokens/s",
                f"{number_format(peak_rps)} requests/s × {out:,} tokens",
                peak_tokens,
                "tokens/s",
                rate_format(peak_tokens, "tokens/s"),
            ),
            Step(
                "Peak prompt tokens/s",
                f"{number_format(peak_rps)} requests/s × {inp:,} tokens",
                peak_input_tokens,
                "tokens/s",
                rate_format(peak_input_tokens, "tokens/s"),
            ),
            Step(
                "GPUs",
                f"⌈{number_format(peak_tokens)} ÷ ({number_format(throughput)} "
                f"tokens/s per GPU × {number_format(target)} target utilisation)⌉",
                gpus,
                "GPUs",
                f"{gpus:,} GPUs",
            ),
            Step(
                "Monthly cost",
                f"{gpus:,} × {what} × {HOURS_PER_MONTH} h",
                monthly,
                "USD",
                money_format(monthly),
            ),
        ),
    )
