"""Quantization: what a smaller weight (and KV) format saves in memory and bandwidth, and what
that does to the decode floor, which is bytes read ÷ bandwidth."""

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.decode import decode_step_model
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check
from problems.arithmetic.memory import kv_cache, params_count_model
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
) -> Result:
    """Weight bytes before and after (bytes), bytes saved, and the decode floor before and after
    (seconds) for `batch` sequences of `context_tokens`.

    The KV cache stays in `kv_dtype` (default `from_dtype`) in both cases, so at long contexts
    and large batches the saving on the floor shrinks: weights are no longer most of the bytes.
    """
    m = model_get(model)
    g = gpu_get(gpu)
    before_d = dtype_get(from_dtype, field="from_dtype")
    after_d = dtype_get(to_dtype, field="to_dtype")
    kv_d = dtype_get(kv_dtype or from_dtype, field="kv_dtype")
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    params = params_count_model(m)["total"]
    before = params * before_d.bytes
    after = params * after_d.bytes
    kv_per_token = kv_cache(model=model, tokens=1, dtype=kv_d.id)["bytes_per_token"]
    floors = [
        decode_step_model(
            model=m,
            gpu=g,
            batch=batch,
            context_tokens=context_tokens,
            weight_bytes_per_param=d.bytes,
            kv_bytes_per_token=kv_per_token,
            bandwidth_efficiency=1.0,
        )
        for d in (before_d, after_d)
    ]
    speedup = floors[0]["seconds"] / floors[1]["seconds"]
    return Result(
        values={
            "weights_bytes_before": before,
            "weights_bytes_after": after,
            "bytes_saved": before - after,
            "fraction_saved": 1 - after / before,
            "floor_seconds_before": floors[0]["seconds"],
            "floor_seconds_after": floors[1]["seconds"],
            "floor_speedup": speedup,
            "fits_before": before <= g.memory_bytes,
            "fits_after": after <= g.memory_bytes,
        },
        steps=(
            Step(
                f"Weights in {before_d.name}",
                f"{number_format(params)} × {number_format(before_d.bits)} bits ÷ 8",
                before,
                "B",
                bytes_format(before),
            ),
            Step(
                f"Weights in {after_d.name}",
                f"{number_format(params)} × {number_format(after_d.bits)} bits ÷ 8",
                after,
                "B",
                bytes_format(after),
            ),
            Step(
                "Memory saved",
                f"{bytes_short(before)} − {bytes_short(after)}",
                before - after,
                "B",
                bytes_format(before - after),
            ),
            Step(
                f"Decode floor in {before_d.name}",
                f"{bytes_short(floors[0]['bytes'])} read per step ÷ {g.name} bandwidth",
                floors[0]["seconds"],
                "s",
                seconds_format(floors[0]["seconds"]),
            ),
            Step(
                f"Decode floor in {after_d.name}",
                f"{bytes_short(floors[1]['bytes'])} read per step ÷ {g.name} bandwidth",
                floors[1]["seconds"],
                "s",
                seconds_format(floors[1]["seconds"]),
            ),
            Step(
                "Floor speedup",
                f"{seconds_format(floors[0]['seconds'])} ÷ {seconds_format(floors[1]['seconds'])}",
                speedup,
                "×",
                f"{number_format(speedup)}×",
            ),
        ),
    )
