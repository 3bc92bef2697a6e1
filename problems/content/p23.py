"""Problem 23, serving a large MoE with tensor, pipeline and expert parallelism: the layout
calculator (memory, communication and step bounds per GPU, with layouts compared), the routing
simulator, and every figure the prose quotes, computed at render time.

The prose follows the calculator's inputs (model, formats, batch, context, efficiencies, and the
learner's cluster as cluster A) while they describe an MLA model whose standard layouts are all
valid; otherwise it keeps the defaults and says so. Cluster B is fixed: 2 nodes of 8 H100s.
"""

import math

from django.http import HttpRequest

from demos.simulators import moe_routing as routing_sim
from problems.arithmetic.catalog import DTYPES, dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import native_peak_get, peak_flops_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.interconnect import collective_links
from problems.arithmetic.memory import (
    embedding_dtype_resolve,
    experts_touched,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.moe import expert_gpu_hit_probability
from problems.arithmetic.parallel import (
    COLLECTIVE_US_MAX,
    GPUS_PER_NODE_MAX,
    IB_GBPS_MAX,
    MICROBATCHES_MAX,
    NODES_MAX,
    Layout,
    allreduce_bytes,
    layout_row,
    moe_layout,
    moe_layouts_compare,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_in,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import (
    SAME_WITHIN,
    count_phrase,
    ratio_phrase,
    share_phrase,
)
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
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

SLUG = "moe-parallelism"
PREFIX = "p23-moe"
DEMO_SLUG = "moe-routing"
DEMO_PREFIX = "p23-routing"
CLUSTER_B = ("h100-sxm", 2, 8)
# Outside facts the prose quotes, each from a source in SOURCES.
FLASHMLA_TFLOPS = 660  # FlashMLA README: dense MLA decoding on H800, compute-bound
DEEPSEEK_KV_LENGTH = 4_989  # Day 6 overview: average KV length per output token
MTP_ACCEPTANCE = "85–90%"  # DeepSeek-V3 report §5.4.3, the second token's acceptance rate
MTP_SPEEDUP = 1.8  # the same section: tokens per second with MTP, ×
# Published decode throughput per node, to calibrate the page's floors against (K6). DeepSeek's
# Day 6 overview: about 14.8k output tokens/s per H800 node, decode at EP144 over 18 nodes, an
# average KV length of 4,989 tokens. LMSYS (2025-05-05): 22.3k output tokens/s per H100 node,
# decode at EP72 over 9 nodes, 2,000-token inputs.
DEEPSEEK_NODE_TPS, DEEPSEEK_DECODE_NODES, DEEPSEEK_DECODE_EP = 14_800, 18, 144
SGLANG_NODE_TPS, SGLANG_DECODE_NODES, SGLANG_DECODE_EP, SGLANG_INPUT = 22_300, 9, 72, 2_000
# The page's own wide layout for that comparison: 8 nodes of H100 (H800s read HBM as fast),
# EP64, as many sequences as its KV holds. 256 experts split evenly over 64 GPUs, not 72.
WIDE_NODES, WIDE_GPU = 8, "h100-sxm"
# DeepSeek-V3's node-limited routing: the router keeps the best `topk_group` of `n_group` expert
# groups (config.json: 4 of 8; report §2.1.2 the mechanism, §3.2.2 and §4.2 at most 4 nodes per
# token in training), and the link bandwidths the report gives for its H800 cluster (§3.2.2; it
# does not say they were measured).
EXPERT_GROUPS, GROUPS_PER_TOKEN = 8, 4
H800_NVLINK_GBPS, H800_IB_GBPS = 160, 50
MS = 1e3
US = 1e6

MOE_LAYOUT_INPUTS: tuple[Input, ...] = (
    model_input(initial="deepseek-v3", api="deepseek-v3"),
    gpu_input(initial="h200", api="h200"),
    whole_input("nodes", "Nodes", unit="nodes", initial=1, api=1, maximum=NODES_MAX),
    whole_input("gpus_per_node", "GPUs per node", unit="GPUs", initial=8, api=8,
                maximum=GPUS_PER_NODE_MAX, help="NVLink connects the GPUs inside a node; "
                "InfiniBand connects nodes."),
    whole_input("pp", "Pipeline stages", unit="stages", initial=1, api=1, maximum=128,
                help="Consecutive layers per stage, as even as possible."),
    whole_input("attn_tp", "Attention tensor-parallel size", unit="GPUs", initial=1, api=1,
                maximum=NODES_MAX * GPUS_PER_NODE_MAX,
                help="1 = data-parallel attention (each GPU its own requests and KV); the "
                     "stage's GPU count = plain tensor parallelism."),
    choice_input("moe", "Experts split by", choices=(("ep", "expert parallelism"),
                                                     ("tp", "tensor parallelism")),
                 initial="ep", api="ep",
                 help="Expert parallelism sends tokens to the experts (dispatch and combine); "
                      "tensor parallelism splits every expert and all-reduces."),
    dtype_input(initial="fp8", api="fp8", help="The embedding and output head stay in BF16."),
    kv_dtype_input(),
    whole_input("batch", "Sequences decoding", unit="sequences", initial=256, api=256,
                maximum=USERS_MAX, help="Across the whole deployment."),
    whole_input("context_tokens", "Context per sequence", unit="tokens", initial=5_000,
                api=5_000, maximum=TOKENS_MAX,
                help="DeepSeek reports an average KV length of 4,989 tokens on its service."),
    real_input("memory_fraction", "Share of GPU memory the engine may use", unit="fraction",
               initial=0.9, api=0.9, minimum=0.01, maximum=1.0,
               help="Of the memory the driver reports; vLLM's default is 0.9."),
    real_input("reserve_gb", "Runtime reserve per GPU", unit="GB", initial=5.0, api=5.0,
               maximum=1_000.0, help="Activations, CUDA graphs and communication buffers "
               "(expert-parallel all-to-all buffers alone can take gigabytes)."),
    real_input("bandwidth_efficiency", "HBM bandwidth efficiency", unit="fraction",
               initial=0.8, api=0.8, minimum=0.01, maximum=1.0,
               help="Achieved over datasheet bandwidth; well-tuned decode kernels reach "
                    "roughly 0.6–0.85."),
    real_input("mfu", "Compute efficiency (MFU)", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0,
               help="FlashMLA reports up to 660 TFLOPS on an H800 in its compute-bound "
                    "configuration, about two-thirds of the dense BF16 peak."),
    real_input("link_efficiency", "Link efficiency", unit="fraction", initial=0.8, api=0.8,
               minimum=0.01, maximum=1.0,
               help="Achieved over nominal NVLink and InfiniBand bandwidth (an assumption)."),
    real_input("collective_us", "Fixed cost per collective", unit="µs", initial=10.0,
               api=10.0, maximum=COLLECTIVE_US_MAX,
               help="An assumption: measure small all-reduces and all-to-alls on your own "
                    "cluster (nccl-tests, DeepEP's tests)."),
    real_input("ib_gbps", "InfiniBand per GPU, one way", unit="GB/s", initial=50.0, api=50.0,
               maximum=IB_GBPS_MAX, help="A 400 Gb/s NIC per GPU is 50 GB/s."),
    dtype_input(name="dispatch_dtype", label="Dispatch format", initial="fp8", api="fp8",
                help="DeepSeek dispatches in FP8 and combines in BF16."),
    choice_input("copies", "Copies per token", choices=(
        ("per_gpu", "one per destination GPU"), ("per_expert", "one per chosen expert")),
        initial="per_gpu", api="per_gpu",
        help="Normal kernels send a token once to each GPU holding its experts; DeepEP's "
             "low-latency kernels send one copy per expert."),
    Input("microbatches", "whole", "Micro-batches in flight", initial=None, api=None,
          minimum=1, maximum=MICROBATCHES_MAX, required=False,
          help="Only with pipeline stages; blank = one per stage."),
)

SHARED_KEYS = ("dtype", "kv_dtype", "batch", "context_tokens", "memory_fraction",
               "reserve_gb", "bandwidth_efficiency", "mfu", "link_efficiency",
               "collective_us", "ib_gbps", "dispatch_dtype", "copies")


def _shared(inputs: dict) -> dict:
    return {key: inputs[key] for key in SHARED_KEYS}


def _learner_layout(inputs: dict) -> Layout:
    return Layout(inputs["nodes"], inputs["gpus_per_node"], inputs["pp"], inputs["attn_tp"],
                  inputs["moe"])


def cluster_b_inputs(inputs: dict) -> dict:
    """The inputs cluster B is worked at: the learner's, except a weight format its GPU has no
    tensor cores for (NVFP4 on Hopper runs weight-only there, with other kernels and costs),
    which falls back to FP8, the narrowest format Hopper multiplies natively."""
    try:
        native_peak_get(gpu=gpu_get(CLUSTER_B[0]), dtype=dtype_get(inputs["dtype"]))
    except ArithmeticInputError:
        return {**inputs, "dtype": "fp8"}
    return inputs


def layouts_rows(inputs: dict) -> list[dict]:
    """The comparison rows: the learner's cluster's standard layouts, cluster B's (in a format
    its GPU runs natively), and the learner's own layout when it is not among them."""
    own = moe_layouts_compare(
        model=inputs["model"], clusters=[(inputs["gpu"], inputs["nodes"],
                                          inputs["gpus_per_node"])],
        extra=(inputs["gpu"], _learner_layout(inputs)), **_shared(inputs))
    b = cluster_b_inputs(inputs)
    return own + [row for row in moe_layouts_compare(model=inputs["model"],
                                                    clusters=[CLUSTER_B], **_shared(b))
                  if row["name"] not in {r["name"] for r in own}]


def _short(row: dict) -> str:
    return row["name"].replace("NVIDIA ", "")


def layouts_memory_plot(rows: list[dict]) -> BarPlot:
    names = tuple(_short(r) for r in rows)
    weights = tuple(r.get("weights", math.nan) / GB for r in rows)
    kv = tuple(r["kv_held"] / GB if r["valid"] else math.nan for r in rows)
    free = tuple(max(0.0, (r["usable"] - r["weights"] - r["kv_held"]) / GB) if r["valid"]
                 else math.nan for r in rows)
    usable = {round(r["usable"] / GB, 1) for r in rows if "usable" in r}
    return BarPlot(
        title="Memory per GPU by layout", categories=names,
        value_title="GB per GPU (the fullest stage)", horizontal=True, mode="stack",
        series=(BarSeries("Weights", weights), BarSeries("KV of the batch evaluated", kv),
                BarSeries("Free", free)),
        lines=tuple(Line(u, f"usable {number_format(u)} GB") for u in sorted(usable)),
        columns=(("Sequences held", tuple(f"{r['max_seq']:,}" if r["valid"] else r["reason"]
                                          for r in rows)),))


def layouts_comm_plot(rows: list[dict]) -> BarPlot:
    valid = [r for r in rows if r["valid"]]
    names = tuple(_short(r) for r in valid)
    return BarPlot(
        title="Sent per GPU per decode step, by layout", categories=names,
        value_title="MB per GPU per step", horizontal=True, mode="stack",
        series=(BarSeries("Inside a node", tuple(r["comm_nvl"] / 1e6 for r in valid)),
                BarSeries("Over InfiniBand", tuple(r["comm_ib"] / 1e6 for r in valid),
                          labels=tuple(seconds_format(r["comm_time"]) for r in valid))),
        columns=(("Communication time", tuple(seconds_format(r["comm_time"]) for r in valid)),
                 ("Time per token floor, overlapped to serial",
                  tuple(f"{seconds_format(r['tpot_low'])} to {seconds_format(r['tpot_high'])}"
                        for r in valid)),
                 ("Sequences evaluated", tuple(f"{r['batch']:,}" for r in valid))))


def moe_layout_plots(*, inputs: dict, result: Result) -> tuple[BarPlot, ...]:
    rows = layouts_rows(inputs)
    return layouts_memory_plot(rows), layouts_comm_plot(rows)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="MoE layouts: memory, communication and step time",
    explanation=("Pick a cluster and how attention, experts and layers are split. The working "
                 "shows the weights and KV each GPU holds, the bytes each GPU sends per decode "
                 "step over NVLink and InfiniBand, and the floor on the step at the stated "
                 "efficiencies: the larger of GPU work and communication with perfect overlap, "
                 "their sum with none. "
                 "The plots compare the standard layouts of your cluster and of 2 × 8 H100s."),
    inputs=MOE_LAYOUT_INPUTS, compute=moe_layout, plots=moe_layout_plots, listed=False,
    api_path="/moe-layout",
    api_summary="MoE layout: weights, KV, communication and step bounds per GPU"))


# ---------------------------------------------------------------------------------------------
# The routing simulator (demo).

ROUTING_INPUTS: tuple[Input, ...] = (
    model_input(initial="deepseek-v3", api="deepseek-v3"),
    gpu_input(initial="h200", api="h200"),
    dtype_input(initial="fp8", api="fp8", help="Of the experts' weights."),
    whole_input("ep", "Expert-parallel GPUs", unit="GPUs", initial=8, api=8, minimum=2,
                maximum=256),
    whole_input("gpus_per_node", "GPUs per node", unit="GPUs", initial=8, api=8,
                maximum=GPUS_PER_NODE_MAX,
                help="A group wider than a node sends its all-to-all over InfiniBand."),
    whole_input("tokens", "Tokens in the step", unit="tokens", initial=2_048, api=2_048,
                maximum=8_192, help="A prefill step carries thousands; a decode step one per "
                "sequence (try 256)."),
    real_input("skew", "Popularity skew", initial=1.0, api=1.0, minimum=0.0, maximum=3.0,
               help="Zipf exponent over the experts: 0 is uniform; at 1 the r-th most "
                    "popular expert gets 1/r of the top one's weight, a stress case far more "
                    "skewed than a model trained for balance (the working shows the hottest "
                    "expert's load against the mean)."),
    whole_input("redundant", "Redundant expert slots", unit="slots", initial=32, api=32,
                minimum=0, maximum=256,
                help="Extra copies of the hottest experts (DeepSeek uses 32); experts plus "
                     "slots must split evenly over the GPUs."),
    whole_input("steps", "Steps simulated", unit="steps", initial=2, api=2, maximum=20),
    whole_input("seed", "Random seed", initial=0, api=0, minimum=0, maximum=10**6),
    real_input("mfu", "Compute efficiency (MFU)", unit="fraction", initial=0.5, api=0.5,
               minimum=0.01, maximum=1.0),
    real_input("bandwidth_efficiency", "HBM bandwidth efficiency", unit="fraction",
               initial=0.8, api=0.8, minimum=0.01, maximum=1.0),
    real_input("link_efficiency", "Link efficiency", unit="fraction", initial=0.8, api=0.8,
               minimum=0.01, maximum=1.0),
    real_input("collective_us", "Fixed cost per collective", unit="µs", initial=10.0,
               api=10.0, maximum=COLLECTIVE_US_MAX),
    real_input("ib_gbps", "InfiniBand per GPU, one way", unit="GB/s", initial=50.0, api=50.0,
               maximum=IB_GBPS_MAX),
)


def routing_simulated(*, model: str, gpu: str, dtype: str = "fp8", ep: int = 8,
                gpus_per_node: int = 8, tokens: int = 2_048, skew: float = 1.0,
                redundant: int = 32, steps: int = 2, seed: int = 0, mfu: float = 0.5,
                bandwidth_efficiency: float = 0.8, link_efficiency: float = 0.8,
                collective_us: float = 10.0, ib_gbps: float = 50.0) -> Result:
    """Simulated routing of `tokens` tokens per step over an EP group (`demos.simulators.
    moe_routing`), against the layout arithmetic's uniform assumption (loads in pairs, times
    in seconds). Values hold every curve, so the plots need no second run."""
    m = model_get(model)
    if not m.is_moe:
        raise ArithmeticInputError(field="model", message=f"{m.name} has no experts")
    g = gpu_get(gpu)
    w = dtype_get(dtype)
    peak = peak_flops_get(gpu=g, dtype=w)
    ep = count_check(ep, field="ep", maximum=256)
    if m.experts_routed % ep:
        raise ArithmeticInputError(field="ep", message=f"{m.experts_routed} experts do not "
                                   f"split evenly over {ep} GPUs")
    redundant = count_check(redundant, field="redundant", minimum=0, maximum=256)
    if (m.experts_routed + redundant) % ep:
        raise ArithmeticInputError(
            field="redundant", message=f"{m.experts_routed} experts + {redundant} slots do not "
            f"split evenly over {ep} GPUs")
    if redundant > m.experts_routed * (ep - 1):
        raise ArithmeticInputError(field="redundant", message="more copies than GPUs to hold "
                                   "them")
    tokens = count_check(tokens, field="tokens", maximum=8_192)
    steps = count_check(steps, field="steps", maximum=20)
    gpn = count_check(gpus_per_node, field="gpus_per_node", maximum=GPUS_PER_NODE_MAX)
    skew = number_check(skew, field="skew", minimum=0.0, maximum=3.0, allow_minimum=True)
    sweeps = len(set(routing_sim.SKEWS) | {float(skew)})
    work = routing_sim.routing_work(tokens=tokens, experts=m.experts_routed, steps=steps,
                                    sweeps=sweeps)
    if work > routing_sim.WORK_MAX:
        raise ArithmeticInputError(
            field="steps", message=f"{number_format(work)} token-expert draws is more than one "
            f"run may take ({number_format(routing_sim.WORK_MAX)}): fewer steps or tokens")
    parts = params_count_model(m)
    act = DTYPES["bf16"]
    over_ib = ep > gpn
    # Inside a node each GPU exchanges with the other ep − 1 at once: NVLink's whole figure,
    # one link to each on a mesh (MI300X).
    link = (ib_gbps * 1e9 if over_ib else g.collective_one_way_bytes_per_second(ep))
    run = routing_sim.simulate(
        experts=m.experts_routed, k=m.experts_per_token, gpus=ep, tokens=tokens,
        skew=float(skew), redundant=redundant, steps=steps,
        seed=count_check(seed, field="seed", minimum=0, maximum=10**6),
        expert_params=parts["expert"], hidden=m.hidden, weight_bytes=w.bytes,
        dispatch_bytes=DTYPES["fp8"].bytes, combine_bytes=act.bytes, peak_flops=peak,
        mfu=fraction_check(mfu, field="mfu"),
        bandwidth=g.bandwidth_bytes_per_second * fraction_check(
            bandwidth_efficiency, field="bandwidth_efficiency"),
        link_bandwidth=link * fraction_check(link_efficiency, field="link_efficiency"),
        collective_seconds=number_check(collective_us, field="collective_us", minimum=0.0,
                                        maximum=COLLECTIVE_US_MAX, allow_minimum=True) * 1e-6)
    chosen = run["skews"].index(float(skew))
    ratio_plain = run["ratio_plain"][chosen]
    ratio_balanced = run["ratio_balanced"][chosen]
    t_plain = run["time_plain"][chosen]
    t_bal = run["time_balanced"][chosen]
    predicted = run["predicted_time"]
    moe_layers = parts["moe_layers"]
    per_gpu_slots = (m.experts_routed + redundant) // ep
    compute_mean = 2 * run["mean_load"] * parts["expert"] / (peak * mfu)
    memory_mean = (m.experts_routed // ep) * (1 - (1 - m.experts_per_token / m.experts_routed)
                                              ** tokens) * parts["expert"] * w.bytes / (
        g.bandwidth_bytes_per_second * bandwidth_efficiency)
    values = {
        "skews": list(run["skews"]), "ratio_plain": [float(x) for x in run["ratio_plain"]],
        "ratio_expert": [float(x) for x in run["ratio_expert"]],
        "ratio_expert_at_skew": float(run["ratio_expert"][chosen]),
        "mean_expert_load": float(run["mean_expert_load"]),
        "ratio_balanced": [float(x) for x in run["ratio_balanced"]],
        "time_plain": [float(x) for x in run["time_plain"]],
        "time_balanced": [float(x) for x in run["time_balanced"]],
        "predicted_time": predicted, "mean_load": run["mean_load"],
        "loads_plain": [int(x) for x in run["loads_plain"]],
        "loads_balanced": [int(x) for x in run["loads_balanced"]],
        "skew": float(skew), "ratio_plain_at_skew": float(ratio_plain),
        "ratio_balanced_at_skew": float(ratio_balanced), "time_plain_at_skew": t_plain,
        "time_balanced_at_skew": t_bal, "moe_layers": moe_layers,
        "step_delta_plain": moe_layers * (t_plain - predicted),
        "step_delta_balanced": moe_layers * (t_bal - predicted),
        "uniform_bound": "compute" if compute_mean >= memory_mean else "memory",
        "over_infiniband": over_ib, "hottest_copies": int(run["copies"].max()),
    }
    steps_out = (
        Step("Tokens and pairs per step",
             f"{count_phrase(tokens, 'token')} × top-{m.experts_per_token} of "
             f"{m.experts_routed} experts over {ep} GPUs", run["mean_load"], "pairs per GPU",
             f"{number_format(run['mean_load'])} pairs per GPU on average"),
        Step("Predicted MoE layer on each GPU (uniform routing)",
             f"{'compute' if compute_mean >= memory_mean else 'memory'}-bound: max("
             f"{seconds_format(compute_mean)} matmuls, {seconds_format(memory_mean)} reading the "
             f"experts touched) + dispatch and combine over "
             f"{'InfiniBand' if over_ib else collective_links(g, ep)[1]}", predicted, "s",
             seconds_format(predicted)),
        Step(f"Hottest expert at skew {number_format(skew)}",
             f"its (token, expert) pairs over the mean expert's "
             f"{number_format(run['mean_expert_load'])}, averaged over "
             f"{count_phrase(steps, 'step')}",
             values["ratio_expert_at_skew"], "× the mean",
             f"{number_format(values['ratio_expert_at_skew'])}× the mean expert"),
        Step(f"Busiest GPU at skew {number_format(skew)}, experts in order",
             f"load {number_format(ratio_plain)}× the mean, averaged over "
             f"{count_phrase(steps, 'step')}",
             t_plain, "s", seconds_format(t_plain)),
        Step(f"Busiest GPU at skew {number_format(skew)}, {redundant} redundant slots",
             f"load {number_format(ratio_balanced)}× the mean; {per_gpu_slots} expert slots per "
             f"GPU instead of {m.experts_routed // ep}; the hottest expert has "
             f"{count_phrase(values['hottest_copies'], 'copy')}", t_bal, "s",
             seconds_format(t_bal)),
        Step(f"Over {moe_layers} MoE layers, per step",
             f"{moe_layers} × ({seconds_format(t_plain)} − {seconds_format(predicted)}) "
             "without redundancy", values["step_delta_plain"], "s",
             seconds_format(values["step_delta_plain"])),
    )
    return Result(values=values, steps=steps_out)


def moe_routing_plots(*, inputs: dict, result: Result) -> tuple:
    r = result.values
    gpus = len(r["loads_plain"])
    names = tuple(f"GPU {i}" for i in range(gpus))
    loads = BarPlot(
        title=f"Pairs per GPU in the first step, skew {number_format(r['skew'])}",
        categories=names, value_title="(token, expert) pairs", category_title="GPU",
        series=(BarSeries("Experts in order", tuple(float(x) for x in r["loads_plain"])),
                BarSeries(f"{inputs['redundant']} redundant slots, balanced",
                          tuple(float(x) for x in r["loads_balanced"]))),
        lines=(Line(r["mean_load"], "mean"),))
    skews = tuple(r["skews"])
    ratio = Plot(
        title="Hottest expert and busiest GPU against the mean, by skew",
        x_title="Popularity skew", y_title="Load ÷ mean load", y_log=True,
        series=(Series("Hottest expert (÷ mean expert)", skews, tuple(r["ratio_expert"]),
                       markers=True),
                Series("Busiest GPU, experts in order", skews, tuple(r["ratio_plain"]),
                       markers=True),
                Series(f"Busiest GPU, {inputs['redundant']} redundant slots", skews,
                       tuple(r["ratio_balanced"]), markers=True),
                Series("Uniform (the calculator)", (skews[0], skews[-1]), (1.0, 1.0),
                       dash=True)),
        marks=(Mark(r["skew"], "your skew"),))
    times = Plot(
        title="MoE layer on the busiest GPU: simulated against predicted",
        x_title="Popularity skew", y_title="MoE layer time (µs)",
        series=(Series("Simulated, experts in order", skews,
                       tuple(t * US for t in r["time_plain"]), markers=True),
                Series(f"Simulated, {inputs['redundant']} redundant slots", skews,
                       tuple(t * US for t in r["time_balanced"]), markers=True),
                Series("Predicted (balanced, the layout calculator)", (skews[0], skews[-1]),
                       (r["predicted_time"] * US,) * 2, dash=True)),
        marks=(Mark(r["skew"], "your skew"),))
    return loads, ratio, times


def moe_routing_note(*, inputs: dict, result: Result) -> str:
    r = result.values
    why = ("The step waits for its slowest GPU: random routing alone leaves one GPU above the "
           "mean, popular experts add more, and redundant copies help only as far as the "
           "sample they were placed from still describes the traffic. ")
    if r["uniform_bound"] == "memory":
        units = gpu_get(inputs["gpu"]).matrix_units
        why += ("Here each GPU's experts are memory-bound (too few tokens per expert to use the "
                f"{units}), so extra tokens cost little until the hottest GPU turns "
                "compute-bound; extra copies even add weight reads. More tokens per step make "
                "the time track the load.")
    else:
        why += ("Here the experts' matmuls are compute-bound, so the busiest GPU's extra "
                "tokens become extra time.")
    return (f"At skew {number_format(r['skew'])} the hottest expert gets "
            f"{number_format(r['ratio_expert_at_skew'])}× the mean expert's tokens and the "
            f"busiest GPU carries "
            f"{number_format(r['ratio_plain_at_skew'])}× the mean load "
            f"({number_format(r['ratio_balanced_at_skew'])}× with {inputs['redundant']} "
            f"redundant slots), and the MoE part of each layer takes "
            f"{seconds_format(r['time_plain_at_skew'])} "
            f"({seconds_format(r['time_balanced_at_skew'])} with them) instead of the "
            f"{seconds_format(r['predicted_time'])} the calculator assumes; over "
            f"{r['moe_layers']} MoE layers that is "
            f"{seconds_format(abs(r['step_delta_plain']))} "
            f"{'more' if r['step_delta_plain'] >= 0 else 'less'} per step. " + why)


ROUTING = calculator_register(Calculator(
    slug=DEMO_SLUG,
    title="Routing skew: the busiest GPU against the mean",
    explanation=("A numpy simulator on the web server (no worker): each step routes its tokens "
                 "to the top-k experts with a popularity skew, places the experts on an "
                 "expert-parallel group with or without redundant copies of the hottest, and "
                 "times the MoE layer on every GPU. The last plot sets the busiest GPU against "
                 "the layout calculator's balanced prediction."),
    inputs=ROUTING_INPUTS, compute=routing_simulated, plots=moe_routing_plots,
    note=moe_routing_note, listed=False, api_path="/moe-routing",
    api_summary="Simulated MoE routing skew over an expert-parallel group"))


# ---------------------------------------------------------------------------------------------
# The prose's figures.

SOURCES: list[tuple[str, str]] = [
    ("DeepSeek-AI, 'DeepSeek-V3 Technical Report' (§2.1.2 auxiliary-loss-free balancing, "
     "node-limited routing and no token dropping; §3.2.2 NVLink 160 GB/s and InfiniBand "
     "50 GB/s in its H800 cluster, each token sent to at most 4 nodes (also §4.2); §3.4 the "
     "prefill and decode deployments; §5.4.3 multi-token prediction)",
     "https://arxiv.org/abs/2412.19437"),
    ("DeepSeek, 'Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview' (EP32 prefill, "
     "EP144 decode over 18 nodes, 32 redundant experts, FP8 dispatch and BF16 combine, average "
     "KV length 4,989 tokens, about 14.8k output tokens/s per H800 node in decode)",
     "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
     "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md"),
    ("DeepSeek-V3 config.json (61 layers, 256 routed experts, top-8, 4 of 8 expert groups per "
     "token, MLA ranks)",
     "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"),
    ("DeepSeek FlashMLA (dense MLA decoding, up to 660 TFLOPS on H800 when compute-bound)",
     "https://github.com/deepseek-ai/FlashMLA"),
    ("DeepSeek DeepEP (expert-parallel dispatch and combine kernels, normal and low-latency)",
     "https://github.com/deepseek-ai/DeepEP"),
    ("DeepSeek EPLB, the expert-parallel load balancer (redundant experts placed from "
     "estimated loads)", "https://github.com/deepseek-ai/EPLB"),
    ("Shoeybi et al., 'Megatron-LM' (tensor parallelism: two all-reduces per layer in the "
     "forward pass)", "https://arxiv.org/abs/1909.08053"),
    ("Huang et al., 'GPipe' (the pipeline bubble, (K − 1)/(M + K − 1))",
     "https://arxiv.org/abs/1811.06965"),
    ("Lepikhin et al., 'GShard' (expert capacity and expert parallelism)",
     "https://arxiv.org/abs/2006.16668"),
    ("Fedus et al., 'Switch Transformers' (the capacity factor)",
     "https://arxiv.org/abs/2101.03961"),
    ("vLLM recipes: DeepSeek-V3 (tensor parallel for low latency, data parallel with expert "
     "parallelism for high load)",
     "https://docs.vllm.ai/projects/recipes/en/latest/DeepSeek/DeepSeek-V3.html"),
    ("vLLM documentation: distributed inference (tensor parallelism inside a node, pipeline "
     "parallelism across nodes)",
     "https://docs.vllm.ai/en/latest/serving/distributed_serving.html"),
    ("vLLM documentation: expert-parallel deployment, and its EPLB (redundant experts "
     "rearranged from recorded loads)",
     "https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment/"),
    ("SGLang documentation: DeepSeek V3/V3.1/R1 usage (DP attention; hardware configurations, "
     "W4A8 and AWQ on a node of H100s)",
     "https://github.com/sgl-project/sglang/blob/main/docs/basic_usage/deepseek_v3.md"),
    ("LMSYS, 'Deploying DeepSeek with PD Disaggregation and Large-Scale Expert Parallelism on "
     "96 H100 GPUs' (2025-05-05: decode at EP72 on 9 nodes, 22.3k output tokens/s per node for "
     "2,000-token inputs)", "https://lmsys.org/blog/2025-05-05-large-scale-ep/"),
    ("LMSYS, 'SGLang v0.4' (data-parallel attention for DeepSeek models)",
     "https://lmsys.org/blog/2024-12-04-sglang-v0-4/"),
    ("TensorRT-LLM documentation: parallelism strategies (attention data parallelism, wide "
     "expert parallelism)",
     "https://nvidia.github.io/TensorRT-LLM/features/parallel-strategy.html"),
]


def _link_phrase(ib_bytes: float, link: str, *, inside: str | None = None) -> str:
    """Where a step's collectives travel: the GPUs' own link inside a node (`link`: NVLink,
    Infinity Fabric, PCIe) alone, or it and InfiniBand with the InfiniBand share of the
    bytes."""
    if ib_bytes <= 0:
        return inside or f"over {link}"
    return f"over {link} and InfiniBand ({_mb(ib_bytes)} of it over InfiniBand)"


def _gb(count: float) -> str:
    return bytes_in(count, "GB")


def _mb(count: float) -> str:
    return bytes_in(count, "MB")


def _layout(inputs: dict, layout: Layout, *, gpu: str | None = None,
            cap_batch: bool = True) -> dict:
    """One layout at the inputs (a comparison row's figures), refusing one that is invalid."""
    from problems.arithmetic.parallel import _checked, moe_layout_model

    k = _checked(model=inputs["model"], gpu=gpu or inputs["gpu"], nodes=layout.nodes,
                 gpus_per_node=layout.gpus_per_node, pp=layout.pp, attn_tp=layout.attn_tp,
                 moe=layout.moe, microbatches=None, **_shared(inputs))
    r = moe_layout_model(model=k["model"], gpu=k["gpu"], layout=layout, w=k["w"], kv=k["kv"],
                         dispatch=k["dispatch"], batch=k["batch"], context=k["context"],
                         memory_fraction=k["memory_fraction"], reserve_bytes=k["reserve_bytes"],
                         bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu"],
                         link_efficiency=k["link_efficiency"], alpha_seconds=k["alpha_seconds"],
                         ib_bytes_per_second=k["ib_bytes_per_second"], copies=k["copies"],
                         cap_batch=cap_batch)
    if not r["weights_fit"] or r["max_seq"] == 0:
        raise ArithmeticInputError(
            field="nodes", message=f"{layout.gpus} × {k['gpu'].name} as {layout.name} cannot "
            "hold the model and one sequence")
    return r


def wide_ep_calibration(inputs: dict) -> dict:
    """The page's floors for a wide-EP decode cluster, set beside published per-node throughput:
    8 nodes of H100 at EP64 in FP8, holding as many sequences as their KV allows, at
    DeepSeek's average context and at SGLang's input length. Empty for a model other than
    DeepSeek-V3 (the published figures are for it), or where the layout cannot be worked."""
    if inputs["model"] != "deepseek-v3":
        return {"calibrate": False}
    m = model_get(inputs["model"])
    layout = Layout(WIDE_NODES, 8, 1, 1, "ep")
    rows = {}
    try:
        for name, context in (("ds", DEEPSEEK_KV_LENGTH), ("sg", SGLANG_INPUT)):
            wide = {**inputs, "gpu": WIDE_GPU, "nodes": WIDE_NODES, "gpus_per_node": 8,
                    "dtype": "fp8", "batch": 10**6, "context_tokens": context}
            rows[name] = _layout(wide, layout, gpu=WIDE_GPU)
    except ArithmeticInputError:
        return {"calibrate": False}
    # The learner's cluster filled to its KV limit: a saturated node against saturated nodes.
    full = _layout({**inputs, "batch": 10**6},
                   Layout(inputs["nodes"], inputs["gpus_per_node"], 1, 1, "ep"))
    one_node_high = full["tps_high"] / inputs["nodes"]

    def per_node(row: dict, key: str) -> str:
        return number_format(round(row[key] / WIDE_NODES))

    return {
        "calibrate": True,
        "wide_gpus": WIDE_NODES * 8, "wide_nodes": WIDE_NODES,
        "wide_gpu_name": gpu_get(WIDE_GPU).name,
        "ds_tps_text": number_format(DEEPSEEK_NODE_TPS),
        "ds_nodes": DEEPSEEK_DECODE_NODES, "ds_ep": DEEPSEEK_DECODE_EP,
        "sg_tps_text": number_format(SGLANG_NODE_TPS),
        "sg_nodes": SGLANG_DECODE_NODES, "sg_ep": SGLANG_DECODE_EP,
        "sg_input_text": f"{SGLANG_INPUT:,}",
        "ds_context_text": f"{DEEPSEEK_KV_LENGTH:,}",
        "page_full_tps_text": number_format(round(one_node_high)),
        "page_full_seq": count_phrase(full["max_seq"], "sequence"),
        "published_vs_page": ratio_phrase(DEEPSEEK_NODE_TPS, one_node_high, more="higher",
                                          less="lower"),
        "sg_vs_page": ratio_phrase(SGLANG_NODE_TPS, one_node_high, more="higher", less="lower"),
        "published_above_page": min(DEEPSEEK_NODE_TPS, SGLANG_NODE_TPS) > one_node_high,
        "wide_experts": math.ceil(m.experts_routed / (WIDE_NODES * 8)),
        "narrow_experts": math.ceil(m.experts_routed / (inputs["nodes"]
                                                        * inputs["gpus_per_node"])),
        # SGLang's measurement against the page's serial (no-overlap) end at its input length.
        "sg_near_serial": abs(SGLANG_NODE_TPS / (rows["sg"]["tps_low"] / WIDE_NODES) - 1) <= 0.1,
        "wide_ds_seq": f"{rows['ds']['max_seq']:,}",
        "wide_ds_low": per_node(rows["ds"], "tps_low"),
        "wide_ds_high": per_node(rows["ds"], "tps_high"),
        "wide_sg_seq": f"{rows['sg']['max_seq']:,}",
        "wide_sg_low": per_node(rows["sg"], "tps_low"),
        "wide_sg_high": per_node(rows["sg"], "tps_high"),
        "wide_sg_step_high": seconds_format(rows["sg"]["tpot_high"]),
        # The published figures should land at or below the page's ceilings; say which.
        "ds_below_ceiling": DEEPSEEK_NODE_TPS <= rows["ds"]["tps_high"] / WIDE_NODES,
        "sg_below_ceiling": SGLANG_NODE_TPS <= rows["sg"]["tps_high"] / WIDE_NODES,
    }


def tp_dp_crossover(inputs: dict, *, batch: int, tp_max: int) -> int:
    """The fewest sequences above `batch` (where plain TP's step floor is the lower) at which
    DP attention + EP's floor catches up with TP's (within SAME_WITHIN) on the learner's
    cluster, or `tp_max` + 1 where TP stays ahead at every batch its copied cache holds.
    DeepSeek-V3 on 8 × H200 at 5,000 tokens: 37, well before TP's 132."""
    nodes, gpn = inputs["nodes"], inputs["gpus_per_node"]
    n = nodes * gpn

    def tp_ahead(b: int) -> bool:
        at = {**inputs, "batch": b}
        tp = _layout(at, Layout(nodes, gpn, 1, n, "tp"))["tpot_low"]
        dp = _layout(at, Layout(nodes, gpn, 1, 1, "ep"))["tpot_low"]
        return tp < dp * (1 - SAME_WITHIN)

    # TP ahead at `batch`, not past `tp_max` (it cannot hold the batch): bisect between.
    low, high = batch, tp_max + 1
    while high - low > 1:
        middle = (low + high) // 2
        if tp_ahead(middle):
            low = middle
        else:
            high = middle
    return high


def figures(inputs: dict) -> dict:
    """Every figure of the prose at `inputs` (the calculator's normalised inputs)."""
    m = model_get(inputs["model"])
    if m.attention != "MLA":
        raise ArithmeticInputError(field="model", message=f"{m.name} caches keys and values "
                                   "per head, not an MLA latent")
    parts = params_count_model(m)
    w = dtype_get(inputs["dtype"])
    kv = kv_dtype_get(inputs["kv_dtype"], model=m)
    dispatch = dtype_get(inputs["dispatch_dtype"])
    emb = embedding_dtype_resolve(model=m, dtype=w)
    batch, context = inputs["batch"], inputs["context_tokens"]
    routed = m.experts_routed * parts["expert"] * parts["moe_layers"]
    total_bytes = weight_bytes_model(model=m, dtype=w, embedding=emb)["total"]
    routed_bytes = routed * w.bytes
    kv_token = m.layers * (m.kv_lora_rank + m.qk_rope_head_dim) * kv.bytes
    kv_mha = m.layers * m.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim
                                   + m.v_head_dim) * kv.bytes
    h_bytes = m.hidden * 2

    a_gpu = gpu_get(inputs["gpu"])
    nodes, gpn = inputs["nodes"], inputs["gpus_per_node"]
    n = nodes * gpn
    a_dp = _layout(inputs, Layout(nodes, gpn, 1, 1, "ep"))
    a_tp = _layout(inputs, Layout(nodes, gpn, 1, n, "tp"))
    a_tp_full = _layout(inputs, Layout(nodes, gpn, 1, n, "tp"), cap_batch=False)
    a_dp_full = _layout(inputs, Layout(nodes, gpn, 1, 1, "ep"), cap_batch=False)
    dp_stage = a_dp["stages"][0]
    tp_stage = a_tp["stages"][0]
    usable = a_dp["usable"]
    nvl, ib = allreduce_bytes(message_bytes=h_bytes, group=n, per_node=gpn)
    ar_factor = (nvl + ib) / h_bytes
    q = expert_gpu_hit_probability(experts=m.experts_routed, per_gpu=m.experts_routed // n,
                                   k=m.experts_per_token)
    remote = (n - 1) * q
    dispatch_token = remote * m.hidden * dispatch.bytes
    combine_token = remote * m.hidden * 2
    tp_token = 2 * ar_factor * h_bytes
    ib_speed = inputs["ib_gbps"] * 1e9

    b_gpu_id, b_nodes, b_gpn = CLUSTER_B
    b_gpu = gpu_get(b_gpu_id)
    bn = b_nodes * b_gpn
    b_inputs = cluster_b_inputs(inputs)
    b_w = dtype_get(b_inputs["dtype"])
    b_dp = _layout(b_inputs, Layout(b_nodes, b_gpn, 1, 1, "ep"), gpu=b_gpu_id)
    b_tp = _layout(b_inputs, Layout(b_nodes, b_gpn, 1, bn, "tp"), gpu=b_gpu_id)
    b_pp = _layout(b_inputs, Layout(b_nodes, b_gpn, b_nodes, b_gpn, "tp"), gpu=b_gpu_id)
    # Which layout has the lower step floor at this batch on the learner's cluster: at low load
    # TP splits each token's work n ways and its copied cache costs nothing.
    tp_floor, dp_floor = a_tp["tpot_low"], a_dp["tpot_low"]
    # TP is the better layout only where it holds the batch: a TP floor worked at the fewer
    # sequences its copied cache holds is not a faster way to serve the batch asked for.
    tp_faster = a_tp["fits"] and tp_floor < dp_floor * (1 - SAME_WITHIN)
    # What the DP step spends its GPU time on, at the sequences it is worked at: reading
    # weights, reading the busiest group's KV, or attention's arithmetic (compute-bound at
    # long contexts even for one sequence, since MLA's attention multiplies the cached latent
    # by every head).
    dp_kv_bytes = (math.ceil(a_dp["batch"] / a_dp["layout"].attn_groups - 1e-9) * context
                   * dp_stage["kv_token"])
    dp_bytes = dp_stage["attn_bytes"] + dp_stage["ffn_bytes"]
    dp_read_time = dp_stage["attn_memory"] + dp_stage["ffn_memory"]
    dp_kv_time = dp_read_time * dp_kv_bytes / dp_bytes
    dp_weight_time = dp_read_time - dp_kv_time
    dp_attn_arith = (dp_stage["t_attn"] if dp_stage["attn_bound"] == "compute" else 0.0)
    if dp_attn_arith > dp_stage["gpu_time"] / 2:
        dp_step_mostly = "attention"
    elif dp_weight_time >= dp_kv_time:
        dp_step_mostly = "weights"
    else:
        dp_step_mostly = "kv"
    dp_touched = dp_stage["touched"]
    # What each layout reads that the other does not, per GPU per step: TP's copied cache holds
    # every sequence of the batch on every GPU (DP attention's busiest GPU only its own group's),
    # and DP attention reads the replicated weights whole where TP reads an n-th of them.
    tp_kv_bytes = a_tp["batch"] * context * tp_stage["kv_token"]
    tp_weight_bytes = tp_stage["attn_bytes"] + tp_stage["ffn_bytes"] - tp_kv_bytes
    tp_extra_kv = max(0.0, tp_kv_bytes - dp_kv_bytes)
    dp_extra_weights = max(0.0, (dp_bytes - dp_kv_bytes) - tp_weight_bytes)
    crossover = (tp_dp_crossover(inputs, batch=batch, tp_max=a_tp["max_seq"]) if tp_faster
                 else batch)
    busiest = math.ceil(batch / n)
    b_q = expert_gpu_hit_probability(experts=m.experts_routed, per_gpu=m.experts_routed // bn,
                                     k=m.experts_per_token)
    rows = layouts_rows(inputs)
    # One node of the H100s of cluster B, DP attention + EP over its GPUs: the fit counts the
    # weights, the KV of the sequences and the reserve, as every layout does.
    h100_gpn = CLUSTER_B[2]
    h100_row = layout_row(model=inputs["model"], gpu=CLUSTER_B[0],
                          layout=Layout(1, h100_gpn, 1, 1, "ep"), **_shared(b_inputs))
    h100_usable = (gpu_get(CLUSTER_B[0]).memory_total_bytes * inputs["memory_fraction"]
                   - inputs["reserve_gb"] * GB)
    return {
        "flashmla_tflops": f"{FLASHMLA_TFLOPS:,}",
        "deepseek_kv_length": f"{DEEPSEEK_KV_LENGTH:,}",
        "mtp_acceptance_text": MTP_ACCEPTANCE, "mtp_speedup_text": f"{MTP_SPEEDUP}×",
        "expert_groups": EXPERT_GROUPS, "groups_per_token": GROUPS_PER_TOKEN,
        "h800_nvlink_text": f"{H800_NVLINK_GBPS} GB/s", "h800_ib_text": f"{H800_IB_GBPS} GB/s",
        "h800_ratio_text": number_format(H800_NVLINK_GBPS / H800_IB_GBPS, digits=2),
        "params_card_text": f"{number_format((m.params_published or 0) / 1e9)}B",
        "active_card_text": f"{number_format((m.active_params_published or 0) / 1e9)}B",
        "h100_node_gpus": h100_gpn, "h100_node_usable_text": _gb(h100_gpn * h100_usable),
        "h100_gpu_usable_text": _gb(h100_usable), "h100_node_fits": h100_row["valid"],
        "h100_node_weights_fit": h100_row.get("weights_fit", False),
        "h100_node_w_gpu_text": _gb(h100_row.get("weights", total_bytes / h100_gpn)),
        "h100_node_max_seq": f"{h100_row.get('max_seq', 0):,}",
        "h100_node_short": h100_row["valid"] and h100_row["max_seq"] < batch,
        "model_name": m.name, "layers": m.layers, "dense_layers": m.dense_layers,
        "moe_layers": parts["moe_layers"], "hidden": f"{m.hidden:,}", "heads": m.heads,
        "experts_routed": m.experts_routed, "experts_shared": m.experts_shared,
        "experts_per_token": m.experts_per_token, "expert_width": f"{m.moe_intermediate:,}",
        "kv_lora_rank": m.kv_lora_rank, "rope_dim": m.qk_rope_head_dim,
        "dtype_name": w.name, "kv_dtype_name": kv.name, "dispatch_dtype_name": dispatch.name,
        "params_total_text": f"{number_format(parts['total'] / 1e9)}B",
        "params_routed_text": f"{number_format(routed / 1e9)}B",
        "routed_share_text": percent_format(routed / parts["total"]),
        "params_rest_text": f"{number_format((parts['total'] - routed) / 1e9)}B",
        "params_active_text": f"{number_format(parts['active'] / 1e9)}B",
        "weights_total_text": _gb(total_bytes), "weights_routed_text": _gb(routed_bytes),
        "weights_rest_text": _gb(total_bytes - routed_bytes),
        "kv_expression": f"{m.layers} layers × ({m.kv_lora_rank} latent + "
                         f"{m.qk_rope_head_dim} RoPE key) × {number_format(kv.bytes)} B",
        "kv_per_token_text": f"{number_format(kv_token)} B",
        "kv_mha_text": _mb(kv_mha), "kv_ratio_text": number_format(kv_mha / kv_token, digits=2),
        "experts_touched_text": f"{experts_touched(model=m, batch=batch):.1f}",
        # "Nearly every expert is read" holds only at a large batch.
        "experts_touched_most": experts_touched(model=m, batch=batch) >= 0.9 * m.experts_routed,
        # "Little more than the active part" holds only while at most twice one token's
        # experts are read: at batch 1 exactly its own.
        "experts_touched_few": experts_touched(model=m, batch=batch)
        <= 2 * m.experts_per_token,
        "experts_touched_one": batch == 1,
        "experts_touched_share_text": share_phrase(experts_touched(model=m, batch=batch)
                                                   / m.experts_routed),
        "tp_allreduces_per_step": 2 * m.layers,
        "batch": f"{batch:,}", "batch_phrase": count_phrase(batch, "sequence"),
        "context_phrase": count_phrase(context, "token"),
        "context": f"{context:,}", "ep": n, "ep_minus_one": n - 1,
        "remote_gpus_text": number_format(remote), "alpha_text":
            f"{number_format(inputs['collective_us'])} µs",
        "ib_text": f"{number_format(inputs['ib_gbps'])} GB/s",
        # The cross-node paragraph is about cluster B: its own NVLink against the IB rate.
        "nvlink_ib_ratio_text": number_format(
            b_gpu.interconnect_one_way_bytes_per_second / ib_speed, digits=2),
        "b_nvlink_text": bandwidth_format(b_gpu.interconnect_one_way_bytes_per_second),
        "b_dtype_name": b_w.name, "b_dtype_fallback": b_w.id != w.id,
        "tp_faster": tp_faster,
        "tp_extra_kv": tp_extra_kv > 0,
        # Where TP is the layout chosen, the answer's DP step is a comparison at this load.
        "dp_lead": "Under DP attention at this load, by comparison, most" if tp_faster else "Most",
        "tp_extra_kv_text": _gb(tp_extra_kv),
        "dp_extra_weights_text": _gb(dp_extra_weights),
        # Where DP attention catches up: before TP's copied cache is full, or only there.
        # A bisection over floors that step with whole sequences per GPU: two figures suffice.
        "crossover_text": count_phrase(crossover if crossover < 100 else
                                       round(crossover, 2 - len(str(crossover))), "sequence"),
        "crossover_before_full": crossover < a_tp["max_seq"],
        "crossover_at_full": crossover == a_tp["max_seq"],
        "a_tp_tps_low_text": number_format(round(a_tp["tps_low"])),
        "a_tp_tps_high_text": number_format(round(a_tp["tps_high"])),
        # TP holds the batch yet DP attention's floor is as low or lower.
        "tp_fits_not_faster": a_tp["fits"] and not tp_faster,
        "dp_floor_against_tp": ("lower than" if dp_floor < tp_floor * (1 - SAME_WITHIN)
                                else "about the same as"),
        "dp_step_mostly": dp_step_mostly,
        "a_dp_attn_share_text": share_phrase(dp_stage["t_attn"] / dp_stage["gpu_time"]),
        "a_dp_kv_share_text": share_phrase(dp_kv_time / dp_stage["gpu_time"]),
        "dp_experts_touched_most": dp_touched >= 0.9 * m.experts_routed,
        "dp_experts_touched_share_text": share_phrase(dp_touched / m.experts_routed),
        "dp_experts_touched_few": dp_touched <= 2 * m.experts_per_token,
        "batch_holds": "that holds" if batch == 1 else "that each hold",
        "tp_dp_floor_ratio": ratio_phrase(dp_floor, tp_floor, more="longer",
                                          less="shorter"),
        "a_tp_step_low_text": seconds_format(a_tp["tpot_low"]),
        "a_tp_step_high_text": seconds_format(a_tp["tpot_high"]),
        "a_idle_groups": count_phrase(max(n - batch, 0), "GPU"),
        "a_few_sequences": batch < n,
        "a_gpus": n, "a_nodes": nodes, "a_gpu_name": a_gpu.name,
        # The learner's cluster may span nodes: then it is not "the node", and its collectives
        # cross InfiniBand as well as NVLink.
        "a_span": "the node" if nodes == 1 else f"the {nodes} nodes",
        "a_span_holds": "the node holds" if nodes == 1 else f"the {nodes} nodes hold",
        "a_multinode": nodes > 1,
        "a_tp_comm_link_text": _link_phrase(a_tp_full["comm_ib"], a_gpu.interconnect),
        "a_dp_full_comm_link_text": _link_phrase(a_dp_full["comm_ib"], a_gpu.interconnect,
                                                 inside="all inside the node"),
        "a_dp_comm_link_text": _link_phrase(a_dp["comm_ib"], a_gpu.interconnect),
        # Each cluster's own link inside a node, from the catalog: NVLink, Infinity Fabric, PCIe.
        "a_link_name": a_gpu.interconnect,
        "node_links_text": (f"{a_gpu.interconnect} inside a node"
                            if a_gpu.interconnect == b_gpu.interconnect else
                            f"{a_gpu.interconnect} inside a node of the first and "
                            f"{b_gpu.interconnect} inside a node of the second"),
        "a_memory_text": _gb(a_gpu.memory_total_bytes),
        "memory_fraction_text": percent_format(inputs["memory_fraction"]),
        "reserve_text": f"{number_format(inputs['reserve_gb'])} GB",
        "a_usable_text": _gb(usable), "a_min_gpus": math.ceil(total_bytes / usable),
        "a_dp_w_gpu_text": _gb(a_dp["weights"]), "a_dp_free_text": _gb(a_dp["free"]),
        "a_dp_kv_tokens_gpu_text": f"{math.floor(a_dp['free'] / kv_token):,}",
        "a_dp_kv_tokens_text": f"{math.floor(n * a_dp['free'] / kv_token):,}",
        "a_dp_max_seq": f"{a_dp['max_seq']:,}",
        "a_tp_w_gpu_text": _gb(a_tp["weights"]),
        "a_tp_kv_tokens_text": f"{math.floor(a_tp['free'] / kv_token):,}",
        "a_tp_max_seq": f"{a_tp['max_seq']:,}", "a_tp_fits": a_tp["fits"],
        "hidden_bytes_text": f"{h_bytes:,} B", "a_tp_ar_factor_text": number_format(ar_factor),
        "a_tp_bytes_token_layer_text": f"{number_format(round(tp_token))} B",
        "a_remote_gpus_text": number_format(remote),
        "a_dispatch_bytes_token_layer_text": f"{number_format(round(dispatch_token))} B",
        "a_combine_bytes_token_layer_text": f"{number_format(round(combine_token))} B",
        "a_ep_bytes_token_layer_text": f"{number_format(round(dispatch_token + combine_token))} B",
        "a_ep_sends_more_per_token": dispatch_token + combine_token > tp_token,
        "a_tokens_per_gpu": count_phrase(busiest, "token"),
        "a_tp_comm_bytes_text": _mb(a_tp_full["comm_nvl"] + a_tp_full["comm_ib"]),
        "a_tp_comm_time_text": seconds_format(a_tp_full["comm_time"]),
        "a_dp_comm_bytes_text": _mb(a_dp["comm_nvl"] + a_dp["comm_ib"]),
        "a_dp_comm_time_text": seconds_format(a_dp["comm_time"]),
        "a_dp_full_comm_bytes_text": _mb(a_dp_full["comm_nvl"] + a_dp_full["comm_ib"]),
        "a_dp_full_comm_time_text": seconds_format(a_dp_full["comm_time"]),
        "a_dp_fits": a_dp["fits"],
        "a_dp_attn_bytes_text": _gb(dp_stage["attn_bytes"]),
        "a_dp_attn_time_text": seconds_format(dp_stage["t_attn"]),
        "a_dp_attn_bound": dp_stage["attn_bound"],
        "a_dp_ffn_bytes_text": _gb(dp_stage["ffn_bytes"]),
        "a_dp_ffn_time_text": seconds_format(dp_stage["t_ffn"]),
        "a_dp_ffn_bound": dp_stage["ffn_bound"],
        "a_dp_gpu_time_text": seconds_format(dp_stage["gpu_time"]),
        "a_dp_step_low_text": seconds_format(a_dp["tpot_low"]),
        "a_dp_step_high_text": seconds_format(a_dp["tpot_high"]),
        "a_dp_tps_low_text": number_format(round(a_dp["tps_low"])),
        "a_dp_tps_high_text": number_format(round(a_dp["tps_high"])),
        "a_tp_batch_fits_text": f"{a_tp['max_seq']:,}",
        "a_tp_attn_bound": tp_stage["attn_bound"],
        "b_gpus": bn, "b_nodes": b_nodes, "b_gpu_name": b_gpu.name,
        "b_dp_w_gpu_text": _gb(b_dp["weights"]), "b_dp_free_text": _gb(b_dp["free"]),
        "b_dp_max_seq": f"{b_dp['max_seq']:,}",
        "b_remote_gpus_text": number_format((bn - 1) * b_q),
        "b_ib_share_text": percent_format((bn - b_gpn) / (bn - 1)),
        "b_dp_comm_bytes_text": _mb(b_dp["comm_nvl"] + b_dp["comm_ib"]),
        "b_dp_comm_ib_bytes_text": _mb(b_dp["comm_ib"]),
        "b_dp_comm_time_text": seconds_format(b_dp["comm_time"]),
        "b_tp_max_seq": f"{b_tp['max_seq']:,}",
        "b_tp_comm_time_text": seconds_format(b_tp["comm_time"]),
        "b_tp_pp_t": b_gpn, "b_pp": b_nodes, "b_pp_max_seq": f"{b_pp['max_seq']:,}",
        "b_pp_microbatches": b_pp["microbatches"],
        "b_pp_bubble_flush_text": percent_format(b_pp["bubble"]["flush"]),
        "b_pp_tpot_text": f"{seconds_format(b_pp['tpot_low'])} to "
                          f"{seconds_format(b_pp['tpot_high'])}",
        "layouts": [_row_text(r) for r in rows],
        **wide_ep_calibration(inputs),
    }


def _row_text(row: dict) -> dict:
    if not row["valid"]:
        return {"name": row["name"], "valid": False, "reason": row["reason"]}
    return {
        "name": row["name"], "valid": True, "w_gpu_text": _gb(row["weights"]),
        "max_seq": f"{row['max_seq']:,}", "fits": row["fits"],
        "comm_bytes_text": _mb(row["comm_nvl"] + row["comm_ib"]),
        "comm_ib_bytes_text": _mb(row["comm_ib"]) if row["comm_ib"] else "none",
        "comm_time_text": seconds_format(row["comm_time"]),
        "step_low_text": seconds_format(row["tpot_low"]),
        "step_high_text": seconds_format(row["tpot_high"]), "bound": row["bound"],
        "tps_text": f"{number_format(round(row['tps_low']))} to "
                    f"{number_format(round(row['tps_high']))}",
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 23's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    follows = False
    # Inputs the calculator refuses are announced above the working by the shared template;
    # this notice is only for inputs it accepts but the prose cannot follow (a model that is
    # not MLA, a layout the comparison cannot hold), so the page says one thing, once.
    prose_refusal = ""
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        try:
            found = figures(inputs)
            follows = True
        except ArithmeticInputError as error:
            found = None
            prose_refusal = error.message
    if not follows:
        found = figures(CALCULATOR.defaults())
    return {
        **found, "calculator_slug": SLUG, "calculator_prefix": PREFIX,
        "demo_slug": DEMO_SLUG, "demo_prefix": DEMO_PREFIX, "inputs_followed": follows,
        "prose_refusal": prose_refusal,
    }
