"""Quantization: what a smaller weight format saves in memory and bandwidth, and what that does to
the decode floor: a roofline bound at full efficiency, the larger of bytes read ÷ bandwidth and
FLOPs ÷ the format's dense peak. Weight-only formats (INT4 group-quantized, MXFP4 on GPUs without
FP4 tensor cores) still multiply at the BF16 rate, so once a large batch makes the step
compute-bound they save memory but no time. The embedding and output head stay in BF16
(as AWQ, GPTQ and FP8 checkpoints keep them) and the KV cache keeps its own format, by default
the model's precision, so neither shrinks with the weights."""

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model, peak_describe, peak_flops_get
from problems.arithmetic.decode import decode_flops_per_sequence, decode_step_model
from problems.arithmetic.errors import ArithmeticInputError
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
from problems.arithmetic.units import (
    bytes_format,
    bytes_short,
    flops_format,
    number_format,
    seconds_format,
)


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

    The floor is max(bytes read ÷ peak bandwidth, FLOPs ÷ the format's dense peak), the bound
    named: at small batches the weights' bytes decide it, at large ones the matmuls may.

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
    flops = batch * decode_flops_per_sequence(m, context_tokens)
    results = []
    for d, field in ((before_d, "from_dtype"), (after_d, "to_dtype")):
        e = embedding_dtype_resolve(model=m, dtype=d, embedding_dtype=embedding_dtype)
        weights = weight_bytes_model(model=m, dtype=d, embedding=e)
        floor = decode_step_model(
            model=m, gpu=g, batch=batch, context_tokens=context_tokens,
            weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_efficiency=1.0, embedding_bytes_per_param=e.bytes,
        )
        try:
            peak = peak_flops_get(gpu=g, dtype=d)
        except ArithmeticInputError as error:
            raise ArithmeticInputError(field=field, message=error.message) from error
        compute = flops / peak
        floor = {**floor, "memory": floor["seconds"], "compute": compute, "peak": peak,
                 "seconds": max(floor["seconds"], compute),
                 "bound": "memory" if floor["seconds"] >= compute else "compute"}
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
        f, d = r["floor"], r["dtype"]
        return Step(
            f"Decode floor with {d.name} weights ({f['bound']}-bound)",
            f"max({bytes_short(f['bytes'])} read per step ({bytes_short(f['kv'])} of it KV in "
            f"{kv_d.kv_label}) ÷ {g.name} bandwidth = {seconds_format(f['memory'])}; "
            f"{flops_format(flops)} ÷ {peak_describe(gpu=g, dtype=d)} = "
            f"{seconds_format(f['compute'])})",
            f["seconds"],
            "s",
            seconds_format(f["seconds"]),
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
            "floor_bound_before": before["floor"]["bound"],
            "floor_bound_after": after["floor"]["bound"],
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
