"""Cold starts and the capacity they cost (problem 20).

A new replica is not ready until every part of its cold start is done, one after another:
a node is provisioned (or found), the container image is pulled, the weights are read into GPU
memory, and the engine warms up (allocates its KV pool, compiles or captures CUDA graphs, runs
a first request). Pulling and loading are bytes over a bandwidth, so each has a floor: bytes ÷
bandwidth. While that runs, load keeps climbing. With load rising by s (a fraction of the
current load per minute) and the autoscaler acting D after the rise starts, the replicas it
asks for now arrive D + T later, by which time the load is L(1 + s(D + T)). Ready capacity
must already cover that: the headroom is s × (D + T), and it is paid for all the time.

A warm pool keeps W replicas loaded but out of the router; one joins in seconds (T_w). It
removes the cold start from the ramp's path, so the running fleet needs only s × (D + T_w)
of headroom, and the pool holds the rest until cold replicas catch up. Both are idle GPUs
paid for; a pool is cheaper only when its standby costs less than a running replica (one pool
shared by several models or regions whose spikes do not coincide, or stopped machines with the
weights on local disk). Faster loading (a local NVMe cache, streaming the safetensors straight
to the GPU, a memory snapshot) shortens T itself.
"""

import math

from problems.arithmetic.catalog import dtype_get, model_get
from problems.arithmetic.cost import HOURS_PER_MONTH
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, number_check
from problems.arithmetic.memory import embedding_dtype_resolve, weight_bytes_model
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_in,
    money_format,
    number_format,
    percent_format,
    percent_given_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

GB = 1e9


def cold_start_parts(*, node_seconds: float, image_bytes: float, image_bandwidth: float,
                     weight_bytes: float, load_bandwidth: float, warmup_seconds: float
                     ) -> dict[str, float]:
    """Each part of a cold start and their sum (s): node, image (bytes ÷ B/s), weights (bytes ÷
    B/s, the floor at that bandwidth), warm-up. 141.1 GB at 2 GB/s: 70.55 s of weights."""
    parts = {
        "node": node_seconds,
        "image": image_bytes / image_bandwidth,
        "weights": weight_bytes / load_bandwidth,
        "warmup": warmup_seconds,
    }
    parts["total"] = sum(parts.values())
    return parts


def ramp_headroom(*, slope_per_minute: float, react_seconds: float, start_seconds: float
                  ) -> float:
    """Headroom (a fraction of the current load) that absorbs a linear ramp of
    `slope_per_minute` (fraction of the load per minute) while the autoscaler reacts and the new
    replicas start: s × (D + T) in minutes. 2%/min, 60 s + 6 min: 14%."""
    return slope_per_minute * (react_seconds + start_seconds) / 60


def spike_backlog(*, demand_rps: float, capacity_rps: float, react_seconds: float,
                  start_seconds: float, pool_rps: float = 0.0,
                  pool_start_seconds: float = 0.0) -> float:
    """Requests queued by the time new capacity arrives after load jumps to `demand_rps` above
    the `capacity_rps` ready (requests): the shortfall builds for `react_seconds` +
    `start_seconds`; a warm pool serving `pool_rps` joins after `react_seconds` +
    `pool_start_seconds` and shrinks the shortfall from then on. 40 requests/s short for
    60 s + 10 min: 26,400; with 30 requests/s of pool joining after 60 + 30 s: 40 × 90 + 10 ×
    570 = 9,300."""
    short = max(0.0, demand_rps - capacity_rps)
    if pool_rps <= 0:
        return short * (react_seconds + start_seconds)
    pool_after = min(pool_start_seconds, start_seconds)
    left = max(0.0, short - pool_rps)
    return short * (react_seconds + pool_after) + left * (start_seconds - pool_after)


def replicas_for(*, load_rps: float, replica_rps: float, utilisation: float) -> int:
    """Whole replicas to serve `load_rps` with each at most `utilisation` busy."""
    return max(1, math.ceil(load_rps / (replica_rps * utilisation) - 1e-9))


def monthly_cost(*, replicas: float, gpus_per_replica: int, price_per_hour: float) -> float:
    """USD a month for `replicas` held all month (730 h)."""
    return replicas * gpus_per_replica * price_per_hour * HOURS_PER_MONTH


def autoscale_checked(*, model: str, dtype: str, gpus_per_replica: int, node_minutes: float,
                      image_gb: float, image_gbps: float, load_gbps: float,
                      warmup_seconds: float, react_seconds: float, load_rps: float,
                      replica_rps: float, utilisation: float, ramp_per_minute: float,
                      warm_start_seconds: float, standby_cost: float, fast_load_gbps: float,
                      price_per_hour: float) -> dict:
    """Every input resolved and range-checked, each error naming its field."""
    m = model_get(model)
    d = dtype_get(dtype)
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=None)
    k = {
        "model": m, "dtype": d,
        "weight_bytes": weight_bytes_model(model=m, dtype=d, embedding=e)["total"],
        "gpus_per_replica": count_check(gpus_per_replica, field="gpus_per_replica",
                                        maximum=64),
        "node_seconds": 60 * number_check(node_minutes, field="node_minutes", minimum=0.0,
                                          maximum=600.0, allow_minimum=True),
        "image_bytes": GB * number_check(image_gb, field="image_gb", minimum=0.0,
                                         maximum=1_000.0, allow_minimum=True),
        "image_bandwidth": GB * number_check(image_gbps, field="image_gbps", maximum=1_000.0),
        "load_bandwidth": GB * number_check(load_gbps, field="load_gbps", maximum=1_000.0),
        "warmup_seconds": number_check(warmup_seconds, field="warmup_seconds", minimum=0.0,
                                       maximum=36_000.0, allow_minimum=True),
        "react_seconds": number_check(react_seconds, field="react_seconds", minimum=0.0,
                                      maximum=36_000.0, allow_minimum=True),
        "load_rps": number_check(load_rps, field="load_rps", maximum=1e7),
        "replica_rps": number_check(replica_rps, field="replica_rps", maximum=1e6),
        "utilisation": number_check(utilisation, field="utilisation", minimum=0.05,
                                    maximum=1.0, allow_minimum=True),
        "ramp_per_minute": number_check(ramp_per_minute, field="ramp_per_minute", minimum=0.0,
                                        maximum=1.0, allow_minimum=True),
        "warm_start_seconds": number_check(warm_start_seconds, field="warm_start_seconds",
                                           minimum=0.0, maximum=36_000.0, allow_minimum=True),
        "standby_cost": number_check(standby_cost, field="standby_cost", minimum=0.0,
                                     maximum=1.0, allow_minimum=True),
        "fast_load_bandwidth": GB * number_check(fast_load_gbps, field="fast_load_gbps",
                                                 maximum=1_000.0),
        "price_per_hour": number_check(price_per_hour, field="price_per_hour", maximum=1_000.0),
    }
    if replicas_for(load_rps=k["load_rps"], replica_rps=k["replica_rps"],
                    utilisation=k["utilisation"]) > 1_000_000:
        raise ArithmeticInputError(field="load_rps", message="needs more than a million "
                                   "replicas; raise what one replica serves")
    return k


def autoscale_model(k: dict) -> dict:
    """The cold start, the headroom a ramp needs during it, and three ways to pay for it
    (replicas, s, USD a month) for checked inputs `k`."""
    parts = cold_start_parts(node_seconds=k["node_seconds"], image_bytes=k["image_bytes"],
                             image_bandwidth=k["image_bandwidth"],
                             weight_bytes=k["weight_bytes"],
                             load_bandwidth=k["load_bandwidth"],
                             warmup_seconds=k["warmup_seconds"])
    fast = cold_start_parts(node_seconds=k["node_seconds"], image_bytes=k["image_bytes"],
                            image_bandwidth=k["image_bandwidth"],
                            weight_bytes=k["weight_bytes"],
                            load_bandwidth=k["fast_load_bandwidth"],
                            warmup_seconds=k["warmup_seconds"])
    s, react = k["ramp_per_minute"], k["react_seconds"]
    load, rate, util = k["load_rps"], k["replica_rps"], k["utilisation"]

    def need(headroom: float) -> int:
        return replicas_for(load_rps=load * (1 + headroom), replica_rps=rate, utilisation=util)

    base = need(0.0)
    h_cold = ramp_headroom(slope_per_minute=s, react_seconds=react,
                           start_seconds=parts["total"])
    h_warm = ramp_headroom(slope_per_minute=s, react_seconds=react,
                           start_seconds=k["warm_start_seconds"])
    h_fast = ramp_headroom(slope_per_minute=s, react_seconds=react, start_seconds=fast["total"])
    extra_cold = need(h_cold) - base
    extra_warm = need(h_warm) - base
    pool = need(h_cold) - need(h_warm)
    extra_fast = need(h_fast) - base
    g, price = k["gpus_per_replica"], k["price_per_hour"]
    cost_cold = monthly_cost(replicas=extra_cold, gpus_per_replica=g, price_per_hour=price)
    cost_warm = (monthly_cost(replicas=extra_warm, gpus_per_replica=g, price_per_hour=price)
                 + monthly_cost(replicas=pool * k["standby_cost"], gpus_per_replica=g,
                                price_per_hour=price))
    cost_fast = monthly_cost(replicas=extra_fast, gpus_per_replica=g, price_per_hour=price)
    return {
        "parts": parts, "fast": fast, "base": base,
        "headroom_cold": h_cold, "headroom_warm": h_warm, "headroom_fast": h_fast,
        "extra_cold": extra_cold, "extra_warm": extra_warm, "pool": pool,
        "extra_fast": extra_fast, "cost_cold": cost_cold, "cost_warm": cost_warm,
        "cost_fast": cost_fast,
        "cost_base": monthly_cost(replicas=base, gpus_per_replica=g, price_per_hour=price),
        "load_at_arrival": load * (1 + h_cold),
        "per_gpu_bandwidth": k["load_bandwidth"] / g,
    }


def autoscale_steps(a: dict, k: dict) -> tuple[Step, ...]:
    p, fast = a["parts"], a["fast"]
    g = k["gpus_per_replica"]
    slope = percent_format(k["ramp_per_minute"])
    react = seconds_format(k["react_seconds"])
    return (
        Step("Weights to load", f"{k['model'].name} in {k['dtype'].name}",
             k["weight_bytes"], "B", bytes_in(k["weight_bytes"], "GB")),
        Step("Node", "provisioned, or found free (an assumed time)", p["node"], "s",
             seconds_format(p["node"])),
        Step("Container image", f"{bytes_in(k['image_bytes'], 'GB')} ÷ "
             f"{bandwidth_format(k['image_bandwidth'])} (an assumed size and bandwidth)",
             p["image"], "s",
             seconds_format(p["image"])),
        Step("Weights (a floor at this bandwidth)",
             f"{bytes_in(k['weight_bytes'], 'GB')} ÷ {bandwidth_format(k['load_bandwidth'])} "
             f"for the replica ({bandwidth_format(a['per_gpu_bandwidth'])} into each of its "
             f"{count_phrase(g, 'GPU')})", p["weights"], "s", seconds_format(p["weights"])),
        Step("Warm-up", "KV pool, graph capture or compilation, a first request (an assumed "
             "time)",
             p["warmup"], "s", seconds_format(p["warmup"])),
        Step("Cold start", "node + image + weights + warm-up, one after another (the "
             "weights at their floor)", p["total"],
             "s", seconds_format(p["total"])),
        Step("Replicas for today's load", f"⌈{rate_format(k['load_rps'], 'requests/s')} ÷ "
             f"({number_format(k['replica_rps'])} per replica × "
             f"{percent_given_format(k['utilisation'])})⌉", a["base"], "replicas",
             count_phrase(a["base"], "replica")),
        Step("Headroom to ride out the ramp", f"{slope} of the load per minute × ({react} to "
             f"react + {seconds_format(p['total'])} cold start)", a["headroom_cold"],
             "fraction", percent_format(a["headroom_cold"])),
        Step("Extra replicas kept running for it", f"⌈load × (1 + "
             f"{percent_format(a['headroom_cold'])}) ÷ (rate × utilisation)⌉ − {a['base']}",
             a["extra_cold"], "replicas", count_phrase(a["extra_cold"], "replica")),
        Step("Their cost", f"{a['extra_cold']} × {count_phrase(g, 'GPU')} × "
             f"{money_format(k['price_per_hour'])}"
             f"/h × {HOURS_PER_MONTH} h", a["cost_cold"], "USD/month",
             money_format(a["cost_cold"]) + " a month"),
        Step("With a warm pool: headroom on the running fleet",
             f"{slope} per minute × ({react} + {seconds_format(k['warm_start_seconds'])} to "
             f"join from the pool)", a["headroom_warm"], "fraction",
             percent_format(a["headroom_warm"])),
        Step("Warm pool size", "the replicas the ramp adds until cold ones arrive: "
             f"{a['extra_cold']} − {a['extra_warm']} kept running"
             + ("; none: the running headroom already covers the ramp" if not a["pool"] else ""),
             a["pool"], "replicas", count_phrase(a["pool"], "replica")),
        Step("Warm pool and its headroom, cost",
             f"({a['extra_warm']} + {a['pool']} × {number_format(k['standby_cost'])} standby "
             f"cost) × {count_phrase(g, 'GPU')} × {money_format(k['price_per_hour'])}/h × "
             f"{HOURS_PER_MONTH} h", a["cost_warm"], "USD/month",
             money_format(a["cost_warm"]) + " a month"),
        Step("Faster loading instead: cold start",
             f"weights at {bandwidth_format(k['fast_load_bandwidth'])} (an assumed bandwidth): "
             f"{seconds_format(fast['weights'])} instead of {seconds_format(p['weights'])}, "
             "again a floor",
             fast["total"], "s", seconds_format(fast["total"])),
        Step("Faster loading: headroom and its cost",
             f"{slope} per minute × ({react} + {seconds_format(fast['total'])}) = "
             f"{percent_format(a['headroom_fast'])}: {count_phrase(a['extra_fast'], 'replica')}",
             a["cost_fast"], "USD/month", money_format(a["cost_fast"]) + " a month"),
        Step("Scale to zero: the first request waits", "a whole cold start, plus its own time",
             p["total"], "s", seconds_format(p["total"])),
    )


def autoscale(**inputs: object) -> Result:
    """Problem 20's worked answer (s, replicas, USD a month): see the module docstring."""
    k = autoscale_checked(**inputs)
    a = autoscale_model(k)
    p = a["parts"]
    values = {
        "weight_bytes": k["weight_bytes"], "node_seconds": p["node"],
        "image_seconds": p["image"], "weights_seconds": p["weights"],
        "warmup_seconds": p["warmup"], "cold_start_seconds": p["total"],
        "fast_cold_start_seconds": a["fast"]["total"],
        "fast_weights_seconds": a["fast"]["weights"], "replicas": a["base"],
        "headroom": a["headroom_cold"], "headroom_warm": a["headroom_warm"],
        "headroom_fast": a["headroom_fast"], "extra_replicas": a["extra_cold"],
        "extra_replicas_warm": a["extra_warm"], "warm_pool": a["pool"],
        "extra_replicas_fast": a["extra_fast"], "cost_headroom": a["cost_cold"],
        "cost_warm_pool": a["cost_warm"], "cost_fast_load": a["cost_fast"],
        "cost_base": a["cost_base"],
    }
    return Result(values=values, steps=autoscale_steps(a, k))


__all__ = ["autoscale", "autoscale_checked", "autoscale_model", "cold_start_parts",
           "monthly_cost", "ramp_headroom", "replicas_for", "spike_backlog"]
