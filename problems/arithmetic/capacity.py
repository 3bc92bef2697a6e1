"""From users to a fleet (problem 25): chat demand in requests and tokens per second at the peak
(every turn resends the conversation), concurrency by Little's law, decode replicas sized by
throughput and by KV memory (whichever needs more), a prefill pool sized by the roofline of a
prompt's pass after prefix cache hits, regions that survive losing one, and the monthly bill
peak-sized and scaled; then a tornado of which assumption moves that bill most.

The decode replica is problem 24's (`replica.replica_decode`); nothing is computed twice.
"""

import math
from collections.abc import Callable

from problems.arithmetic.catalog import model_get
from problems.arithmetic.compute import kv_bytes_per_token_model, peak_flops_get
from problems.arithmetic.cost import HOURS_PER_MONTH, PRICE_MAX
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, number_check
from problems.arithmetic.memory import context_check
from problems.arithmetic.replica import (
    prefill_pass_replica,
    replica_decode,
    replica_inputs_check,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    money_format,
    number_format,
    percent_format,
    rate_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase

DAYS_PER_MONTH = 365 / 12
SECONDS_PER_DAY = 86_400
REGIONS_MAX = 20
KV_LINK_EFFICIENCY = 0.8  # achieved share of the KV-transfer link, as for other links


def little_concurrency(*, arrival_rate: float, time_in_system: float) -> float:
    """Little's law, L = λW (items): the mean number in a system from its arrival rate (per s)
    and the mean time each spends in it (s). 347.22 requests/s × 10.392 s = 3,608."""
    return arrival_rate * time_in_system


def chat_demand_model(*, daily_users: float, sessions: float, turns: int, system_tokens: int,
                      user_tokens: int, answer_tokens: int, peak_to_average: float,
                      prefix_hit: float) -> dict[str, float]:
    """Requests and tokens of a chat product (requests/s, tokens, tokens/s).

    Turn j resends the system prompt, every earlier message and answer, and the new message:
    S + u + (j − 1)(u + a) tokens; over T turns the mean prompt is S + u + (T − 1)/2 × (u + a).
    Everything but the new message was seen on an earlier turn, and `prefix_hit` of that
    repeated part is served from the prefix cache, so u + (1 − h)(prompt − u) are computed.
    """
    prompt = system_tokens + user_tokens + (turns - 1) / 2 * (user_tokens + answer_tokens)
    uncached = user_tokens + (1 - prefix_hit) * (prompt - user_tokens)
    per_day = daily_users * sessions * turns
    average = per_day / SECONDS_PER_DAY
    peak = average * peak_to_average
    return {
        "prompt": prompt, "uncached": uncached, "requests_per_day": per_day,
        "average_rps": average, "peak_rps": peak, "peak_input": peak * prompt,
        "peak_prefill": peak * uncached, "peak_output": peak * answer_tokens,
        "answer": answer_tokens, "turns": turns,
    }


def chat_demand(*, daily_users: int, sessions: float, turns: int, system_tokens: int,
                user_tokens: int, answer_tokens: int, peak_to_average: float,
                prefix_hit: float) -> Result:
    """A chat product's demand at its peak (requests/s, tokens/s): see `chat_demand_model`."""
    d = chat_demand_model(**_demand_checked(
        daily_users=daily_users, sessions=sessions, turns=turns, system_tokens=system_tokens,
        user_tokens=user_tokens, answer_tokens=answer_tokens, peak_to_average=peak_to_average,
        prefix_hit=prefix_hit))
    return Result(values=d, steps=_demand_steps(d, daily_users=daily_users, sessions=sessions,
                                                system_tokens=system_tokens,
                                                user_tokens=user_tokens,
                                                peak_to_average=peak_to_average))


def _demand_checked(**given: float) -> dict:
    return {
        "daily_users": count_check(given["daily_users"], field="daily_users",
                                   maximum=USERS_MAX),
        "sessions": number_check(given["sessions"], field="sessions", maximum=1_000),
        "turns": count_check(given["turns"], field="turns", maximum=1_000),
        "system_tokens": count_check(given["system_tokens"], field="system_tokens", minimum=0,
                                     maximum=TOKENS_MAX),
        "user_tokens": count_check(given["user_tokens"], field="user_tokens",
                                   maximum=TOKENS_MAX),
        "answer_tokens": count_check(given["answer_tokens"], field="answer_tokens",
                                     maximum=TOKENS_MAX),
        "peak_to_average": number_check(given["peak_to_average"], field="peak_to_average",
                                        minimum=1.0, maximum=100.0, allow_minimum=True),
        "prefix_hit": number_check(given["prefix_hit"], field="prefix_hit", minimum=0.0,
                                   maximum=1.0, allow_minimum=True),
    }


def _demand_steps(d: dict, *, daily_users: int, sessions: float, system_tokens: int,
                  user_tokens: int, peak_to_average: float) -> tuple[Step, ...]:
    a, t = d["answer"], d["turns"]
    return (
        Step("Requests per day",
             f"{count_phrase(daily_users, 'user')} × {amount_phrase(sessions, 'sessions')} a day × "
             f"{count_phrase(t, 'turn')}", d["requests_per_day"], "requests",
             number_format(d["requests_per_day"])),
        Step("Average and peak rate", f"{number_format(d['requests_per_day'])} ÷ 86,400 s = "
             f"{rate_format(d['average_rps'], 'requests/s')}, × {number_format(peak_to_average)} "
             "peak-to-average", d["peak_rps"], "requests/s",
             rate_format(d["peak_rps"], "requests/s")),
        Step("Mean prompt (history resent every turn)",
             f"{system_tokens:,} + {user_tokens:,} + ({t} − 1)/2 × ({user_tokens:,} + {a:,})",
             d["prompt"], "tokens", count_format(d["prompt"], "token")),
        Step("Prompt tokens computed (after prefix-cache hits)",
             f"{user_tokens:,} new + (1 − hit rate) × {number_format(d['prompt'] - user_tokens)} "
             "repeated", d["uncached"], "tokens", count_format(d["uncached"], "token")),
        Step("Peak tokens/s", f"input {rate_format(d['peak_input'], 'tokens/s')}, of which "
             f"{rate_format(d['peak_prefill'], 'tokens/s')} computed; output "
             f"{number_format(d['peak_rps'])} × {a:,}", d["peak_output"], "tokens/s",
             rate_format(d["peak_output"], "tokens/s") + " output"),
    )


def capstone_checked(
    *, daily_users: int, sessions: float, turns: int, system_tokens: int, user_tokens: int,
    answer_tokens: int, peak_to_average: float, prefix_hit: float, ttft_target_s: float,
    tpot_target_ms: float, think_s: float, model: str, gpu: str, tp: int, dtype: str,
    kv_dtype: str | None, memory_fraction: float, reserve_gb: float,
    bandwidth_efficiency: float, mfu_decode: float, mfu_prefill: float, utilisation: float,
    regions: int, survive_region: str, price_per_hour: float | None, link_gbps: float,
) -> dict:
    """Every input of the capstone resolved and range-checked, each error naming its field."""
    demand = _demand_checked(daily_users=daily_users, sessions=sessions, turns=turns,
                             system_tokens=system_tokens, user_tokens=user_tokens,
                             answer_tokens=answer_tokens, peak_to_average=peak_to_average,
                             prefix_hit=prefix_hit)
    longest = system_tokens + turns * user_tokens + (turns - 1) * answer_tokens
    context_check(model=model_get(model), tokens=longest + answer_tokens, field="turns",
                  what=f"the last turn's prompt ({longest:,}) plus its answer "
                       f"({answer_tokens:,})")
    k = replica_inputs_check(model=model, gpu=gpu, tp=tp, dtype=dtype, kv_dtype=kv_dtype,
                             input_tokens=max(1, longest), output_tokens=answer_tokens,
                             memory_fraction=memory_fraction, reserve_gb=reserve_gb,
                             bandwidth_efficiency=bandwidth_efficiency, mfu_decode=mfu_decode,
                             mfu_prefill=mfu_prefill, tpot_target_ms=tpot_target_ms)
    if survive_region not in ("on", "off"):
        raise ArithmeticInputError(field="survive_region", message="choose on or off")
    price = (k["gpu"].price_per_hour_assumed if price_per_hour is None else
             number_check(price_per_hour, field="price_per_hour", maximum=PRICE_MAX))
    return {
        **k, "demand": demand,
        "ttft_target_seconds": number_check(ttft_target_s, field="ttft_target_s",
                                            maximum=3_600),
        "think_seconds": number_check(think_s, field="think_s", minimum=0.0, maximum=86_400,
                                      allow_minimum=True),
        "utilisation": number_check(utilisation, field="utilisation", maximum=1.0),
        "regions": count_check(regions, field="regions", maximum=REGIONS_MAX),
        "survive_region": survive_region == "on",
        "price": price,
        "link_bytes_per_second": number_check(link_gbps, field="link_gbps", maximum=10_000) * 1e9,
    }


def fleet_plan_model(k: dict) -> dict:
    """The fleet for checked inputs `k` (requests, replicas, GPUs, bytes, seconds, USD).

    Decode replicas: the larger of peak output tokens/s ÷ (a replica's tokens/s × utilisation)
    and peak concurrency (Little's law over the whole request, first token included) ÷ (the
    sequences its KV memory holds × utilisation). Prefill: peak computed prompt tokens/s × GPU
    seconds per token (the roofline of a typical prompt's pass, `prefill_pass_replica`) ÷
    utilisation, in replicas of `tp` GPUs (each holds the weights, and the decode replica's
    fit check already makes room for a whole prompt's KV beside them).
    Regions: each carries the peak ÷ (R − 1) when the fleet must survive losing one.
    """
    d = chat_demand_model(**k["demand"])
    m, g, w, tp = k["model"], k["gpu"], k["w"], k["tp"]
    answer = k["demand"]["answer_tokens"]
    context = d["prompt"] + answer / 2
    dec = replica_decode(model=m, gpu=g, tp=tp, w=w, kv=k["kv"], context=context,
                         memory_fraction=k["memory_fraction"], reserve_bytes=k["reserve_bytes"],
                         bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu_decode"],
                         tpot_target_seconds=k["tpot_target_seconds"])
    util = k["utilisation"]
    t_req = k["ttft_target_seconds"] + (answer - 1) * dec["step_seconds"]
    concurrency = little_concurrency(arrival_rate=d["peak_rps"], time_in_system=t_req)
    # Decode holds a sequence's KV only while it decodes: its time to first token is spent in
    # the prefill pool and its queue, so decode occupancy is Little's law over decode time.
    t_decode = (answer - 1) * dec["step_seconds"]
    decode_concurrency = little_concurrency(arrival_rate=d["peak_rps"], time_in_system=t_decode)
    by_throughput = d["peak_output"] / (dec["tokens_per_second"] * util)
    # The same count by memory: sequences decoding ÷ (sequences memory holds × utilisation).
    # With the batch at the KV limit both are rate × step ÷ (batch × utilisation), differing
    # only by the answer's first token (made by prefill): which resource binds is decided
    # when the batch is chosen, not here.
    by_kv = decode_concurrency / (dec["b_mem"] * util)
    decode_replicas = max(by_throughput, by_kv)
    # Planned at `util` busy, a replica runs a batch of util × batch, whose step is shorter
    # than the full batch's: sizing with the full batch's step is conservative by this much.
    step_at_util = dec["step_of"](max(1.0, dec["batch"] * util))["seconds"]
    prefill = prefill_pass_replica(model=m, gpu=g, tp=tp, w=w, emb=dec["emb"], kv=k["kv"],
                                   prompt_tokens=d["prompt"], uncached_tokens=d["uncached"],
                                   bandwidth_efficiency=k["bandwidth_efficiency"],
                                   mfu=k["mfu_prefill"])
    flops = prefill["flops_per_token"]
    gpu_seconds = prefill["gpu_seconds_per_token"]
    prefill_gpus = d["peak_prefill"] * gpu_seconds / util
    prefill_time = prefill["seconds"]
    kv_token = kv_bytes_per_token_model(m, k["kv"])
    # Each GPU sends its own share of the prompt's KV over its own link (the whole latent, for
    # MLA, which every GPU of the replica holds).
    kv_transfer = d["prompt"] * dec["kv_token"] / (k["link_bytes_per_second"]
                                                   * KV_LINK_EFFICIENCY)
    regions = k["regions"]
    share = regions - 1 if (k["survive_region"] and regions > 1) else regions
    dec_region = math.ceil(decode_replicas / share)
    pre_region = math.ceil(prefill_gpus / share / tp)
    per_region = tp * (dec_region + pre_region)
    total = regions * per_region
    monthly = total * k["price"] * HOURS_PER_MONTH
    follow = monthly / k["demand"]["peak_to_average"]
    tokens_month = d["requests_per_day"] * (d["prompt"] + answer) * DAYS_PER_MONTH
    output_month = d["requests_per_day"] * answer * DAYS_PER_MONTH
    open_conversations = d["peak_rps"] * (t_req + k["think_seconds"])
    decode_pool = regions * dec_region
    return {
        "demand": d, "decode": dec, "context": context, "t_req": t_req,
        "concurrency": concurrency, "by_throughput": by_throughput, "by_kv": by_kv,
        "t_decode": t_decode, "decode_concurrency": decode_concurrency,
        "step_at_util": step_at_util,
        "kv_binds": by_kv >= by_throughput, "decode_replicas": decode_replicas,
        "prefill_flops": flops, "prefill_gpu_seconds": gpu_seconds, "prefill": prefill,
        "prefill_gpus": prefill_gpus, "prefill_time": prefill_time, "kv_token": kv_token,
        "kv_transfer": kv_transfer,
        "prefill_fits_ttft": prefill_time + kv_transfer < k["ttft_target_seconds"],
        "prefill_exceeds_decode": prefill_gpus > decode_replicas * tp,
        "share": share, "dec_region": dec_region, "pre_region": pre_region,
        "per_region": per_region, "total_gpus": total, "monthly_peak": monthly,
        "monthly_follow": follow, "per_user": monthly / k["demand"]["daily_users"],
        "per_user_follow": follow / k["demand"]["daily_users"],
        "per_million": monthly / tokens_month * 1e6,
        "per_million_output": monthly / output_month * 1e6,
        "open_conversations": open_conversations,
        "kv_open": open_conversations * context * kv_token,
        "decode_pool_replicas": decode_pool,
        # Tokens the decode pool's KV room holds, in whole-token bytes (an MLA latent sits
        # whole on every GPU of a replica, so its room does not grow with tp).
        "kv_room": decode_pool * dec["free"] / dec["kv_token"] * kv_token,
    }


def fleet_steps(p: dict, k: dict) -> tuple[Step, ...]:
    """The worked steps of a fleet plan `p` for checked inputs `k`."""
    d, dec = p["demand"], p["decode"]
    m, g, w, tp = k["model"], k["gpu"], k["w"], k["tp"]
    dem = k["demand"]
    util = percent_format(k["utilisation"])
    at = dec["step"]
    pf = p["prefill"]
    regions_text = (f"{k['regions']} regions, each carrying the peak ÷ {p['share']} so the rest "
                    "survive losing one" if p["share"] != k["regions"] else
                    f"{k['regions']} region{'s' if k['regions'] > 1 else ''}, no spare")
    return (
        *_demand_steps(d, daily_users=dem["daily_users"], sessions=dem["sessions"],
                       system_tokens=dem["system_tokens"], user_tokens=dem["user_tokens"],
                       peak_to_average=dem["peak_to_average"]),
        Step("Decode replica: free for KV per GPU",
             f"{bytes_short(g.memory_total_bytes)} × {number_format(k['memory_fraction'])} − "
             f"{bytes_short(k['reserve_bytes'])} reserve − {bytes_short(dec['weights'])} of "
             f"{w.name} weights ({m.name} ÷ {tp})", dec["free"], "B", bytes_format(dec["free"])),
        Step("Decode replica: sequences memory holds",
             f"⌊{bytes_short(dec['free'])} ÷ ({bytes_short(dec['kv_token'])} per token per GPU × "
             f"{number_format(p['context'])} tokens, the prompt plus half the answer)⌋",
             dec["b_mem"], "sequences", count_format(dec["b_mem"], "sequence")),
        Step("Decode replica: sequences the TPOT target allows",
             f"the largest batch whose step is within {seconds_format(k['tpot_target_seconds'])}",
             dec["b_slo"], "sequences", count_format(dec["b_slo"], "sequence")),
        Step(f"Decode replica: step at {dec['batch']:,} sequences ({dec['bound']}-bound, "
             f"batch limited by {dec['limit']})",
             f"max({bytes_short(at['bytes'])} read, {flops_format(at['flops'])} per GPU)",
             at["seconds"], "s", seconds_format(at["seconds"])),
        Step("Decode replica: output tokens/s", f"{dec['batch']:,} ÷ "
             f"{seconds_format(at['seconds'])}", dec["tokens_per_second"], "tokens/s",
             rate_format(dec["tokens_per_second"], "tokens/s")),
        Step("Request time", f"{seconds_format(k['ttft_target_seconds'])} to the first token "
             f"(the target, standing in for the measured TTFT) + {dem['answer_tokens'] - 1:,} × "
             f"{seconds_format(at['seconds'])}", p["t_req"], "s", seconds_format(p["t_req"])),
        Step("Concurrency at the peak (Little's law)",
             f"{number_format(d['peak_rps'])} requests/s × {seconds_format(p['t_req'])}",
             p["concurrency"], "sequences",
             f"about {number_format(p['concurrency'])} sequences on average"),
        Step("Decode replicas by throughput",
             f"{number_format(d['peak_output'])} tokens/s ÷ "
             f"({number_format(dec['tokens_per_second'])} × {util})", p["by_throughput"],
             "replicas", number_format(p["by_throughput"])),
        Step("Sequences decoding at the peak (Little's law over decode time)",
             f"{number_format(d['peak_rps'])} requests/s × {seconds_format(p['t_decode'])}",
             p["decode_concurrency"], "sequences",
             "no sequences" if p["decode_concurrency"] == 0 else
             f"about {number_format(p['decode_concurrency'])} sequences on average"),
        Step("Decode replicas by KV memory",
             f"about {number_format(p['decode_concurrency'])} sequences on average ÷ "
             f"({dec['b_mem']:,} × {util})",
             p["by_kv"], "replicas", number_format(p["by_kv"])),
        Step("Prefill FLOPs per computed token",
             f"2 × non-embedding parameters + attention over "
             f"{number_format(d['prompt'] - d['uncached'] / 2 + 0.5)} positions on average",
             p["prefill_flops"], "FLOP", flops_format(p["prefill_flops"])),
        Step(f"A typical prompt's prefill ({pf['bound']}-bound)",
             f"max({number_format(pf['computed'])} tokens × {flops_format(p['prefill_flops'])} "
             f"÷ {count_phrase(tp, 'GPU')} ÷ ({rate_of_format(peak_flops_get(gpu=g, dtype=w))} × "
             f"{number_format(k['mfu_prefill'])} MFU), {bytes_short(pf['bytes'])} of weights "
             f"and KV per GPU ÷ ({bandwidth_format(g.bandwidth_bytes_per_second)} × "
             f"{number_format(k['bandwidth_efficiency'])}))",
             pf["seconds"], "s", seconds_format(pf["seconds"])),
        Step("Prefill GPUs at the peak",
             f"{number_format(d['peak_prefill'])} tokens/s × "
             f"{seconds_format(p['prefill_gpu_seconds'])} GPU-time per computed token ({tp} × "
             f"{seconds_format(pf['seconds'])} ÷ {number_format(pf['computed'])}) ÷ {util}",
             p["prefill_gpus"], "GPUs", number_format(p["prefill_gpus"])),
        Step("A typical prompt: prefill and KV transfer",
             f"{number_format(d['uncached'])} tokens on {count_phrase(tp, 'GPU')} "
             f"({seconds_format(p['prefill_time'])}) + {number_format(d['prompt'])} tokens × "
             f"{bytes_short(dec['kv_token'])} of KV per GPU over each GPU's "
             f"{number_format(k['link_bytes_per_second'] / 1e9)} GB/s at "
             f"{percent_format(KV_LINK_EFFICIENCY)} ({seconds_format(p['kv_transfer'])})",
             p["prefill_time"] + p["kv_transfer"], "s",
             seconds_format(p["prefill_time"] + p["kv_transfer"])),
        Step("GPUs per region", f"{regions_text}: ⌈{number_format(p['decode_replicas'])} ÷ "
             f"{p['share']}⌉ = {p['dec_region']} decode replicas + ⌈"
             f"{number_format(p['prefill_gpus'])} ÷ {p['share']} ÷ {tp}⌉ = {p['pre_region']} "
             f"prefill replicas, × {count_phrase(tp, 'GPU')}", p["per_region"], "GPUs",
             count_format(p["per_region"], "GPU")),
        Step("GPUs in all", f"{k['regions']} × {p['per_region']}", p["total_gpus"], "GPUs",
             count_format(p["total_gpus"], "GPU")),
        Step("Monthly cost, sized for the peak all day",
             f"{p['total_gpus']:,} × {money_format(k['price'])}/h × {HOURS_PER_MONTH} h "
             "(model GPUs only: gateway, store and safety classifiers not counted)",
             p["monthly_peak"], "USD", money_format(p["monthly_peak"])),
        Step("Monthly cost, following the load exactly",
             f"{money_format(p['monthly_peak'])} ÷ {number_format(dem['peak_to_average'])} "
             "peak-to-average (a lower bound no autoscaler reaches)", p["monthly_follow"], "USD",
             money_format(p["monthly_follow"])),
        Step("Per daily user per month, peak-sized",
             f"{money_format(p['monthly_peak'])} ÷ {dem['daily_users']:,}", p["per_user"], "USD",
             money_format(p["per_user"], significant=2)),
        Step("Per million tokens, peak-sized",
             f"input and output together; {money_format(p['per_million_output'])} per million "
             "if all of it is charged to output tokens", p["per_million"], "USD",
             money_format(p["per_million"], significant=3)),
        Step("KV of open conversations at the peak",
             f"about {number_format(p['open_conversations'])} conversations on average "
             "(requests/s × (request "
             f"time + {seconds_format(k['think_seconds'])} thinking)) × "
             f"{number_format(p['context'])} tokens × {bytes_short(p['kv_token'])}, against "
             f"{bytes_short(p['kv_room'])} of KV room in the decode pool", p["kv_open"], "B",
             bytes_format(p["kv_open"])),
    )


def capstone(**inputs: object) -> Result:
    """Problem 25's fleet from its calculator's inputs (requests, GPUs, USD): see
    `fleet_plan_model`. Values name every figure the page quotes."""
    k = capstone_checked(**inputs)
    p = fleet_plan_model(k)
    d, dec = p["demand"], p["decode"]
    values = {
        "requests_per_day": d["requests_per_day"], "average_rps": d["average_rps"],
        "peak_rps": d["peak_rps"], "mean_prompt": d["prompt"], "uncached": d["uncached"],
        "peak_output_tokens_per_second": d["peak_output"],
        "peak_prefill_tokens_per_second": d["peak_prefill"],
        "prefill_seconds": p["prefill_time"], "prefill_bound": p["prefill"]["bound"],
        "batch_memory": dec["b_mem"], "batch_target": dec["b_slo"], "batch": dec["batch"],
        "batch_limit": dec["limit"], "step_seconds": dec["step_seconds"],
        "step_bound": dec["bound"], "replica_tokens_per_second": dec["tokens_per_second"],
        "request_seconds": p["t_req"], "concurrency": p["concurrency"],
        "replicas_by_throughput": p["by_throughput"], "replicas_by_kv": p["by_kv"],
        "kv_binds": p["kv_binds"], "prefill_gpus": p["prefill_gpus"],
        "prefill_flops_per_token": p["prefill_flops"],
        "decode_replicas_per_region": p["dec_region"],
        "prefill_replicas_per_region": p["pre_region"], "gpus_per_region": p["per_region"],
        "total_gpus": p["total_gpus"], "monthly_cost_peak": p["monthly_peak"],
        "monthly_cost_follow": p["monthly_follow"], "per_user_month": p["per_user"],
        "per_million_tokens": p["per_million"],
        "per_million_output_tokens": p["per_million_output"],
        "open_conversations": p["open_conversations"], "kv_open_bytes": p["kv_open"],
        "kv_room_bytes": p["kv_room"],
    }
    return Result(values=values, steps=fleet_steps(p, k))


def capstone_monthly(**inputs: object) -> float:
    """The peak-sized monthly cost (USD) for the capstone's inputs: what the tornado varies."""
    return fleet_plan_model(capstone_checked(**inputs))["monthly_peak"]


# The tornado's ranges: a plausible low and high for each uncertain assumption. Daily users are
# the question's premise, not an assumption (cost scales with them; the line plot shows it).
TORNADO_RANGES: dict[str, tuple[float, float, str]] = {
    "sessions": (1, 4, "sessions per user"),
    "turns": (3, 10, "turns per session"),
    "answer_tokens": (200, 800, "answer length"),
    "user_tokens": (50, 400, "user message length"),
    "system_tokens": (100, 2_000, "system prompt length"),
    "peak_to_average": (2, 4, "peak-to-average"),
    "prefix_hit": (0.2, 0.8, "prefix-cache hit rate"),
    "tpot_target_ms": (30, 100, "TPOT target"),
    "bandwidth_efficiency": (0.6, 0.9, "bandwidth efficiency"),
    "mfu_prefill": (0.3, 0.6, "prefill MFU"),
    "price_per_hour": (2.0, 3.5, "GPU price"),
    "utilisation": (0.5, 0.85, "peak utilisation"),
    "regions": (2, 5, "regions"),
}


def tornado(*, compute: Callable[..., float], inputs: dict,
            ranges: dict[str, tuple[float, float, str]]) -> list[dict]:
    """For each input named in `ranges` (low, high, label), `compute(**inputs)` with that input
    at its low and at its high value and the rest as given; sorted by swing |high − low|,
    largest first. An end the formula refuses is None (and counts as no swing)."""
    rows = []
    for name, (low, high, label) in ranges.items():
        ends = []
        for value in (low, high):
            kind = type(inputs[name]) if inputs.get(name) is not None else float
            try:
                ends.append(compute(**{**inputs, name: kind(value)}))
            except (ArithmeticInputError, ArithmeticError):
                ends.append(None)
        swing = abs(ends[1] - ends[0]) if None not in ends else 0.0
        rows.append({"name": name, "label": label, "low": low, "high": high,
                     "at_low": ends[0], "at_high": ends[1], "swing": swing})
    return sorted(rows, key=lambda row: -row["swing"])


__all__ = [
    "DAYS_PER_MONTH", "TORNADO_RANGES", "capstone", "capstone_checked", "capstone_monthly",
    "chat_demand", "chat_demand_model", "fleet_plan_model", "fleet_steps", "little_concurrency",
    "tornado",
]
