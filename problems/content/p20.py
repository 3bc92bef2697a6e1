"""Problem 20, autoscaling with slow cold starts: the cold-start calculator (the parts of a cold
start, the headroom a ramp needs during it, and what a warm pool or faster loading costs instead),
the policies simulator (demos/simulators/autoscaling.py: one day with a spike, every policy on
it, the worst queue against problems/arithmetic/coldstart.py's prediction), the real load time
of the shipped model on this course's worker, and every figure the prose quotes.
"""

import math

from django.http import HttpRequest

from demos.simulators import autoscaling
from problems.arithmetic.coldstart import (
    autoscale,
    autoscale_checked,
    autoscale_model,
    replicas_for,
    spike_backlog,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, number_check
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
from problems.arithmetic.wording import count_phrase, share_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    Input,
    dtype_input,
    inputs_normalise,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import BarPlot, BarSeries, Line, Mark, Plot, Series, sweep_points

SLUG = "cold-start"
PREFIX = "p20-cold"
DEMO_SLUG = "autoscaling-policies"
DEMO_PREFIX = "p20-day"

INPUTS: tuple[Input, ...] = (
    model_input(initial="llama-3-70b", api="llama-3-70b"),
    dtype_input(initial="bf16", api="bf16"),
    whole_input("gpus_per_replica", "GPUs per replica", unit="GPUs", initial=4, api=4,
                maximum=64),
    real_input("node_minutes", "Node provisioning", unit="minutes", initial=4.0, api=4.0,
               maximum=600.0, help="From asking the cloud for a GPU machine to it running your "
               "container; 0 for a node already up. An assumption: measure yours."),
    real_input("image_gb", "Container image", unit="GB", initial=10.0, api=10.0,
               maximum=1_000.0, help="CUDA, PyTorch and the engine make images of several "
               "GB. An assumption: measure yours."),
    real_input("image_gbps", "Image pull bandwidth", unit="GB/s", initial=0.5, api=0.5,
               minimum=0.001, maximum=1_000.0, help="From the registry to the node, "
               "unpacking included. An assumption: measure yours."),
    real_input("load_gbps", "Weight load bandwidth", unit="GB/s", initial=1.0, api=1.0,
               minimum=0.001, maximum=1_000.0,
               help="For the whole replica, from object storage or a network disk. An "
                    "assumption: measure yours. Bytes ÷ this bandwidth is a floor on the "
                    "load (no parsing, no copies counted)."),
    real_input("warmup_seconds", "Engine warm-up", unit="s", initial=60.0, api=60.0,
               maximum=36_000.0, help="KV pool allocation, CUDA graph capture or compilation, "
               "a first request. An assumption: measure yours."),
    real_input("react_seconds", "Time for the autoscaler to react", unit="s", initial=60.0,
               api=60.0, maximum=36_000.0, help="Metric scrape, averaging window, decision. "
               "An assumption: read your autoscaler's settings."),
    real_input("load_rps", "Load now", unit="requests/s", initial=40.0, api=40.0,
               maximum=1e7),
    real_input("replica_rps", "What one replica serves", unit="requests/s", initial=2.0,
               api=2.0, maximum=1e6, help="At the latency target, from a benchmark. An "
               "assumption: measure yours."),
    real_input("utilisation", "Busiest a replica may run", unit="fraction", initial=0.7,
               api=0.7, minimum=0.05, maximum=1.0),
    real_input("ramp_per_minute", "Ramp", unit="fraction of the load per minute",
               initial=0.02, api=0.02, maximum=1.0,
               help="0.02: load grows by 2% of today's each minute (doubles in 50). An "
                    "assumption: read it off your traffic's steepest hour."),
    real_input("warm_start_seconds", "Joining from a warm pool", unit="s", initial=10.0,
               api=10.0, maximum=36_000.0, help="A loaded replica added to the router. An "
               "assumption."),
    real_input("standby_cost", "Standby cost of a pooled replica", unit="fraction",
               initial=1.0, api=1.0, maximum=1.0,
               help="1: a loaded GPU idling costs as much as a busy one. 0.5: one pool "
                    "shared by two deployments whose spikes never coincide."),
    real_input("fast_load_gbps", "Faster loading", unit="GB/s", initial=8.0, api=8.0,
               minimum=0.001, maximum=1_000.0, help="Weights from a local NVMe cache or "
               "streamed straight to the GPUs; an assumption."),
    real_input("price_per_hour", "GPU price", unit="$ per GPU-hour", initial=2.5, api=2.5,
               minimum=0.01, maximum=1_000.0, help="A round assumption, not a quote."),
)
BANDWIDTHS = tuple(sweep_points(0.1, 100.0, count=25, log=True))


def cold_start_plots(*, inputs: dict, result: Result) -> tuple:
    r = result.values
    parts = ("node", "image", "weights", "warm-up")
    as_set = (r["node_seconds"], r["image_seconds"], r["weights_seconds"], r["warmup_seconds"])
    fast = (r["node_seconds"], r["image_seconds"], r["fast_weights_seconds"],
            r["warmup_seconds"])
    bars = BarPlot(
        title="Where a cold start's time goes", categories=("as set", "faster loading"),
        value_title="Seconds", mode="stack",
        series=tuple(BarSeries(name, (a, f),
                               labels=(seconds_format(a), seconds_format(f)))
                     for name, a, f in zip(parts, as_set, fast, strict=True)))
    cold, warm = [], []
    for gbps in BANDWIDTHS:
        a = autoscale_model(autoscale_checked(**{**inputs, "load_gbps": gbps}))
        cold.append(a["cost_cold"])
        warm.append(a["cost_warm"])
    xs = tuple(BANDWIDTHS)
    cost = Plot(
        title="Monthly cost of riding out the ramp, against load bandwidth",
        x_title="Weight load bandwidth (GB/s per replica)", y_title="USD per month",
        x_log=True,
        series=(Series("headroom on the running fleet", xs, tuple(cold), step=True),
                Series("warm pool (at its standby cost) + its headroom", xs, tuple(warm),
                       dash=True, step=True)),
        marks=(Mark(inputs["load_gbps"], "as set"),
               Mark(inputs["fast_load_gbps"], "faster loading")))
    return bars, cost


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Cold start, ramp headroom and warm pools",
    explanation=("A new replica's cold start, part by part; the headroom that absorbs a ramp "
                 "while the autoscaler reacts and the replica starts; and the monthly cost of "
                 "that headroom, of a warm pool instead, and of loading faster."),
    inputs=INPUTS, compute=autoscale, plots=cold_start_plots, listed=False, order=200,
    api_path="/cold-start",
    api_summary="Cold start parts, ramp headroom, warm pool and faster-load costs"))


# ---------------------------------------------------------------------------------------------
# The policies simulator (demo): one day with a spike, every policy on it.

POLICY_NAMES = {"static": "static, sized for the peak", "reactive": "reactive",
                "queue": "on queue depth", "predictive": "predictive",
                "warm_pool": "warm pool + reactive"}

DAY_INPUTS: tuple[Input, ...] = (
    real_input("average_rps", "Average load", unit="requests/s", initial=20.0, api=20.0,
               maximum=100_000.0),
    real_input("peak_to_average", "Daily peak over average", unit="×", initial=2.0, api=2.0,
               minimum=1.0, maximum=10.0),
    real_input("spike_multiplier", "Spike", unit="× the load", initial=2.0, api=2.0,
               minimum=1.0, maximum=10.0, help="A launch, a news event: the load multiplied "
               "at once."),
    real_input("spike_hour", "Spike starts", unit="h", initial=14.0, api=14.0, maximum=23.0),
    real_input("spike_minutes", "Spike lasts", unit="minutes", initial=90.0, api=90.0,
               maximum=600.0),
    real_input("cold_start_minutes", "Cold start", unit="minutes", initial=8.0, api=8.0,
               maximum=120.0, help="The calculator above adds one up from its parts."),
    whole_input("warm_pool", "Warm pool", unit="replicas", initial=6, api=6, minimum=0,
                maximum=200),
    real_input("warm_start_minutes", "Joining from the pool", unit="minutes", initial=0.5,
               api=0.5, maximum=60.0, help="A loaded replica added to the router. An "
               "assumption."),
    real_input("replica_rps", "What one replica serves", unit="requests/s", initial=2.0,
               api=2.0, maximum=10_000.0, help="At full load within the latency target, from a "
               "benchmark; queued requests are served at this rate. An assumption."),
    real_input("utilisation", "Target utilisation", unit="fraction", initial=0.7, api=0.7,
               minimum=0.05, maximum=1.0),
    real_input("cooldown_minutes", "Cool-down before scaling in", unit="minutes",
               initial=15.0, api=15.0, maximum=240.0),
    real_input("ttft_slo_s", "Time to first token target", unit="s", initial=2.0, api=2.0,
               minimum=0.01, maximum=600.0),
    real_input("base_ttft_s", "Time to first token with no queue", unit="s", initial=0.4,
               api=0.4, maximum=60.0, help="Prefill and the first step; a request's time to "
               "first token is this plus its wait in the queue. An assumption."),
    whole_input("gpus_per_replica", "GPUs per replica", unit="GPUs", initial=4, api=4,
                maximum=64),
    real_input("price_per_hour", "GPU price", unit="$ per GPU-hour", initial=2.5, api=2.5,
               minimum=0.01, maximum=1_000.0),
    real_input("noise", "Minute-to-minute noise", unit="σ", initial=0.05, api=0.05,
               maximum=1.0),
    whole_input("seed", "Random seed", initial=0, api=0, minimum=0, maximum=10**6),
)
# Two-minute steps keep the five runs of a day cheap; the spike window is drawn at that
# resolution too.
STEP_MINUTES = 2.0
PLOT_EVERY = 5  # one point every ten minutes for the whole day


def day_checked(**given: object) -> dict:
    """The simulator's inputs range-checked, each error naming its field."""
    k = {name: number_check(given[name], field=name, minimum=low, maximum=high,
                            allow_minimum=True)
         for name, low, high in (
             ("average_rps", 1e-6, 100_000.0), ("peak_to_average", 1.0, 10.0),
             ("spike_multiplier", 1.0, 10.0), ("spike_hour", 0.0, 23.0),
             ("spike_minutes", 0.0, 600.0), ("cold_start_minutes", 0.0, 120.0),
             ("warm_start_minutes", 0.0, 60.0), ("replica_rps", 1e-6, 10_000.0),
             ("utilisation", 0.05, 1.0), ("cooldown_minutes", 0.0, 240.0),
             ("ttft_slo_s", 0.01, 600.0), ("base_ttft_s", 0.0, 60.0),
             ("price_per_hour", 0.01, 1_000.0), ("noise", 0.0, 1.0))}
    k["warm_pool"] = count_check(given["warm_pool"], field="warm_pool", minimum=0, maximum=200)
    k["gpus_per_replica"] = count_check(given["gpus_per_replica"], field="gpus_per_replica",
                                        maximum=64)
    k["seed"] = count_check(given["seed"], field="seed", minimum=0, maximum=10**6)
    peak = k["average_rps"] * k["peak_to_average"] * k["spike_multiplier"] * 2
    if peak / (k["replica_rps"] * k["utilisation"]) > 20_000:
        raise ArithmeticInputError(field="replica_rps", message="the peak would need more "
                                   "than 20,000 replicas; raise what one replica serves")
    return k


def day_policies(**given: object) -> Result:
    """Every policy through the same day (demos.simulators.autoscaling) and, for each, the
    queue at the spike's worst predicted by problems.arithmetic.coldstart.spike_backlog
    (requests, GPU-hours, s)."""
    k = day_checked(**given)
    start = k["spike_hour"] * 60
    spike = (autoscaling.Spike(start_minute=start, duration_minutes=k["spike_minutes"],
                               multiplier=k["spike_multiplier"])
             if k["spike_minutes"] > 0 and k["spike_multiplier"] > 1 else None)
    demand = autoscaling.demand_curve(average_rps=k["average_rps"],
                                      peak_to_average=k["peak_to_average"],
                                      step_minutes=STEP_MINUTES, noise_sigma=k["noise"],
                                      spike=spike, seed=k["seed"])
    pool = autoscaling.Pool(replica_rate=k["replica_rps"],
                            gpus_per_replica=k["gpus_per_replica"],
                            target_utilisation=k["utilisation"])
    onset = int(math.ceil(start / STEP_MINUTES - 1e-9))
    window = slice(onset, onset + max(1, int(math.ceil(
        (k["spike_minutes"] + k["cold_start_minutes"] + 30) / STEP_MINUTES))))
    runs, rows = {}, []
    for kind in autoscaling.POLICIES:
        policy = autoscaling.Policy(kind=kind, cold_start_minutes=k["cold_start_minutes"],
                                    cooldown_minutes=k["cooldown_minutes"],
                                    warm_pool=k["warm_pool"],
                                    warm_start_minutes=k["warm_start_minutes"])
        run = autoscaling.simulate(demand=demand, step_minutes=STEP_MINUTES, pool=pool,
                                   policy=policy, base_ttft_seconds=k["base_ttft_s"],
                                   ttft_slo_seconds=k["ttft_slo_s"])
        runs[kind] = run
        # The prediction: the load jumps at the onset above what was ready a step before.
        ready_rps = float(run["capacity"][onset - 1]) if onset >= 1 else float(
            run["capacity"][0])
        demand_rps = float(demand["rate"][onset]) if spike is not None else 0.0
        in_pool = k["warm_pool"] if kind == "warm_pool" else 0
        predicted = spike_backlog(
            demand_rps=demand_rps, capacity_rps=ready_rps, react_seconds=STEP_MINUTES * 60,
            start_seconds=k["cold_start_minutes"] * 60,
            pool_rps=in_pool * k["replica_rps"],
            pool_start_seconds=k["warm_start_minutes"] * 60) if kind != "static" else max(
            0.0, demand_rps - ready_rps) * k["spike_minutes"] * 60
        measured = float(run["backlog"][window].max()) if spike is not None else 0.0
        rows.append({
            "policy": kind, "name": POLICY_NAMES[kind], "gpu_hours": run["gpu_hours"],
            "cost_month": run["gpu_hours"] * k["price_per_hour"] * 365 / 12,
            "p99_ttft": run["p99_ttft"], "slo_miss_share": run["slo_miss_share"],
            "minutes_short": run["minutes_short"], "peak_backlog": measured,
            "predicted_backlog": predicted, "peak_paid_gpus": run["peak_paid_gpus"],
        })
    hours = demand["minute"] / 60
    keep = slice(None, None, PLOT_EVERY)
    values = {
        "hour": [float(x) for x in hours[keep]],
        "demand": [float(x) for x in demand["rate"][keep]],
        "window_hour": [float(x) for x in hours[window]],
        "window_demand": [float(x) for x in demand["rate"][window]],
        "rows": rows,
        **{f"ready_{kind}": [float(x) for x in runs[kind]["capacity"][keep]]
           for kind in autoscaling.POLICIES},
        **{f"window_{kind}": [float(x) for x in runs[kind]["capacity"][window]]
           for kind in autoscaling.POLICIES},
        **{f"gpu_hours_{r['policy']}": r["gpu_hours"] for r in rows},
        **{f"p99_ttft_{r['policy']}": r["p99_ttft"] for r in rows},
        **{f"slo_miss_{r['policy']}": r["slo_miss_share"] for r in rows},
        **{f"backlog_{r['policy']}": r["peak_backlog"] for r in rows},
        **{f"backlog_predicted_{r['policy']}": r["predicted_backlog"] for r in rows},
        "spike_demand_rps": float(demand["rate"][onset]) if spike is not None else 0.0,
    }
    steps = (
        Step("Demand", f"{rate_format(k['average_rps'], 'requests/s')} on average, "
             f"{number_format(k['peak_to_average'])}× at the daily peak, × "
             f"{number_format(k['spike_multiplier'])} for "
             f"{count_phrase(k['spike_minutes'], 'minute', rounding='nearest')} "
             f"from hour {number_format(k['spike_hour'])}",
             float(demand["rate"].max()), "requests/s",
             rate_format(float(demand["rate"].max()), "requests/s") + " at the busiest step"),
        *(Step(f"{r['name']}", f"{number_format(r['gpu_hours'])} GPU-hours "
               f"({money_format(r['cost_month'])} a month); p99 time to first token "
               f"{seconds_format(r['p99_ttft'])}; {percent_format(r['slo_miss_share'])} of "
               f"requests over {seconds_format(k['ttft_slo_s'])}; worst queue "
               f"{number_format(round(r['peak_backlog']))} (predicted "
               f"{number_format(round(r['predicted_backlog']))})", r["gpu_hours"], "GPU-hours",
               number_format(r["gpu_hours"]) + " GPU-hours") for r in rows),
    )
    return Result(values=values, steps=steps)


def day_plots(*, inputs: dict, result: Result) -> tuple:
    r = result.values
    hours = tuple(r["hour"])
    policies = autoscaling.POLICIES
    day = Plot(
        title="Load and the capacity each policy had ready",
        x_title="Hour of the day", y_title="Requests/s (ready capacity at full load)",
        series=(Series("demand", hours, tuple(r["demand"])),
                *(Series(POLICY_NAMES[p], hours, tuple(r[f"ready_{p}"]), step=True,
                         dash=p == "static") for p in policies)))
    w = tuple(r["window_hour"])
    spike = Plot(
        title="The spike, close up: capacity arrives a cold start late",
        x_title="Hour of the day", y_title="Requests/s",
        series=(Series("demand", w, tuple(r["window_demand"])),
                *(Series(POLICY_NAMES[p], w, tuple(r[f"window_{p}"]), step=True)
                  for p in policies if p != "static")))
    rows = r["rows"]
    names = tuple(row["name"] for row in rows)
    latency = BarPlot(
        title="p99 time to first token and requests over the target",
        categories=names, value_title="p99 time to first token (s)",
        series=(BarSeries("p99 time to first token", tuple(row["p99_ttft"] for row in rows),
                          labels=tuple(seconds_format(row["p99_ttft"]) for row in rows)),),
        lines=(Line(inputs["ttft_slo_s"], f"target {seconds_format(inputs['ttft_slo_s'])}"),),
        columns=(("Over the target", tuple(percent_format(row["slo_miss_share"])
                                           for row in rows)),
                 ("Minutes short", tuple(number_format(row["minutes_short"])
                                         for row in rows))))
    cost = BarPlot(
        title="GPU-hours paid in the day", categories=names, value_title="GPU-hours",
        series=(BarSeries("GPU-hours", tuple(row["gpu_hours"] for row in rows),
                          labels=tuple(number_format(round(row["gpu_hours"]))
                                       for row in rows)),),
        columns=(("A month at this rate", tuple(money_format(row["cost_month"])
                                                for row in rows)),))
    backlog = BarPlot(
        title="Worst queue in the spike: simulated against the arithmetic",
        categories=names, value_title="Requests waiting",
        series=(BarSeries("predicted (coldstart.spike_backlog)",
                          tuple(row["predicted_backlog"] for row in rows), outline=True,
                          labels=tuple(number_format(round(row["predicted_backlog"]))
                                       for row in rows)),
                BarSeries("simulated", tuple(row["peak_backlog"] for row in rows),
                          labels=tuple(number_format(round(row["peak_backlog"]))
                                       for row in rows))))
    return day, spike, latency, cost, backlog


def day_note(*, inputs: dict, result: Result) -> str:
    rows = {row["policy"]: row for row in result.values["rows"]}
    reactive = rows["reactive"]
    pool = rows["warm_pool"]
    static = rows["static"]
    most = max(rows.values(), key=lambda row: row["gpu_hours"])
    static_text = ("Static sizing for the peak (spike included) "
                   + ("never queued" if static["peak_backlog"] <= 0 else "still queued")
                   + (" and paid the most GPU-hours." if most is static else
                      f", yet the {most['name']} policy paid more GPU-hours "
                      f"({number_format(round(most['gpu_hours']))} against "
                      f"{number_format(round(static['gpu_hours']))}): "
                      + ("its standby replicas are paid like running ones."
                         if most["policy"] == "warm_pool" else
                         "replicas booting and waiting out cool-downs are paid too.")))
    # Which prediction missed by the most requests is a result of the run, not a given: at
    # other seeds or spikes the warm pool's can be the loosest, or reactive and queue tie.
    loosest = max((row for row in rows.values() if row["policy"] != "static"),
                  key=lambda row: row["peak_backlog"] - row["predicted_backlog"])
    gap_text = (f"{number_format(round(loosest['peak_backlog']))} against "
                f"{number_format(round(loosest['predicted_backlog']))}")
    if loosest["policy"] == "queue":
        loosest_text = ("The queue-depth policy runs its replicas near full, so its queue, and "
                        "the replicas it asks for, may already have started before the spike: "
                        f"its prediction is the loosest here ({gap_text}). ")
    else:
        loosest_text = (f"The loosest prediction here is the {loosest['name']} policy's "
                        f"({gap_text}). ")
    predicted = number_format(round(reactive["predicted_backlog"]))
    if round(reactive["peak_backlog"]) == 0 and round(pool["peak_backlog"]) == 0:
        expected = count_phrase(round(reactive["predicted_backlog"]), "request")
        return ("Neither the reactive policy nor the warm pool let a queue build here (the "
                f"arithmetic predicted {expected} for the reactive one): the spike fits in the "
                "capacity already running. " + loosest_text + static_text)
    worst_text = count_phrase(round(reactive["peak_backlog"]), "request")
    utilisation = inputs["utilisation"]
    # The spare capacity a target below 100% keeps delays the queue; at 100% there is none.
    kept_text = (", and the queue only starts once the ready capacity, sized to run at most "
                 f"{percent_given_format(utilisation)} busy, is used up" if utilisation < 1
                 else "; a target utilisation of 100% keeps no spare capacity to delay the "
                      "queue")
    return (f"The reactive policy's worst queue was {worst_text} against {predicted} "
            "predicted; "
            f"with the warm pool, {number_format(round(pool['peak_backlog']))} against "
            f"{number_format(round(pool['predicted_backlog']))}. The prediction takes the load "
            "as one step up to its value at the spike's first minute and the capacity as what "
            "was ready just before; in the simulation the daily curve keeps moving under the "
            "spike, the noise changes the load minute by minute, replicas come in whole numbers "
            f"and join only at whole two-minute steps of the simulation{kept_text}. "
            + loosest_text + static_text)


DAY = calculator_register(Calculator(
    slug=DEMO_SLUG,
    title="A day with a spike: every autoscaling policy on the same load",
    explanation=("A numpy simulator on the web server (no worker): a daily curve with noise "
                 "and a sudden spike, the same for every policy; each new replica becomes "
                 "ready a cold start after it is asked for, and each surplus is released after "
                 "a cool-down. Requests that find no capacity wait in a first-come queue, "
                 "served at the full rate of the replicas ready at each moment (including "
                 "those that join while they wait); each request's time to first token is its "
                 "wait plus the no-queue time, and the p99 and the share over the target are "
                 "taken over every request."),
    inputs=DAY_INPUTS, compute=day_policies, plots=day_plots, note=day_note, listed=False,
    order=201, api_path="/autoscaling-policies",
    api_summary="Autoscaling policies compared on a day with a spike"))


# ---------------------------------------------------------------------------------------------
# The shipped model's real load on this course's worker (measured when its shared engine loads).

def engine_load_measured() -> dict | None:
    """The last load of the shared engine a worker reported (demos.hardware), or None when no
    worker has reported one or Redis does not answer."""
    try:
        from demos.hardware import engine_load_latest
        from demos.services import redis

        return engine_load_latest(redis())
    except Exception:  # noqa: BLE001 (no Redis, no measurement: the page says so)
        return None


def engine_load_figures(measured: dict | None, *, load_bandwidth: float) -> dict:
    """The worker's measured load in words, and how long its weight bytes alone would take at
    `load_bandwidth` (B/s): the part of the load that grows with the model's size."""
    if not measured:
        return {"load_measured": False}
    file_bytes = float(measured["file_bytes"])
    return {
        "load_measured": True,
        "load_model": measured.get("model", "the shipped model"),
        "load_file_text": bytes_in(file_bytes, "MB"),
        "load_seconds_text": seconds_format(float(measured["load_seconds"])),
        "load_warmup_text": seconds_format(float(measured["warmup_seconds"])),
        "load_device": measured.get("device", "cpu"),
        "load_bytes_time_text": seconds_format(file_bytes / load_bandwidth),
        # "Nearly all fixed work" only when the bytes at that bandwidth are under a tenth of
        # the measured load; otherwise the page gives their share.
        "load_fixed_mostly": file_bytes / load_bandwidth < 0.1 * float(measured["load_seconds"]),
        "load_bytes_share_text": percent_format(
            min(1.0, file_bytes / load_bandwidth / max(float(measured["load_seconds"]), 1e-9))),
    }


SOURCES: list[tuple[str, str]] = [
    ("vLLM documentation: Sleep Mode (level 1 offloads the weights to CPU memory and discards "
     "the KV cache; level 2 discards both; the process stays up, so waking skips a reload)",
     "https://docs.vllm.ai/en/latest/features/sleep_mode.html"),
    ("Fu et al., 'ServerlessLLM: Low-Latency Serverless Inference for Large Language Models', "
     "OSDI 2024 (a loading-optimised checkpoint format and multi-tier local storage)",
     "https://arxiv.org/abs/2401.14351"),
    ("Kubernetes documentation, 'Horizontal Pod Autoscaling' (metrics, stabilisation window "
     "for scaling in)",
     "https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/"),
    ("vLLM documentation, 'Production Metrics' (queue depth, KV cache usage, time to first "
     "token)", "https://docs.vllm.ai/en/latest/usage/metrics.html"),
    ("Hugging Face, safetensors (memory-mapped, zero-copy loading)",
     "https://huggingface.co/docs/safetensors/index"),
    ("Run:ai Model Streamer (many threads read safetensors from storage into a CPU buffer "
     "while tensors already read are copied to the GPU)",
     "https://github.com/run-ai/runai-model-streamer/blob/master/docs/README.md"),
    ("Fu et al., 'ServerlessLLM: Low-Latency Serverless Inference for Large Language Models', "
     "OSDI 2024 (cold starts; loading from local storage tiers)",
     "https://arxiv.org/abs/2401.14351"),
    ("Amazon EC2 Auto Scaling, 'Warm pools' (instances kept stopped or running, ready to "
     "join)", "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-warm-pools.html"),
    ("PyTorch documentation, 'CUDA Graphs' (capture before serving)",
     "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs"),
    ("Meta Llama 3 70B config.json",
     "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
]


def figures(inputs: dict) -> dict:
    """Every figure of the prose at the calculator's normalised `inputs`."""
    r = autoscale(**inputs).values
    k = autoscale_checked(**inputs)
    shared = autoscale_model(autoscale_checked(**{**inputs, "standby_cost": 0.5}))
    fleet = r["replicas"] + r["extra_replicas"]
    peak_load = k["load_rps"] * (1 + r["headroom"])
    fleet_uncapped = replicas_for(load_rps=peak_load, replica_rps=k["replica_rps"],
                                  utilisation=1.0)
    peak_util = peak_load / (fleet * k["replica_rps"])
    base_capacity = r["replicas"] * k["replica_rps"] * k["utilisation"]
    return {
        "model_name": k["model"].name, "dtype_name": k["dtype"].name,
        "gpus": k["gpus_per_replica"], "gpus_text": count_phrase(k["gpus_per_replica"], "GPU"),
        "weights_text": bytes_in(r["weight_bytes"], "GB"),
        "load_bw_text": bandwidth_format(k["load_bandwidth"]),
        "fast_bw_text": bandwidth_format(k["fast_load_bandwidth"]),
        "per_gpu_bw_text": bandwidth_format(k["load_bandwidth"] / k["gpus_per_replica"]),
        "node_text": seconds_format(r["node_seconds"]),
        "image_text": seconds_format(r["image_seconds"]),
        "image_size_text": bytes_in(k["image_bytes"], "GB"),
        "image_bw_text": bandwidth_format(k["image_bandwidth"]),
        "weights_time_text": seconds_format(r["weights_seconds"]),
        "warmup_text": seconds_format(r["warmup_seconds"]),
        "cold_text": seconds_format(r["cold_start_seconds"]),
        "react_text": seconds_format(k["react_seconds"]),
        "ramp_text": percent_format(k["ramp_per_minute"]),
        "load_text": rate_format(k["load_rps"], "requests/s"),
        "replica_rate_text": rate_format(k["replica_rps"], "requests/s"),
        "util_text": percent_given_format(k["utilisation"]),
        "replicas": r["replicas"],
        "headroom_text": percent_format(r["headroom"]),
        "extra": r["extra_replicas"],
        "extra_text": count_phrase(r["extra_replicas"], "more replica"),
        # The utilisation cap (burst slack, problem 17) and the ramp headroom stack: at today's
        # load the fleet runs at cap ÷ (1 + headroom) of what it serves within the target.
        "stacked_util_text": percent_format(k["utilisation"] / (1 + r["headroom"])),
        # The alternative: a target derived from the ramp, 1 ÷ (1 + headroom), and no cap.
        "ramp_target_text": percent_format(1 / (1 + r["headroom"])),
        "ramp_target_replicas": count_phrase(
            replicas_for(load_rps=k["load_rps"] * (1 + r["headroom"]),
                         replica_rps=k["replica_rps"], utilisation=1.0), "replica"),
        "fleet_with_headroom": count_phrase(r["replicas"] + r["extra_replicas"], "replica"),
        "capped": k["utilisation"] < 1.0,
        # Whether the cap costs replicas: the fewest that carry the ramp's peak at it against
        # the fewest at full load. Where it costs none, whole replicas already run below it.
        "cap_binds": fleet > fleet_uncapped,
        "burst_room_text": share_phrase(1 - k["utilisation"]),
        "fleet_util_text": share_phrase(k["load_rps"] / (fleet * k["replica_rps"])),
        "fleet_peak_util_text": share_phrase(peak_util),
        "fleet_peak_room_text": share_phrase(1 - peak_util),
        # Problem 17's M/M/1: the mean response is the service time × 1 ÷ (1 − ρ), so a cap's
        # room for bursts reads as the wait it allows (3.33× at 70%, 100× at 99%).
        "cap_wait_factor_text": (f"{number_format(1 / (1 - k['utilisation']))}× its service "
                                 "time" if k["utilisation"] < 1 else ""),
        "fleet_peak_full": peak_util > 0.999,
        "fleet_count_text": count_phrase(fleet, "whole replica"),
        "ramp_target_peak_text": share_phrase(
            k["load_rps"] * (1 + r["headroom"]) / (fleet_uncapped * k["replica_rps"])),
        # With no replica added for the ramp, what today's replicas already serve within the
        # cap beyond today's load (at least the headroom).
        "base_capacity_text": rate_format(base_capacity, "requests/s"),
        "base_spare_text": percent_format(base_capacity / k["load_rps"] - 1),
        "fast_faster": r["fast_cold_start_seconds"] < r["cold_start_seconds"],
        "fast_saves": r["extra_replicas_fast"] < r["extra_replicas"],
        "ramp_target_leaner": replicas_for(load_rps=k["load_rps"] * (1 + r["headroom"]),
                                           replica_rps=k["replica_rps"], utilisation=1.0)
        < r["replicas"] + r["extra_replicas"],
        "extra_gpus_text": count_phrase(r["extra_replicas"] * k["gpus_per_replica"], "GPU"),
        "extra_fast_text": count_phrase(r["extra_replicas_fast"], "extra replica"),
        "extra_gpus": r["extra_replicas"] * k["gpus_per_replica"],
        "price_text": money_format(k["price_per_hour"]),
        "cost_headroom_text": money_format(r["cost_headroom"]),
        "cost_base_text": money_format(r["cost_base"]),
        "headroom_share_text": percent_format(r["cost_headroom"] / r["cost_base"]),
        "warm_start_text": seconds_format(k["warm_start_seconds"]),
        "headroom_warm_text": percent_format(r["headroom_warm"]),
        "extra_warm": r["extra_replicas_warm"], "pool": r["warm_pool"],
        "pool_text": count_phrase(r["warm_pool"], "replica"),
        "extra_warm_text": count_phrase(r["extra_replicas_warm"], "extra replica"),
        "standby_text": percent_format(k["standby_cost"]),
        "standby_full": k["standby_cost"] >= 1.0,
        # Sharing a pool between two deployments halves a full standby cost; it only helps
        # when the standby costs more than that half already.
        "sharing_cheaper": k["standby_cost"] > 0.5,
        "flat": k["ramp_per_minute"] == 0,
        "cost_warm_text": money_format(r["cost_warm_pool"]),
        "cost_warm_shared_text": money_format(shared["cost_warm"]),
        "fast_weights_text": seconds_format(r["fast_weights_seconds"]),
        "fast_cold_text": seconds_format(r["fast_cold_start_seconds"]),
        "headroom_fast_text": percent_format(r["headroom_fast"]),
        "extra_fast": r["extra_replicas_fast"],
        "cost_fast_text": money_format(r["cost_fast_load"]),
        "node_share_text": percent_format(r["node_seconds"] / r["cold_start_seconds"]),
        "node_largest_fast": r["node_seconds"] >= max(
            r["image_seconds"], r["fast_weights_seconds"], r["warmup_seconds"]),
        "node_largest": r["node_seconds"] >= max(
            r["image_seconds"], r["weights_seconds"], r["warmup_seconds"]),
        "node_share_fast_text": percent_format(r["node_seconds"]
                                               / r["fast_cold_start_seconds"]),
        **engine_load_figures(engine_load_measured(), load_bandwidth=k["load_bandwidth"]),
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 20's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        inputs = CALCULATOR.defaults()
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "demo_slug": DEMO_SLUG, "demo_prefix": DEMO_PREFIX,
            "inputs_valid": state.result is not None}
