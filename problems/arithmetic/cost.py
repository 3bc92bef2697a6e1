"""Cost: dollars per million tokens from a GPU's hourly price and throughput, naming which tokens
are counted, and capacity planning from daily users to peak load, GPUs (sized by prompt and
output tokens), average utilisation and a monthly bill, peak-sized all day or scaled with load."""

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
from problems.arithmetic.units import (
    money_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)

HOURS_PER_MONTH = 730  # 24 × 365 ÷ 12
PRICE_MAX = 1e4
THROUGHPUT_MAX = 1e9
# An assumption for a mid-size model on one GPU, stated where it is used: prefill runs far more
# tokens per second than decode because it is compute-bound with many tokens per weight read.
INPUT_THROUGHPUT_DEFAULT = 20_000.0


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
    *,
    gpu: str,
    tokens_per_second: float,
    price_per_hour: float | None = None,
    input_tokens_per_second: float | None = None,
) -> Result:
    """Dollars per million tokens (USD) for one `gpu`, saying which tokens are counted.

    `tokens_per_second` is output throughput. Alone, every GPU-second is charged to output
    tokens: dollars per million output tokens, input free. With `input_tokens_per_second`
    (prefill throughput when the GPU does only prefill), input and output are priced
    separately, each by the GPU time it takes, so a request costs input × its price + output ×
    its price. `price_per_hour` defaults to the catalog's assumed price, which the learner
    should change.
    """
    price, what = _price(gpu, price_per_hour)
    rate = number_check(tokens_per_second, field="tokens_per_second", maximum=THROUGHPUT_MAX)
    per_hour = rate * 3600
    dollars = price / per_hour * 1e6
    steps = [
        Step(
            "Output tokens per hour",
            f"{rate_format(rate, 'tokens/s')} × 3,600 s",
            per_hour,
            "tokens",
            f"{number_format(per_hour)} tokens",
        ),
        Step(
            "Dollars per million output tokens"
            + (" (decode time only)" if input_tokens_per_second else " (input not charged)"),
            f"{what} ÷ {number_format(per_hour)} tokens × 1,000,000",
            dollars,
            "USD",
            money_format(dollars),
        ),
    ]
    values: dict[str, float | str] = {
        "dollars_per_million_tokens": dollars,
        "dollars_per_million_output_tokens": dollars,
        "tokens_per_hour": per_hour,
        "price_per_hour": price,
        "tokens_counted": "output only",
    }
    if input_tokens_per_second is not None:
        input_rate = number_check(input_tokens_per_second, field="input_tokens_per_second",
                                  maximum=THROUGHPUT_MAX)
        input_dollars = price / (input_rate * 3600) * 1e6
        steps.append(
            Step(
                "Dollars per million input tokens (prefill time only)",
                f"{what} ÷ ({rate_format(input_rate, 'tokens/s')} × 3,600 s) × 1,000,000",
                input_dollars,
                "USD",
                money_format(input_dollars),
            )
        )
        values.update(dollars_per_million_input_tokens=input_dollars,
                      tokens_counted="input and output priced separately")
    return Result(values=values, steps=tuple(steps))


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
    input_tokens_per_second_per_gpu: float = INPUT_THROUGHPUT_DEFAULT,
) -> Result:
    """Peak requests/s, the GPU time each request takes, GPUs needed, average utilisation and
    monthly cost, peak-sized or scaled (USD).

    Traffic is `daily_users` × `requests_per_user` spread over a day, times `peak_to_average`
    at the busiest time. A request takes `input_tokens` ÷ the prefill throughput plus
    `output_tokens` ÷ the decode throughput of GPU time (the two share each GPU's steps). GPUs
    are sized to run at `target_utilization` at that peak, leaving headroom so queues (and
    p99) stay short; over the day they then average the load's share of that fleet.
    """
    users = count_check(daily_users, field="daily_users", maximum=USERS_MAX * 10)
    per_user = number_check(requests_per_user, field="requests_per_user", maximum=1e5)
    out = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    inp = count_check(input_tokens, field="input_tokens", maximum=TOKENS_MAX, minimum=0)
    throughput = number_check(
        tokens_per_second_per_gpu, field="tokens_per_second_per_gpu", maximum=THROUGHPUT_MAX
    )
    input_throughput = number_check(
        input_tokens_per_second_per_gpu, field="input_tokens_per_second_per_gpu",
        maximum=THROUGHPUT_MAX,
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
    gpu_seconds = inp / input_throughput + out / throughput
    peak_load = peak_rps * gpu_seconds  # GPUs kept fully busy at the peak
    average_load = average_rps * gpu_seconds
    gpus = max(1, math.ceil(peak_load / target))
    average_utilisation = average_load / gpus
    monthly = gpus * price * HOURS_PER_MONTH
    # An autoscaler that tracks the load at the target utilisation pays for average_load ÷
    # target GPUs on average (never fewer than one), ignoring cold starts and minimum sizes.
    scaled_gpus = max(1.0, average_load / target)
    monthly_scaled = scaled_gpus * price * HOURS_PER_MONTH
    return Result(
        values={
            "average_requests_per_second": average_rps,
            "peak_requests_per_second": peak_rps,
            "peak_tokens_per_second": peak_tokens,
            "peak_input_tokens_per_second": peak_input_tokens,
            "gpu_seconds_per_request": gpu_seconds,
            "gpus": gpus,
            "average_utilization": average_utilisation,
            "monthly_cost": monthly,
            "monthly_cost_scaled": monthly_scaled,
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
                "Peak prompt tokens/s",
                f"{number_format(peak_rps)} requests/s × {inp:,} tokens",
                peak_input_tokens,
                "tokens/s",
                rate_format(peak_input_tokens, "tokens/s"),
            ),
            Step(
                "Peak output tokens/s",
                f"{number_format(peak_rps)} requests/s × {out:,} tokens",
                peak_tokens,
                "tokens/s",
                rate_format(peak_tokens, "tokens/s"),
            ),
            Step(
                "GPU time per request",
                f"{inp:,} prompt tokens ÷ {number_format(input_throughput)} tokens/s + "
                f"{out:,} output tokens ÷ {number_format(throughput)} tokens/s",
                gpu_seconds,
                "s",
                seconds_format(gpu_seconds),
            ),
            Step(
                "GPUs",
                f"⌈{number_format(peak_rps)} requests/s × {seconds_format(gpu_seconds)} ÷ "
                f"{number_format(target)} target utilisation at the peak⌉",
                gpus,
                "GPUs",
                f"{gpus:,} GPUs",
            ),
            Step(
                "Average utilisation over the day",
                f"{number_format(average_rps)} requests/s × {seconds_format(gpu_seconds)} ÷ "
                f"{gpus:,} GPUs",
                average_utilisation,
                "",
                percent_format(average_utilisation),
            ),
            Step(
                "Monthly cost, peak-sized all day",
                f"{gpus:,} × {what} × {HOURS_PER_MONTH} h",
                monthly,
                "USD",
                money_format(monthly),
            ),
            Step(
                "Monthly cost, scaled with the load",
                f"{number_format(scaled_gpus)} GPUs on average (the load ÷ "
                f"{number_format(target)}) × {what} × {HOURS_PER_MONTH} h, if an autoscaler "
                "tracks it perfectly",
                monthly_scaled,
                "USD",
                money_format(monthly_scaled),
            ),
        ),
    )
