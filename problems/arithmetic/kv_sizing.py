"""Problem 3: sizing the KV cache of one model for many long conversations, and the levers that
shrink it. Built on `memory.kv_cache` and `memory.batch_max` (the formulas live there once):

- per token, per sequence and for every user, against the weights;
- how many GPUs of each kind that takes: for each tensor-parallel size that splits the KV heads
  evenly (1, 2, 4, 8 for 8 heads), replicas of that size until every user has a seat, the
  fewest GPUs winning; and how many full-length users one 8-GPU node holds;
- the levers, each at the same context and users: an FP8 cache; attention that caches less
  (full multi-head attention for contrast, GQA, DeepSeek-V3's MLA); sizing by the mean context
  instead of the maximum; sliding-window layers; and offloading to CPU memory, with the time
  to bring one conversation back over PCIe against recomputing it.
"""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model, prefill_times_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    batch_max,
    context_check,
    embedding_dtype_resolve,
    kv_cache,
    kv_heads_per_gpu,
    tp_sizes_model,
    weight_bytes_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

SIZING_GPUS = ("h100-sxm", "h200", "b200")
NODE_GPUS = 8
# The host link of the H100 SXM, H200 and B200: PCIe Gen5 x16, 128 GB/s for both directions
# together on NVIDIA's H100 datasheet, so 64 GB/s each way.
PCIE_GEN5_X16_ONE_WAY = 64e9
PCIE_EFFICIENCY_DEFAULT = 0.8
# Prefill (recomputing a conversation) at this share of the dense peak, split over the node.
RECOMPUTE_MFU_DEFAULT = 0.5
WINDOW_MAX = 10**7
# Gemma 2's local layers attend to the last 4,096 tokens and alternate with global layers
# (Gemma Team, arXiv 2408.00118): the default window lever.
GEMMA2_WINDOW = 4_096


def mha_bytes_per_token(*, model_id: str, kv_dtype: str) -> tuple[float, str]:
    """KV bytes per token if `model_id` cached every attention head (no GQA): what full
    multi-head attention would cost at the same size (bytes), and its expression."""
    m = model_get(model_id)
    d = kv_dtype_get(kv_dtype, model=m)
    if m.attention == "MLA":
        # An MLA model's heads have keys of qk_nope + qk_rope values but values of v_head_dim
        # (DeepSeek-V3: 192 and 128); its config's head_dim is the key's, not the value's.
        key = m.qk_nope_head_dim + m.qk_rope_head_dim
        per_token = m.layers * m.heads * (key + m.v_head_dim) * d.bytes
        return per_token, (f"{m.layers} layers × {m.heads} heads (one KV head per query head) × "
                           f"({key} key + {m.v_head_dim} value) × {number_format(d.bytes)} B")
    per_token = m.layers * 2 * m.heads * m.head_dim * d.bytes
    return per_token, (f"{m.layers} layers × 2 × {m.heads} heads (one KV head per query head) × "
                       f"{m.head_dim} head_dim × {number_format(d.bytes)} B")


def gpus_needed(*, model: str, gpu: str, tokens: int, users: int, dtype: str, kv_dtype: str,
                memory_fraction: float, reserve_gb: float) -> dict:
    """The fewest GPUs of kind `gpu` that seat `users` sequences of `tokens` (GPUs).

    For each tensor-parallel size that splits the KV heads evenly (each holds weights ÷ tp and
    its share of KV heads) the largest batch per replica comes from `memory.batch_max`; enough
    replicas of it seat every user. The cheapest layout wins (the smaller tp on a tie).
    Returns tp, batch per replica, replicas and GPUs, or batch 0 where nothing fits.
    """
    m = model_get(model)
    layouts = []
    for tp in (1, 2, 4, 8):
        if tp not in tp_sizes_model(m, maximum=tp) or (m.attention != "MLA" and m.kv_heads % tp):
            continue
        per_replica = batch_max(model=model, gpu=gpu, context_tokens=tokens, dtype=dtype,
                                kv_dtype=kv_dtype, tp=tp, memory_fraction=memory_fraction,
                                reserve_gb=reserve_gb)["batch"]
        if per_replica >= 1:
            replicas = math.ceil(users / per_replica)
            layouts.append({"tp": tp, "batch": per_replica, "replicas": replicas,
                            "gpus": replicas * tp})
    if not layouts:
        return {"tp": 0, "batch": 0, "replicas": 0, "gpus": 0}
    return min(layouts, key=lambda x: (x["gpus"], x["tp"]))


def node_layout(*, model: str, gpu: str, tokens: int, dtype: str, kv_dtype: str,
                memory_fraction: float, reserve_gb: float, gpus: int = NODE_GPUS) -> dict:
    """The most users of `tokens` one node of `gpus` GPUs seats: for each tensor-parallel size
    that splits the KV heads evenly (MLA's latent is kept whole, so any size), ⌊gpus ÷ tp⌋
    replicas × the batch each holds; the best layout wins (the smaller tp on a tie).

    Never tp past the KV-head count: there heads are copied, so the per-GPU cache stops
    shrinking and replicas of a smaller tp seat more (Qwen2.5 7B, 4 KV heads, on H100s: two
    tp-4 replicas, not one tp-8 replica). Returns tp, replicas, batch per replica and users;
    all 0 where nothing fits.
    """
    m = model_get(model)
    best = None
    for tp in (1, 2, 4, 8):
        if (tp > gpus or tp not in tp_sizes_model(m, maximum=tp)
                or (m.attention != "MLA" and m.kv_heads % tp)):
            continue
        fit = batch_max(model=model, gpu=gpu, context_tokens=tokens, dtype=dtype,
                        kv_dtype=kv_dtype, tp=tp, memory_fraction=memory_fraction,
                        reserve_gb=reserve_gb)
        replicas = gpus // tp
        users = replicas * fit["batch"]
        # Keep the widest layout when nothing fits, to say what each GPU would have to hold.
        if best is None or users > best["users"] or (users == 0 and best["users"] == 0):
            best = {"tp": tp, "replicas": replicas if users else 0, "batch": fit["batch"],
                    "users": users,
                    "kv_bytes_per_gpu": float(fit["kv_bytes_per_sequence"]),
                    "split": kv_heads_per_gpu(model=m, tp=tp)[1]}
    return best


def mla_like_for_like(*, model: str, kv_dtype: str) -> dict:
    """DeepSeek-V3's MLA set beside `model`'s cache fairly: at `model`'s layer count (part of
    the raw ratio is only 61 layers against 80), and per GPU on an 8-GPU node, where tensor
    parallelism splits GQA's KV heads but copies MLA's latent onto every GPU, and
    data-parallel attention (each GPU its own batch, the latent of its own sequences only)
    stores it once (bytes per token).

    Llama 3.1 70B in BF16: MLA at 80 layers is 80 × (512 + 64) × 2 = 92,160 B per token
    against GQA's 327,680 (3.56× less, not 4.66×); under tp 8 GQA keeps 327,680 ÷ 8 = 40,960 B
    per token on each GPU, MLA the whole 70,272 B: more per GPU, unless attention runs data
    parallel, where each token's latent sits on one GPU only.
    """
    m = model_get(model)
    v3 = model_get("deepseek-v3")
    kv_d = kv_dtype_get(kv_dtype, model=m)
    latent = (v3.kv_lora_rank + v3.qk_rope_head_dim) * kv_d.bytes
    mla = float(kv_bytes_per_token_model(v3, kv_dtype_get(kv_d.id, model=v3)))
    own = float(kv_cache(model=model, tokens=1, dtype=kv_d.id)["bytes_per_token"])
    # The widest tensor-parallel group of one node the model's heads allow: 8 for most, 4 for
    # Qwen2.5 7B, whose 28 query heads do not divide by 8.
    tp = max(tp_sizes_model(m, maximum=NODE_GPUS))
    own_per_gpu = float(kv_cache(model=model, tokens=1, dtype=kv_d.id,
                                 tp=tp)["total_bytes_per_gpu"])
    return {"mla_same_layers": m.layers * latent, "mla_per_gpu_tp": mla,
            "mla_same_layers_per_gpu_tp": m.layers * latent,
            "own_bytes_per_token": own, "own_per_gpu_tp": own_per_gpu, "tp": tp}


def kv_sizing(
    *,
    model: str = "llama-3.1-70b",
    tokens: int = 32_768,
    users: int = 100,
    kv_dtype: str = "bf16",
    dtype: str = "bf16",
    mean_tokens: int = 8_192,
    window_tokens: int = GEMMA2_WINDOW,
    window_share: float = 0.5,
    pcie_efficiency: float = PCIE_EFFICIENCY_DEFAULT,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """The KV cache of `users` conversations of `tokens` tokens, the GPUs it takes, and the
    levers (bytes, GPUs, users, seconds). `mean_tokens` is the average context an active user
    really holds; `window_share` of the layers attend only to their last `window_tokens`."""
    m = model_get(model)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m, field="kv_dtype")
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=None)
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=tokens, field="tokens")
    users = count_check(users, field="users", maximum=USERS_MAX)
    mean_tokens = count_check(mean_tokens, field="mean_tokens", maximum=TOKENS_MAX)
    if mean_tokens > tokens:
        raise ArithmeticInputError(field="mean_tokens",
                                   message="the mean context cannot exceed the maximum")
    window_tokens = count_check(window_tokens, field="window_tokens", maximum=WINDOW_MAX)
    window_share = fraction_check(window_share, field="window_share", allow_zero=True)
    pcie_efficiency = fraction_check(pcie_efficiency, field="pcie_efficiency")
    number_check(memory_fraction, field="memory_fraction", maximum=1.0)

    kv = kv_cache(model=model, tokens=tokens, users=users, dtype=kv_d.id)
    per_token = float(kv["bytes_per_token"])
    per_seq = per_token * tokens
    total = float(kv["total_bytes"])
    weights = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]

    steps: list[Step] = list(kv.steps[:1])
    steps.append(Step("KV per conversation",
                      f"{bytes_short(per_token)} × {count_format(tokens, 'token')}",
                      per_seq, "B", bytes_format(per_seq)))
    steps.append(Step(f"KV for {count_format(users, 'user')}",
                      f"{bytes_short(per_seq)} × {users:,}", total, "B", bytes_format(total)))
    # "course-lm's parameters", not "course-lm (this course's demo model)'s parameters".
    steps.append(Step(f"Weights ({d.name})",
                      f"{m.name.split(' (')[0]}'s parameters × {number_format(d.bytes)} B",
                      weights, "B", bytes_format(weights)))
    steps.append(Step("KV against the weights", f"{bytes_short(total)} ÷ {bytes_short(weights)}",
                      total / weights, "×", f"{number_format(total / weights)}×"))

    gpu_rows = []
    for gid in SIZING_GPUS:
        g = gpu_get(gid)
        need = gpus_needed(model=model, gpu=gid, tokens=tokens, users=users, dtype=dtype,
                           kv_dtype=kv_d.id, memory_fraction=memory_fraction,
                           reserve_gb=reserve_gb)
        node = node_layout(model=model, gpu=gid, tokens=tokens, dtype=dtype, kv_dtype=kv_d.id,
                           memory_fraction=memory_fraction, reserve_gb=reserve_gb)
        row = {"gpu": gid, "name": g.name, "short_name": g.short_name or g.name,
               "memory_bytes": g.memory_total_bytes, **need,
               "node_users": node["users"], "node_tp": node["tp"],
               "node_replicas": node["replicas"], "node_batch": node["batch"]}
        gpu_rows.append(row)
        if need["batch"]:
            expression = (f"tp {need['tp']}: {count_format(need['batch'], 'user')} per replica "
                          f"(weights ÷ {need['tp']}, reserve, KV in the rest of "
                          f"{number_format(memory_fraction * 100)}% of "
                          f"{bytes_short(g.memory_total_bytes)}) → {need['replicas']:,} "
                          f"replica{'s' if need['replicas'] != 1 else ''}")
            display = count_format(need["gpus"], "GPU")
        else:
            expression = (f"not one user of {count_format(tokens, 'token')} fits beside the "
                          f"weights and reserve on up to {NODE_GPUS} GPUs")
            display = "does not fit"
        whom = f"all {count_format(users, 'user')}" if users > 1 else "1 user"
        steps.append(Step(f"{g.short_name or g.name}s for {whom}",
                          expression,
                          need["gpus"], "GPUs", display))
        steps.append(Step(f"Users of {count_format(tokens, 'token')} on one {NODE_GPUS}-GPU "
                          f"{g.short_name} node",
                          (f"the best layout in {NODE_GPUS} GPUs: {node['replicas']:,} × tp "
                           f"{node['tp']}, {count_format(node['batch'], 'user')} each at "
                           f"{bytes_short(node['kv_bytes_per_gpu'])} per user on each GPU "
                           f"({node['split']}); never tp past the KV-head count, where heads "
                           "are copied") if node["users"] else
                          (f"no layout fits one user: even at tp {node['tp']} one user takes "
                           f"{bytes_short(node['kv_bytes_per_gpu'])} on each GPU "
                           f"({node['split']}) beside the weights and reserve"),
                          node["users"], "users", count_phrase(node["users"], "user")))

    # Levers, each at the same context and users.
    fp8 = kv_cache(model=model, tokens=tokens, users=users, dtype="fp8")
    fp8_total = float(fp8["total_bytes"])
    fp8_node = node_layout(model=model, gpu="h100-sxm", tokens=tokens, dtype=dtype,
                           kv_dtype="fp8", memory_fraction=memory_fraction,
                           reserve_gb=reserve_gb)["users"]
    steps.append(Step("Lever: FP8 KV cache",
                      f"{number_format(kv_d.bytes)} B → 1 B per value" if kv_d.bytes > 1 else
                      f"already {number_format(kv_d.bytes)} B per value: no saving",
                      fp8_total, "B", bytes_format(fp8_total)))

    mha_token, mha_expr = mha_bytes_per_token(model_id=model, kv_dtype=kv_d.id)
    steps.append(Step("For contrast: the same model with full multi-head attention",
                      mha_expr, mha_token, "B", f"{bytes_format(mha_token)} per token"))
    v3 = model_get("deepseek-v3")
    mla_token = kv_bytes_per_token_model(v3, kv_dtype_get(kv_d.id, model=v3))
    fair = mla_like_for_like(model=model, kv_dtype=kv_d.id)
    # Set beside DeepSeek-V3's latent only a model that does not already cache one: for an MLA
    # model these rows would compare its latent with itself (70,272 B "split over 8 GPUs"
    # against 70,272 B).
    mla_rows = [] if m.attention == "MLA" else [
        Step("DeepSeek-V3 (MLA) per token",
             f"{v3.layers} layers × ({v3.kv_lora_rank} latent + "
             f"{v3.qk_rope_head_dim} RoPE key) × {number_format(kv_d.bytes)} B",
             mla_token, "B", f"{bytes_format(mla_token)} per token"),
        Step("…MLA at this model's layer count",
             f"{m.layers} layers × ({v3.kv_lora_rank} + {v3.qk_rope_head_dim}) × "
             f"{number_format(kv_d.bytes)} B",
             fair["mla_same_layers"], "B", f"{bytes_format(fair['mla_same_layers'])} per token"),
        Step(f"…per GPU under tp {fair['tp']}: this model against MLA",
             f"{bytes_short(per_token)} split over {fair['tp']} GPUs (where its KV heads allow) "
             "against the latent copied whole onto each",
             fair["own_per_gpu_tp"], "B",
             f"{bytes_format(fair['own_per_gpu_tp'])} against "
             f"{bytes_format(fair['mla_same_layers_per_gpu_tp'])} per token"),
    ]
    steps.extend(mla_rows)

    mean_total = per_token * mean_tokens * users
    steps.append(Step("Lever: size for the mean context, not the maximum",
                      f"{bytes_short(per_token)} × {count_format(mean_tokens, 'mean token')} × "
                      f"{users:,}",
                      mean_total, "B", bytes_format(mean_total)))

    windowed = (1 - window_share) * tokens + window_share * min(tokens, window_tokens)
    window_total = per_token * windowed * users
    steps.append(Step("Lever: sliding-window layers",
                      f"{bytes_short(per_token)} × ({number_format(1 - window_share)} × "
                      f"{tokens:,} + {number_format(window_share)} × "
                      f"min({tokens:,}, {window_tokens:,} window)) × {users:,}",
                      window_total, "B", bytes_format(window_total)))

    pcie = PCIE_GEN5_X16_ONE_WAY * pcie_efficiency
    # Offload and recompute are timed on the first node (H100, then H200, then B200) that holds
    # the weights and one user, on one replica of its best layout: a node that cannot hold the
    # model recomputes nothing (Llama 3.1 405B or DeepSeek-V3 on eight H100s). Where none does,
    # the largest stands in, and the page says it cannot really hold the model.
    home = next((row for row in gpu_rows if row["node_users"]), None)
    offload_fits = home is not None
    home = home or gpu_rows[-1]
    home_gpu = gpu_get(home["gpu"])
    home_tp = home["node_tp"] or NODE_GPUS
    home_short = home_gpu.short_name or home_gpu.name
    # Each GPU of the replica pulls what it keeps over its own link: a tp-th of the KV heads,
    # more where heads are copied past the KV-head count, the whole latent for MLA.
    per_gpu_seq = float(kv_cache(model=model, tokens=tokens, dtype=kv_d.id,
                                 tp=home_tp)["total_bytes_per_gpu"])
    _, split = kv_heads_per_gpu(model=m, tp=home_tp)
    reload_seconds = per_gpu_seq / pcie
    gpus_phrase = count_format(home_tp, "GPU")
    steps.append(Step("Lever: offload to CPU memory; one conversation back over PCIe",
                      f"{bytes_short(per_gpu_seq)} on each of the replica's {gpus_phrase} "
                      f"({split}), each over its own PCIe Gen5 x16 link "
                      f"({bandwidth_format(PCIE_GEN5_X16_ONE_WAY)} one way × "
                      f"{percent_format(pcie_efficiency)})",
                      reload_seconds, "s", seconds_format(reload_seconds)))
    recompute = prefill_times_model(model=m, gpu=home_gpu, tokens=tokens, dtype=d, embedding=e,
                                    kv_dtype=kv_d, mfu=RECOMPUTE_MFU_DEFAULT,
                                    bandwidth_efficiency=1.0)
    recompute_seconds = max(recompute["compute_seconds"], recompute["memory_seconds"]) / home_tp
    recompute_bound = ("compute" if recompute["compute_seconds"] >= recompute["memory_seconds"]
                       else "memory")
    steps.append(Step(f"…against recomputing it (prefill on {home_tp} {home_short}s in "
                      "tensor parallel)",
                      f"{tokens:,}-token prefill at {percent_format(RECOMPUTE_MFU_DEFAULT)} of "
                      f"the dense peak, ÷ {gpus_phrase} ({recompute_bound}-bound)",
                      recompute_seconds, "s",
                      f"{seconds_format(recompute_seconds)} ({recompute_bound}-bound)"))
    per_step_pcie = reload_seconds
    per_step_hbm = per_gpu_seq / home_gpu.bandwidth_bytes_per_second
    steps.append(Step("…and why offloaded KV must come back before decoding",
                      f"each decode step reads the whole cache, {bytes_short(per_gpu_seq)} on "
                      f"each GPU: from HBM over {home_tp} {home_short}s "
                      f"{seconds_format(per_step_hbm)}, over PCIe "
                      f"{seconds_format(per_step_pcie)}",
                      per_step_pcie / per_step_hbm, "×",
                      f"{number_format(per_step_pcie / per_step_hbm)}× slower over PCIe"))

    return Result(
        values={
            "bytes_per_token": per_token,
            "bytes_per_sequence": per_seq,
            "total_bytes": total,
            "weights_bytes": weights,
            "kv_over_weights": total / weights,
            "gpus": gpu_rows,
            "fp8_total_bytes": fp8_total,
            "fp8_node_users_h100": fp8_node,
            "mha_bytes_per_token": mha_token,
            "mha_total_bytes": mha_token * tokens * users,
            "mla_bytes_per_token": mla_token,
            "mla_total_bytes": mla_token * tokens * users,
            "mla_same_layers_bytes_per_token": fair["mla_same_layers"],
            "own_per_gpu_tp_bytes_per_token": fair["own_per_gpu_tp"],
            "mla_compare_tp": fair["tp"],
            "mean_total_bytes": mean_total,
            "window_tokens_effective": windowed,
            "window_total_bytes": window_total,
            "pcie_bytes_per_second": pcie,
            "reload_seconds": reload_seconds,
            "recompute_seconds": recompute_seconds,
            "recompute_bound": recompute_bound,
            "decode_read_pcie_seconds": per_step_pcie,
            "decode_read_hbm_seconds": per_step_hbm,
            "offload_gpu": home["gpu"],
            "offload_tp": home_tp,
            "offload_fits": offload_fits,
        },
        steps=tuple(steps),
    )
