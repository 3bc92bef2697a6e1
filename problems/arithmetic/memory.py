"""Memory: parameters from the architecture, weight bytes in a format (the embedding and output
head kept in BF16 when the rest is quantized), the KV cache (MHA, GQA, MQA and MLA; per GPU under
tensor parallelism), whether weights + KV + a runtime reserve fit a GPU, and the largest batch
that does.

GPU memory has one definition throughout: the total CUDA reports (`Gpu.memory_total_bytes`,
e.g. 79.22 GiB on an H100 80GB, where nvidia-smi shows 81,559 MiB), of which an engine may use
`memory_fraction` (vLLM's gpu_memory_utilization, 0.9 by default); within that share it must hold
every weight, the KV cache and a runtime reserve (`reserve_gb`: peak activations, the CUDA
context, buffers).
"""

import functools
import math

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
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bytes_format,
    bytes_short,
    count_format,
    number_format,
    scientific_format,
)
from problems.arithmetic.wording import list_phrase

TP_MAX = 1024
# vLLM's gpu_memory_utilization default: the share of the GPU's memory the engine may use.
MEMORY_FRACTION_DEFAULT = 0.9
# Runtime reserve inside that share (GB): vLLM's own profiling of Llama 3 8B on an H100 logged
# 1.26 GiB of activation peak and 1.79 GiB outside PyTorch, 3.05 GiB = 3.27 GB together
# (https://github.com/vllm-project/vllm/pull/10511). Larger models and tensor parallelism need more.
RESERVE_GB_DEFAULT = 3.3
RESERVE_GB_MAX = 10_000.0


def _params_step(label: str, expression: str, value: float) -> Step:
    return Step(
        label, expression, value, "parameters", f"{scientific_format(value, digits=3)} parameters"
    )


def params_count_model(model: Model) -> dict[str, float]:
    """Parameter counts of `model` by part (a fresh dict each call; see `_params_parts`)."""
    return dict(_params_parts(model))


@functools.lru_cache(maxsize=128)
def _params_parts(model: Model) -> dict[str, float]:
    """Parameter counts of `model` from its architecture (parameters), by part.

    Keys: embedding, lm_head (stored; 0 when tied to the embedding), head (the output
    projection as applied: vocab × hidden, the embedding matrix itself when tied),
    attention_per_layer, dense_ffn_per_layer, moe_ffn_per_layer, expert (one routed expert),
    norms, total, active (touched per token: shared weights plus `experts_per_token` routed
    experts in each MoE layer), non_embedding and non_embedding_active (the same without the
    embedding and the stored head: the weights every token multiplies).
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
        "head": model.vocab * h,
        "non_embedding": total - embedding - lm_head,
        "non_embedding_active": active - embedding - lm_head,
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


def embedding_dtype_resolve(
    *, model: Model, dtype: Dtype, embedding_dtype: str | None = None
) -> Dtype:
    """The format of the embedding and output head: `embedding_dtype` when given, else the
    model's own precision (BF16) when the rest is quantized below 16 bits, as AWQ, GPTQ and FP8
    checkpoints keep them, else the weights' format."""
    if embedding_dtype:
        return dtype_get(embedding_dtype, field="embedding_dtype")
    if dtype.bits < 16:
        own = DTYPES[model.dtype]
        return own if own.bits >= 16 else DTYPES["bf16"]
    return dtype


def weight_bytes_model(*, model: Model, dtype: Dtype, embedding: Dtype) -> dict[str, float]:
    """Bytes of every stored weight (bytes): the body (all non-embedding weights, every expert)
    in `dtype`, the embedding and an untied output head in `embedding`."""
    parts = params_count_model(model)
    body = parts["non_embedding"] * dtype.bytes
    embedding_bytes = parts["embedding"] * embedding.bytes
    head = parts["lm_head"] * embedding.bytes
    return {
        "body": body,
        "embedding": embedding_bytes,
        "head": head,
        "total": body + embedding_bytes + head,
    }


def weights_bytes(*, model: str, dtype: str, embedding_dtype: str | None = None) -> Result:
    """Bytes to hold every weight of `model` in `dtype` (bytes). MoE: all experts, not active.

    The embedding and an untied output head stay in BF16 when `dtype` is narrower, unless
    `embedding_dtype` says otherwise.
    """
    m = model_get(model)
    d = dtype_get(dtype)
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
    parts = params_count_model(m)
    sizes = weight_bytes_model(model=m, dtype=d, embedding=e)
    params = parts["total"]
    everything_in_dtype = params * d.bytes
    steps = [
        _params_step(
            "Parameters",
            f"from the {m.name} architecture (all experts included)"
            if m.is_moe
            else f"from the {m.name} architecture",
            params,
        ),
        Step(
            "Body: every weight but the embedding and head",
            f"{number_format(parts['non_embedding'])} parameters × {number_format(d.bits)} bits "
            f"÷ 8 ({d.name})",
            sizes["body"],
            "B",
            bytes_format(sizes["body"]),
        ),
        Step(
            "Embedding" + (" (also the output head: tied)" if m.tied_embeddings else ""),
            f"{number_format(parts['embedding'])} parameters × {number_format(e.bits)} bits ÷ 8 "
            f"({e.name})",
            sizes["embedding"],
            "B",
            bytes_format(sizes["embedding"]),
        ),
    ]
    if not m.tied_embeddings:
        steps.append(
            Step(
                "Output head",
                f"{number_format(parts['lm_head'])} parameters × {number_format(e.bits)} bits "
                f"÷ 8 ({e.name})",
                sizes["head"],
                "B",
                bytes_format(sizes["head"]),
            )
        )
    steps.append(
        Step(
            "Weight bytes",
            " + ".join(
                bytes_short(v) for v in (sizes["body"], sizes["embedding"], sizes["head"]) if v
            )
            + (
                f" (embedding and head kept in {e.name}; all in {d.name} would be "
                f"{bytes_short(everything_in_dtype)})"
                if e.id != d.id
                else ""
            ),
            sizes["total"],
            "B",
            bytes_format(sizes["total"]),
        )
    )
    return Result(
        values={
            "params": params,
            "bytes": sizes["total"],
            "bits_per_param": sizes["total"] * 8 / params,
            "body_bytes": sizes["body"],
            "embedding_bytes": sizes["embedding"] + sizes["head"],
            "bytes_all_in_dtype": everything_in_dtype,
        },
        steps=tuple(steps),
    )


def experts_touched(*, model: Model, batch: int) -> float:
    """Expected distinct routed experts a step of `batch` tokens reads per MoE layer (experts).

    With uniform routing each token picks k of E experts, so one expert escapes a token with
    probability (E − k) / E and the whole batch with that to the power `batch`.
    """
    e, k = model.experts_routed, model.experts_per_token
    return e * (1 - ((e - k) / e) ** batch)


def weights_read_model(
    *, model: Model, tokens: int, dtype: Dtype, embedding: Dtype
) -> dict[str, float]:
    """What one forward pass over `tokens` tokens reads of the weights (parameters, bytes).

    The body: every non-embedding weight of a dense model; for MoE the shared weights plus the
    experts the tokens touch. The output head: vocab × hidden, read once (with tied embeddings
    it is the embedding matrix). The embedding lookup only gathers the tokens' own rows
    (`embedding_rows`), a gather rather than a matmul.
    """
    parts = params_count_model(model)
    body_params = parts["non_embedding"]
    if model.is_moe:
        routed_all = model.experts_routed * parts["expert"] * parts["moe_layers"]
        routed_read = (
            experts_touched(model=model, batch=tokens) * parts["expert"] * parts["moe_layers"]
        )
        body_params = body_params - routed_all + routed_read
    head_params = parts["head"]
    rows = tokens * model.hidden * embedding.bytes
    body = body_params * dtype.bytes
    head = head_params * embedding.bytes
    return {
        "body_params": body_params,
        "head_params": head_params,
        "body": body,
        "head": head,
        "embedding_rows": rows,
        "total": body + head,
    }


def context_check(*, model: Model, tokens: int, field: str, what: str = "",
                  advice: str = "") -> None:
    """Refuse `tokens` past the model's context window (max_position_embeddings), naming
    `field`, as a server refuses such a request before spending any GPU time on it; `advice`
    (from `window_advice`) says how far to cut."""
    if model.context and tokens > model.context:
        subject = what or f"{tokens:,} tokens"
        raise ArithmeticInputError(
            field=field,
            message=f"{subject} exceed{'s' if not what else ''} {model.name}'s context window of "
            f"{model.context:,} tokens" + (f": {advice}" if advice else ""),
        )


def window_advice(*, model: Model, first: int, second: int, first_name: str,
                  second_name: str, excess: bool = True) -> str:
    """How to cut two lengths that share `model`'s window (a prompt and its answer) so that
    they fit: "276 tokens too many; with this prompt, an output of at most 24 tokens fits;
    with this output, a prompt of at most 724 tokens". Empty when they fit. A learner who
    picks a small model (course-lm's 1,024 tokens) at another model's lengths reads here what
    to type instead. `excess=False` leaves out the count of tokens too many (for a refusal of
    the first length alone, whose own excess is another number)."""
    window = model.context
    if not window or first + second <= window:
        return ""
    over = first + second - window
    options = []
    if second - over >= 1 and first < window:
        options.append(f"with this {first_name}, {_article(second_name)} {second_name} of at most "
                       f"{_tokens(second - over)} fits")
    if first - over >= 1 and second < window:
        options.append(f"with this {second_name}, {_article(first_name)} {first_name} of at most "
                       f"{_tokens(first - over)} fits")
    if not options:
        options.append(f"the {first_name} and the {second_name} together may be at most "
                       f"{_tokens(window)}")
    return (f"{_tokens(over)} too many; " if excess else "") + "; ".join(options)


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _tokens(count: int) -> str:
    return f"{count:,} token{'' if count == 1 else 's'}"


def memory_fit(
    *,
    gpu: Gpu,
    weights_bytes: float,
    kv_bytes: float,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    per_gpu: str = "",
) -> tuple[dict[str, float | bool], tuple[Step, ...]]:
    """Whether weights + KV + the runtime reserve fit the engine's share of one GPU (bytes).

    Returns the values (`fits`, `memory_needed_bytes`, `memory_usable_bytes`,
    `memory_total_bytes`, `reserve_bytes`) and the steps that show it.
    """
    memory_fraction = fraction_check(memory_fraction, field="memory_fraction")
    reserve_gb = number_check(
        reserve_gb, field="reserve_gb", minimum=0.0, maximum=RESERVE_GB_MAX, allow_minimum=True
    )
    total = gpu.memory_total_bytes
    usable = total * memory_fraction
    reserve = reserve_gb * GB
    needed = weights_bytes + kv_bytes + reserve
    fits = needed <= usable
    where = f" {per_gpu}" if per_gpu else ""
    steps = (
        Step(
            "GPU memory (the total a program sees)",
            gpu.memory_total_basis,
            total,
            "B",
            bytes_format(total),
        ),
        Step(
            "Usable by the engine",
            f"{bytes_short(total)} × {number_format(memory_fraction)} (the share the engine may "
            f"use)",
            usable,
            "B",
            bytes_format(usable),
        ),
        Step(
            f"Memory needed{where}: " + ("fits" if fits else "does not fit"),
            f"{bytes_short(weights_bytes)} weights + {bytes_short(kv_bytes)} KV + "
            f"{bytes_short(reserve)} runtime reserve {'≤' if fits else '>'} "
            f"{bytes_short(usable)} usable",
            needed,
            "B",
            bytes_format(needed) + (" (fits)" if fits else " (does not fit)"),
        ),
    )
    return (
        {
            "fits": fits,
            "memory_needed_bytes": needed,
            "memory_usable_bytes": usable,
            "memory_total_bytes": total,
            "reserve_bytes": reserve,
        },
        steps,
    )


def tp_sizes_model(model: Model, *, maximum: int = TP_MAX) -> tuple[int, ...]:
    """The tensor-parallel sizes up to `maximum` that `model`'s heads allow (GPUs): the query
    heads must split evenly (vLLM refuses any other size: "Total number of attention heads
    must be divisible by tensor parallel size"), and the KV heads either split evenly or are
    copied whole. Qwen2.5 7B's 28 query heads and 4 KV heads allow 1, 2, 4 and 28, so no
    8-GPU node runs it as one tensor-parallel group. MLA's latent is kept whole at any size."""
    sizes = []
    for tp in range(1, maximum + 1):
        if model.heads % tp:
            continue
        if model.attention != "MLA" and model.kv_heads % tp and tp % model.kv_heads:
            continue
        sizes.append(tp)
    return tuple(sizes)


def tp_check(*, model: Model, tp: int, field: str = "tp") -> int:
    """`tp` when `model`'s heads allow that tensor-parallel size (`tp_sizes_model`), else
    refused with the reason and the sizes they allow, as vLLM refuses it at startup: Qwen2.5
    7B's 28 query heads over 8 GPUs ("its heads allow 1, 2, 4 or 28")."""
    if tp in tp_sizes_model(model, maximum=tp):
        return tp
    name = model.name.split(" (")[0]
    # Every size allowed: none exceeds the query heads, so the list is short.
    allowed = list_phrase([str(t) for t in tp_sizes_model(model, maximum=model.heads)],
                          conjunction="or")
    if model.heads % tp:
        reason = (f"{name}'s {model.heads} query heads do not split evenly over {tp} GPUs, and "
                  "engines such as vLLM refuse a tensor-parallel size that does not divide them")
    else:
        reason = (f"{name}'s {model.kv_heads} KV heads neither split evenly over {tp} GPUs nor "
                  "copy evenly onto them")
    raise ArithmeticInputError(field=field, message=f"{reason}; its heads allow {allowed}")


def kv_heads_per_gpu(*, model: Model, tp: int, field: str = "tp") -> tuple[int, str]:
    """KV heads each GPU stores under tensor parallelism `tp`, and why; a size the model's
    heads do not allow is refused (`tp_check`).

    Heads split evenly while tp ≤ kv_heads; beyond that each GPU still needs a whole head, so
    heads are replicated (tp / kv_heads copies of each).
    """
    tp_check(model=model, tp=tp, field=field)
    if model.attention == "MLA":
        return 1, "MLA's latent is shared by all heads, so every GPU keeps the whole latent"
    if tp <= model.kv_heads:
        return model.kv_heads // tp, (
            f"{model.kv_heads} KV heads ÷ {tp} GPU{'s' if tp != 1 else ''}")
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
    `dtype` is the KV cache's own format (a format engines offer for it); `tokens` must lie
    within the model's context window.
    """
    m = model_get(model)
    d = kv_dtype_get(dtype, model=m, field="dtype")
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=tokens, field="tokens")
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
            f"{m.layers} layers × {expression} × {number_format(d.bytes)} B per "
            f"{d.kv_label} value" + (f" ({d.kv_note})" if d.kv_note else ""),
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
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    embedding_dtype: str | None = None,
) -> Result:
    """The most sequences of `context_tokens` whose KV fits beside the weights and the runtime
    reserve on each of `tp` GPUs (sequences).

    `memory_fraction` is the share of the driver's reported memory the engine may use (vLLM's
    gpu_memory_utilization defaults to 0.9); `reserve_gb` the activations and runtime buffers
    kept inside it. The KV cache is in `kv_dtype`, by default the model's own precision (BF16),
    never the weights' format. Weights split evenly over `tp` GPUs.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    tp = tp_check(model=m, tp=count_check(tp, field="tp", maximum=TP_MAX))
    weights = weight_bytes_model(model=m, dtype=d, embedding=e)["total"] / tp
    fit, fit_steps = memory_fit(
        gpu=g, weights_bytes=weights, kv_bytes=0.0, reserve_gb=reserve_gb,
        memory_fraction=memory_fraction, per_gpu="for the weights alone",
    )
    usable = float(fit["memory_usable_bytes"])
    reserve = float(fit["reserve_bytes"])
    free = usable - weights - reserve
    kv = kv_cache(model=model, tokens=context_tokens, users=1, dtype=kv_d.id, tp=tp)
    per_sequence = kv["total_bytes_per_gpu"]
    batch = max(0, math.floor(free / per_sequence)) if free > 0 else 0
    steps = (
        *fit_steps[:2],
        Step(
            "Weights per GPU",
            f"{d.name} weights"
            + (f" (embedding and head in {e.name})" if e.id != d.id else "")
            + f" ÷ {tp} GPU{'s' if tp != 1 else ''}",
            weights,
            "B",
            bytes_format(weights),
        ),
        Step(
            "Runtime reserve",
            "peak activations, CUDA context and buffers (an input)",
            reserve,
            "B",
            bytes_format(reserve),
        ),
        Step(
            "Free for the KV cache",
            f"{bytes_short(usable)} − {bytes_short(weights)} − {bytes_short(reserve)}"
            + ("" if free > 0 else ": the weights and reserve alone do not fit"),
            free,
            "B",
            bytes_format(free),
        ),
        Step(
            f"KV per sequence per GPU in {kv_d.kv_label}",
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
            "memory_usable_bytes": usable,
            "memory_total_bytes": fit["memory_total_bytes"],
            "reserve_bytes": reserve,
        },
        steps=steps,
    )
