"""Problem 25, ChatGPT-style serving for a million daily users: the capstone calculator (demand,
decode replicas by throughput and by KV memory, a prefill pool, regions, cost) with its tornado
plot, the day simulator (the fleet's two pools under an autoscaler with cold starts), and every
figure the prose quotes.
"""

import math

from django.http import HttpRequest

from demos.simulators import autoscaling
from problems.arithmetic.capacity import (
    DAYS_PER_MONTH,
    REGIONS_MAX,
    TORNADO_RANGES,
    capstone,
    capstone_checked,
    capstone_monthly,
    fleet_plan_model,
    tornado,
)
from problems.arithmetic.cost import HOURS_PER_MONTH, PRICE_MAX
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import USERS_MAX, count_check, number_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_in,
    count_format,
    flops_format,
    money_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase, times_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    ON_OFF,
    Input,
    choice_input,
    dtype_input,
    gpu_input,
    inputs_initial,
    inputs_normalise,
    kv_dtype_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import BarPlot, BarSeries, Line, Mark, Plot, Series, sweep_points

SLUG = "capstone"
PREFIX = "p25-fleet"
DEMO_SLUG = "capstone-day"
DEMO_PREFIX = "p25-day"
# Outside facts the prose quotes, each from a source in SOURCES.
DEEPSEEK_NODES = (278, 226.75)  # Day 6 overview: peak and average H800 nodes over one day
SGLANG_ROUTER = (1.9, 3.8)  # SGLang v0.4: throughput and cache hit rate, cache-aware router

CAPSTONE_INPUTS: tuple[Input, ...] = (
    whole_input("daily_users", "Daily active users", unit="users", initial=1_000_000,
                api=1_000_000, maximum=USERS_MAX),
    real_input("sessions", "Sessions per user per day", unit="sessions", initial=2.0,
               api=2.0, minimum=0.01, maximum=50.0, help="An assumption; measure it."),
    whole_input("turns", "Turns per session", unit="turns", initial=5, api=5, maximum=100,
                help="Each turn resends the whole conversation."),
    whole_input("system_tokens", "System prompt", unit="tokens", initial=500, api=500,
                minimum=0, maximum=100_000),
    whole_input("user_tokens", "User message", unit="tokens", initial=150, api=150,
                maximum=100_000),
    whole_input("answer_tokens", "Answer", unit="tokens", initial=400, api=400,
                maximum=100_000, help="The mean, not max_tokens."),
    real_input("peak_to_average", "Peak-to-average traffic", unit="×", initial=3.0, api=3.0,
               minimum=1.0, maximum=20.0, help="An assumption: one region's evening peak over "
               "its daily mean."),
    real_input("prefix_hit", "Prefix-cache hit rate on the repeated part", unit="fraction",
               initial=0.5, api=0.5, maximum=1.0,
               help="DeepSeek reported 56.3% of input tokens hitting its cache."),
    real_input("ttft_target_s", "Time to first token target", unit="s", initial=0.5,
               api=0.5, minimum=0.01, maximum=30.0),
    real_input("tpot_target_ms", "Time per output token target", unit="ms", initial=50.0,
               api=50.0, minimum=1.0, maximum=1_000.0, help="50 ms is 20 tokens/s."),
    real_input("think_s", "User think time between turns", unit="s", initial=30.0, api=30.0,
               maximum=3_600.0),
    model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("tp", "GPUs per replica", unit="GPUs", initial=4, api=4, maximum=64),
    dtype_input(initial="fp8", api="fp8"),
    kv_dtype_input(initial="fp8", api="fp8"),
    real_input("memory_fraction", "Share of GPU memory the engine may use", unit="fraction",
               initial=0.9, api=0.9, minimum=0.01, maximum=1.0),
    real_input("reserve_gb", "Runtime reserve per GPU", unit="GB", initial=5.0, api=5.0,
               maximum=1_000.0),
    real_input("bandwidth_efficiency", "Bandwidth efficiency (MBU)", unit="fraction",
               initial=0.8, api=0.8, minimum=0.01, maximum=1.0),
    real_input("mfu_decode", "Decode MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("mfu_prefill", "Prefill MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("utilisation", "Busiest a pool may run at the peak", unit="fraction",
               initial=0.7, api=0.7, minimum=0.05, maximum=1.0,
               help="Headroom for bursts keeps queues, and p99, short (problem 17)."),
    whole_input("regions", "Regions", unit="regions", initial=3, api=3, maximum=REGIONS_MAX),
    choice_input("survive_region", "Size to survive losing one region", choices=ON_OFF,
                 initial="on", api="on"),
    real_input("price_per_hour", "GPU price", unit="$ per GPU-hour", initial=None, api=None,
               minimum=0.01, maximum=PRICE_MAX, required=False,
               help="Blank: the catalog's assumed price, a round figure, not a quote."),
    real_input("link_gbps", "KV transfer link per GPU", unit="GB/s", initial=50.0, api=50.0,
               maximum=10_000.0, help="Prefill to decode; 400 Gb/s InfiniBand is 50 GB/s."),
)
CAPSTONE_NAMES = tuple(i.name for i in CAPSTONE_INPUTS)


def tornado_rows(inputs: dict) -> list[dict]:
    """The tornado at the learner's inputs (each range clamped to its field's limits)."""
    limits = {i.name: i for i in CAPSTONE_INPUTS}
    ranges = {}
    for name, (low, high, label) in TORNADO_RANGES.items():
        field = limits[name]
        low = max(low, field.minimum if field.minimum is not None else low)
        high = min(high, field.maximum if field.maximum is not None else high)
        ranges[name] = (low, high, label)
    given = {**inputs}
    if given.get("price_per_hour") is None:
        from problems.arithmetic.catalog import gpu_get

        given["price_per_hour"] = gpu_get(inputs["gpu"]).price_per_hour_assumed
    return tornado(compute=capstone_monthly, inputs=given, ranges=ranges)


def _value_text(name: str, value: float) -> str:
    if name in ("prefix_hit", "bandwidth_efficiency", "mfu_prefill", "utilisation"):
        return percent_format(value)
    if name == "price_per_hour":
        return f"{money_format(value)}/h"
    if name == "tpot_target_ms":
        return f"{number_format(value)} ms"
    if name == "peak_to_average":
        return f"{number_format(value)}×"
    return number_format(value)


def tornado_plot(rows: list[dict], base: float) -> BarPlot:
    shown = [r for r in rows if r["at_low"] is not None and r["at_high"] is not None]
    categories = tuple(r["label"] for r in shown)
    starts = tuple(min(r["at_low"], r["at_high"]) for r in shown)
    spans = tuple(abs(r["at_high"] - r["at_low"]) for r in shown)
    labels = tuple(f"{_value_text(r['name'], r['low'])} → {_value_text(r['name'], r['high'])}"
                   for r in shown)
    return BarPlot(
        title="Which assumption moves the monthly cost most", categories=categories,
        value_title="Monthly cost, peak-sized (USD)", horizontal=True,
        series=(BarSeries("From the low to the high value", spans, base=starts, labels=labels),),
        lines=(Line(base, f"your inputs: {money_format(base)}"),),
        columns=(("Low", tuple(_value_text(r["name"], r["low"]) for r in shown)),
                 ("High", tuple(_value_text(r["name"], r["high"]) for r in shown)),
                 ("Cost at low", tuple(money_format(r["at_low"]) for r in shown)),
                 ("Cost at high", tuple(money_format(r["at_high"]) for r in shown)),
                 ("Swing", tuple(money_format(r["swing"]) for r in shown))))


def users_plot(inputs: dict) -> Plot:
    users = inputs["daily_users"]
    xs = [round(x) for x in sweep_points(max(1, users / 10), users * 10, count=21, log=True)]
    gpus = []
    for x in xs:
        try:
            gpus.append(float(fleet_plan_model(capstone_checked(
                **{**inputs, "daily_users": x}))["total_gpus"]))
        except (ArithmeticInputError, ArithmeticError):
            gpus.append(math.nan)
    return Plot(title="Fleet size in GPUs against daily users", x_title="Daily active users",
                y_title="GPUs",
                x_log=True, y_log=True,
                series=(Series("GPUs in all regions", tuple(float(x) for x in xs), tuple(gpus),
                               markers=True),),
                marks=(Mark(float(users), "your users"),))


def capstone_plots(*, inputs: dict, result: Result) -> tuple:
    rows = tornado_rows(inputs)
    return tornado_plot(rows, float(result["monthly_cost_peak"])), users_plot(inputs)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="ChatGPT-style serving: from users to GPUs and dollars",
    explanation=("Every assumption is an input. Demand becomes tokens per second at the peak, "
                 "concurrency by Little's law, decode replicas by throughput and by KV memory, a "
                 "prefill pool by the roofline of a prompt's pass (its FLOPs, or its reads when "
                 "those take longer), regions with failover, and a monthly bill, peak-sized "
                 "and scaled. The tornado varies one assumption at a time."),
    inputs=CAPSTONE_INPUTS, compute=capstone, plots=capstone_plots, listed=False,
    api_path="/capstone",
    api_summary="Capstone: users to tokens, GPUs per region and monthly cost"))


# ---------------------------------------------------------------------------------------------
# The day simulator (demo): the fleet's two pools through 24 hours under an autoscaler.

POLICY_CHOICES = (("reactive", "reactive (sizes for the load it sees)"),
                  ("predictive", "predictive (sizes a cold start ahead)"),
                  ("queue", "on queue depth (scales once requests wait)"),
                  ("static", "static (sized for the peak)"))

DAY_INPUTS: tuple[Input, ...] = (
    *inputs_initial(tuple(i for i in CAPSTONE_INPUTS if i.name in (
        "daily_users", "sessions", "turns", "peak_to_average", "gpu", "tp", "regions",
        "survive_region", "utilisation"))),
    choice_input("policy", "Autoscaling policy", choices=POLICY_CHOICES, initial="reactive",
                 api="reactive"),
    real_input("cold_start_minutes", "Cold start", unit="minutes", initial=10.0, api=10.0,
               maximum=240.0, help="From asking for a replica to its serving: a node, the "
               "image, the weights, warm-up (problem 20)."),
    real_input("cooldown_minutes", "Cool-down before scaling in", unit="minutes",
               initial=15.0, api=15.0, maximum=240.0),
    real_input("headroom", "Headroom the autoscaler adds", unit="fraction", initial=0.1,
               api=0.1, maximum=2.0, help="Provision this much above the computed need."),
    real_input("noise", "Minute-to-minute noise", unit="σ", initial=0.05, api=0.05,
               maximum=1.0, help="Lognormal, mean 1."),
    real_input("peak_hour", "Peak hour", unit="h", initial=20.0, api=20.0, maximum=24.0),
    whole_input("seed", "Random seed", initial=0, api=0, minimum=0, maximum=10**6),
)
DAY_NAMES = tuple(i.name for i in DAY_INPUTS)


def day_simulated(**given: object) -> Result:
    """The capstone's fleet through a simulated day (`demos.simulators.autoscaling`): decode and
    prefill pools, each resized by the policy and waiting out cold starts (GPU-hours, USD,
    minutes). The other assumptions stay at the calculator's defaults."""
    fleet_inputs = {**CALCULATOR.defaults(), **{k: v for k, v in given.items()
                                                if k in CAPSTONE_NAMES}}
    k = capstone_checked(**fleet_inputs)
    p = fleet_plan_model(k)
    policy_kind = given["policy"]
    if policy_kind not in dict(POLICY_CHOICES):
        raise ArithmeticInputError(field="policy", message="choose a policy from the list")
    cold = number_check(given["cold_start_minutes"], field="cold_start_minutes", minimum=0.0,
                        maximum=240.0, allow_minimum=True)
    cooldown = number_check(given["cooldown_minutes"], field="cooldown_minutes", minimum=0.0,
                            maximum=240.0, allow_minimum=True)
    headroom = number_check(given["headroom"], field="headroom", minimum=0.0, maximum=2.0,
                            allow_minimum=True)
    noise = number_check(given["noise"], field="noise", minimum=0.0, maximum=1.0,
                         allow_minimum=True)
    peak_hour = number_check(given["peak_hour"], field="peak_hour", minimum=0.0, maximum=24.0,
                             allow_minimum=True)
    seed = count_check(given["seed"], field="seed", minimum=0, maximum=10**6)
    d, dec = p["demand"], p["decode"]
    tp, regions, util = k["tp"], k["regions"], k["utilisation"]
    reserve = regions / p["share"]
    answer = k["demand"]["answer_tokens"]
    decode_rate = 1 / max(answer / dec["tokens_per_second"], p["t_req"] / dec["b_mem"])
    prefill_rate = tp / (d["uncached"] * p["prefill_gpu_seconds"])
    demand = autoscaling.demand_curve(average_rps=d["average_rps"],
                                      peak_to_average=k["demand"]["peak_to_average"],
                                      peak_minute=peak_hour * 60, noise_sigma=noise, seed=seed)
    runs = {}
    fleet_replicas = {"decode": regions * p["dec_region"], "prefill": regions * p["pre_region"]}
    for name, rate in (("decode", decode_rate), ("prefill", prefill_rate)):
        pool = autoscaling.Pool(replica_rate=rate, gpus_per_replica=tp, target_utilisation=util,
                                reserve_factor=reserve, granularity=regions,
                                min_replicas=regions)
        policy = autoscaling.Policy(kind=policy_kind, cold_start_minutes=cold,
                                    cooldown_minutes=cooldown, headroom=headroom,
                                    static_replicas=fleet_replicas[name])
        runs[name] = autoscaling.simulate(demand=demand, step_minutes=1.0, pool=pool,
                                          policy=policy, ttft_slo_seconds=math.inf)
    gpu_hours = runs["decode"]["gpu_hours"] + runs["prefill"]["gpu_hours"]
    monthly = gpu_hours * k["price"] * DAYS_PER_MONTH
    short = (runs["decode"]["ready"] < runs["decode"]["needed_replicas"]) | (
        runs["prefill"]["ready"] < runs["prefill"]["needed_replicas"])
    queued = (runs["decode"]["backlog"] > 1e-9) | (runs["prefill"]["backlog"] > 1e-9)
    paid_gpus = (runs["decode"]["paid"] + runs["prefill"]["paid"]) * tp
    needed_gpus = (runs["decode"]["needed_replicas"] + runs["prefill"]["needed_replicas"]) * tp
    hours = demand["minute"] / 60
    # One point every 10 minutes is plenty for the plots and keeps the page light.
    keep = slice(None, None, 10)
    values = {
        "hour": [float(x) for x in hours[keep]],
        "demand": [float(x) for x in demand["rate"][keep]],
        "decode_capacity": [float(x) for x in runs["decode"]["capacity"][keep]],
        "prefill_capacity": [float(x) for x in runs["prefill"]["capacity"][keep]],
        "paid_gpus": [float(x) for x in paid_gpus[keep]],
        "needed_gpus": [float(x) for x in needed_gpus[keep]],
        "gpu_hours_per_day": gpu_hours, "monthly_cost_simulated": monthly,
        "monthly_cost_peak": p["monthly_peak"], "monthly_cost_follow": p["monthly_follow"],
        "minutes_short": float(short.sum()), "minutes_queued": float(queued.sum()),
        "peak_paid_gpus": float(paid_gpus.max()), "fleet_gpus": p["total_gpus"],
        "demand_peak_over_mean": float(demand["rate"].max() / demand["rate"].mean()),
        "decode_rate": decode_rate, "prefill_rate": prefill_rate,
        "policy": policy_kind, "headroom": headroom,
    }
    steps = (
        Step("The fleet the calculator sizes",
             f"{count_format(regions, 'region')} × {p['per_region']} GPUs, "
             f"{money_format(p['monthly_peak'])} a month peak-sized, "
             f"{money_format(p['monthly_follow'])} if it followed the load exactly",
             p["total_gpus"], "GPUs", count_format(p["total_gpus"], "GPU")),
        Step("What one replica serves at full load",
             f"decode {rate_format(decode_rate, 'requests/s')} (the smaller of tokens/s ÷ "
             f"{answer:,} and {dec['b_mem']:,} sequences ÷ {seconds_format(p['t_req'])}); "
             f"prefill {rate_format(prefill_rate, 'requests/s')}", decode_rate, "requests/s",
             rate_format(decode_rate, "requests/s")),
        Step("Demand over the simulated day",
             f"average {rate_format(d['average_rps'], 'requests/s')}, peak over mean with "
             f"noise {number_format(values['demand_peak_over_mean'])}",
             float(demand["rate"].max()), "requests/s",
             rate_format(float(demand["rate"].max()), "requests/s") + " at the busiest minute"),
        Step("GPU-hours paid in the day", f"{POLICY_CHOICES_TEXT[policy_kind]}; every replica "
             f"paid while booting, ready or held in its cool-down", gpu_hours, "GPU-hours",
             number_format(gpu_hours)),
        Step("Monthly cost it implies", f"{number_format(gpu_hours)} GPU-hours × "
             f"{money_format(k['price'])}/h × 365 ÷ 12 days", monthly, "USD",
             money_format(monthly)),
        Step("Minutes short of the target", "ready replicas below what the load needs at "
             f"{percent_format(util)} utilisation with the failover reserve, before headroom; "
             f"requests waited in {number_format(values['minutes_queued'])} of them",
             values["minutes_short"], "minutes", number_format(values["minutes_short"])),
        Step("Most GPUs paid at once", "ready + booting", values["peak_paid_gpus"], "GPUs",
             count_format(values["peak_paid_gpus"], "GPU")),
    )
    return Result(values=values, steps=steps)


POLICY_CHOICES_TEXT = {key: text for key, text in POLICY_CHOICES}


def day_plots(*, inputs: dict, result: Result) -> tuple:
    r = result.values
    hours = tuple(r["hour"])
    load = Plot(
        title="Demand over the day and the capacity the autoscaler had ready",
        x_title="Hour of the day", y_title="Requests/s", y_from_zero=True,
        series=(Series("Demand", hours, tuple(r["demand"])),
                Series("Decode pool, ready (at full load)", hours, tuple(r["decode_capacity"]),
                       step=True),
                Series("Prefill pool, ready (at full load)", hours,
                       tuple(r["prefill_capacity"]), step=True)))
    gpus = Plot(
        title="Fleet paid against the load's need, in GPUs", x_title="Hour of the day",
        y_title="GPUs",
        series=(Series("Paid (ready + booting)", hours, tuple(r["paid_gpus"]), step=True),
                Series("Needed (before headroom)", hours, tuple(r["needed_gpus"]), dash=True,
                       step=True)))
    nan = math.nan
    cost = BarPlot(
        title="Monthly cost: the simulated autoscaler against the calculator",
        categories=("Sized for the peak", "Follows the load exactly", "Simulated autoscaler"),
        value_title="USD per month", mode="overlay",
        series=(BarSeries("Predicted (the calculator)",
                          (r["monthly_cost_peak"], r["monthly_cost_follow"], nan),
                          labels=(money_format(r["monthly_cost_peak"]),
                                  money_format(r["monthly_cost_follow"]), ""), outline=True),
                BarSeries("Simulated day", (nan, nan, r["monthly_cost_simulated"]),
                          labels=("", "", money_format(r["monthly_cost_simulated"])))))
    return load, gpus, cost


def day_note(*, inputs: dict, result: Result) -> str:
    r = result.values
    return (f"The simulated autoscaler paid for {number_format(r['gpu_hours_per_day'])} "
            f"GPU-hours in the day, {money_format(r['monthly_cost_simulated'])} a month, "
            f"against {money_format(r['monthly_cost_follow'])} for a fleet that follows the load "
            f"exactly and {money_format(r['monthly_cost_peak'])} for one sized for the peak; it "
            "was short of its target capacity for "
            f"{amount_phrase(r['minutes_short'], 'minutes')}. "
            "It costs more than the ideal because it rounds up to whole replicas in every "
            "region, keeps a floor in each, holds the failover reserve all day, waits out cold "
            "starts and keeps capacity through its cool-down; with less headroom it gets cheaper "
            "and the short minutes go up.")


DAY = calculator_register(Calculator(
    slug=DEMO_SLUG,
    title="A day of traffic against the autoscaled fleet",
    explanation=("A numpy simulator on the web server (no worker). The calculator's decode and "
                 "prefill pools run through 24 hours of demand with the chosen peak and noise; "
                 "the autoscaler sizes each pool in whole replicas per region, every new replica "
                 "arriving a cold start later. Assumptions not listed here stay at the "
                 "calculator's defaults."),
    inputs=DAY_INPUTS, compute=day_simulated, plots=day_plots, note=day_note, listed=False,
    api_path="/capstone-day",
    api_summary="Simulated day of the capstone fleet under an autoscaler"))


# ---------------------------------------------------------------------------------------------
# The prose's figures.

SOURCES: list[tuple[str, str]] = [
    ("DeepSeek, 'Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview' (a peak of "
     "278 nodes against a daily average of 226.75, nodes lent to research at night, 56.3% of "
     "input tokens hitting the KV cache on disk)",
     "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
     "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md"),
    ("Little, 'A Proof for the Queuing Formula: L = λW', Operations Research 9(3), 1961",
     "https://doi.org/10.1287/opre.9.3.383"),
    ("Qin et al., 'Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving' "
     "(KV cache tiers in CPU memory and SSD; its published trace's wide distribution of "
     "input lengths)", "https://arxiv.org/abs/2407.00079"),
    ("LMSYS, 'SGLang v0.4' (a cache-aware load balancer)",
     "https://lmsys.org/blog/2024-12-04-sglang-v0-4/"),
    ("Inan et al., 'Llama Guard: LLM-based Input-Output Safeguard for Human-AI Conversations'",
     "https://arxiv.org/abs/2312.06674"),
    ("Zhong et al., 'DistServe' (disaggregated prefill and decode)",
     "https://arxiv.org/abs/2401.09670"),
    ("Patel et al., 'Splitwise' (prefill and decode on separate machines; its production "
     "traces of Azure's coding and conversation services, with their spread of prompt and "
     "output lengths)",
     "https://arxiv.org/abs/2311.18677"),
    ("Kwon et al., 'PagedAttention' (KV memory and preemption)",
     "https://arxiv.org/abs/2309.06180"),
    ("Meta Llama 3.1 70B config.json", "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/"
     "main/config.json"),
]


def _tail_turns(dem: dict, mean_prompt: float) -> dict:
    """Prompt lengths a mean hides: turn j sends S + u + (j − 1)(u + a) tokens, so the last turn
    of a T-turn conversation, and of a 2T-turn one, against the mean prompt over T turns."""
    step = dem["user_tokens"] + dem["answer_tokens"]
    base = dem["system_tokens"] + dem["user_tokens"]
    turns = max(1, round(dem["turns"]))
    last = base + (turns - 1) * step
    long_last = base + (2 * turns - 1) * step
    return {
        "tail_turns": count_phrase(turns, "turn"),
        "tail_long_turns": count_phrase(2 * turns, "turn"),
        "tail_last_text": f"{last:,}", "tail_long_text": f"{long_last:,}",
        "tail_long_vs_mean": times_phrase(long_last, mean_prompt),
        "tail_grows": step > 0 and turns > 1,
    }


def figures(inputs: dict) -> dict:
    """Every figure of the prose at the calculator's normalised `inputs`."""
    k = capstone_checked(**inputs)
    p = fleet_plan_model(k)
    d, dec = p["demand"], p["decode"]
    dem = k["demand"]
    rows = tornado_rows(inputs)
    tpot_row = next(r for r in rows if r["name"] == "tpot_target_ms")
    top = rows[:3]
    return {
        "deepseek_peak_nodes": f"{DEEPSEEK_NODES[0]:,}",
        "deepseek_average_nodes": number_format(DEEPSEEK_NODES[1], digits=5),
        "deepseek_peak_ratio": f"{number_format(DEEPSEEK_NODES[0] / DEEPSEEK_NODES[1])}×",
        "sglang_router_throughput": f"{SGLANG_ROUTER[0]}×",
        "sglang_router_hits": f"{SGLANG_ROUTER[1]}×",
        # Conversation lengths are heavy-tailed: the last turn of a conversation of the mean
        # length, and of one twice as long, against the mean prompt the sizing uses.
        **_tail_turns(dem, d["prompt"]),
        "dau_text": f"{dem['daily_users']:,}", "sessions_text": number_format(dem["sessions"]),
        "sessions_phrase": amount_phrase(dem["sessions"], "sessions"),
        "turns": dem["turns"], "sys_tokens": f"{dem['system_tokens']:,}",
        "user_tokens": f"{dem['user_tokens']:,}", "answer_tokens": f"{dem['answer_tokens']:,}",
        "peak_to_avg_text": f"{number_format(dem['peak_to_average'])}×",
        "hit_text": percent_format(dem["prefix_hit"]),
        "ttft_text": seconds_format(k["ttft_target_seconds"]),
        "tpot_slo_text": seconds_format(k["tpot_target_seconds"]),
        "think_text": seconds_format(k["think_seconds"]),
        "model_name": k["model"].name, "dtype_name": k["w"].name,
        "kv_dtype_name": k["kv"].name, "gpu_name": k["gpu"].name, "tp": k["tp"],
        "price_text": money_format(k["price"]), "util_text": percent_format(k["utilisation"]),
        "mfu_text": percent_format(k["mfu_prefill"]),
        "req_day_text": f"{number_format(d['requests_per_day'])}",
        "avg_rps_text": rate_format(d["average_rps"], "requests/s"),
        "peak_rps_text": rate_format(d["peak_rps"], "requests/s"),
        "mean_input": f"{number_format(d['prompt'])}", "uncached": number_format(d["uncached"]),
        "peak_in_text": rate_format(d["peak_input"], "tokens/s"),
        "peak_prefill_text": rate_format(d["peak_prefill"], "tokens/s"),
        "peak_out_text": rate_format(d["peak_output"], "tokens/s"),
        "w_gpu_text": bytes_in(dec["weights"], "GB"),
        "usable_text": bytes_in(dec["usable"], "GB"), "free_text": bytes_in(dec["free"], "GB"),
        "memory_total_text": bytes_in(k["gpu"].memory_total_bytes, "GB"),
        "kv_per_token_text": bytes_in(p["kv_token"], "kB"),
        "kv_gpu_text": bytes_in(dec["kv_token"], "kB"),
        "kv_copied": k["tp"] > 1 and dec["kv_token"] >= p["kv_token"],
        "context": number_format(p["context"]), "b_mem": f"{dec['b_mem']:,}",
        "b_slo": f"{dec['b_slo']:,}", "batch": f"{dec['batch']:,}",
        "batch_limit": dec["limit"], "step_text": seconds_format(dec["step_seconds"]),
        "step_bound": dec["bound"],
        "replica_tps_text": rate_format(dec["tokens_per_second"], "tokens/s"),
        "t_req_text": seconds_format(p["t_req"]),
        # Averages (Little's law), so not rounded to whole requests: "about 0.004 on average".
        "concurrency_text": number_format(p["concurrency"]),
        "rep_thr_text": number_format(p["by_throughput"]),
        "rep_kv_text": number_format(p["by_kv"]), "rep_kv_none": p["by_kv"] == 0,
        "kv_limited": dec["limit"] == "KV memory",
        # At full utilisation the planned batch is the whole batch: nothing conservative left.
        "step_at_util_shorter": seconds_format(p["step_at_util"])
        != seconds_format(dec["step_seconds"]),
        "kv_binds": p["kv_binds"],
        "t_decode_text": seconds_format(p["t_decode"]),
        "decode_concurrency_text": number_format(p["decode_concurrency"]),
        "decode_concurrency_phrase": (
            "no sequences" if p["decode_concurrency"] == 0 else
            f"about {number_format(p['decode_concurrency'])} sequences on average"),
        "answer_tokens_phrase": count_phrase(dem["answer_tokens"], "token"),
        "step_at_util_text": seconds_format(p["step_at_util"]),
        "rep_need_text": number_format(p["decode_replicas"]),
        "prefill_flops_text": flops_format(p["prefill_flops"]),
        "prefill_gs_text": seconds_format(p["prefill_gpu_seconds"]),
        "pre_need_text": number_format(p["prefill_gpus"]),
        "prefill_exceeds_decode": p["prefill_exceeds_decode"],
        "prefill_time_text": seconds_format(p["prefill_time"]),
        "prefill_compute_text": seconds_format(p["prefill"]["compute"]),
        "prefill_memory_text": seconds_format(p["prefill"]["memory"]),
        "prefill_bound": p["prefill"]["bound"],
        "kv_transfer_text": seconds_format(p["kv_transfer"]),
        "prefill_fits_ttft": p["prefill_fits_ttft"],
        "regions": k["regions"], "regions_minus_one": p["share"],
        "survives": p["share"] != k["regions"],
        "dec_rep_region": count_phrase(p["dec_region"], "decode replica"),
        "dec_gpus_region": count_phrase(p["dec_region"] * k["tp"], "GPU"),
        "pre_rep_region": count_phrase(p["pre_region"], "prefill replica"),
        "pre_gpus_region": count_phrase(p["pre_region"] * k["tp"], "GPU"),
        "dau_phrase": count_phrase(dem["daily_users"], "daily active user"),
        "dau_short_phrase": count_phrase(dem["daily_users"], "daily user"),
        "per_region": p["per_region"], "total_gpus": f"{p['total_gpus']:,}",
        "hours_per_month": HOURS_PER_MONTH,
        "monthly_peak_text": money_format(p["monthly_peak"]),
        "monthly_follow_text": money_format(p["monthly_follow"]),
        "per_user_text": money_format(p["per_user"], significant=3),
        "per_user_follow_text": money_format(p["per_user_follow"], significant=3),
        "per_million_text": money_format(p["per_million"], significant=3),
        "per_million_output_text": money_format(p["per_million_output"], significant=3),
        "open_conversations_text": number_format(p["open_conversations"]),
        # Of those, the ones between turns: Little's law over the think time alone.
        "idle_conversations_text": number_format(p["demand"]["peak_rps"] * k["think_seconds"]),
        "no_think": k["think_seconds"] == 0,
        "turns_one": dem["turns"] == 1,
        "kv_open_text": bytes_in(p["kv_open"], "TB"),
        "kv_hbm_text": bytes_in(p["kv_room"], "TB"),
        "kv_open_exceeds": p["kv_open"] > p["kv_room"],
        "tornado_top_name": top[0]["label"],
        "tornado_top_low_text": money_format(top[0]["at_low"] or 0),
        "tornado_top_high_text": money_format(top[0]["at_high"] or 0),
        "tornado_second_name": top[1]["label"], "tornado_third_name": top[2]["label"],
        "tpot_no_effect": tpot_row["swing"] == 0,
        # Why it barely moves: KV memory still limits the batch at the range's tightest target,
        # or else whole replicas per region round the change away.
        "tpot_kv_binds_across": fleet_plan_model(capstone_checked(
            **{**inputs, "tpot_target_ms": tpot_row["low"]}))["decode"]["limit"] == "KV memory",
        "tpot_range_text": f"{_value_text('tpot_target_ms', tpot_row['low'])} to "
                           f"{_value_text('tpot_target_ms', tpot_row['high'])}",
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 25's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        inputs = CALCULATOR.defaults()
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "demo_slug": DEMO_SLUG, "demo_prefix": DEMO_PREFIX,
            "inputs_valid": state.result is not None}

