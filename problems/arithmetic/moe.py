"""Mixture of experts: memory per GPU under tensor, pipeline and expert parallelism, and the
all-to-all traffic that expert parallelism adds per token."""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import USERS_MAX, count_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    embedding_dtype_resolve,
    memory_fit,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import bytes_format, bytes_short, number_format

GPUS_MAX = 4096


def moe_memory(
    *,
    model: str,
    gpus: int,
    dtype: str = "bf16",
    gpu: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """Weight bytes per GPU (bytes) when `gpus` GPUs hold the model by TP, PP or EP.

    Tensor parallelism splits every matrix, pipeline parallelism splits the layers (shown as
    an even split), and expert parallelism gives each GPU 1/`gpus` of the routed experts while
    every GPU keeps a full copy of everything else (attention, shared experts, dense layers,
    embeddings). The embedding and head stay in BF16 when `dtype` is narrower. Given a `gpu`,
    each layout's weights plus the runtime reserve are checked against its usable memory (the
    KV cache needs room on top).
    """
    m = model_get(model)
    d = dtype_get(dtype)
    e = embedding_dtype_resolve(model=m, dtype=d)
    gpus = count_check(gpus, field="gpus", maximum=GPUS_MAX)
    parts = params_count_model(m)
    total = weight_bytes_model(model=m, dtype=d, embedding=e)["total"]
    routed = m.experts_routed * parts["expert"] * parts["moe_layers"] * d.bytes
    if m.is_moe and m.experts_routed % gpus:
        raise ArithmeticInputError(
            field="gpus", message=f"{m.experts_routed} experts do not split evenly over {gpus} GPUs"
        )
    rest = total - routed
    ep = rest + routed / gpus
    fits: dict[str, bool] = {}
    fit_steps: list[Step] = []
    if gpu is not None:
        g = gpu_get(gpu)
        for name, per_gpu in (("tp", total / gpus), ("ep", ep)):
            fit, steps = memory_fit(gpu=g, weights_bytes=per_gpu, kv_bytes=0.0,
                                    reserve_gb=reserve_gb, memory_fraction=memory_fraction,
                                    per_gpu=f"per GPU, {name.upper()} over {gpus}, before any KV")
            fits[f"fits_{name}"] = bool(fit["fits"])
            if not fit_steps:
                fit_steps.extend(steps[:2])
            fit_steps.append(steps[-1])
    return Result(
        values={
            "total_bytes": total,
            "expert_bytes": routed,
            "non_expert_bytes": rest,
            "tp_bytes_per_gpu": total / gpus,
            "pp_bytes_per_gpu": total / gpus,
            "ep_bytes_per_gpu": ep,
            **fits,
        },
        steps=(
            Step(
                "All weights",
                f"{number_format(parts['total'])} parameters, every expert, "
                f"{number_format(d.bytes)} B each ({d.name})"
                + (f"; embedding and head in {e.name}" if e.id != d.id else ""),
                total,
                "B",
                bytes_format(total),
            ),
            Step(
                "Routed experts",
                f"{m.experts_routed} experts × {parts['moe_layers']} MoE layers × "
                f"{number_format(parts['expert'])} parameters × {number_format(d.bytes)} B",
                routed,
                "B",
                bytes_format(routed),
            ),
            Step(
                "Everything else (replicated under EP)",
                f"{bytes_short(total)} − {bytes_short(routed)}",
                rest,
                "B",
                bytes_format(rest),
            ),
            Step(
                f"Tensor parallel over {gpus}",
                f"{bytes_short(total)} ÷ {gpus}",
                total / gpus,
                "B",
                bytes_format(total / gpus),
            ),
            Step(
                f"Pipeline parallel over {gpus} (even split of layers)",
                f"{bytes_short(total)} ÷ {gpus}",
                total / gpus,
                "B",
                bytes_format(total / gpus),
            ),
            Step(
                f"Expert parallel over {gpus}",
                f"{bytes_short(rest)} + {bytes_short(routed)} ÷ {gpus}",
                ep,
                "B",
                bytes_format(ep),
            ),
            *fit_steps,
        ),
    )


def expert_gpu_hit_probability(*, experts: int, per_gpu: int, k: int) -> float:
    """Probability (0 to 1) that one GPU holding `per_gpu` of `experts` experts holds at least
    one of a token's `k` distinct routed experts, under uniform routing.

    The token escapes the GPU when all k choices fall among the other experts:
    C(E − E/ep, k) / C(E, k). DeepSeek-V3 over 8 GPUs (32 experts each): 1 − C(224, 8)/C(256, 8)
    = 0.6618.
    """
    if per_gpu >= experts:
        return 1.0
    return 1 - math.comb(experts - per_gpu, k) / math.comb(experts, k)


def remote_gpus_expected(*, experts: int, chosen: int, gpus: int) -> float:
    """Expected distinct other GPUs a token's `chosen` experts live on (GPUs), when `experts`
    experts are spread evenly over `gpus` GPUs and routing is uniform.

    A given GPU holds E/ep experts and escapes a token's k distinct choices with probability
    C(E − E/ep, k) / C(E, k); each of the ep − 1 other GPUs is hit otherwise.
    """
    if gpus == 1:
        return 0.0
    hit = expert_gpu_hit_probability(experts=experts, per_gpu=experts // gpus, k=chosen)
    return (gpus - 1) * hit


def moe_all_to_all(
    *, model: str, ep: int, tokens: int = 1, dtype: str = "bf16", dispatch_dtype: str | None = None
) -> Result:
    """All-to-all bytes per token and for `tokens` tokens (bytes) under expert parallelism.

    In each MoE layer a token's hidden vector is sent once to every other GPU that holds at
    least one of its k routed experts (dispatch), and each such GPU sends back one partial sum
    (combine): one copy per destination GPU, not per expert. With uniform routing the expected
    number of those GPUs is `remote_gpus_expected`. Dispatch travels in `dispatch_dtype`
    (FP8 halves it, as DeepSeek-V3 does; its small per-block scales are left out), combine in
    `dtype`. Shared experts and dense layers run locally and send nothing.
    """
    m = model_get(model)
    d = dtype_get(dtype)
    dispatch = dtype_get(dispatch_dtype, field="dispatch_dtype") if dispatch_dtype else d
    if not m.is_moe:
        raise ArithmeticInputError(field="model", message=f"{m.name} has no experts")
    ep = count_check(ep, field="ep", maximum=GPUS_MAX)
    if m.experts_routed % ep:
        raise ArithmeticInputError(
            field="ep", message=f"{m.experts_routed} experts do not split evenly over {ep} GPUs"
        )
    tokens = count_check(tokens, field="tokens", maximum=USERS_MAX)
    moe_layers = params_count_model(m)["moe_layers"]
    remote = remote_gpus_expected(experts=m.experts_routed, chosen=m.experts_per_token, gpus=ep)
    per_layer_dispatch = remote * m.hidden * dispatch.bytes
    per_layer_combine = remote * m.hidden * d.bytes
    per_token = (per_layer_dispatch + per_layer_combine) * moe_layers
    naive = 2 * m.experts_per_token * m.hidden * d.bytes * moe_layers * (ep - 1) / ep
    return Result(
        values={
            "bytes_per_token": per_token,
            "total_bytes": per_token * tokens,
            "remote_gpus": remote,
            "remote_fraction": (ep - 1) / ep,
            "per_expert_bytes_per_token": naive,
        },
        steps=(
            Step(
                "Other GPUs a token's experts live on",
                f"({ep} − 1) × (1 − C({m.experts_routed} − {m.experts_routed // ep}, "
                f"{m.experts_per_token}) ÷ C({m.experts_routed}, {m.experts_per_token})): "
                f"{m.experts_per_token} of {m.experts_routed} experts, "
                f"{m.experts_routed // ep} per GPU, uniform routing",
                remote,
                "GPUs",
                f"{number_format(remote)} GPUs",
            ),
            Step(
                "Dispatch per token per MoE layer",
                f"{number_format(remote)} GPUs × {m.hidden:,} hidden × "
                f"{number_format(dispatch.bytes)} B ({dispatch.name})",
                per_layer_dispatch,
                "B",
                bytes_format(per_layer_dispatch),
            ),
            Step(
                "Combine per token per MoE layer",
                f"{number_format(remote)} GPUs × {m.hidden:,} hidden × "
                f"{number_format(d.bytes)} B ({d.name}), one partial sum per GPU",
                per_layer_combine,
                "B",
                bytes_format(per_layer_combine),
            ),
            Step(
                "Bytes per token",
                f"({bytes_short(per_layer_dispatch)} + {bytes_short(per_layer_combine)}) × "
                f"{moe_layers} MoE layers (counting one copy per expert instead would give "
                f"{bytes_short(naive)})",
                per_token,
                "B",
                bytes_format(per_token),
            ),
            Step(
                "For the batch",
                f"{bytes_short(per_token)} × {tokens:,} tokens",
                per_token * tokens,
                "B",
                bytes_format(per_token * tokens),
            ),
        ),
    )
