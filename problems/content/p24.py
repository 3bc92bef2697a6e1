"""Problem 24, cutting cost per million tokens by 70%: the cost waterfall (a baseline replica, then
ten levers applied in order, each with its own assumption), the replica simulator that checks
the steady-state arithmetic against random traffic, and every figure the prose quotes.
"""

import math

from django.http import HttpRequest

from demos.simulators import replica as replica_sim
from problems.arithmetic.compute import (
    attention_flops_per_token_pair,
    kv_bytes_per_token_model,
    peak_flops_get,
)
from problems.arithmetic.cost import (
    LEVERS,
    PRICE_MAX,
    cost_levers,
    cost_levers_plan,
    state_costs,
    waterfall_rows,
)
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, number_check
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.replica import (
    SPEC_GAMMA_MAX,
    replica_cost_model,
    replica_inputs_check,
    replica_steps,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_in,
    money_format,
    number_format,
    percent_format,
    rate_format,
    scientific_format,
    seconds_format,
)
from problems.arithmetic.wording import (
    count_phrase,
    finite_or,
    list_phrase,
    share_phrase,
    times_phrase,
)
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    ON_OFF,
    Input,
    choice_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import BarPlot, BarSeries, Line, Mark, Plot, Series

SLUG = "cost-waterfall"
PREFIX = "p24-cost"
DEMO_SLUG = "cost-replica"
DEMO_PREFIX = "p24-replica"
MS = 1e3
SAVING, INCREASE, LEVEL = "#009E73", "#D55E00", "#0072B2"
SHORT = {"batching": "Batching", "fp8": "FP8", "prefix": "Prefix cache", "gpu": "GPU",
         "spec": "Spec. decoding", "autoscale": "Autoscaling", "commit": "Commitment",
         "route": "Routing", "cap_output": "Output cap", "disagg": "Disaggregation"}
# An illustration of compounding in the prose: three cuts of this size each.
THREE_CUT_EXAMPLE = 0.3
QUESTION_CUT = 0.7  # the question as interviewers ask it
# A cap that takes at most this share off the mean answer trims a long tail; more truncates
# ordinary answers (a product decision, not a tail).
CAP_TAIL_SHARE = 0.25
# A change of the blended cost per token under this share reads "barely a change".
CAP_BARELY = 0.02
# Outside facts the prose quotes, each from a source in SOURCES.
R1_PRICES = {"hit": 0.14, "miss": 0.55, "output": 2.19}  # Day 6 overview, USD per M tokens
DEEPSEEK_HIT = 0.563  # Day 6 overview: share of input tokens hitting the on-disk KV cache
ROUTELLM_CUT = 2  # RouteLLM abstract: costs cut by over 2× in some cases
SPLITWISE = (1.4, 0.2)  # Splitwise: up to 1.4× throughput at 20% lower cost
DISTSERVE = 7.4  # DistServe: up to 7.4× more requests within SLO


def _price_input(name: str, label: str) -> Input:
    return real_input(name, label, unit="$ per GPU-hour", initial=None, api=None,
                      minimum=0.01, maximum=PRICE_MAX, required=False,
                      help="Blank: the catalog's assumed price, a round figure, not a quote.")


def _lever(name: str, title: str) -> Input:
    return choice_input(name, title, choices=ON_OFF, initial="on", api="on")


COST_INPUTS: tuple[Input, ...] = (
    model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("tp", "GPUs per replica", unit="GPUs", initial=4, api=4, maximum=64,
                help="Tensor parallel."),
    dtype_input(initial="bf16", api="bf16"),
    kv_dtype_input(),
    whole_input("batch_cap", "Engine cap on sequences", unit="sequences", initial=64, api=64,
                maximum=100_000, help="vLLM's max_num_seqs."),
    real_input("tpot_target_ms", "Time per output token you promise", unit="ms",
               initial=50.0, api=50.0, minimum=1.0, maximum=1_000.0),
    whole_input("input_tokens", "Input per request", unit="tokens", initial=2_000, api=2_000,
                maximum=TOKENS_MAX),
    whole_input("output_tokens", "Output per request", unit="tokens", initial=400, api=400,
                maximum=TOKENS_MAX),
    _price_input("price_per_hour", "GPU price"),
    real_input("utilisation", "Utilisation", unit="fraction", initial=0.35, api=0.35,
               minimum=0.01, maximum=1.0,
               help="Share of paid GPU-hours doing useful work; a fleet sized for the peak "
                    "and left on all night does little of it (an assumption)."),
    real_input("memory_fraction", "Share of GPU memory the engine may use", unit="fraction",
               initial=0.9, api=0.9, minimum=0.01, maximum=1.0),
    real_input("reserve_gb", "Runtime reserve per GPU", unit="GB", initial=5.0, api=5.0,
               maximum=1_000.0),
    real_input("bandwidth_efficiency", "Bandwidth efficiency (MBU)", unit="fraction",
               initial=0.8, api=0.8, minimum=0.01, maximum=1.0),
    real_input("mfu_decode", "Decode MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("mfu_prefill", "Prefill MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0, help="40–60% is typical for large prefills."),
    real_input("target_cut", "Target cut", unit="fraction", initial=0.7, api=0.7,
               minimum=0.01, maximum=0.99),
    _lever("batching", "Lever: batch to the latency target"),
    _lever("fp8", "Lever: narrower weights, FP8 KV"),
    dtype_input(name="fp8_dtype", label="… weight format", initial="fp8", api="fp8",
                help="FP8, or NVFP4 on a GPU with FP4 tensor cores."),
    _lever("prefix", "Lever: prefix caching"),
    real_input("prefix_hit", "… share of input tokens cached", unit="fraction", initial=0.5,
               api=0.5, maximum=1.0, help="DeepSeek reported 56.3% on its service."),
    _lever("right_gpu", "Lever: the right GPU"),
    gpu_input(name="right_gpu_id", label="… GPU", initial="b200", api="b200"),
    Input("right_gpu_tp", "whole", "… GPUs per replica", unit="GPUs", initial=None, api=None,
          minimum=1, maximum=64, required=False,
          help="Blank: the lever sizes the replica itself, the fewest of these GPUs (1, 2, 4, "
               "8 … 64) that run at least the batch the replica runs before the move."),
    _price_input("right_gpu_price", "… its price"),
    _lever("spec", "Lever: speculative decoding"),
    real_input("spec_alpha", "… acceptance rate", unit="fraction", initial=0.8, api=0.8,
               maximum=1.0),
    whole_input("spec_gamma", "… drafted tokens per step", unit="tokens", initial=2, api=2,
                maximum=SPEC_GAMMA_MAX),
    real_input("spec_draft_cost", "… draft step cost", unit="of a target step", initial=0.05,
               api=0.05, maximum=1.0),
    _lever("autoscale", "Lever: autoscaling"),
    real_input("autoscale_utilisation", "… utilisation reached", unit="fraction",
               initial=0.6, api=0.6, minimum=0.01, maximum=1.0),
    _lever("commit", "Lever: committed capacity"),
    real_input("commit_discount", "… discount", unit="fraction", initial=0.3, api=0.3,
               maximum=0.9, help="An assumption: quotes vary by provider and term."),
    _lever("route", "Lever: route to a smaller model"),
    real_input("route_share", "… share of requests routed", unit="fraction", initial=0.3,
               api=0.3, maximum=1.0),
    model_input(name="route_model", label="… smaller model", initial="llama-3.1-8b",
                api="llama-3.1-8b"),
    _lever("cap_output", "Lever: cap output length"),
    whole_input("cap_output_tokens", "… mean output after the cap", unit="tokens",
                initial=350, api=350, maximum=TOKENS_MAX),
    _lever("disagg", "Lever: disaggregate prefill and decode"),
    real_input("disagg_gain", "… decode throughput gain", unit="×", initial=1.1, api=1.1,
               minimum=1.0, maximum=10.0,
               help="Splitwise and DistServe report gains from about 1.1× to several × on "
                    "their workloads; yours depends on lengths and SLOs."),
)


def _assumption(lever: str, state: dict, row: dict) -> str:
    if not row["on"]:
        return "off"
    # A skipped lever's row keeps the state before it; its own assumption is in its changes.
    state = {**state, **(row.get("changes") or {})}
    text = _lever_assumption(lever, state, row)
    if not row["applied"] and lever != "spec":
        text += ": skipped"
    return text


def _lever_assumption(lever: str, state: dict, row: dict) -> str:
    if lever == "batching":
        return "engine cap lifted"
    if lever == "fp8":
        return f"{state['w'].name} weights, {state['kv'].name} KV"
    if lever == "prefix":
        return f"{percent_format(state['prefix_hit'])} of input cached"
    if lever == "gpu":
        if state["tp"] is None:
            return state["gpu"].name.removeprefix("NVIDIA ")
        return (f"{state['tp']} × {state['gpu'].name.removeprefix('NVIDIA ')} at "
                f"{money_format(state['price_per_hour'])}/h")
    if lever == "spec":
        alpha, gamma, draft = row["trial_state_spec"]
        return (f"acceptance {number_format(alpha)}, {gamma} drafted, draft "
                f"{percent_format(draft)}" + ("" if row["applied"] else ": not applied"))
    if lever == "autoscale":
        return f"{percent_format(state['utilisation'])} utilisation"
    if lever == "commit":
        return f"{percent_format(state['discount'])} off"
    if lever == "route":
        tp = state.get("small_tp")
        return (f"{percent_format(state['route_share'])} to {state['small_model'].name}"
                + (f" on {tp} GPU{'s' if tp != 1 else ''}" if tp and row["applied"] else ""))
    if lever == "cap_output":
        return f"{state['output_tokens']:,} output tokens"
    if lever == "disagg":
        return f"decode × {number_format(state['disagg_gain'])}"
    return ""


def cost_rows(inputs: dict) -> tuple[list[dict], float]:
    """The waterfall's rows (with each lever's assumption text) and the target cut."""
    baseline, levers = cost_levers_plan(**inputs)
    rows = waterfall_rows(baseline=baseline, levers=levers)
    changes = dict(levers)
    for row in rows:
        if row["lever"] == "spec" and changes.get("spec"):
            row["trial_state_spec"] = changes["spec"]["spec"]
        row["assumption"] = ("" if row["lever"] == "baseline"
                             else _assumption(row["lever"], row["state"], row))
    return rows, inputs["target_cut"]


def _money(value: float) -> str:
    return money_format(value, significant=3)


def waterfall_plot(rows: list[dict], target_cut: float) -> BarPlot:
    base = rows[0]["blended"]
    categories = ["Baseline"]
    bases, values, colours, labels = [0.0], [base], [LEVEL], [_money(base)]
    level = base
    for row in rows[1:]:
        categories.append(SHORT.get(row["lever"], row["lever"]))
        change = row["blended"] - level if row["applied"] else 0.0
        bases.append(level)
        values.append(change)
        colours.append(SAVING if change <= 0 else INCREASE)
        labels.append("off" if not row["on"] else (
            "not applied" if not row["applied"] else
            ("−" if change <= 0 else "+") + percent_format(abs(change) / base)))
        level = row["blended"] if row["applied"] else level
    final = rows[-1]
    categories.append("Result")
    bases.append(0.0)
    values.append(final["blended"])
    colours.append(LEVEL)
    labels.append(f"{_money(final['blended'])} ({percent_format(final['cut'])} cut)")
    cells = [(row["assumption"] or "—", _money(row["out"]), _money(row["in"]),
              _money(row["blended"]),
              "—" if row["lever"] == "baseline" else percent_format(row["delta"]),
              percent_format(row["cut"]), _money(row["per_1000"])) for row in rows]
    cells.append(("all levers", *cells[-1][1:]))
    headers = ("Assumption", "$ per M output", "$ per M input", "$ per M blended",
               "Change (of baseline)", "Cut so far", "$ per 1,000 requests")
    return BarPlot(
        title="Cost per million tokens, lever by lever", categories=tuple(categories),
        value_title="$ per million tokens (blended)",
        series=(BarSeries("Level and each lever's change", tuple(values), base=tuple(bases),
                          labels=tuple(labels), colors=tuple(colours)),),
        lines=(Line(base * (1 - target_cut), f"target: {percent_format(target_cut)} cut"),),
        columns=tuple((header, tuple(c[i] for c in cells)) for i, header in enumerate(headers)))


def per_request_plot(rows: list[dict]) -> BarPlot:
    return BarPlot(
        title="Cost per 1,000 requests after each lever",
        categories=tuple(["Baseline"] + [SHORT.get(r["lever"], r["lever"]) for r in rows[1:]]),
        value_title="$ per 1,000 requests",
        series=(BarSeries("Per 1,000 requests", tuple(r["per_1000"] for r in rows),
                          labels=tuple(_money(r["per_1000"]) for r in rows)),))


def cost_plots(*, inputs: dict, result: Result) -> tuple[BarPlot, ...]:
    rows, target = cost_rows(inputs)
    return waterfall_plot(rows, target), per_request_plot(rows)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Cost per million tokens, lever by lever",
    explanation=("A baseline deployment, then each lever applied on top of the ones before, "
                 "each with its own assumption (switch any off). Input and output tokens are "
                 "priced separately by the GPU time each takes and blended at the baseline's "
                 "mix; the last column is the cost per thousand requests at each state's own "
                 "lengths."),
    inputs=COST_INPUTS, compute=cost_levers, plots=cost_plots, listed=False,
    api_path="/cost-waterfall",
    api_summary="Cost per million tokens: a baseline replica and ten levers in order"))


# ---------------------------------------------------------------------------------------------
# The replica simulator (demo).

LOADS = (0.25, 0.5, 0.75, 1.0, 1.2)

REPLICA_INPUTS: tuple[Input, ...] = (
    model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
    gpu_input(initial="b200", api="b200"),
    whole_input("tp", "GPUs per replica", unit="GPUs", initial=2, api=2, maximum=64),
    dtype_input(initial="fp8", api="fp8"),
    kv_dtype_input(initial="fp8", api="fp8"),
    real_input("tpot_target_ms", "Time per output token target", unit="ms", initial=50.0,
               api=50.0, minimum=1.0, maximum=1_000.0,
               help="Sets the batch the calculator plans for."),
    whole_input("input_tokens", "Input per request", unit="tokens", initial=2_000, api=2_000,
                maximum=100_000),
    whole_input("output_tokens", "Mean output per request", unit="tokens", initial=350,
                api=350, maximum=100_000, help="Lengths are drawn at random with this mean."),
    real_input("prefix_hit", "Share of input cached", unit="fraction", initial=0.5, api=0.5,
               maximum=0.99),
    real_input("bandwidth_efficiency", "Bandwidth efficiency (MBU)", unit="fraction",
               initial=0.8, api=0.8, minimum=0.01, maximum=1.0),
    real_input("mfu_decode", "Decode MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("mfu_prefill", "Prefill MFU", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("memory_fraction", "Share of GPU memory the engine may use", unit="fraction",
               initial=0.9, api=0.9, minimum=0.01, maximum=1.0),
    real_input("reserve_gb", "Runtime reserve per GPU", unit="GB", initial=5.0, api=5.0,
               maximum=1_000.0),
    _price_input("price_per_hour", "GPU price"),
    whole_input("seconds", "Simulated seconds per load", unit="s", initial=60, api=60,
                minimum=10, maximum=300,
                help="Counted after a warm-up (15 s, or a quarter of this if less); a load "
                     "also stops after 20,000 steps."),
    whole_input("chunk_tokens", "Per-step token budget", unit="tokens", initial=2_048,
                api=2_048, minimum=64, maximum=65_536,
                help="Prefill tokens a step may carry beside its decodes "
                     "(vLLM's max_num_batched_tokens plays this role)."),
    whole_input("seed", "Random seed", initial=0, api=0, minimum=0, maximum=10**6),
)


def replica_simulated(*, model: str, gpu: str, tp: int = 2, dtype: str = "fp8",
                      kv_dtype: str | None = "fp8", tpot_target_ms: float = 50.0,
                      input_tokens: int = 2_000, output_tokens: int = 350,
                      prefix_hit: float = 0.5, bandwidth_efficiency: float = 0.8,
                      mfu_decode: float = 0.5, mfu_prefill: float = 0.5,
                      memory_fraction: float = 0.9, reserve_gb: float = 5.0,
                      price_per_hour: float | None = None, seconds: int = 60,
                      chunk_tokens: int = 2_048, seed: int = 0) -> Result:
    """One replica simulated under Poisson load at fractions of its predicted capacity
    (`demos.simulators.replica`), against the calculator's cost per million tokens (USD,
    tokens/s, seconds). Values hold every curve."""
    k = replica_inputs_check(model=model, gpu=gpu, tp=tp, dtype=dtype, kv_dtype=kv_dtype,
                             input_tokens=input_tokens, output_tokens=output_tokens,
                             memory_fraction=memory_fraction, reserve_gb=reserve_gb,
                             bandwidth_efficiency=bandwidth_efficiency, mfu_decode=mfu_decode,
                             mfu_prefill=mfu_prefill, tpot_target_ms=tpot_target_ms)
    hit = number_check(prefix_hit, field="prefix_hit", minimum=0.0, maximum=0.99,
                       allow_minimum=True)
    price = (k["gpu"].price_per_hour_assumed if price_per_hour is None else
             number_check(price_per_hour, field="price_per_hour", maximum=PRICE_MAX))
    seconds = count_check(seconds, field="seconds", minimum=10, maximum=300)
    chunk = count_check(chunk_tokens, field="chunk_tokens", minimum=64, maximum=65_536)
    seed = count_check(seed, field="seed", minimum=0, maximum=10**6)
    m, g, w, n = k["model"], k["gpu"], k["w"], k["tp"]
    r = replica_cost_model(model=m, gpu=g, tp=n, w=w, kv=k["kv"],
                           input_tokens=k["input_tokens"], output_tokens=k["output_tokens"],
                           memory_fraction=k["memory_fraction"], reserve_bytes=k["reserve_bytes"],
                           bandwidth_efficiency=k["bandwidth_efficiency"],
                           mfu_decode=k["mfu_decode"], mfu_prefill=k["mfu_prefill"],
                           tpot_target_seconds=k["tpot_target_seconds"], batch_cap=None,
                           price_per_hour=price, discount=0.0, utilisation=1.0, prefix_hit=hit)
    parts = params_count_model(m)
    peak = peak_flops_get(gpu=g, dtype=w)
    model_r = replica_sim.ReplicaModel(
        weights_read=r["step"]["weights"], kv_token=r["kv_token"],
        linear_flops=2 * parts["non_embedding_active"] / n, head_flops=2 * parts["head"] / n,
        pair_flops=attention_flops_per_token_pair(m) / n,
        bandwidth=g.bandwidth_bytes_per_second * k["bandwidth_efficiency"],
        decode_flops_rate=peak * k["mfu_decode"], prefill_flops_rate=peak * k["mfu_prefill"],
        kv_capacity_tokens=r["free"] / r["kv_token"])
    inp, out = k["input_tokens"], k["output_tokens"]
    t_in = r["prefill_gpu_seconds_per_token"] / n  # replica-seconds per computed token
    t_out = r["step_seconds"] / r["batch"]
    busy = inp * (1 - hit) * t_in + out * t_out  # replica-seconds per request
    capacity = 1 / busy
    runs = replica_sim.loads_sweep(replica=model_r, batch=r["batch"], input_tokens=inp,
                                   cached_tokens=int(round(inp * hit)), output_tokens=out,
                                   capacity_rps=capacity, loads=LOADS, seconds=seconds,
                                   chunk_tokens=chunk, seed=seed)
    short = min(x["seconds"] for x in runs)
    if short < 1.0:
        raise ArithmeticInputError(
            field="seconds", message=f"this replica's steps are so short that a load stops at "
            f"its step cap after {seconds_format(short)} of measurement; simulate fewer seconds "
            "or a larger replica")
    hourly = price * n
    measured = [hourly / 3600 * x["seconds"] / max(x["input"] + x["output"], 1.0) * 1e6
                for x in runs]
    predicted = [hourly / 3600 * busy / (inp + out) / min(load, 1.0) * 1e6 for load in LOADS]
    values = {
        "loads": list(LOADS), "measured": measured, "predicted": predicted,
        "measured_output_tps": [x["output"] / x["seconds"] for x in runs],
        "predicted_output_tps": [min(load, 1.0) * capacity * out for load in LOADS],
        "ttft_p50": [x["ttft_p50"] for x in runs], "ttft_p99": [x["ttft_p99"] for x in runs],
        "tpot_p50": [x["tpot_p50"] for x in runs], "tpot_p99": [x["tpot_p99"] for x in runs],
        "mean_batch": [x["mean_batch"] for x in runs], "batch": r["batch"],
        "capacity_rps": capacity, "tpot_target": k["tpot_target_seconds"],
        "cut_short": any(x["cut_short"] for x in runs),
        "seconds_measured": [x["seconds"] for x in runs],
    }
    if not all(math.isfinite(v) for key in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")
               for v in values[key]):
        values.update({key: [v if math.isfinite(v) else 0.0 for v in values[key]]
                       for key in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")})
    k.update(utilisation=1.0, prefix_hit=hit)
    steps = (
        *replica_steps(r=r, k=k, what="Replica")[:8],
        Step("Predicted capacity", f"1 ÷ ({inp:,} × {percent_format(1 - hit)} computed × "
             f"{seconds_format(t_in)} + {out:,} × {seconds_format(t_out)}) of replica time per "
             "request", capacity, "requests/s", rate_format(capacity, "requests/s")),
        *(Step(f"At {percent_format(load)} of capacity",
               f"simulated {rate_format(round(x['output'] / x['seconds']), 'output tokens/s')} "
               f"(predicted {number_format(round(min(load, 1) * capacity * out))}), mean batch "
               f"{number_format(x['mean_batch'])}, TTFT p99 {seconds_format(x['ttft_p99'])}, "
               "TPOT p50 " + finite_or(x["tpot_p50"], seconds_format,
                                       undefined="undefined (one-token answers have no gaps)")
               + (" (stopped at the step cap)" if x["cut_short"] else ""), meas, "USD",
               f"{_money(meas)} per M simulated, {_money(pred)} predicted")
          for load, x, meas, pred in zip(LOADS, runs, measured, predicted, strict=True)),
    )
    return Result(values=values, steps=steps)


def replica_plots(*, inputs: dict, result: Result) -> tuple[Plot, ...]:
    r = result.values
    loads = tuple(r["loads"])
    ends = (loads[0], loads[-1])
    latency = Plot(
        title="Time to first token and per output token, against load",
        x_title="Offered load (fraction of predicted capacity)", y_title="Seconds",
        y_log=True,
        series=(Series("TTFT p50", loads, tuple(r["ttft_p50"]), markers=True),
                Series("TTFT p99", loads, tuple(r["ttft_p99"]), markers=True),
                Series("TPOT p50", loads, tuple(r["tpot_p50"]), markers=True),
                Series("TPOT p99", loads, tuple(r["tpot_p99"]), markers=True),
                Series("TPOT target", ends, (r["tpot_target"],) * 2, dash=True)),
        marks=(Mark(1.0, "predicted capacity"),))
    batch = Plot(
        title="Mean decode batch against load", x_title="Offered load (fraction of capacity)",
        y_title="Sequences decoding per step",
        series=(Series("Simulated", loads, tuple(r["mean_batch"]), markers=True),
                Series("The calculator's batch", ends, (float(r["batch"]),) * 2, dash=True)),
        marks=(Mark(1.0, "predicted capacity"),))
    cost = Plot(
        title="Cost per million tokens: simulated replica against the calculator",
        x_title="Offered load (fraction of predicted capacity)",
        y_title="Dollars per million tokens (input and output)", y_log=True,
        series=(Series("Simulated replica", loads, tuple(r["measured"]),
                       markers=True),
                Series("Predicted (the calculator)", loads, tuple(r["predicted"]), dash=True,
                       markers=True)),
        marks=(Mark(1.0, "predicted capacity"),))
    return latency, batch, cost


def replica_note(*, inputs: dict, result: Result) -> str:
    r = result.values
    i = r["loads"].index(1.0)
    return (f"At the predicted capacity the simulated replica served "
            f"{rate_format(round(r['measured_output_tps'][i]), 'output tokens/s')} against "
            f"{number_format(round(r['predicted_output_tps'][i]))} predicted, so a million "
            f"tokens cost {_money(r['measured'][i])} instead of {_money(r['predicted'][i])}; "
            f"TTFT p99 was {seconds_format(r['ttft_p99'][i])} and TPOT p50 "
            f"{seconds_format(r['tpot_p50'][i])} against a target of "
            f"{seconds_format(r['tpot_target'])}. Random arrivals leave some steps under-filled "
            "and build queues near capacity; prefill chunks that ride on memory-bound decode "
            "steps recover time the calculator counts twice (it adds prefill and decode time as "
            "if they never overlapped), and the same chunks stretch the decode steps past the "
            "time per token the batch was planned for. Below capacity both lines are the paid "
            "hour divided by the tokens the traffic brings.")


REPLICA = calculator_register(Calculator(
    slug=DEMO_SLUG,
    title="A replica under random load: simulated against predicted cost",
    explanation=("A numpy simulator on the web server (no worker). One replica serves Poisson "
                 "arrivals at five loads, from a quarter of its predicted capacity to 20% "
                 "beyond, step by step: decodes and prefill chunks share each step, whose time "
                 "is the roofline of what it carries. Speculative decoding, routing and "
                 "disaggregation are not simulated."),
    inputs=REPLICA_INPUTS, compute=replica_simulated, plots=replica_plots, note=replica_note,
    listed=False, api_path="/cost-replica",
    api_summary="Simulated serving replica: cost per million tokens against load"))


# ---------------------------------------------------------------------------------------------
# The prose's figures.

SOURCES: list[tuple[str, str]] = [
    ("DeepSeek, 'Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview' (1 March 2025: "
     "R1 prices per million tokens at the time, 56.3% of input tokens hitting the on-disk KV "
     "cache over one day, nodes lent to research and training at night)",
     "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
     "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention'", "https://arxiv.org/abs/2309.06180"),
    ("Leviathan et al., 'Fast Inference from Transformers via Speculative Decoding' (expected "
     "tokens per verification step)", "https://arxiv.org/abs/2211.17192"),
    ("Ong et al., 'RouteLLM: Learning to Route LLMs with Preference Data' (cost cuts "
     "without losing quality on their benchmarks)", "https://arxiv.org/abs/2406.18665"),
    ("Patel et al., 'Splitwise: Efficient Generative LLM Inference Using Phase Splitting'",
     "https://arxiv.org/abs/2311.18677"),
    ("Zhong et al., 'DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large "
     "Language Model Serving'", "https://arxiv.org/abs/2401.09670"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(chunked prefill inside decode steps)", "https://arxiv.org/abs/2403.02310"),
    ("NVIDIA, 'Introducing NVFP4 for Efficient and Accurate Low-Precision Inference'",
     "https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-"
     "precision-inference/"),
    ("Meta Llama 3.1 70B config.json", "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/"
     "main/config.json"),
    ("Meta Llama 3.1 8B config.json", "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/"
     "config.json"),
]


def _kv_expression(m, kv) -> str:
    """How one token's KV adds up, for the model's own attention (MLA caches a latent)."""
    if m.attention == "MLA":
        return (f"{m.layers} layers × ({m.kv_lora_rank} latent + {m.qk_rope_head_dim} RoPE key) "
                f"× {number_format(kv.bytes)} B")
    return (f"{m.layers} layers × 2 (K, V) × {m.kv_heads} KV heads × {m.head_dim} × "
            f"{number_format(kv.bytes)} B")


def _kv_share(m, tp: int, per_gpu: float) -> str:
    """What each GPU of a `tp`-way replica keeps of a token's KV (`per_gpu` bytes)."""
    if tp == 1:
        return "held whole on its one GPU"
    if m.attention == "MLA":
        return (f"and each of the {tp} GPUs keeps all of it, since tensor parallelism cannot "
                "split MLA's shared latent")
    return f"of which each of the {tp} GPUs keeps {bytes_in(per_gpu, 'kB')}"


def _delta(fraction: float) -> str:
    sign = "−" if fraction < 0 else "+"
    return f"{sign}{percent_format(abs(fraction))} of the baseline"


def _piggyback(big: dict, state: dict) -> dict:
    """How much of the baseline's prefill could ride free in its decode steps (Sarathi-Serve's
    chunked prefill): a memory-bound step leaves (step − its FLOPs' time) of compute idle on
    every GPU; each computed prompt token needs the prefill's GPU-seconds ÷ tp of replica time.
    The share of the prompts' computed tokens that fit in that slack bounds how far pricing
    prefill and decode separately overstates the input side (a fraction, at most one)."""
    at = big["step"]
    slack = max(0.0, at["seconds"] - at["compute"])
    per_token = big["prefill_gpu_seconds_per_token"] / state["tp"]
    free_tokens = slack / per_token if per_token > 0 else 0.0
    computed = state["input_tokens"] * (1 - state["prefix_hit"])
    needed = big["batch"] * computed / state["output_tokens"]  # per step, one token each
    room = free_tokens / needed if needed > 0 else 0.0
    share = min(1.0, room)
    return {"piggyback": at["bound"] == "memory" and share > 0,
            "piggyback_slack_text": seconds_format(slack),
            "piggyback_share_text": share_phrase(share),
            # More slack than the prompts need: all of the input side could ride along.
            "piggyback_all": room >= 1.0,
            "piggyback_room_text": times_phrase(room, 1.0)}


def _lever_prose(lever: str, lv: dict) -> str:
    """A lever named in running prose (the takeaway's ranking)."""
    return {"batching": "batching to the latency target",
            "fp8": f"{lv['fp8'].get('dtype_name', 'FP8')} weights and KV cache",
            "prefix": "prefix caching", "gpu": "the move of GPU", "spec": "speculative decoding",
            "autoscale": "autoscaling", "commit": "committed capacity",
            "route": "routing to the small model", "cap_output": "the output cap",
            "disagg": "disaggregation"}[lever]


def figures(inputs: dict) -> dict:
    """Every figure of the prose at the calculator's normalised `inputs`."""
    rows, target = cost_rows(inputs)
    base = rows[0]
    big = base["costs"]["big"]
    state = base["state"]
    m, g, w, kv = state["model"], state["gpu"], state["w"], state["kv"]
    at = big["step"]
    kv_whole = kv_bytes_per_token_model(m, kv)
    lv: dict[str, dict] = {}
    previous = base
    for row in rows[1:]:
        b = row["costs"]["big"]
        trial = (row.get("trial") or row["costs"])["big"]
        # A skipped lever keeps the state before it; its own assumption is in its changes.
        s = {**row["state"], **(row.get("changes") or {})}
        entry = {
            "on": row["on"], "applied": row["applied"], "skip": row["skip"],
            "blended_text": _money(row["blended"]), "delta_text": _delta(row["delta"]),
            "cut_text": percent_format(row["cut"]),
            "batch_before": f"{previous['costs']['big']['batch']:,}",
            "batch_after": f"{b['batch']:,}", "limit": b["limit"], "b_mem": f"{b['b_mem']:,}",
            # Within 5% of the step before: the lever fits more sequences into the same bytes.
            "step_same": abs(b["step_seconds"] / previous["costs"]["big"]["step_seconds"] - 1)
            < 0.05,
            "step_text": seconds_format(b["step_seconds"]), "bound": b["bound"],
            "tps_text": rate_format(round(b["tokens_per_second_effective"]), "tokens/s"),
            "out_text": _money(row["out"]), "in_text": _money(row["in"]),
        }
        lever = row["lever"]
        if lever == "fp8":
            entry.update(dtype_name=s["w"].name,
                         weights_gpu_text=bytes_in(b["weights"], "GB"),
                         kv_per_token_text=bytes_in(kv_bytes_per_token_model(m, s["kv"]),
                                                    "kB"),
                         prefill_bound=b["prefill"]["bound"])
        elif lever == "prefix":
            entry.update(hit_text=percent_format(s["prefix_hit"]))
        elif lever == "gpu":
            moved = {**s, **(row.get("changes") or {})}
            entry.update(tp=moved["tp"], gpu_name=moved["gpu"].name,
                         sized=inputs.get("right_gpu_tp") is None,
                         batch_wanted=f"{previous['costs']['big']['batch']:,}",
                         price_text=money_format(moved["price_per_hour"]),
                         out_text=_money(b["out"]), in_text=_money(b["in"]))
        elif lever == "spec":
            alpha, gamma, draft = row.get("trial_state_spec", (0.0, 0, 0.0))
            entry.update(alpha_text=number_format(alpha), gamma=gamma,
                         draft_cost_text=percent_format(draft), batch=f"{trial['batch']:,}",
                         gain_text=f"{number_format(trial['spec_gain'])}×")
        elif lever == "autoscale":
            entry.update(util_text=percent_format({**s, **(row.get("changes") or {})}
                                                  ["utilisation"]),
                         util_before_text=percent_format(previous["state"]["utilisation"]))
        elif lever == "commit":
            entry.update(discount_text=percent_format(s["discount"]),
                         price_text=money_format(s["price_per_hour"] * (1 - s["discount"])))
        elif lever == "route":
            small = row["costs"]["small"] or {}
            chosen = {**s, **(row.get("changes") or {})}
            tp = chosen.get("small_tp") or 1
            entry.update(small_name=chosen["small_model"].name if chosen["small_model"] else "",
                         small_gpus_text=("one GPU" if tp == 1 else f"{tp} GPUs"),
                         share_text=percent_format(chosen["route_share"]),
                         small_out_text=_money(small.get("out", math.nan)),
                         small_in_text=_money(small.get("in", math.nan)))
        elif lever == "cap_output":
            cap = (row.get("changes") or {}).get("output_tokens", s["output_tokens"])
            trimmed = 1 - cap / previous["state"]["output_tokens"]
            token_change = 1 - row["blended"] / previous["blended"]
            entry.update(output_before=f"{previous['state']['output_tokens']:,}",
                         output_after=f"{cap:,}",
                         output_after_phrase=count_phrase(cap, "token"),
                         # A cap that removes a small share of the mean trims a long tail; one
                         # that removes most of it truncates ordinary answers.
                         trims_tail=trimmed <= CAP_TAIL_SHARE,
                         trimmed_text=percent_format(trimmed),
                         token_barely=abs(token_change) < CAP_BARELY,
                         token_change_text=percent_format(abs(token_change)),
                         request_before_text=_money(previous["per_1000"]),
                         request_text=_money(row["per_1000"]),
                         request_lever_cut_text=percent_format(1 - row["per_1000"]
                                                               / previous["per_1000"]),
                         request_cut_text=percent_format(1 - row["per_1000"]
                                                         / base["per_1000"]))
        elif lever == "disagg":
            entry.update(gain_text=percent_format(s["disagg_gain"] - 1))
        lv[lever] = entry
        if row["on"]:
            previous = row
    reached = next((i for i, row in enumerate(rows) if i and row["cut"] >= target), 0)
    spec_row = next(r for r in rows if r["lever"] == "spec")
    # The learner's speculation inputs, used even with the lever off so the figures stay true.
    spec_params = (inputs["spec_alpha"], inputs["spec_gamma"], inputs["spec_draft_cost"])
    spec_base = state_costs({**state, "spec": spec_row.get("trial_state_spec",
                                                             spec_params)})["big"]
    spec_off_gain = state_costs({**spec_row["state"], "spec": spec_params})["big"]["spec_gain"]
    cut_at = {row["lever"]: row["cut"] for row in rows}
    on_after = sum(1 for row in rows[reached + 1:] if row["applied"]) if reached else 0
    # The model answer's first levers, in the order they applied, and the takeaway's ranking.
    ordinals = ("First", "Second", "Third")
    early = [name for name in ("batching", "fp8", "prefix") if lv[name]["applied"]]
    early_ordinal = {name: ordinals[i] for i, name in enumerate(early)}
    applied = [row for row in rows[1:] if row["applied"] and row["delta"] < 0]
    ranked = sorted(applied, key=lambda row: row["delta"])[:2]

    def own_cut(row: dict) -> float:
        """A lever's cut of what was left before it (a fraction)."""
        before = row["blended"] - row["delta"] * base["blended"]
        return 1 - row["blended"] / before if before > 0 else 0.0

    pricing = [(row["title"].lower(), percent_format(own_cut(row))) for row in applied
               if row["lever"] in ("autoscale", "commit")]
    # The pricing levers read as "comparable to a technical lever's" only when each removes at
    # least half as large a share of what is left as the best technical lever does, and as
    # "small in the waterfall only because they come late" only when most of the baseline's
    # cost is gone before the first of them.
    pricing_rows = [row for row in applied if row["lever"] in ("autoscale", "commit")]
    technical_cuts = [own_cut(row) for row in applied
                      if row["lever"] not in ("autoscale", "commit")]
    pricing_comparable = bool(pricing_rows) and bool(technical_cuts) and (
        min(own_cut(row) for row in pricing_rows) >= 0.5 * max(technical_cuts))
    first_pricing = pricing_rows[0] if pricing_rows else None
    pricing_late = first_pricing is not None and (
        first_pricing["cut"] + first_pricing["delta"] >= 0.5)
    input_share = (state["input_tokens"] * base["in"]
                   / (state["input_tokens"] * base["in"] + state["output_tokens"] * base["out"]))
    return {
        "early_ordinal": early_ordinal,
        "early_count": len([n for n in early if n != "prefix"]),
        "top_levers_text": list_phrase([f"{_lever_prose(row['lever'], lv)} "
                                        f"({percent_format(-row['delta'])} of the baseline)"
                                        for row in ranked]),
        "top_levers_count": len(ranked),
        "top_are_bytes": bool(ranked) and all(row["lever"] in ("batching", "fp8")
                                              for row in ranked)
        and at["bound"] == "memory",
        "pricing_text": list_phrase([f"{name} {cut}" for name, cut in pricing]),
        "pricing_count": len(pricing),
        "pricing_comparable": pricing_comparable,
        "pricing_late": pricing_late,
        "best_technical_text": percent_format(max(technical_cuts)) if technical_cuts else "",
        "input_share_text": percent_format(input_share),
        "margin_none": bool(reached) and on_after == 0,
        "question_cut_text": percent_format(QUESTION_CUT),
        "r1_hit_text": money_format(R1_PRICES["hit"]),
        "r1_miss_text": money_format(R1_PRICES["miss"]),
        "r1_output_text": money_format(R1_PRICES["output"]),
        "deepseek_hit_text": percent_format(DEEPSEEK_HIT),
        "routellm_text": f"{ROUTELLM_CUT}×",
        "splitwise_throughput_text": f"{SPLITWISE[0]}×",
        "splitwise_cost_text": percent_format(SPLITWISE[1]),
        "distserve_text": f"{DISTSERVE}×",
        "model_name": m.name, "gpu_name": g.name, "tp": state["tp"],
        "tp_gpus_text": count_phrase(state["tp"], "GPU"), "dtype_name": w.name,
        "price_text": money_format(state["price_per_hour"]),
        "util_text": percent_format(state["utilisation"]),
        "tpot_target_text": seconds_format(state["tpot_target_seconds"]),
        "batch_cap": f"{state['batch_cap']:,}",
        "batch_cap_phrase": count_phrase(state["batch_cap"], "sequence"),
        "input_tokens": f"{state['input_tokens']:,}",
        "output_tokens": f"{state['output_tokens']:,}",
        "eff_bw_text": percent_format(state["bandwidth_efficiency"]),
        "mfu_text": percent_format(state["mfu_decode"]),
        "mfu_prefill_text": percent_format(state["mfu_prefill"]),
        "memory_fraction_text": percent_format(state["memory_fraction"]),
        "reserve_text": f"{number_format(state['reserve_bytes'] / 1e9)} GB",
        "memory_total_text": bytes_in(g.memory_total_bytes, "GB"),
        "base_weights_gpu_text": bytes_in(big["weights"], "GB"),
        "base_usable_text": bytes_in(big["free"] + big["weights"], "GB"),
        "base_free_text": bytes_in(big["free"], "GB"),
        "base_kv_per_token_text": bytes_in(kv_whole, "kB"),
        "base_kv_expression": _kv_expression(m, kv),
        "base_kv_share_text": _kv_share(m, state["tp"], big["kv_token"]),
        "base_context": f"{number_format(big['context'])}",
        "base_b_mem": f"{big['b_mem']:,}", "base_b_slo": f"{big['b_slo']:,}",
        "base_batch": f"{big['batch']:,}", "base_limit": big["limit"],
        "base_batch_phrase": count_phrase(big["batch"], "sequence"),
        "base_read_w_text": bytes_in(at["weights"], "GB"),
        "base_read_kv_text": bytes_in(at["kv"], "GB"),
        "base_bandwidth_text": bandwidth_format(g.bandwidth_bytes_per_second
                                                * state["bandwidth_efficiency"]),
        "base_step_text": seconds_format(at["seconds"]), "base_step_bound": at["bound"],
        "base_compute_text": seconds_format(at["compute"]),
        "base_tps_text": rate_format(round(big["tokens_per_second_effective"]), "tokens/s"),
        "base_out_text": _money(base["out"]), "base_in_text": _money(base["in"]),
        "base_in_flops_text": scientific_format(big["prefill_flops_per_token"], digits=4,
                                                unit="FLOP"),
        "base_in_gs_text": seconds_format(big["prefill_gpu_seconds_per_token"]),
        "base_in_compute_text": seconds_format(big["prefill"]["compute"]),
        "base_in_memory_text": seconds_format(big["prefill"]["memory"]),
        "base_in_bound": big["prefill"]["bound"],
        **_piggyback(big, state),
        "base_blended_text": _money(base["blended"]),
        "base_request_text": _money(base["per_1000"]),
        "target_cut_text": percent_format(target),
        "target_left_text": percent_format(1 - target),
        "target_text": _money(base["blended"] * (1 - target)),
        "two_lever_cut_text": percent_format(1 - math.sqrt(1 - target)),
        "three_cut_each_text": percent_format(THREE_CUT_EXAMPLE),
        "three_cut_total_text": percent_format(1 - (1 - THREE_CUT_EXAMPLE) ** 3),
        "three_cut_naive_text": percent_format(3 * THREE_CUT_EXAMPLE),
        "lv": lv,
        "after_fp8_cut_text": percent_format(cut_at["fp8"]),
        "after_prefix_cut_text": percent_format(cut_at["prefix"]),
        "after_prefix_reaches": cut_at["prefix"] >= target,
        "target_reached": bool(reached), "target_step": reached,
        "target_lever": rows[reached]["title"].lower() if reached else "",
        "target_margin_levers": count_phrase(on_after, "more lever"),
        "final_blended_text": _money(rows[-1]["blended"]),
        "final_cut_text": percent_format(rows[-1]["cut"]),
        "final_request_text": _money(rows[-1]["per_1000"]),
        "final_request_cut_text": percent_format(1 - rows[-1]["per_1000"] / base["per_1000"]),
        "spec_gain_baseline_text": f"{number_format(spec_base['spec_gain'])}×",
        # With its lever switched off, what speculation would give where the lever sits (the
        # default acceptance, drafts and draft cost), so the follow-up's figure is still true.
        "spec_gain_lever_text": lv["spec"].get("gain_text", "") if spec_row["on"] else
        f"{number_format(spec_off_gain)}×",
        "spec_on": spec_row["applied"],
        "spec_gain_same": spec_row["applied"] and lv["spec"].get("gain_text", "")
        == f"{number_format(spec_base['spec_gain'])}×",
        "levers_count": len(LEVERS),
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 24's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        # Bad input shows beside the calculator's field; the prose keeps the defaults.
        inputs = CALCULATOR.defaults()
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "demo_slug": DEMO_SLUG, "demo_prefix": DEMO_PREFIX,
            "inputs_valid": state.result is not None}

