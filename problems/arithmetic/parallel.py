"""Placing one large (mixture-of-experts) model on many GPUs: tensor, pipeline and expert
parallelism and data-parallel attention, and what each layout costs per GPU in memory (weights,
KV cache), in bytes on the wire (all-reduces, dispatch and combine, pipeline sends over NVLink
and InfiniBand) and in time per decode step (roofline bounds for attention and for the FFN, plus
communication, with and without overlap).

A layout is `nodes` × `gpus_per_node` GPUs cut into `pp` pipeline stages of consecutive layers;
inside a stage attention is split `attn_tp` ways by tensor parallelism and the rest of the
stage's GPUs run attention data-parallel (each group its own requests and its own KV cache);
the routed experts are split over all of the stage's GPUs, by expert parallelism (`moe="ep"`:
dispatch and combine) or by tensor parallelism (`moe="tp"`: an all-reduce, and then attention
must be split over the same GPUs).

Simplifications, each stated where it is used: uniform routing (skew is the routing simulator's
job), a ring all-reduce that is hierarchical across nodes, NVLink and InfiniBand used in
parallel for an all-to-all with no congestion, and a fixed cost per collective (an input).
"""

import math
from dataclasses import dataclass

from problems.arithmetic.catalog import (
    DTYPES,
    Dtype,
    Gpu,
    Model,
    dtype_get,
    gpu_get,
    kv_dtype_get,
    model_get,
)
from problems.arithmetic.compute import peak_flops_get
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
    RESERVE_GB_MAX,
    context_check,
    embedding_dtype_resolve,
    experts_touched,
    kv_heads_per_gpu,
    params_count_model,
    tp_check,
)
from problems.arithmetic.moe import expert_gpu_hit_probability
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase

NODES_MAX = 64
GPUS_PER_NODE_MAX = 8
MICROBATCHES_MAX = 64
COLLECTIVE_US_MAX = 1_000.0
IB_GBPS_MAX = 400.0
MOE_SPLITS = ("ep", "tp")
COPIES = ("per_gpu", "per_expert")


@dataclass(frozen=True)
class Layout:
    """How the GPUs are cut: `pp` stages, attention TP `attn_tp` inside a stage, experts by EP or
    TP over the stage's GPUs."""

    nodes: int
    gpus_per_node: int
    pp: int = 1
    attn_tp: int = 1
    moe: str = "ep"

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def per_stage(self) -> int:
        """GPUs in one pipeline stage (g)."""
        return self.gpus // self.pp

    @property
    def attn_groups(self) -> int:
        """Data-parallel attention groups in a stage (d = g / attn_tp)."""
        return self.per_stage // self.attn_tp

    @property
    def name(self) -> str:
        """"DP8 attention + EP8", "TP8 (experts by TP)", "TP8 × PP2 (experts by TP)", ..."""
        g, t, d = self.per_stage, self.attn_tp, self.attn_groups
        if self.moe == "tp":
            inner = f"TP{g} (experts by TP)" if self.pp == 1 else f"TP{g}"
        elif t == 1:
            inner = f"DP{d} attention + EP{g}"
        elif d == 1:
            inner = f"TP{t} attention + EP{g}"
        else:
            inner = f"TP{t} × DP{d} attention + EP{g}"
        if self.pp == 1:
            return inner
        suffix = " (experts by TP)" if self.moe == "tp" else ""
        return f"{inner} × PP{self.pp}{suffix}"


def layout_check(*, model: Model, layout: Layout) -> None:
    """Refuse a layout the model or the cluster cannot take, naming the input to change."""
    n, gpn = layout.gpus, layout.gpus_per_node
    if not model.is_moe:
        raise ArithmeticInputError(field="model", message=f"{model.name} has no experts")
    if layout.moe not in MOE_SPLITS:
        raise ArithmeticInputError(field="moe", message="choose ep or tp")
    if layout.pp > model.layers:
        raise ArithmeticInputError(
            field="pp", message=f"{layout.pp} stages is more than {model.name}'s "
            f"{model.layers} layers")
    if n % layout.pp:
        raise ArithmeticInputError(
            field="pp", message=f"{layout.pp} stages do not divide the {n} GPUs evenly")
    g = layout.per_stage
    if (g > gpn and g % gpn) or (g < gpn and gpn % g):
        raise ArithmeticInputError(
            field="pp", message=f"a stage of {g} GPUs would straddle nodes of {gpn}: choose "
            "stages that are whole nodes or split a node evenly")
    t = layout.attn_tp
    if g % t:
        raise ArithmeticInputError(
            field="attn_tp", message=f"{t} must divide the {g} GPUs of a stage")
    if (t > gpn and t % gpn) or (t < gpn and gpn % t):
        raise ArithmeticInputError(
            field="attn_tp", message=f"a tensor-parallel group of {t} would straddle nodes of "
            f"{gpn}")
    # A group the cluster can hold, but the model's query heads must divide it too.
    tp_check(model=model, tp=t, field="attn_tp")
    if layout.moe == "tp" and t != g:
        raise ArithmeticInputError(
            field="moe", message=f"experts split by tensor parallelism need attention split "
            f"over the same {g} GPUs (attention TP {g})")
    if layout.moe == "ep" and model.experts_routed % g:
        raise ArithmeticInputError(
            field="moe", message=f"{model.experts_routed} experts do not split evenly over "
            f"{g} GPUs")


def stage_layers(*, layers: int, dense_layers: int, pp: int) -> list[tuple[int, int]]:
    """(layers, dense layers) of each of `pp` stages: consecutive layers, the first
    `layers mod pp` stages one longer; the dense layers are the model's first ones.
    DeepSeek-V3 (61 layers, 3 dense) on 2 stages: [(31, 3), (30, 0)]."""
    base, extra = divmod(layers, pp)
    found, start = [], 0
    for s in range(pp):
        count = base + (1 if s < extra else 0)
        dense = max(0, min(dense_layers, start + count) - start)
        found.append((count, dense))
        start += count
    return found


def allreduce_bytes(*, message_bytes: float, group: int, per_node: int) -> tuple[float, float]:
    """Bytes each GPU sends in a ring all-reduce of `message_bytes` over `group` GPUs, as
    (over NVLink, over InfiniBand) (bytes).

    Inside a node a ring sends 2(t − 1)/t of the message per GPU. Across nodes it is done in
    three phases: reduce-scatter inside the node (NVLink), an all-reduce of each GPU's 1/t shard
    between the nodes' matching GPUs (InfiniBand), all-gather inside the node (NVLink).
    TP8 in one node, 3,670,016 B: (6,422,528, 0); TP16 over two nodes, 1,003,520 B:
    (1,756,160, 125,440).
    """
    local = min(group, per_node)
    across = group // local
    nvlink = 2 * (local - 1) / local * message_bytes
    infiniband = 2 * (across - 1) / across * message_bytes / local
    return nvlink, infiniband


def pipeline_bubble(*, stages: int, microbatches: int) -> dict[str, float]:
    """Idle share of each stage (0 to 1): `flush`, a batch pushed through once in m micro-batches
    (GPipe's (p − 1)/(m + p − 1)), and `steady`, decoding with m micro-batches in flight
    (a stage waits when there are fewer micro-batches than stages: 1 − m/p, else 0)."""
    stages = count_check(stages, field="pp")
    microbatches = count_check(microbatches, field="microbatches")
    return {
        "flush": (stages - 1) / (microbatches + stages - 1),
        "steady": max(0.0, 1 - microbatches / stages),
    }


def mla_decode_attention_flops(*, model: Model, context: float) -> float:
    """FLOPs of one sequence's decode-step attention over `context` cached tokens, all layers
    (FLOP), in MLA's absorbed form: every query head scores against the shared latent plus the
    RoPE key (kv_lora_rank + rope dims) and sums the latents (kv_lora_rank), 2 FLOPs each.
    DeepSeek-V3 at 5,000 tokens: 61 × 128 × 2 × (512 + 64 + 512) × 5,000 = 84,951,040,000."""
    per_pair = model.heads * 2 * (2 * model.kv_lora_rank + model.qk_rope_head_dim)
    return model.layers * per_pair * context


def _core_attention_flops_per_layer(model: Model, context: float) -> float:
    """One sequence's core attention in one layer at decode (FLOP): MLA absorbed, else the
    ordinary 2 × (d_qk + d_v) per head per cached token."""
    if model.attention == "MLA":
        return mla_decode_attention_flops(model=model, context=context) / model.layers
    return model.heads * 2 * 2 * model.head_dim * context


def _kv_per_token_gpu(model: Model, layers: int, attn_tp: int, kv: Dtype) -> float:
    """KV bytes per token per GPU for `layers` layers when attention is split `attn_tp` ways:
    MLA's latent is whole on every GPU of the group; GQA heads split (or replicate)."""
    if model.attention == "MLA":
        return layers * (model.kv_lora_rank + model.qk_rope_head_dim) * kv.bytes
    heads, _ = kv_heads_per_gpu(model=model, tp=attn_tp)
    return layers * 2 * heads * model.head_dim * kv.bytes


@dataclass(frozen=True)
class Links:
    """The links and their costs: one-way bandwidths (bytes/s) already scaled by efficiency,
    and the fixed cost of one collective (seconds). `nvlink` is the GPU's whole link figure,
    which any peer gets through a switch; on a mesh (`mesh_links` > 0, the MI300X's Infinity
    Fabric) a GPU reaches each peer over one link of `peer` (`within`)."""

    nvlink: float
    infiniband: float
    alpha: float
    peer: float = 0.0
    mesh_links: int = 0

    def within(self, gpus: int) -> float:
        """Each GPU's one-way bandwidth inside a node when it exchanges with the other
        `gpus` − 1 GPUs of its group at once (a collective; a point-to-point copy is
        `gpus` = 2): on a mesh one link to each, at best spread evenly over them; through a
        switch the whole figure."""
        if not self.mesh_links:
            return self.nvlink
        return min(max(gpus - 1, 1), self.mesh_links) * self.peer


def _stage(*, model: Model, gpu: Gpu, layout: Layout, stage: int, layers: int, dense: int,
           batch: float, context: int, w: Dtype, emb: Dtype, kv: Dtype, act: Dtype,
           dispatch: Dtype, links: Links, bandwidth: float, mfu: float, copies: str,
           usable: float) -> dict[str, float | str]:
    """One pipeline stage, per GPU, for one stage-step of `batch` sequences (bytes, seconds)."""
    parts = params_count_model(model)
    h = model.hidden
    g, t, d = layout.per_stage, layout.attn_tp, layout.attn_groups
    first, last = stage == 0, stage == layout.pp - 1
    moe_layers = layers - dense
    shared = model.experts_shared * parts["expert"] + h * model.experts_routed
    attn = parts["attention_per_layer"]
    nonrouted = (attn * layers + parts["dense_ffn_per_layer"] * dense + shared * moe_layers
                 + 2 * h * layers + (h if last else 0)) * w.bytes
    if first:
        nonrouted += parts["embedding"] * emb.bytes
    head_stored = parts["lm_head"] or (parts["head"] if layout.pp > 1 else 0)
    if last:
        nonrouted += head_stored * emb.bytes
    routed = model.experts_routed * parts["expert"] * moe_layers * w.bytes
    weights = nonrouted / t + routed / g
    kv_token = _kv_per_token_gpu(model, layers, t, kv)
    free = usable - weights
    seqs_per_group = math.floor(free / (kv_token * context)) if free > 0 else 0

    per_gpu_tokens = batch / g
    # The step waits for the busiest attention group, and a group holds whole sequences: with
    # fewer sequences than groups (batch 1 over DP8) one group does all of a sequence's
    # attention while the others run empty dispatches, not an eighth of it each.
    per_group_seqs = math.ceil(batch / d - 1e-9) if batch > 0 else 0
    attn_tokens = per_group_seqs / t  # tokens the busiest group's GPUs each project and send
    peak_w = peak_flops_get(gpu=gpu, dtype=w)
    peak_bf16 = gpu.bf16_flops
    attn_bytes = attn * layers * w.bytes / t + per_group_seqs * context * kv_token
    attn_proj = 2 * attn_tokens * attn * layers
    attn_core = attn_tokens * layers * _core_attention_flops_per_layer(model, context)
    attn_compute = attn_proj / (peak_w * mfu) + attn_core / (peak_bf16 * mfu)
    attn_memory = attn_bytes / bandwidth
    touched = experts_touched(model=model, batch=batch) if batch > 0 else 0.0
    ffn_bytes = ((parts["dense_ffn_per_layer"] * dense + shared * moe_layers) * w.bytes / t
                 + (parts["head"] * emb.bytes / t if last else 0.0)
                 + touched * parts["expert"] * moe_layers * w.bytes / g)
    ffn_flops = (2 * per_gpu_tokens * (parts["dense_ffn_per_layer"] * dense + shared * moe_layers)
                 + 2 * per_gpu_tokens * model.experts_per_token * parts["expert"] * moe_layers)
    head_flops = 2 * per_gpu_tokens * model.vocab * h if last else 0.0
    ffn_compute = ffn_flops / (peak_w * mfu) + head_flops / (peak_bf16 * mfu)
    ffn_memory = ffn_bytes / bandwidth
    t_attn = max(attn_compute, attn_memory)
    t_ffn = max(ffn_compute, ffn_memory)

    # Tensor-parallel all-reduces of the group's activations (BF16).
    reductions = (layers + dense + (moe_layers if layout.moe == "tp" else 0)) if t > 1 else 0
    message = per_group_seqs * h * act.bytes
    ar_nvl, ar_ib = allreduce_bytes(message_bytes=message, group=t,
                                    per_node=layout.gpus_per_node) if t > 1 else (0.0, 0.0)
    ar_time = reductions * (links.alpha + ar_nvl / links.within(min(t, layout.gpus_per_node))
                            + ar_ib / links.infiniband)
    # Expert-parallel dispatch (out) and combine (back) per MoE layer.
    remote = 0.0
    a2a = {"d_nvl": 0.0, "d_ib": 0.0, "c_nvl": 0.0, "c_ib": 0.0}
    a2a_time = 0.0
    if layout.moe == "ep" and g > 1 and moe_layers:
        if copies == "per_expert":
            remote = model.experts_per_token * (g - 1) / g
        else:
            hit = expert_gpu_hit_probability(experts=model.experts_routed,
                                             per_gpu=model.experts_routed // g,
                                             k=model.experts_per_token)
            remote = (g - 1) * hit
        local_share = (min(g, layout.gpus_per_node) - 1) / (g - 1)
        out = attn_tokens * remote * h * dispatch.bytes
        back = attn_tokens * remote * h * act.bytes
        a2a = {"d_nvl": out * local_share, "d_ib": out * (1 - local_share),
               "c_nvl": back * local_share, "c_ib": back * (1 - local_share)}
        # Inside the node each GPU sends to the node's other GPUs at once.
        node_link = links.within(min(g, layout.gpus_per_node))
        per_layer = (2 * links.alpha
                     + max(a2a["d_nvl"] / node_link, a2a["d_ib"] / links.infiniband)
                     + max(a2a["c_nvl"] / node_link, a2a["c_ib"] / links.infiniband))
        a2a_time = per_layer * moe_layers
        a2a = {k: v * moe_layers for k, v in a2a.items()}
    # Pipeline: one activation per token to the next stage.
    pp_bytes = per_gpu_tokens * h * act.bytes if layout.pp > 1 else 0.0
    pp_over_ib = layout.nodes > 1
    # A stage hands its activations to the next stage's GPU: a copy between two GPUs.
    pp_time = (links.alpha + pp_bytes / (links.infiniband if pp_over_ib else links.within(2))
               if layout.pp > 1 else 0.0)
    nvl_bytes = reductions * ar_nvl + a2a["d_nvl"] + a2a["c_nvl"] + (
        0.0 if pp_over_ib else pp_bytes)
    ib_bytes = reductions * ar_ib + a2a["d_ib"] + a2a["c_ib"] + (pp_bytes if pp_over_ib else 0.0)
    comm = ar_time + a2a_time + pp_time
    gpu_time = t_attn + t_ffn
    return {
        "layers": layers, "dense_layers": dense, "moe_layers": moe_layers,
        "nonrouted_bytes": nonrouted, "routed_bytes": routed, "weights": weights,
        "kv_token": kv_token, "free": free, "seqs_per_group": seqs_per_group,
        "attn_tokens": attn_tokens, "attn_bytes": attn_bytes, "attn_proj_flops": attn_proj,
        "attn_core_flops": attn_core,
        "attn_compute": attn_compute, "attn_memory": attn_memory, "t_attn": t_attn,
        "attn_bound": "compute" if attn_compute >= attn_memory else "memory",
        "touched": touched, "ffn_bytes": ffn_bytes, "ffn_flops": ffn_flops,
        "head_flops": head_flops, "ffn_compute": ffn_compute, "ffn_memory": ffn_memory,
        "t_ffn": t_ffn, "ffn_bound": "compute" if ffn_compute >= ffn_memory else "memory",
        "reductions": reductions, "message": message, "ar_nvl": ar_nvl, "ar_ib": ar_ib,
        "ar_time": ar_time, "remote": remote, "a2a_time": a2a_time,
        "dispatch_bytes": a2a["d_nvl"] + a2a["d_ib"], "combine_bytes": a2a["c_nvl"] + a2a["c_ib"],
        "a2a_ib_bytes": a2a["d_ib"] + a2a["c_ib"], "pp_bytes": pp_bytes, "pp_time": pp_time,
        "nvl_bytes": nvl_bytes, "ib_bytes": ib_bytes, "comm": comm, "gpu_time": gpu_time,
        "low": max(gpu_time, comm), "high": gpu_time + comm,
    }


def moe_layout_model(*, model: Model, gpu: Gpu, layout: Layout, w: Dtype, kv: Dtype,
                     dispatch: Dtype, batch: int, context: int, memory_fraction: float,
                     reserve_bytes: float, bandwidth_efficiency: float, mfu: float,
                     link_efficiency: float, alpha_seconds: float, ib_bytes_per_second: float,
                     copies: str = "per_gpu", microbatches: int | None = None,
                     cap_batch: bool = True) -> dict:
    """Every figure of one layout, checked inputs assumed (bytes, seconds, sequences).

    The batch evaluated is the requested `batch` or, when `cap_batch` and the KV cache cannot
    hold it, the most it holds (`fits` says which). Per stage: weights, KV room, attention and
    FFN rooflines, communication; then the step's bounds (overlapped: max of GPU work and
    communication; serial: their sum), the time per output token (a sequence advances once
    every max(pp, m) stage-steps) and tokens/s.
    """
    layout_check(model=model, layout=layout)
    emb = embedding_dtype_resolve(model=model, dtype=w)
    act = DTYPES[model.dtype] if DTYPES[model.dtype].bits >= 16 else DTYPES["bf16"]
    usable = gpu.memory_total_bytes * memory_fraction - reserve_bytes
    m = (microbatches or layout.pp) if layout.pp > 1 else 1
    links = Links(nvlink=gpu.interconnect_one_way_bytes_per_second * link_efficiency,
                  infiniband=ib_bytes_per_second * link_efficiency, alpha=alpha_seconds,
                  peer=gpu.peer_one_way_bytes_per_second * link_efficiency,
                  mesh_links=gpu.mesh_links)
    bandwidth = gpu.bandwidth_bytes_per_second * bandwidth_efficiency
    splits = stage_layers(layers=model.layers, dense_layers=model.dense_layers, pp=layout.pp)

    def stages_at(sequences: float) -> list[dict]:
        return [_stage(model=model, gpu=gpu, layout=layout, stage=s, layers=layers, dense=dense,
                       batch=sequences / m, context=context, w=w, emb=emb, kv=kv, act=act,
                       dispatch=dispatch, links=links, bandwidth=bandwidth, mfu=mfu,
                       copies=copies, usable=usable)
                for s, (layers, dense) in enumerate(splits)]

    probe = stages_at(float(batch))
    max_seq = layout.attn_groups * min(s["seqs_per_group"] for s in probe)
    fits = batch <= max_seq
    evaluated = batch if (fits or not cap_batch) else max_seq
    stages = stages_at(float(evaluated)) if evaluated != batch else probe
    heaviest = max(range(layout.pp), key=lambda i: stages[i]["high"])
    fullest = max(range(layout.pp), key=lambda i: stages[i]["weights"])
    rounds = max(layout.pp, m)
    low = rounds * max(s["low"] for s in stages)
    high = rounds * max(s["high"] for s in stages)
    top = stages[heaviest]
    kv_held = (evaluated / layout.attn_groups) * context * stages[fullest]["kv_token"]
    return {
        "layout": layout, "name": layout.name, "gpus": layout.gpus, "usable": usable,
        "microbatches": m, "rounds": rounds, "stages": stages, "heaviest": heaviest,
        "fullest": fullest, "weights": stages[fullest]["weights"],
        "free": min(s["free"] for s in stages), "kv_held": kv_held, "max_seq": max_seq,
        "fits": fits, "weights_fit": all(s["free"] > 0 for s in stages),
        "batch": evaluated, "comm_nvl": m * top["nvl_bytes"], "comm_ib": m * top["ib_bytes"],
        "comm_time": m * top["comm"], "gpu_time": m * top["gpu_time"],
        "tpot_low": low, "tpot_high": high,
        "tps_low": evaluated / high if high else 0.0, "tps_high": evaluated / low if low else 0.0,
        "bubble": pipeline_bubble(stages=layout.pp, microbatches=m),
        "bound": _bound_name(top),
    }


def _bound_name(stage: dict) -> str:
    text = f"attention {stage['attn_bound']}, FFN {stage['ffn_bound']}"
    if stage["comm"] > stage["gpu_time"]:
        text += "; communication longer than GPU work"
    return text


def _checked(*, model: str, gpu: str, nodes: int, gpus_per_node: int, pp: int, attn_tp: int,
             moe: str, dtype: str, kv_dtype: str | None, batch: int, context_tokens: int,
             memory_fraction: float, reserve_gb: float, bandwidth_efficiency: float, mfu: float,
             link_efficiency: float, collective_us: float, ib_gbps: float,
             dispatch_dtype: str | None, copies: str, microbatches: int | None) -> dict:
    m = model_get(model)
    if not m.is_moe:
        raise ArithmeticInputError(field="model", message=f"{m.name} has no experts")
    g = gpu_get(gpu)
    w = dtype_get(dtype)
    peak_flops_get(gpu=g, dtype=w)  # refuses a format the GPU has no tensor cores for
    kv = kv_dtype_get(kv_dtype, model=m)
    dispatch = dtype_get(dispatch_dtype, field="dispatch_dtype") if dispatch_dtype else w
    if copies not in COPIES:
        raise ArithmeticInputError(field="copies", message="choose per_gpu or per_expert")
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context, field="context_tokens")
    layout = Layout(nodes=count_check(nodes, field="nodes", maximum=NODES_MAX),
                    gpus_per_node=count_check(gpus_per_node, field="gpus_per_node",
                                              maximum=GPUS_PER_NODE_MAX),
                    pp=count_check(pp, field="pp", maximum=m.layers),
                    attn_tp=count_check(attn_tp, field="attn_tp", maximum=NODES_MAX * 8),
                    moe=moe)
    layout_check(model=m, layout=layout)
    if microbatches is not None:
        microbatches = count_check(microbatches, field="microbatches", maximum=MICROBATCHES_MAX)
    return {
        "model": m, "gpu": g, "layout": layout, "w": w, "kv": kv, "dispatch": dispatch,
        "batch": batch, "context": context,
        "memory_fraction": fraction_check(memory_fraction, field="memory_fraction"),
        "reserve_bytes": number_check(reserve_gb, field="reserve_gb", minimum=0.0,
                                      maximum=RESERVE_GB_MAX, allow_minimum=True) * GB,
        "bandwidth_efficiency": fraction_check(bandwidth_efficiency,
                                               field="bandwidth_efficiency"),
        "mfu": fraction_check(mfu, field="mfu"),
        "link_efficiency": fraction_check(link_efficiency, field="link_efficiency"),
        "alpha_seconds": number_check(collective_us, field="collective_us", minimum=0.0,
                                      maximum=COLLECTIVE_US_MAX, allow_minimum=True) * 1e-6,
        "ib_bytes_per_second": number_check(ib_gbps, field="ib_gbps",
                                            maximum=IB_GBPS_MAX) * 1e9,
        "copies": copies, "microbatches": microbatches,
    }


def moe_layout(
    *,
    model: str,
    gpu: str,
    nodes: int = 1,
    gpus_per_node: int = 8,
    pp: int = 1,
    attn_tp: int = 1,
    moe: str = "ep",
    dtype: str = "fp8",
    kv_dtype: str | None = None,
    batch: int = 256,
    context_tokens: int = 5_000,
    memory_fraction: float = 0.9,
    reserve_gb: float = 5.0,
    bandwidth_efficiency: float = 0.8,
    mfu: float = 0.5,
    link_efficiency: float = 0.8,
    collective_us: float = 10.0,
    ib_gbps: float = 50.0,
    dispatch_dtype: str | None = "fp8",
    copies: str = "per_gpu",
    microbatches: int | None = None,
) -> Result:
    """One MoE layout on `nodes` × `gpus_per_node` `gpu`s decoding `batch` sequences of
    `context_tokens` (bytes, seconds, sequences, tokens/s).

    Per GPU: weights (the non-routed part split by attention TP, the routed experts by the
    stage's GPUs), KV room and the sequences it holds, the roofline of attention and of the
    FFN with their bounds named, bytes sent over NVLink and InfiniBand and their time
    (`collective_us` fixed cost each, links at `link_efficiency`), and the step's floor at those
    efficiencies: the larger of GPU work and communication with perfect overlap, their sum with
    none (imbalance, launch gaps and stragglers only add to either). A batch the KV
    cache cannot hold is cut to what it holds, and the steps say so.
    """
    k = _checked(model=model, gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node, pp=pp,
                 attn_tp=attn_tp, moe=moe, dtype=dtype, kv_dtype=kv_dtype, batch=batch,
                 context_tokens=context_tokens, memory_fraction=memory_fraction,
                 reserve_gb=reserve_gb, bandwidth_efficiency=bandwidth_efficiency, mfu=mfu,
                 link_efficiency=link_efficiency, collective_us=collective_us, ib_gbps=ib_gbps,
                 dispatch_dtype=dispatch_dtype, copies=copies, microbatches=microbatches)
    m, g, lay = k["model"], k["gpu"], k["layout"]
    r = moe_layout_model(model=m, gpu=g, layout=lay, w=k["w"], kv=k["kv"],
                         dispatch=k["dispatch"], batch=k["batch"], context=k["context"],
                         memory_fraction=k["memory_fraction"], reserve_bytes=k["reserve_bytes"],
                         bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu"],
                         link_efficiency=k["link_efficiency"], alpha_seconds=k["alpha_seconds"],
                         ib_bytes_per_second=k["ib_bytes_per_second"], copies=k["copies"],
                         microbatches=k["microbatches"])
    if not r["weights_fit"]:
        raise ArithmeticInputError(
            field="nodes", message=f"{r['name']} puts {bytes_short(r['weights'])} of weights on "
            f"a GPU with {bytes_short(r['usable'])} usable: add GPUs or narrow the format")
    if r["max_seq"] == 0:
        raise ArithmeticInputError(
            field="context_tokens", message=f"no room for one sequence of {k['context']:,} "
            f"tokens beside the weights ({bytes_short(r['free'])} free per GPU)")
    return Result(values=_layout_values(r, k), steps=_layout_steps(r, k))


def _layout_values(r: dict, k: dict) -> dict:
    m, lay = k["model"], r["layout"]
    parts = params_count_model(m)
    top = r["stages"][r["heaviest"]]
    return {
        "name": r["name"], "gpus": r["gpus"], "stage_gpus": lay.per_stage,
        "attn_groups": lay.attn_groups, "params_total": parts["total"],
        "params_active": parts["active"],
        "weights_per_gpu_bytes": r["weights"], "usable_bytes": r["usable"],
        "free_bytes": r["free"], "kv_bytes_per_token_per_gpu": r["stages"][r["fullest"]][
            "kv_token"], "max_sequences": r["max_seq"], "fits": r["fits"],
        "batch_evaluated": r["batch"], "experts_touched": top["touched"],
        "attention_seconds": top["t_attn"], "attention_bound": top["attn_bound"],
        "ffn_seconds": top["t_ffn"], "ffn_bound": top["ffn_bound"],
        "remote_gpus": top["remote"], "allreduces": top["reductions"],
        "comm_nvlink_bytes": r["comm_nvl"], "comm_infiniband_bytes": r["comm_ib"],
        "comm_seconds": r["comm_time"], "gpu_seconds": r["gpu_time"],
        "tpot_low_seconds": r["tpot_low"], "tpot_high_seconds": r["tpot_high"],
        "tokens_per_second_low": r["tps_low"], "tokens_per_second_high": r["tps_high"],
        "microbatches": r["microbatches"], "bubble_flush": r["bubble"]["flush"],
        "bubble_steady": r["bubble"]["steady"], "bound": r["bound"],
    }


def _layout_steps(r: dict, k: dict) -> tuple[Step, ...]:
    m, g, lay = k["model"], k["gpu"], r["layout"]
    w, kv, context = k["w"], k["kv"], k["context"]
    parts = params_count_model(m)
    top = r["stages"][r["heaviest"]]
    full = r["stages"][r["fullest"]]
    gs, t, d = lay.per_stage, lay.attn_tp, lay.attn_groups
    routed_params = m.experts_routed * parts["expert"] * parts["moe_layers"]
    stage_note = (f", the fullest of {lay.pp} stages ({full['layers']} layers)"
                  if lay.pp > 1 else "")
    steps = [
        Step("Layout", f"{lay.nodes} node{'s' if lay.nodes > 1 else ''} × {lay.gpus_per_node} "
             f"{g.name}: {lay.pp} stage{'s' if lay.pp > 1 else ''} of {gs} GPUs; attention "
             f"TP{t} in {d} data-parallel group{'s' if d > 1 else ''}; experts by "
             f"{lay.moe.upper()} over {gs}", lay.gpus, "GPUs", r["name"]),
        Step("Parameters, all experts", f"{m.name}: {number_format(routed_params)} in "
             f"{m.experts_routed} routed experts × {parts['moe_layers']} MoE layers + "
             f"{number_format(parts['total'] - routed_params)} everything else",
             parts["total"], "parameters", f"{number_format(parts['total'] / 1e9)}B"),
        Step("Usable memory per GPU", f"{bytes_short(g.memory_total_bytes)} (driver's total) × "
             f"{number_format(k['memory_fraction'])} − {bytes_short(k['reserve_bytes'])} reserve",
             r["usable"], "B", bytes_format(r["usable"])),
        Step(f"Weights per GPU{stage_note}",
             f"{bytes_short(full['nonrouted_bytes'])} non-routed ({w.name}, embedding and head "
             f"in BF16) ÷ {t} + {bytes_short(full['routed_bytes'])} routed experts ÷ {gs}",
             full["weights"], "B", bytes_format(full["weights"])),
        Step("KV per token per GPU",
             f"{full['layers']} layers × " + (
                 f"({m.kv_lora_rank} latent + {m.qk_rope_head_dim} RoPE key) × "
                 f"{number_format(kv.bytes)} B ({kv.name})"
                 + (f", the whole latent on each of the {t} GPUs of a TP group" if t > 1 else "")
                 if m.attention == "MLA" else
                 f"2 × {kv_heads_per_gpu(model=m, tp=t)[0]} KV heads × {m.head_dim} × "
                 f"{number_format(kv.bytes)} B ({kv.name})"),
             full["kv_token"], "B", bytes_format(full["kv_token"])),
        Step("Sequences the KV cache holds",
             f"{d} group{'s' if d > 1 else ''} × ⌊{bytes_short(r['free'])} free ÷ "
             f"({bytes_short(full['kv_token'])} × {count_phrase(context, 'token')})⌋"
             + ("" if r["fits"] else f": fewer than the {k['batch']:,} asked for, so the batch "
                f"is cut to {r['max_seq']:,}"),
             r["max_seq"], "sequences", count_format(r["max_seq"], "sequence")),
        Step("Experts touched per MoE layer",
             f"{m.experts_routed} × (1 − (1 − {m.experts_per_token}/{m.experts_routed})^"
             f"{amount_phrase(r['batch'] / r['microbatches'], 'tokens')}), uniform routing",
             top["touched"], "experts", number_format(top["touched"])),
        Step(f"Attention per GPU ({top['attn_bound']}-bound)",
             f"max({bytes_short(top['attn_bytes'])} of weights and KV ÷ "
             f"{bandwidth_format(g.bandwidth_bytes_per_second * k['bandwidth_efficiency'])}, "
             f"{flops_format(top['attn_proj_flops'])} projections + "
             f"{flops_format(top['attn_core_flops'])} core attention at "
             f"{number_format(k['mfu'])} MFU)",
             top["t_attn"], "s", seconds_format(top["t_attn"])),
        Step(f"FFN and experts per GPU ({top['ffn_bound']}-bound)",
             f"max({bytes_short(top['ffn_bytes'])} of weights (experts touched ÷ {gs}, the rest "
             f"÷ {t}) ÷ bandwidth, {flops_format(top['ffn_flops'] + top['head_flops'])} at "
             f"{number_format(k['mfu'])} MFU)",
             top["t_ffn"], "s", seconds_format(top["t_ffn"])),
    ]
    if top["reductions"]:
        steps.append(Step(
            "All-reduces per stage-step",
            f"{top['reductions']} × ({number_format(k['alpha_seconds'] * 1e6)} µs + "
            f"{bytes_short(top['ar_nvl'])} over "
            f"{collective_links(g, min(t, lay.gpus_per_node))[1]}"
            + (f" + {bytes_short(top['ar_ib'])} over InfiniBand" if top["ar_ib"] else "")
            + f"), messages of {bytes_short(top['message'])}",
            top["ar_time"], "s", seconds_format(top["ar_time"])))
    if top["remote"]:
        share = top["a2a_ib_bytes"] / (top["dispatch_bytes"] + top["combine_bytes"])
        steps.append(Step(
            "Dispatch and combine per stage-step",
            f"{top['moe_layers']} MoE layers × {number_format(top['remote'])} other GPUs per "
            f"token × {amount_phrase(top['attn_tokens'], 'tokens')} on the busiest GPU × "
            f"{m.hidden:,} × ({number_format(k['dispatch'].bytes)} B out + 2 B back) = "
            f"{bytes_short(top['dispatch_bytes'] + top['combine_bytes'])}, "
            f"{percent_format(share)} over InfiniBand, the rest over "
            f"{collective_links(g, min(gs, lay.gpus_per_node))[1]}; "
            f"{number_format(2 * k['alpha_seconds'] * 1e6)} µs fixed per layer",
            top["a2a_time"], "s", seconds_format(top["a2a_time"])))
    if lay.pp > 1:
        steps.append(Step(
            "Pipeline send per stage-step",
            f"{bytes_short(top['pp_bytes'])} per GPU over "
            f"{'InfiniBand' if lay.nodes > 1 else collective_links(g, 2)[1]} + "
            f"{number_format(k['alpha_seconds'] * 1e6)} µs; {r['microbatches']} micro-batches "
            f"over {lay.pp} stages: {percent_format(r['bubble']['steady'])} idle in steady "
            f"decode, {percent_format(r['bubble']['flush'])} for one batch pushed through",
            top["pp_time"], "s", seconds_format(top["pp_time"])))
    rounds = (f"{r['rounds']} stage-steps × " if r["rounds"] > 1 else "")
    steps.extend([
        Step("Time per output token, floor with perfect overlap",
             f"{rounds}max({seconds_format(top['gpu_time'])} GPU work (attention + FFN), "
             f"{seconds_format(top['comm'])} communication)",
             r["tpot_low"], "s", seconds_format(r["tpot_low"])),
        Step("Time per output token, floor with no overlap",
             f"{rounds}({seconds_format(top['gpu_time'])} + {seconds_format(top['comm'])})",
             r["tpot_high"], "s", seconds_format(r["tpot_high"])),
        Step("Output tokens/s for the deployment (ceilings, from the two floors)",
             f"{count_phrase(r['batch'], 'sequence')} ÷ {seconds_format(r['tpot_high'])} to "
             f"÷ {seconds_format(r['tpot_low'])}",
             r["tps_high"], "tokens/s",
             f"{number_format(r['tps_low'])} to {rate_format(r['tps_high'], 'tokens/s')}"),
    ])
    return tuple(steps)


# The layouts the comparison shows: each cluster's plain TP, TP attention with EP, and DP
# attention with EP, and with more than one node TP inside nodes and PP across them.
def layouts_for_cluster(*, nodes: int, gpus_per_node: int) -> list[Layout]:
    """The standard layouts of one cluster, in the table's order."""
    n = nodes * gpus_per_node
    found = [Layout(nodes, gpus_per_node, pp=1, attn_tp=n, moe="tp")]
    if nodes > 1:
        found.append(Layout(nodes, gpus_per_node, pp=nodes, attn_tp=gpus_per_node, moe="tp"))
    else:
        found.append(Layout(nodes, gpus_per_node, pp=1, attn_tp=n, moe="ep"))
    found.append(Layout(nodes, gpus_per_node, pp=1, attn_tp=1, moe="ep"))
    return found


def moe_layouts_compare(*, model: str, clusters: list[tuple[str, int, int]],
                        extra: tuple[str, Layout] | None = None, **shared: object) -> list[dict]:
    """One row per standard layout of each (gpu, nodes, gpus per node) cluster, plus `extra`
    (gpu, layout) when it is not among them; every row at the same model, batch, context,
    formats and efficiencies (`shared`: the other inputs of `moe_layout`). A layout that cannot
    hold the batch is evaluated at the most it holds; one the model or memory refuses is a row
    with `valid` False and the reason."""
    rows = []
    seen = set()
    wanted = [(gpu_id, lay) for gpu_id, nodes, gpn in clusters
              for lay in layouts_for_cluster(nodes=nodes, gpus_per_node=gpn)]
    if extra and extra not in wanted:
        wanted.append(extra)
    for gpu_id, lay in wanted:
        if (gpu_id, lay) in seen:
            continue
        seen.add((gpu_id, lay))
        rows.append(layout_row(model=model, gpu=gpu_id, layout=lay, **shared))
    return rows


def layout_row(*, model: str, gpu: str, layout: Layout, microbatches: int | None = None,
               **shared: object) -> dict:
    """One comparison row (bytes, seconds): the layout's figures, or `valid` False and why."""
    g = gpu_get(gpu)
    label = f"{layout.gpus} × {g.name.removeprefix('NVIDIA ')} {layout.name}"
    try:
        k = _checked(model=model, gpu=gpu, nodes=layout.nodes, gpus_per_node=layout.gpus_per_node,
                     pp=layout.pp, attn_tp=layout.attn_tp, moe=layout.moe,
                     microbatches=microbatches, **shared)
        r = moe_layout_model(model=k["model"], gpu=k["gpu"], layout=k["layout"], w=k["w"],
                             kv=k["kv"], dispatch=k["dispatch"], batch=k["batch"],
                             context=k["context"], memory_fraction=k["memory_fraction"],
                             reserve_bytes=k["reserve_bytes"],
                             bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu"],
                             link_efficiency=k["link_efficiency"],
                             alpha_seconds=k["alpha_seconds"],
                             ib_bytes_per_second=k["ib_bytes_per_second"], copies=k["copies"],
                             microbatches=k["microbatches"])
    except ArithmeticInputError as error:
        return {"name": label, "valid": False, "reason": error.message}
    if not r["weights_fit"] or r["max_seq"] == 0:
        why = ("the weights do not fit" if not r["weights_fit"]
               else "no room for one sequence's KV")
        return {"name": label, "valid": False, "reason": why, "weights": r["weights"],
                "usable": r["usable"], "weights_fit": r["weights_fit"]}
    return {**r, "name": label, "valid": True, "gpu_name": g.name}
