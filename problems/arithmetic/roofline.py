"""The roofline: a GPU's ridge point (peak FLOP/s ÷ bandwidth) and, for decode at a batch size,
the arithmetic intensity that says whether memory or compute bounds the step."""

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model, peak_describe, peak_flops_get
from problems.arithmetic.decode import decode_flops_per_sequence, decode_step_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check
from problems.arithmetic.memory import context_check, embedding_dtype_resolve
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    rate_of_format,
)

BATCHES_MAX = 64


def roofline(*, gpu: str, dtype: str = "bf16") -> Result:
    """Peak FLOP/s, bandwidth (B/s) and the ridge point (FLOP/byte) of `gpu` for `dtype`.

    Work with fewer FLOPs per byte than the ridge is memory-bound; more is compute-bound.
    """
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    peak = peak_flops_get(gpu=g, dtype=d)
    bandwidth = g.bandwidth_bytes_per_second
    ridge = peak / bandwidth
    unit = "OP" if d.compute == "int8" else "FLOP"
    return Result(
        values={
            "peak_flops": peak,
            "bandwidth_bytes_per_second": bandwidth,
            "ridge_flops_per_byte": ridge,
        },
        steps=(
            Step(
                f"Peak for {d.name}",
                f"{g.name} datasheet, dense (not the 'with sparsity' figure): "
                + peak_describe(gpu=g, dtype=d),
                peak,
                f"{unit}/s",
                rate_of_format(peak, unit=unit),
            ),
            Step(
                "Memory bandwidth",
                f"{g.name} datasheet ({g.memory_kind})",
                bandwidth,
                "B/s",
                bandwidth_format(bandwidth),
            ),
            Step(
                "Ridge point",
                f"{rate_of_format(peak, unit=unit)} ÷ {bandwidth_format(bandwidth)}",
                ridge,
                f"{unit}/B",
                f"{number_format(ridge)} {unit}/B",
            ),
        ),
    )


def roofline_decode(
    *,
    model: str,
    gpu: str,
    batch: int = 1,
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> Result:
    """Arithmetic intensity of one decode step (FLOP/byte) against `gpu`'s ridge, and the bound.

    FLOPs grow with the batch while the weight bytes are read once per step, so intensity rises
    with batch until the KV reads (which also grow with batch) dominate. The KV cache is in
    `kv_dtype`, by default the model's own precision (BF16).
    """
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    e = embedding_dtype_resolve(model=m, dtype=d)
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    ridge = roofline(gpu=gpu, dtype=dtype)
    flops = batch * decode_flops_per_sequence(m, context_tokens)
    kv_per_token = kv_bytes_per_token_model(m, kv_d)
    step = decode_step_model(
        model=m, gpu=g, batch=batch, context_tokens=context_tokens,
        weight_bytes_per_param=d.bytes, kv_bytes_per_token=kv_per_token,
        bandwidth_efficiency=1.0, embedding_bytes_per_param=e.bytes,
    )
    weight_bytes, kv_bytes = step["weights"], step["kv"]
    intensity = flops / (weight_bytes + kv_bytes)
    ridge_point = ridge["ridge_flops_per_byte"]
    bound = "memory" if intensity < ridge_point else "compute"
    attainable = min(ridge["peak_flops"], intensity * ridge["bandwidth_bytes_per_second"])
    # INT8 tensor cores are rated in integer operations (OPS): intensity in OP per byte.
    unit = "OP" if d.compute == "int8" else "FLOP"
    return Result(
        values={
            "flops_per_step": flops,
            "bytes_per_step": weight_bytes + kv_bytes,
            "intensity_flops_per_byte": intensity,
            "ridge_flops_per_byte": ridge_point,
            "attainable_flops": attainable,
            "bound": bound,
        },
        steps=(
            *ridge.steps,
            Step(
                "FLOPs per decode step",
                f"{count_format(batch, 'sequence')} × (2 × the non-embedding parameters and "
                f"output head + attention over {count_format(context_tokens, 'token')})",
                flops,
                "FLOP",
                flops_format(flops),
            ),
            Step(
                "Bytes per decode step",
                f"{bytes_short(weight_bytes)} weights + {bytes_short(kv_bytes)} KV",
                weight_bytes + kv_bytes,
                "B",
                bytes_format(weight_bytes + kv_bytes),
            ),
            Step(
                "Arithmetic intensity",
                f"{flops_format(flops)} ÷ {bytes_short(weight_bytes + kv_bytes)}",
                intensity,
                f"{unit}/B",
                f"{number_format(intensity)} {unit}/B",
            ),
            Step(
                f"Bound: {bound}",
                f"{number_format(intensity)} {unit}/B {'<' if bound == 'memory' else '≥'} ridge "
                f"{number_format(ridge_point)} {unit}/B; attainable = min(peak, intensity × "
                f"bandwidth)",
                attainable,
                f"{unit}/s",
                rate_of_format(attainable, unit=unit),
            ),
        ),
    )


def roofline_batches(
    *,
    model: str,
    gpu: str,
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
    context_tokens: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> Result:
    """Decode intensity (FLOP/byte) for each batch size, for a roofline plot; `batches` ≤ 64."""
    if not batches or len(batches) > BATCHES_MAX:
        raise ArithmeticInputError(field="batches", message=f"give 1 to {BATCHES_MAX} batch sizes")
    points = [
        roofline_decode(
            model=model,
            gpu=gpu,
            batch=b,
            context_tokens=context_tokens,
            dtype=dtype,
            kv_dtype=kv_dtype,
        )
        for b in batches
    ]
    crossover = next(
        (b for b, p in zip(batches, points, strict=True) if p["bound"] == "compute"), None
    )
    unit = "OP/B" if dtype_get(dtype).compute == "int8" else "FLOP/B"  # INT8: integer ops
    return Result(
        values={
            "batches": list(batches),
            "intensities": [p["intensity_flops_per_byte"] for p in points],
            "bounds": [p["bound"] for p in points],
            "ridge_flops_per_byte": points[0]["ridge_flops_per_byte"],
            "first_compute_bound_batch": crossover or 0,
        },
        steps=tuple(
            Step(
                f"Batch {b}",
                f"{flops_format(p['flops_per_step'])} ÷ {bytes_short(p['bytes_per_step'])}",
                p["intensity_flops_per_byte"],
                unit,
                f"{number_format(p['intensity_flops_per_byte'])} {unit} ({p['bound']}-bound)",
            )
            for b, p in zip(batches, points, strict=True)
        ),
    )
