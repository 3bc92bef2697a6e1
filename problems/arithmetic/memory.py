"""Memory: parameters from the architecture, weight bytes in a format, the KV cache (MHA, GQA,
MQA and MLA; per GPU under tensor parallelism), and the largest batch that fits."""

import math

from problems.arithmetic.catalog import Model, dtype_get, gpu_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check, fraction_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_format,
    bytes_short,
    count_format,
    number_format,
    scientific_format,
)

TP_MAX = 1024


def _params_step(label: str, expression: str, value: float) -> Step:
    return Step(
        label, expression, value, "parameters", f"{scientific_format(value, digits=3)} parameters"
    )


def params_count_model(model: Model) -> dict[str, float]:
    """Parameter counts of `model` from its architecture (parameters), by part.

    Keys: embedding, lm_head, attention_per_layer, dense_ffn_per_layer, moe_ffn_per_layer,
    expert (one routed expert), norms, total, active (touched per token: shared weights plus
    `experts_per_token` routed experts in each MoE layer).
    """
    h = model.hidden
    embedding = model.vocab * h
    lm_head = 0 if model.tied_embeddings else model.vocab * h
    if model.attention == "MLA":
        # DeepSeek-V3's modeling code: Q through a low-rank bottleneck; K and V from one
        # shared latent (kv_lora_rank) plus a shared RoPE key (qk_rope_head_dim).
        qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
        attention = (
            h * model.q_lora_rank
            + model.q_lora_rank
            + model.q_lora_rank * model.heads * qk_head
            + h * (model.kv_lora_rank + model.qk_rope_head_dim)
            + model.kv_lora_rank
            + model.kv_lora_rank * model.heads * (model.qk_nope_head_dim + model.v_head_dim)
            + model.heads * model.v_head_dim * h
        )
    else:
        q = h * model.heads * model.head_dim
        kv = 2 * h * model.kv_heads * model.head_dim
        o = model.heads * model.head_dim * h
        bias = (model.heads + 2 * model.kv_heads) * model.head_dim if model.qkv_bias else 0
        attention = q + kv + o + bias
    # Gated FFN (SwiGLU): gate, up and down projections.
    dense_ffn = 3 * h * model.intermediate
    expert = 3 * h * model.moe_intermediate if model.is_moe else 0
    router = h * model.experts_routed
    moe_ffn = (model.experts_routed + model.experts_shared) * expert + router
    moe_active = (model.experts_per_token + model.experts_shared) * expert + router
    moe_layers = model.layers - model.dense_layers if model.is_moe else 0
    dense_layers = model.layers - moe_layers
    norms = 2 * h * model.layers + h
    shared = embedding + lm_head + attention * model.layers + dense_ffn * dense_layers + norms
    total = shared + moe_ffn * moe_layers
    active = shared + moe_active * moe_layers
    return {
        "embedding": embedding,
        "lm_head": lm_head,
        "attention_per_layer": attention,
        "dense_ffn_per_layer": dense_ffn,
        "moe_ffn_per_layer": moe_ffn,
        "expert": expert,
        "moe_layers": moe_layers,
        "norms": norms,
        "total": total,
        "active": active,
    }


def params_count(*, model: str) -> Result:
    """Parameters of `model` computed from its config (parameters), total and active per token."""
    m = model_get(model)
    parts = params_count_model(m)
    head = "tied to the embedding" if m.tied_embeddings else f"{m.vocab:,} × {m.hidden:,}"
    steps = [
        _params_step("Embedding", f"{m.vocab:,} vocab × {m.hidden:,} hidden", parts["embedding"]),
        _params_step("Output head", head, parts["lm_head"]),
        _params_step("Attention per layer", _attention_expression(m), parts["attention_per_layer"]),
    ]
    if m.layers - parts["moe_layers"]:
        steps.append(
            _params_step(
                "Dense FFN per layer",
                f"3 (gate, up, down) × {m.hidden:,} × {m.intermediate:,}",
                parts["dense_ffn_per_layer"],
            )
        )
    if m.is_moe:
        steps.append(
            _params_step(
                "One expert", f"3 × {m.hidden:,} × {m.moe_intermediate:,}", parts["expert"]
            )
        )
        steps.append(
            _params_step(
                "MoE FFN per layer",
                f"({m.experts_routed} routed + {m.experts_shared} shared) experts × one expert "
                f"+ router {m.hidden:,} × {m.experts_routed}",
                parts["moe_ffn_per_layer"],
            )
        )
    steps.append(
        _params_step(
            "Total", f"all of the above over {m.layers} layers, plus norms", parts["total"]
        )
    )
    if m.is_moe:
        steps.append(
            _params_step(
                "Active per token",
                f"shared weights + ({m.experts_per_token} routed + {m.experts_shared} shared) "
                f"experts in each of {parts['moe_layers']} MoE layers",
                parts["active"],
            )
        )
    return Result(
        values={
            "params": parts["total"],
            "active_params": parts["active"],
            "params_published": m.params_published or 0,
            "active_params_published": m.active_params_published or m.params_published or 0,
        },
        steps=tuple(steps),
    )


def _attention_expression(m: Model) -> str:
    if m.attention == "MLA":
        return (
            f"MLA: q {m.hidden:,}→{m.q_lora_rank:,}→"
            f"{m.heads}×{m.qk_nope_head_dim + m.qk_rope_head_dim}, "
            f"kv {m.hidden:,}→{m.kv_lora_rank}+{m.qk_rope_head_dim}→{m.heads}×"
            f"({m.qk_nope_head_dim}+{m.v_head_dim}), o {m.heads}×{m.v_head_dim}→{m.hidden:,}"
        )
    bias = " + QKV biases" if m.qkv_bias else ""
    return (
        f"{m.hidden:,} × ({m.heads} Q heads + 2 × {m.kv_heads} KV heads) × {m.head_dim} head_dim"
        f" + O {m.heads} × {m.head_dim} × {m.hidden:,}{bias}"
    )


def weights_bytes(*, model: str, dtype: str) -> Result:
    """Bytes to hold every weight of `model` in `dtype` (bytes). MoE: all experts, not active."""
    m = model_get(model)
    d = dtype_get(dtype)
    params = params_count_model(m)["total"]
    total = params * d.bytes
    return Result(
        values={"params": params, "bytes": total, "bits_per_param": d.bits},
        steps=(
            _params_step(
                "Parameters",
                f"from the {m.name} architecture (all experts included)"
                if m.is_moe
                else f"from the {m.name} architecture",
                params,
            ),
            Step(
                "Weight bytes",
                f"{number_format(params)} parameters × {number_format(d.bits)} bits ÷ 8 ({d.name})",
                total,
                "B",
                bytes_format(total),
            ),
        ),
    )


def kv_heads_per_gpu(*, model: Model, tp: int) -> tuple[int, str]:
    """KV heads each GPU stores under tensor parallelism `tp`, and why.

    Heads split evenly while tp ≤ kv_heads; beyond that each GPU still needs a whole head, so
    heads are replicated (tp / kv_heads copies of each).
    """
    if model.attention == "MLA":
        return 1, "MLA's latent is shared by all heads, so every GPU keeps the whole latent"
    if tp <= model.kv_heads:
        if model.kv_heads % tp:
            raise ArithmeticInputError(
                field="tp", message=f"{model.kv_heads} KV heads do not split evenly over {tp} GPUs"
            )
        return model.kv_heads // tp, f"{model.kv_heads} KV heads ÷ {tp} GPUs"
    if tp % model.kv_heads:
        raise ArithmeticInputError(
            field="tp", message=f"{tp} GPUs is not a multiple of {model.kv_heads} KV heads"
        )
    return (
        1,
        f"tp {tp} > {model.kv_heads} KV heads: each GPU holds 1 head, "
        f"replicated {tp // model.kv_heads}×",
    )


def kv_values_per_token_layer(model: Model) -> tuple[int, str]:
    """Cached values per token per layer, and the expression that gives them."""
    if model.attention == "MLA":
        values = model.kv_lora_rank + model.qk_rope_head_dim
        return values, f"({model.kv_lora_rank} latent + {model.qk_rope_head_dim} RoPE key)"
    values = 2 * model.kv_heads * model.head_dim
    return values, f"2 (K and V) × {model.kv_heads} KV heads × {model.head_dim} head_dim"


def kv_cache(
    *, model: str, tokens: int, users: int = 1, dtype: str = "bf16", tp: int = 1
) -> Result:
    """KV cache bytes: per token, per token per GPU, and for `tokens` × `users` (bytes).

    Uses KV heads, not attention heads (GQA/MQA), the config's head_dim, and MLA's latent.
    """
    m = model_get(model)
    d = dtype_get(dtype)
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    users = count_check(users, field="users", maximum=USERS_MAX)
    tp = count_check(tp, field="tp", maximum=TP_MAX)
    values, expression = kv_values_per_token_layer(m)
    per_token = m.layers * values * d.bytes
    heads_gpu, why = kv_heads_per_gpu(model=m, tp=tp)
    if m.attention == "MLA":
        per_token_gpu = per_token
        gpu_expression = why
    else:
        per_token_gpu = m.layers * 2 * heads_gpu * m.head_dim * d.bytes
        gpu_expression = (
            f"{m.layers} layers × 2 × {heads_gpu} KV heads on this GPU ({why}) × "
            f"{m.head_dim} head_dim × {number_format(d.bytes)} B"
        )
    total = per_token * tokens * users
    total_gpu = per_token_gpu * tokens * users
    kind = m.attention
    steps = (
        Step(
            f"KV bytes per token ({kind})",
            f"{m.layers} layers × {expression} × {number_format(d.bytes)} B ({d.name})",
            per_token,
            "B",
            bytes_format(per_token),
        ),
        Step(
            "KV bytes per token per GPU",
            gpu_expression,
            per_token_gpu,
            "B",
            bytes_format(per_token_gpu),
        ),
        Step(
            "KV cache in total",
            f"{bytes_short(per_token)} × {count_format(tokens, 'token')} × "
            f"{count_format(users, 'user')}",
            total,
            "B",
            bytes_format(total),
        ),
        Step(
            "KV cache per GPU",
            f"{bytes_short(per_token_gpu)} × {count_format(tokens, 'token')} × "
            f"{count_format(users, 'user')}",
            total_gpu,
            "B",
            bytes_format(total_gpu),
        ),
    )
    return Result(
        values={
            "bytes_per_token": per_token,
            "bytes_per_token_per_gpu": per_token_gpu,
            "total_bytes": total,
            "total_bytes_per_gpu": total_gpu,
        },
        steps=steps,
    )


def batch_max(
    *,
    model: str,
    gpu: str,
    context_tokens: int,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    tp: int = 1,
    memory_fraction: float = 0.9,
) -> Result:
    """The most sequences of `context_tokens` whose KV fits beside the weights (sequences).

    `memory_fraction` is the share of GPU memory the engine may use (vLLM's
    gpu_memory_utilization defaults to 0.9); weights split evenly over `tp` GPUs.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = dtype_get(kv_dtype or dtype, field="kv_dtype")
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    tp = count_check(tp, field="tp", maximum=TP_MAX)
    memory_fraction = fraction_check(memory_fraction, field="memory_fraction")
    weights = params_count_model(m)["total"] * d.bytes / tp
    usable = g.memory_bytes * memory_fraction
    free = usable - weights
    kv = kv_cache(model=model, tokens=context_tokens, users=1, dtype=kv_d.id, tp=tp)
    per_sequence = kv["total_bytes_per_gpu"]
    batch = max(0, math.floor(free / per_sequence)) if free > 0 else 0
    steps = (
        Step(
            "Usable memory per GPU",
            f"{bytes_short(g.memory_bytes)} × {number_format(memory_fraction)}",
            usable,
            "B",
            bytes_format(usable),
        ),
        Step(
            "Weights per GPU", f"{d.name} weights ÷ {tp} GPUs", weights, "B", bytes_format(weights)
        ),
        Step(
            "Free for the KV cache",
            f"{bytes_short(usable)} − {bytes_short(weights)}",
            free,
            "B",
            bytes_format(free),
        ),
        Step(
            "KV per sequence per GPU",
            f"{bytes_short(kv['bytes_per_token_per_gpu'])} × {context_tokens:,} tokens",
            per_sequence,
            "B",
            bytes_format(per_sequence),
        ),
        Step(
            "Largest batch",
            f"⌊{bytes_short(max(free, 0))} ÷ {bytes_short(per_sequence)}⌋",
            batch,
            "sequences",
            count_format(batch, "sequence"),
        ),
    )
    return Result(
        values={
            "batch": batch,
            "free_bytes": free,
            "weights_bytes_per_gpu": weights,
            "kv_bytes_per_sequence": per_sequence,
            "fits": free > 0,
        },
        steps=steps,
    )
