"""Quantization: what a smaller weight format saves in memory and bandwidth, and what that does to
the decode floor, which is bytes read ÷ bandwidth. The embedding and output head stay in BF16
(as AWQ, GPTQ and FP8 checkpoints keep them) and the KV cache keeps its own format, by default
the model's precision, so neither shrinks with the weights."""

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model
from problems.arithmetic.decode import decode_step_model
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    context_check,
    embedding_dtype_resolve,
    memory_fit,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import bytes_format, bytes_short, number_format, seconds_format


def quantization(
    *,
    model: str,
    gpu: str,
    to_dtype: str,
    from_dtype: str = "bf16",
    kv_dtype: str | None = None,
    batch: int = 1,
    context_tokens: int = 1,
    embedding_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """Weight bytes before and after (bytes), bytes saved, the decode floor before and after
    (seconds) for `batch` sequences of `context_tokens`, and whether each fits one `gpu` with
    that KV and the runtime reserve.

    The KV cache stays in `kv_dtype` (default the model's own precision) in both cases, so at
    long contexts and large batches the saving on the floor shrinks: weights are no longer
    most of the bytes.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    before_d = dtype_get(from_dtype, field="from_dtype")
    after_d = dtype_get(to_dtype, field="to_dtype")
    kv_d = kv_dtype_get(kv_dtype, model=m)
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    params = params_count_model(m)["total"]
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    kv_bytes = batch * context_tokens * kv_per_token
    results = []
    for d in (before_d, after_d):
        e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
        weights = weight_bytes_model(model=m, dtype=d, embedding=e)
        floor = decode_step_model(
            model=m, gpu=g, batch=batch, context_tokens=context_tokens,
            weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_efficiency=1.0, embedding_bytes_per_param=e.bytes,
        )
        fit, fit_steps = memory_fit(
            gpu=g, weights_bytes=weights["total"], kv_bytes=kv_bytes, reserve_gb=reserve_gb,
            memory_fraction=memory_fraction, per_gpu=f"in {d.name}",
        )
        results.append({"dtype": d, "embedding": e, "weights": weights, "floor": floor,
                         "fit": fit, "fit_step": fit_steps[-1],
                        "fit_steps": fit_steps})
    before, after = results
    speedup = before["floor"]["seconds"] / after["floor"]["seconds"]

    def weights_step(r: dict) -> Step:
        d, e, w = r["dtype"], r["embedding"], r["weights"]
        kept = f"; embedding and head in {e.name}" if e.id != d.id else ""
        return Step(
            f"Weights in {d.name}",
            f"{number_format(params)} parameters, the body at {number_format(d.bits)} bits{kept}",
            w["total"],
            "B",
            bytes_format(w["total"]),
        )

    def floor_step(r: dict) -> Step:
        return Step(
            f"Decode floor with {r['dtype'].name} weights",
            f"{bytes_short(r['floor']['bytes'])} read per step "
            f"({bytes_short(r['floor']['kv'])} of it KV in {kv_d.name}) ÷ {g.name} bandwidth",
            r["floor"]["seconds"],
            "s",
            seconds_format(r["floor"]["seconds"]),
        )

    saved = before["weights"]["total"] - after["weights"]["total"]
    return Result(
        values={
            "weights_bytes_before": before["weights"]["total"],
            "weights_bytes_after": after["weights"]["total"],
            "bytes_saved": saved,
            "fraction_saved": saved / before["weights"]["total"],
            "floor_seconds_before": before["floor"]["seconds"],
            "floor_seconds_after": after["floor"]["seconds"],
            "floor_speedup": speedup,
            "fits_before": before["fit"]["fits"],
            "fits_after": after["fit"]["fits"],
            "memory_usable_bytes": after["fit"]["memory_usable_bytes"],
            "memory_needed_before_bytes": before["fit"]["memory_needed_bytes"],
            "memory_needed_after_bytes": after["fit"]["memory_needed_bytes"],
        },
        steps=(
            weights_step(before),
            weights_step(after),
            Step(
                "Memory saved",
                f"{bytes_short(before['weights']['total'])} − "
                f"{bytes_short(after['weights']['total'])}",
                saved,
                "B",
                bytes_format(saved),
            ),
            floor_step(before),
            floor_step(after),
            Step(
                "Floor speedup",
                f"{seconds_format(before['floor']['seconds'])} ÷ "
                f"{seconds_format(after['floor']['seconds'])}",
                speedup,
                "×",
                f"{number_format(speedup)}×",
            ),
            *before["fit_steps"][:2],
            before["fit_step"],
            after["fit_step"],
        ),
    )
