"""Mixture of experts: memory per GPU under tensor, pipeline and expert parallelism, and the
all-to-all traffic that expert parallelism adds per token."""

from problems.arithmetic.catalog import dtype_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import USERS_MAX, count_check
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import bytes_format, bytes_short, number_format

GPUS_MAX = 4096


def moe_memory(*, model: str, gpus: int, dtype: str = "bf16") -> Result:
    """Weight bytes per GPU (bytes) when `gpus` GPUs hold the model by TP, PP or EP.

    Tensor parallelism splits every matrix, pipeline parallelism splits the layers (shown as
    an even split), and expert parallelism gives each GPU 1/`gpus` of the routed experts while
    every GPU keeps a full copy of everything else (attention, shared experts, dense layers,
    embeddings).
    """
    m = model_get(model)
    d = dtype_get(dtype)
    gpus = count_check(gpus, field="gpus", maximum=GPUS_MAX)
    parts = params_count_model(m)
    total = parts["total"] * d.bytes
    routed = m.experts_routed * parts["expert"] * parts["moe_layers"] * d.bytes
    if m.is_moe and m.experts_routed % gpus:
        raise ArithmeticInputError(
            field="gpus", message=f"{m.experts_routed} experts do not split evenly over {gpus} GPUs"
        )
    rest = total - routed
    ep = rest + routed / gpus
    return Result(
        values={
            "total_bytes": total,
            "expert_bytes": routed,
            "non_expert_bytes": rest,
            "tp_bytes_per_gpu": total / gpus,
            "pp_bytes_per_gpu": total / gpus,
            "ep_bytes_per_gpu": ep,
        },
        steps=(
            Step(
                "All weights",
                f"{number_format(parts['total'])} parameters × "
                f"{number_format(d.bytes)} B ({d.name})",
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
        ),
    )


def moe_all_to_all(*, model: str, ep: int, tokens: int = 1, dtype: str = "bf16") -> Result:
    """All-to-all bytes per token and for `tokens` tokens (bytes) under expert parallelism.

    In each MoE layer a token's hidden vector goes to each of its k experts (dispatch) and
    the k outputs come back (combine); with uniform routing over `ep` GPUs a share
    (ep − 1) / ep of those experts live on another GPU.
    """
    m = model_get(model)
    d = dtype_get(dtype)
    if not m.is_moe:
        raise ArithmeticInputError(field="model", message=f"{m.name} has no experts")
    ep = count_check(ep, field="ep", maximum=GPUS_MAX)
    tokens = count_check(tokens, field="tokens", maximum=USERS_MAX)
    moe_layers = params_count_model(m)["moe_layers"]
    remote = (ep - 1) / ep
    per_token = 2 * m.experts_per_token * m.hidden * d.bytes * moe_layers * remote
    return Result(
        values={
            "bytes_per_token": per_token,
            "total_bytes": per_token * tokens,
            "remote_fraction": remote,
        },
        steps=(
            Step(
                "Bytes per token",
                f"2 (dispatch and combine) × {m.experts_per_token} experts × {m.hidden:,} "
                f"hidden × {number_format(d.bytes)} B × {moe_layers} MoE layers × "
                f"({ep} − 1) ÷ {ep} remote",
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
