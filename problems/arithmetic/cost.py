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


# Problem 24: the levers on cost per million tokens, applied one after another to one state.
# Each lever sets fields of the state; its bar is the change in the blended cost it causes on
# top of the levers before it. The end state does not depend on the order, the bars do.
LEVERS: tuple[tuple[str, str], ...] = (
    ("batching", "Batch to the latency target"),
    ("fp8", "FP8 or FP4 weights, FP8 KV cache"),
    ("prefix", "Prefix caching"),
    ("gpu", "The right GPU"),
    ("spec", "Speculative decoding"),
    ("autoscale", "Autoscaling"),
    ("commit", "Committed capacity"),
    ("route", "Route easy requests to a smaller model"),
    ("cap_output", "Cap output length"),
    ("disagg", "Disaggregate prefill and decode"),
)
# The input a lever's refusal is shown beside (its main assumption).
LEVER_FIELDS = {
    "batching": "batching", "fp8": "fp8_dtype", "prefix": "prefix_hit",
    "gpu": "right_gpu_id", "spec": "spec_alpha", "autoscale": "autoscale_utilisation",
    "commit": "commit_discount", "route": "route_model", "cap_output": "cap_output_tokens",
    "disagg": "disagg_gain",
}


# The tensor-parallel sizes a lever may give a replica it sizes itself: powers of two up to
# the eight GPUs of one NVLink node, then whole nodes.
TP_CHOICES = (1, 2, 4, 8, 16, 32, 64)


def _replica(state: dict, *, model, tp: int, field: str, spec: bool = True) -> dict:
    """One replica of `model` on `tp` GPUs of the state's kind, priced at the state's price,
    utilisation, hit rate and gains (USD per million tokens and its decode figures)."""
    from problems.arithmetic.replica import replica_cost_model

    alpha, gamma, draft = (state["spec"] if spec and state["spec"] else (None, 0, 0.0))
    return replica_cost_model(
        model=model, gpu=state["gpu"], tp=tp, w=state["w"], kv=state["kv"],
        input_tokens=state["input_tokens"], output_tokens=state["output_tokens"],
        memory_fraction=state["memory_fraction"], reserve_bytes=state["reserve_bytes"],
        bandwidth_efficiency=state["bandwidth_efficiency"], mfu_decode=state["mfu_decode"],
        mfu_prefill=state["mfu_prefill"], tpot_target_seconds=state["tpot_target_seconds"],
        batch_cap=state["batch_cap"], price_per_hour=state["price_per_hour"],
        discount=state["discount"], utilisation=state["utilisation"],
        prefix_hit=state["prefix_hit"], disagg_gain=state["disagg_gain"], spec_alpha=alpha,
        spec_gamma=gamma, spec_draft_cost=draft, field=field)


def tp_sized(state: dict, *, model, batch: int, spec: bool = True) -> int | None:
    """The tensor-parallel size (of `TP_CHOICES`) a lever gives `model` on the state's GPU
    (GPUs): the fewest GPUs whose replica runs at least `batch` sequences, so that a move to
    another GPU does not trade batch for price; when none does, the size that costs least per
    token at the baseline's mix. None when no size holds the weights and one sequence's KV
    within the latency target. Fewest, because this cost model charges no all-reduce traffic:
    more GPUs would always look cheaper on paper than they are."""
    from problems.arithmetic.errors import ArithmeticInputError

    best, best_cost = None, math.inf
    for tp in TP_CHOICES:
        try:
            r = _replica(state, model=model, tp=tp, field="tp", spec=spec)
        except ArithmeticInputError:
            continue
        if r["batch"] >= batch:
            return tp
        cost = state["input_tokens"] * r["in"] + state["output_tokens"] * r["out"]
        if cost < best_cost * (1 - 1e-9):
            best, best_cost = tp, cost
    return best


def state_costs(state: dict) -> dict:
    """Dollars per million output and input tokens of one state (USD), routing included: the
    big model's replica, and when `route_share` > 0 the small model's (GPUs of the same kind,
    as many as `small_tp`, no speculation) mixed in at that share. Refusals name the state's own
    fields."""
    big = _replica(state, model=state["model"], tp=state["tp"], field="tp")
    out, dollars_in = big["out"], big["in"]
    small = None
    share = state["route_share"]
    if share > 0:
        small = _replica(state, model=state["small_model"], tp=state.get("small_tp") or 1,
                         field="route_model", spec=False)
        out = (1 - share) * out + share * small["out"]
        dollars_in = (1 - share) * dollars_in + share * small["in"]
    return {"big": big, "small": small, "out": out, "in": dollars_in}


def _blend(costs: dict, *, input_tokens: float, output_tokens: float) -> float:
    return (input_tokens * costs["in"] + output_tokens * costs["out"]) / (
        input_tokens + output_tokens)


def _lever_resolve(lever: str, state: dict, changes: dict, *, batch: int) -> tuple[dict, str]:
    """The changes a lever really makes from `state`, and the reason it is skipped ("" when it
    applies): a lever that cannot help at these inputs is skipped with a sentence, never
    applied backwards (a cap above the mean answer, autoscaling to a lower utilisation, a
    "smaller" model that is the same or larger, a GPU no replica of which fits the model)."""
    from problems.arithmetic.memory import params_count_model
    from problems.arithmetic.units import percent_format

    if lever == "cap_output" and changes["output_tokens"] >= state["output_tokens"]:
        return changes, (f"the answers already average {state['output_tokens']:,} "
                         f"{'token' if state['output_tokens'] == 1 else 'tokens'}, no more "
                         f"than the {changes['output_tokens']:,}-token mean the cap aims at, so "
                         "a cap would trim nothing")
    if lever == "autoscale" and changes["utilisation"] <= state["utilisation"]:
        now, reached = state["utilisation"], changes["utilisation"]
        return changes, (f"the fleet already does useful work {percent_format(now)} of its paid "
                         f"hours, at or above the {percent_format(reached)} autoscaling would "
                         "reach, so there is nothing to gain")
    if lever == "fp8":
        now_w, now_kv, to_w, to_kv = state["w"], state["kv"], changes["w"], changes["kv"]
        if now_w.id == to_w.id and now_kv.id == to_kv.id:
            return changes, (f"the replica already runs {now_w.name} weights and an "
                             f"{now_kv.kv_label} KV cache, so there is nothing to narrow")
    if lever == "commit" and changes["discount"] == 0:
        return changes, "a 0% discount changes no price"
    if lever == "prefix" and changes["prefix_hit"] == 0:
        return changes, "with no input tokens hitting the cache it saves nothing"
    if lever == "route":
        small, big = changes["small_model"], state["model"]
        if changes["route_share"] == 0:
            return changes, "no requests are routed at a 0% share"
        small_params = params_count_model(small)["total"]
        big_params = params_count_model(big)["total"]
        if small.id == big.id or small_params >= big_params:
            what = ("the served model itself" if small.id == big.id
                    else f"no smaller than {big.name}")
            return changes, f"{small.name} is {what}, so routing to it saves nothing"
        tp = tp_sized({**state, **changes}, model=small, batch=1, spec=False)
        if tp is None:
            return changes, (f"no replica of {small.name} on up to {TP_CHOICES[-1]} × "
                             f"{state['gpu'].name} fits its weights and a sequence's KV")
        return {**changes, "small_tp": tp}, ""
    if lever == "gpu" and changes["tp"] is None:
        trial = {**state, **changes}
        tp = tp_sized(trial, model=state["model"], batch=batch)
        if tp is None:
            return changes, (f"no replica of {state['model'].name} on up to {TP_CHOICES[-1]} × "
                             f"{changes['gpu'].name} fits its weights and a sequence's KV")
        return {**changes, "tp": tp}, ""
    return changes, ""


# A lever that moves the blended cost by less than this share is skipped as saving nothing.
SAVING_MIN = 1e-3


def _no_saving(lever: str, trial: dict, costs: dict) -> str:
    """Why a lever that would not lower the cost per token stays off, in its own terms."""
    if lever == "gpu":
        return (f"{trial['tp']} × {trial['gpu'].name} would cost no less per token than the "
                "replica it replaces, so it stays off")
    if lever == "route":
        return (f"{trial['small_model'].name} would cost no less per token than "
                f"{trial['model'].name} here, so routing to it stays off")
    if lever == "prefix" and costs["big"]["prefill"]["bound"] == "memory":
        return ("one prompt's prefill is memory-bound here (it is the weight read that takes "
                "the time), so computing fewer of its tokens saves nothing in this model; "
                "prefilling several prompts in one pass is what would")
    if lever == "batching":
        big = costs["big"]
        return (f"the batch is already {big['batch']:,}, set by the {big['limit']}, not by the "
                "engine cap, so lifting the cap changes nothing")
    return "it would not lower the cost per token, so it stays off"


def waterfall_rows(*, baseline: dict, levers: list[tuple[str, dict | None]]) -> list[dict]:
    """The baseline and each lever's state and costs in turn (USD per million tokens): one row
    each, with the blended cost at the baseline's mix, the change as a share of the baseline,
    the cut so far, the cost per 1,000 requests at the state's own lengths, and the state and
    costs themselves. A lever given None is off. A lever that cannot help here is not
    `applied`, and its row says why (`skip`): speculative decoding that would slow the batch
    down, and the cases `_lever_resolve` names; so is any lever whose change would raise the
    cost (per token; for the output cap, per request). A lever whose state cannot be served is
    refused, naming the lever's main input."""
    from problems.arithmetic.errors import ArithmeticInputError

    mix = {"input_tokens": baseline["input_tokens"], "output_tokens": baseline["output_tokens"]}

    def per_thousand(s: dict, c: dict) -> float:
        return (s["input_tokens"] * c["in"] + s["output_tokens"] * c["out"]) / 1e6 * 1_000

    state = dict(baseline)
    costs = state_costs(state)
    base = _blend(costs, **mix)
    rows = [{"lever": "baseline", "title": "Baseline", "on": True, "applied": True, "skip": "",
             "blended": base, "delta": 0.0, "cut": 0.0, "out": costs["out"], "in": costs["in"],
             "per_1000": per_thousand(state, costs), "costs": costs, "state": dict(state),
             "trial": costs}]
    for lever, changes in levers:
        title = dict(LEVERS).get(lever, lever)
        before = rows[-1]["blended"]
        if changes is None:
            rows.append({**rows[-1], "lever": lever, "title": title, "on": False,
                         "applied": False, "skip": "", "delta": 0.0, "trial": None})
            continue
        changes, skip = _lever_resolve(lever, state, changes, batch=costs["big"]["batch"])
        trial_costs = None
        if not skip:
            trial = {**state, **changes}
            try:
                trial_costs = state_costs(trial)
            except ArithmeticInputError as error:
                field = LEVER_FIELDS.get(lever, error.field)
                raise ArithmeticInputError(field=field, message=f"{title.lower()}: "
                                           f"{error.message}") from error
            if lever == "spec" and not trial_costs["big"]["spec_applied"]:
                skip = "it would slow this batch down, so it stays off"
            elif lever == "cap_output":
                if per_thousand(trial, trial_costs) >= per_thousand(state, costs):
                    skip = "it would not lower the cost per request, so it stays off"
            elif _blend(trial_costs, **mix) >= before * (1 - SAVING_MIN):
                skip = _no_saving(lever, trial, trial_costs)
        applied = not skip
        if applied:
            state, costs = trial, trial_costs
        after = _blend(costs, **mix)
        rows.append({"lever": lever, "title": title, "on": True, "applied": applied,
                     "skip": skip, "blended": after, "delta": (after - before) / base,
                     "cut": 1 - after / base, "out": costs["out"], "in": costs["in"],
                     "per_1000": per_thousand(state, costs), "costs": costs,
                     "state": dict(state), "trial": trial_costs,
                     "changes": changes})
    return rows


def cost_waterfall(*, baseline: dict, levers: list[tuple[str, dict | None]],
                   target_cut: float) -> Result:
    """The blended cost per million tokens (USD) of `baseline`, then after each lever in turn,
    each lever's change, the cut so far, the cost per 1,000 requests, and the first lever
    (1-based; 0 if none) where the cut reaches `target_cut` (`waterfall_rows` has the rules).

    Blended costs are at the baseline's mix of input and output tokens, so a lever that
    changes the mix (a shorter answer) cannot pass off a cheaper mix as a saving.
    """
    target = fraction_check(target_cut, field="target_cut", allow_one=False)
    rows = waterfall_rows(baseline=baseline, levers=levers)
    base, final = rows[0], rows[-1]
    reached = next((i for i, row in enumerate(rows) if i and row["cut"] >= target), 0)
    mix_in, mix_out = baseline["input_tokens"], baseline["output_tokens"]
    steps = [Step("Baseline, blended",
                  f"({mix_in:,} × {money_format(base['in'], significant=3)} input + "
                  f"{mix_out:,} × {money_format(base['out'], significant=3)} output) ÷ "
                  f"{mix_in + mix_out:,} tokens; the target is "
                  f"{money_format(base['blended'] * (1 - target), significant=3)}",
                  base["blended"], "USD per million tokens",
                  money_format(base["blended"], significant=3))]
    for row in rows[1:]:
        if not row["on"]:
            what = "off"
        elif not row["applied"]:
            what = row["skip"]
        else:
            change = "saves" if row["delta"] <= 0 else "adds"
            what = (f"{money_format(row['out'], significant=3)} output, "
                    f"{money_format(row['in'], significant=3)} input per million; "
                    f"{change} {percent_format(abs(row['delta']))} of the baseline; "
                    f"{percent_format(row['cut'])} cut so far; "
                    f"{money_format(row['per_1000'], significant=3)} per 1,000 requests")
        # "Prefix caching" → "prefix caching", but "FP8 or FP4 …" keeps its capitals.
        title = (row["title"] if row["title"][1:2].isupper()
                 else row["title"][:1].lower() + row["title"][1:])
        steps.append(Step(f"After {title}", what, row["blended"], "USD per million tokens",
                          money_format(row["blended"], significant=3)))
    return Result(
        values={
            "baseline_blended": base["blended"], "baseline_per_1000": base["per_1000"],
            "target": base["blended"] * (1 - target), "target_cut": target,
            "final_blended": final["blended"], "final_cut": final["cut"],
            "final_per_1000": final["per_1000"],
            "final_per_1000_cut": 1 - final["per_1000"] / base["per_1000"],
            "target_reached_at": reached,
            "rows": [{k: v for k, v in row.items() if k not in ("costs", "state", "trial")}
                     for row in rows],
        },
        steps=tuple(steps),
    )


def _on(value: str, *, field: str) -> bool:
    if value not in ("on", "off"):
        from problems.arithmetic.errors import ArithmeticInputError

        raise ArithmeticInputError(field=field, message="choose on or off")
    return value == "on"


def cost_levers_plan(
    *,
    model: str = "llama-3.1-70b",
    gpu: str = "h100-sxm",
    tp: int = 4,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    batch_cap: int = 64,
    tpot_target_ms: float = 50.0,
    input_tokens: int = 2_000,
    output_tokens: int = 400,
    price_per_hour: float | None = None,
    utilisation: float = 0.35,
    memory_fraction: float = 0.9,
    reserve_gb: float = 5.0,
    bandwidth_efficiency: float = 0.8,
    mfu_decode: float = 0.5,
    mfu_prefill: float = 0.5,
    target_cut: float = 0.7,
    batching: str = "on",
    fp8: str = "on",
    fp8_dtype: str = "fp8",
    prefix: str = "on",
    prefix_hit: float = 0.5,
    right_gpu: str = "on",
    right_gpu_id: str = "b200",
    right_gpu_tp: int | None = None,
    right_gpu_price: float | None = None,
    spec: str = "on",
    spec_alpha: float = 0.8,
    spec_gamma: int = 2,
    spec_draft_cost: float = 0.05,
    autoscale: str = "on",
    autoscale_utilisation: float = 0.6,
    commit: str = "on",
    commit_discount: float = 0.3,
    route: str = "on",
    route_share: float = 0.3,
    route_model: str = "llama-3.1-8b",
    cap_output: str = "on",
    cap_output_tokens: int = 350,
    disagg: str = "on",
    disagg_gain: float = 1.1,
) -> tuple[dict, list[tuple[str, dict | None]]]:
    """The baseline state and each lever's changes (None when off) from the calculator's flat
    inputs, every one checked and named. Prices default to the catalog's assumed figures."""
    from problems.arithmetic.catalog import dtype_get, kv_dtype_get, model_get
    from problems.arithmetic.compute import native_peak_get
    from problems.arithmetic.errors import ArithmeticInputError
    from problems.arithmetic.replica import SPEC_GAMMA_MAX, replica_inputs_check

    k = replica_inputs_check(model=model, gpu=gpu, tp=tp, dtype=dtype, kv_dtype=kv_dtype,
                             input_tokens=input_tokens, output_tokens=output_tokens,
                             memory_fraction=memory_fraction, reserve_gb=reserve_gb,
                             bandwidth_efficiency=bandwidth_efficiency, mfu_decode=mfu_decode,
                             mfu_prefill=mfu_prefill, tpot_target_ms=tpot_target_ms)
    price, _ = _price(gpu, price_per_hour)
    fraction_check(target_cut, field="target_cut", allow_one=False)
    baseline = {
        "model": k["model"], "gpu": k["gpu"], "tp": k["tp"], "w": k["w"], "kv": k["kv"],
        "batch_cap": count_check(batch_cap, field="batch_cap", maximum=USERS_MAX),
        "tpot_target_seconds": k["tpot_target_seconds"],
        "input_tokens": k["input_tokens"], "output_tokens": k["output_tokens"],
        "memory_fraction": k["memory_fraction"], "reserve_bytes": k["reserve_bytes"],
        "bandwidth_efficiency": k["bandwidth_efficiency"], "mfu_decode": k["mfu_decode"],
        "mfu_prefill": k["mfu_prefill"], "price_per_hour": price, "discount": 0.0,
        "utilisation": fraction_check(utilisation, field="utilisation"), "prefix_hit": 0.0,
        "spec": None, "route_share": 0.0, "small_model": None, "disagg_gain": 1.0,
    }
    levers: list[tuple[str, dict | None]] = []
    levers.append(("batching", {"batch_cap": None} if _on(batching, field="batching")
                   else None))
    narrow = dtype_get(fp8_dtype, field="fp8_dtype")
    if narrow.bits > 8 or narrow.weight_only:
        raise ArithmeticInputError(field="fp8_dtype",
                                   message="choose an 8-bit or 4-bit tensor-core format")
    levers.append(("fp8", {"w": narrow, "kv": kv_dtype_get("fp8", model=k["model"])}
                   if _on(fp8, field="fp8") else None))
    levers.append(("prefix", {"prefix_hit": fraction_check(prefix_hit, field="prefix_hit",
                                                             allow_zero=True)}
                   if _on(prefix, field="prefix") else None))
    if _on(right_gpu, field="right_gpu"):
        new_price, _ = _price(right_gpu_id, right_gpu_price)
        levers.append(("gpu", {"gpu": gpu_get(right_gpu_id, field="right_gpu_id"),
                               # None: the lever sizes the replica from the model.
                               "tp": None if right_gpu_tp is None else count_check(
                                   right_gpu_tp, field="right_gpu_tp", maximum=1024),
                               "price_per_hour": new_price}))
    else:
        levers.append(("gpu", None))
    if _on(spec, field="spec"):
        alpha = fraction_check(spec_alpha, field="spec_alpha", allow_zero=True)
        gamma = count_check(spec_gamma, field="spec_gamma", maximum=SPEC_GAMMA_MAX)
        draft = number_check(spec_draft_cost, field="spec_draft_cost", minimum=0.0,
                             maximum=1.0, allow_minimum=True)
        levers.append(("spec", {"spec": (alpha, gamma, draft)}))
    else:
        levers.append(("spec", None))
    levers.append(("autoscale", {"utilisation": fraction_check(
        autoscale_utilisation, field="autoscale_utilisation")}
        if _on(autoscale, field="autoscale") else None))
    levers.append(("commit", {"discount": fraction_check(
        commit_discount, field="commit_discount", allow_zero=True, allow_one=False)}
        if _on(commit, field="commit") else None))
    if _on(route, field="route"):
        levers.append(("route", {
            "route_share": fraction_check(route_share, field="route_share", allow_zero=True),
            "small_model": model_get(route_model, field="route_model")}))
    else:
        levers.append(("route", None))
    levers.append(("cap_output", {"output_tokens": count_check(
        cap_output_tokens, field="cap_output_tokens", maximum=TOKENS_MAX)}
        if _on(cap_output, field="cap_output") else None))
    levers.append(("disagg", {"disagg_gain": number_check(
        disagg_gain, field="disagg_gain", minimum=1.0, maximum=10.0, allow_minimum=True)}
        if _on(disagg, field="disagg") else None))
    # A format the lever's GPU cannot multiply in on its own tensor cores (a weight-only
    # fallback is not this lever) is refused beside the format.
    for lever, changes in levers:
        if lever == "gpu" and changes and levers[1][1]:
            native_peak_get(gpu=changes["gpu"], dtype=levers[1][1]["w"], field="fp8_dtype")
    if levers[1][1]:
        native_peak_get(gpu=k["gpu"], dtype=narrow, field="fp8_dtype")
    return baseline, levers


def cost_levers(**inputs: object) -> Result:
    """The cost waterfall of problem 24 from its calculator's inputs (USD per million tokens):
    the baseline replica worked step by step, then each lever on top of the ones before
    (`cost_levers_plan` lists the inputs; `cost_waterfall` the rules)."""
    from problems.arithmetic.replica import replica_steps

    target_cut = inputs.get("target_cut", 0.7)
    baseline, levers = cost_levers_plan(**inputs)
    result = cost_waterfall(baseline=baseline, levers=levers, target_cut=target_cut)
    rows = waterfall_rows(baseline=baseline, levers=levers)
    big = rows[0]["costs"]["big"]
    k = {**baseline, "utilisation": baseline["utilisation"], "prefix_hit": 0.0}
    return Result(values=result.values,
                  steps=(*replica_steps(r=big, k=k, what="Baseline"), *result.steps))
