"""The arithmetic's estimate for the lifecycle demo's own run, on the machine that ran it.

No Django. The formulas are problems/arithmetic's (prefill FLOPs; a decode step's bytes and
FLOPs); the rates are what the worker measured on this machine at load (matmul FLOP/s and copy
bandwidth), standing in for a datasheet's peaks. Called by the worker when a run finishes.
"""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from problems.arithmetic.catalog import DTYPES
from problems.arithmetic.catalog.models import DEMO_MODEL_ID, demo_model_load
from problems.arithmetic.compute import prefill_times_model
from problems.arithmetic.decode import decode_flops_per_sequence, decode_step_model
from problems.arithmetic.memory import kv_values_per_token_layer
from problems.arithmetic.steps import Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    flops_format,
    flops_rate_format,
    number_format,
    seconds_format,
)

# torch dtype names → the catalog's number formats.
_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def lifecycle_estimate(*, machine: dict, prompt_tokens: int, output_tokens: int,
                       measured: dict) -> dict:
    """Estimated prefill time, TTFT and TPOT (ms) for this run's sizes on the measured machine.

    Each is a roofline bound, as on the pages: the larger of the FLOPs at the measured matmul
    rate and the bytes at the measured copy bandwidth (a short prompt's prefill still reads
    every weight once). `machine` has matmul_flops_per_s (FLOP/s), memory_bytes_per_s (B/s),
    dtype and model_path; `measured` the run's own ttft_ms, tpot_ms and prefill_ms, for the
    ratios.
    """
    config_path = Path(machine["model_path"]) / "config.json"
    model = demo_model_load(config_path)
    if model is None:
        return {"available": False, "reason": "the model's config.json could not be read"}
    if config_path.parent.name != DEMO_MODEL_ID:  # ENGINE_MODEL names another checkpoint
        model = replace(model, id=config_path.parent.name, name=config_path.parent.name,
                        source=str(config_path))
    flops_rate = float(machine["matmul_flops_per_s"])
    bandwidth = float(machine["memory_bytes_per_s"])
    dtype = DTYPES[_DTYPES.get(machine.get("dtype", "float32"), "fp32")]
    bytes_per_value = dtype.bytes
    # The measured rates stand in for a datasheet's peaks, whatever the format.
    here = SimpleNamespace(bandwidth_bytes_per_second=bandwidth,
                           rate_get=lambda compute: flops_rate)

    prefill = prefill_times_model(model=model, gpu=here, tokens=prompt_tokens, dtype=dtype,
                                  embedding=dtype, kv_dtype=dtype, mfu=1.0,
                                  bandwidth_efficiency=1.0)
    prefill_s = max(prefill["compute_seconds"], prefill["memory_seconds"])
    prefill_bound = ("compute" if prefill["compute_seconds"] >= prefill["memory_seconds"]
                     else "memory")

    # The mean decode step: KV grows one token per step, from the prompt up.
    context = prompt_tokens + max(0, output_tokens - 1) / 2
    kv_per_token = model.layers * kv_values_per_token_layer(model)[0] * bytes_per_value
    step = decode_step_model(model=model, gpu=here, batch=1, context_tokens=round(context),
                             weight_bytes_per_param=bytes_per_value,
                             kv_bytes_per_token=kv_per_token, bandwidth_efficiency=1.0)
    # As on the pages: the non-embedding weights and the head, plus attention over the cache.
    step_flops = decode_flops_per_sequence(model, context)
    compute_s = step_flops / flops_rate
    tpot_s = max(step["seconds"], compute_s)
    bound = "memory" if step["seconds"] >= compute_s else "compute"
    e2e_s = prefill_s + max(0, output_tokens - 1) * tpot_s

    steps = (
        Step("Prefill FLOPs", f"2 × {number_format(prefill['flops_params'])} non-embedding "
             f"parameters × {prompt_tokens:,} tokens + the output head at the last position + "
             "causal attention", prefill["flops_total"], "FLOP",
             flops_format(prefill["flops_total"])),
        Step("Measured matmul rate", "best of 5 fp32 matmuls on this machine", flops_rate,
             "FLOP/s", flops_rate_format(flops_rate)),
        Step("Measured copy bandwidth", "best of 5 copies of 64 MiB on this machine", bandwidth,
             "B/s", bandwidth_format(bandwidth)),
        Step("Prefill bytes", "the weights read once (the embedding only gathered) + the "
             "prompt's KV written", prefill["bytes"], "B", bytes_format(prefill["bytes"])),
        Step(f"Prefill estimate ({prefill_bound}-bound)",
             f"max({flops_format(prefill['flops_total'])} ÷ {flops_rate_format(flops_rate)} = "
             f"{seconds_format(prefill['compute_seconds'])} compute, "
             f"{bytes_short(prefill['bytes'])} ÷ {bandwidth_format(bandwidth)} = "
             f"{seconds_format(prefill['memory_seconds'])} memory)",
             prefill_s, "s", seconds_format(prefill_s)),
        Step("Bytes per decode step", f"weights + KV of {number_format(context)} tokens",
             step["bytes"], "B", bytes_format(step["bytes"])),
        Step(f"Decode step estimate ({bound}-bound)",
             f"max({seconds_format(step['seconds'])} memory, {seconds_format(compute_s)} "
             "compute)", tpot_s, "s", seconds_format(tpot_s)),
    )

    def ratio(key: str, estimate_s: float) -> float | None:
        value = measured.get(key)
        return round(value / (estimate_s * 1000), 2) if value and estimate_s > 0 else None

    return {
        "available": True,
        "model": model.name,
        "model_source": model.source,
        "prefill_flops": prefill["flops_total"],
        "prefill_bound": prefill_bound,
        "prefill_ms": round(prefill_s * 1000, 4),
        "ttft_ms": round(prefill_s * 1000, 4),
        "tpot_ms": round(tpot_s * 1000, 4),
        "e2e_ms": round(e2e_s * 1000, 4),
        "decode_bound": bound,
        "measured_over_estimate": {"prefill": ratio("prefill_ms", prefill_s),
                                   "ttft": ratio("ttft_ms", prefill_s),
                                   "tpot": ratio("tpot_ms", tpot_s)},
        "steps": [s.to_dict() for s in steps],
    }


def streaming_estimate(*, streams: list[dict], block_size: int, block_bytes: int,
                       pace_s: float, max_tokens: int, step_s: float, relay_poll_s: float,
                       runner_poll_s: float) -> dict:
    """What the arithmetic predicts for each stream the streaming demo cut or cancelled.

    For a stream stopped after `completion_tokens` of `max_tokens`: the KV blocks it held
    (problem 2's abandoned-request formula: the prompt and every generated token but the
    newest), how long they would have stayed held without cancellation (the rest of the
    answer at one token every `pace_s` seconds, the demo's own pace), and the most the
    cancellation itself should take (s): a cut is noticed at the relay's next poll
    (`relay_poll_s`; a cancel button needs none), the worker sees it within `runner_poll_s`,
    and the abort lands at the next engine step (`step_s`). Counts and seconds do not depend
    on the model; bytes use the engine's own `block_bytes`.
    """
    from problems.arithmetic.streaming import abandoned_request

    predicted = []
    for s in streams:
        if s.get("state") != "aborted":
            continue
        tokens = int(s["completion_tokens"])
        if tokens >= max_tokens:
            continue
        result = abandoned_request(model=DEMO_MODEL_ID, prompt_tokens=int(s["prompt_tokens"]),
                                   output_tokens=max_tokens, cut_after_tokens=tokens,
                                   step_seconds=pace_s, block_size=block_size)
        noticed_s = relay_poll_s if s.get("reason") == "disconnected" else 0.0
        predicted.append({
            "stream": s["stream"],
            "blocks_at_cut": int(result["blocks_at_cut"]),
            "blocks_at_end": int(result["blocks_at_end"]),
            "bytes_at_cut": int(result["blocks_at_cut"]) * block_bytes,
            "held_s_without_cancel": float(result["held_seconds_without_cancel"]),
            "freed_within_s": noticed_s + runner_poll_s + step_s,
        })
    return {"streams": predicted, "pace_s": pace_s, "step_s": step_s,
            "relay_poll_s": relay_poll_s, "runner_poll_s": runner_poll_s}
