"""The arithmetic's estimate for the lifecycle demo's own run, on the machine that ran it.

No Django. The formulas are problems/arithmetic's (prefill FLOPs; a decode step's bytes and
FLOPs); the rates are what the worker measured on this machine at load (matmul FLOP/s and memory
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


def machine_model(machine: dict):
    """The worker's model as the arithmetic's `Model` (from its config.json; None when it
    cannot be read) and the catalog `Dtype` its weights are held in."""
    config_path = Path(machine["model_path"]) / "config.json"
    model = demo_model_load(config_path)
    if model is not None and config_path.parent.name != DEMO_MODEL_ID:
        # ENGINE_MODEL names another checkpoint.
        model = replace(model, id=config_path.parent.name, name=config_path.parent.name,
                        source=str(config_path))
    return model, DTYPES[_DTYPES.get(machine.get("dtype", "float32"), "fp32")]


def lifecycle_estimate(*, machine: dict, prompt_tokens: int, output_tokens: int,
                       measured: dict) -> dict:
    """Estimated prefill time, TTFT and TPOT (ms) for this run's sizes on the measured machine.

    Each is a roofline bound, as on the pages: the larger of the FLOPs at the measured matmul
    rate and the bytes at the measured memory bandwidth (a short prompt's prefill still reads
    every weight once). `machine` has matmul_flops_per_s (FLOP/s), memory_bytes_per_s (B/s),
    dtype and model_path; `measured` the run's own ttft_ms, tpot_ms and prefill_ms, for the
    ratios.
    """
    model, dtype = machine_model(machine)
    if model is None:
        return {"available": False, "reason": "the model's config.json could not be read"}
    flops_rate = float(machine["matmul_flops_per_s"])
    bandwidth = float(machine["memory_bytes_per_s"])
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
        Step("Measured matmul rate",
             machine.get("matmul_how", "best of 5 fp32 matmuls on this machine"), flops_rate,
             "FLOP/s", flops_rate_format(flops_rate)),
        Step("Measured memory bandwidth",
             machine.get("memory_how", "best of 5 copies of 64 MiB on this machine"), bandwidth,
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


def rmsnorm_estimate(*, tokens: int, hidden: int, dtype: str, residual: bool, timing: dict,
                     machine: dict) -> dict:
    """The byte arithmetic's floors for the triton-rmsnorm demo's shape on the measured machine
    (µs): Hugging Face's eager code (with the eager add when `residual`) and the fused kernel,
    each its DRAM bytes ÷ the memory bandwidth the worker measured; the fused kernel's achieved
    GB/s from `timing` (µs per call, measured)."""
    from problems.arithmetic.fusion import rmsnorm_traffic_model

    value_bytes = 4 if dtype == "fp32" else 2
    t = rmsnorm_traffic_model(tokens=tokens, hidden=hidden, value_bytes=value_bytes)
    bandwidth = float(machine["memory_bytes_per_s"])
    eager = t["add_eager_bytes"] if residual else t["norm_eager_bytes"]
    fused = t["add_fused_bytes"] if residual else t["norm_fused_bytes"]
    triton_s = timing["triton_us"] / 1e6
    return {
        "eager_bytes": eager,
        "fused_bytes": fused,
        "eager_kernels": t["add_eager_kernels"] if residual else t["norm_eager_kernels"],
        "eager_us": eager / bandwidth * 1e6,
        "fused_us": fused / bandwidth * 1e6,
        "bandwidth_measured": bandwidth,
        "achieved_gbps": fused / triton_s / 1e9 if triton_s > 0 else 0.0,
        "achieved_share": fused / triton_s / bandwidth if triton_s > 0 else 0.0,
        # The eager code's FP32 intermediate, and this GPU's L2 as the driver reports it.
        "intermediate_mb": t["elements"] * 4 / 1e6,
        "l2_mb": float(timing.get("l2_bytes", 0)) / 1e6,
    }


def forward_floor_model(*, model, dtype, machine: dict, prefill_tokens: int,
                        prefill_sequences: int, decode_sequences: int,
                        decode_context: float) -> dict:
    """The arithmetic's floor for one engine step's forward pass on the measured machine
    (seconds): the decode rows by kernel group (each group's max of bytes at the measured memory
    bandwidth and FLOPs at the measured matmul rate, summed), plus any prefill rows (their
    FLOPs, per prompt, against the weights read once and the KV written), whichever of the
    prefill's two sides is slower. `bound` names what limits the step."""
    from problems.arithmetic.compute import prefill_flops_model
    from problems.arithmetic.utilization import decode_groups_model, step_bound

    rate = float(machine["matmul_flops_per_s"])
    bandwidth = float(machine["memory_bytes_per_s"])
    kv_per_token = model.layers * kv_values_per_token_layer(model)[0] * dtype.bytes
    seconds, bounds, flops, size = 0.0, [], 0.0, 0.0
    if decode_sequences:
        groups = decode_groups_model(
            model=model, batch=decode_sequences, context_tokens=decode_context,
            weight_bytes_per_param=dtype.bytes, kv_bytes_per_token=kv_per_token,
            bandwidth_bytes_per_second=bandwidth, peak_flops=rate)
        seconds += sum(g["seconds"] for g in groups)
        flops += sum(g["flops"] for g in groups)
        size += sum(g["bytes"] for g in groups)
        bounds.append(step_bound(groups))
    if prefill_tokens:
        per_prompt = prefill_tokens / max(prefill_sequences, 1)
        p_flops = prefill_flops_model(model, round(per_prompt))["total"] * prefill_sequences
        from problems.arithmetic.memory import params_count_model

        parts = params_count_model(model)
        # The weights are read once per step, shared with any decode rows in it.
        weights = 0 if decode_sequences else (parts["non_embedding"] + parts["head"]) * dtype.bytes
        p_bytes = weights + prefill_tokens * kv_per_token
        compute, memory = p_flops / rate, p_bytes / bandwidth
        seconds += max(compute, memory)
        flops += p_flops
        size += p_bytes
        bounds.append("compute" if compute >= memory else "memory")
    bound = bounds[0] if len(set(bounds)) == 1 else "mixed"
    return {"seconds": seconds, "flops": flops, "bytes": size, "bound": bound}


def profile_estimate(*, machine: dict, steps: list[dict], prompt_tokens: int,
                     timeline: list[dict] | None = None) -> dict:
    """Each profiled step's forward pass against the arithmetic's floor on this machine (ms):
    `steps` are the engine's step events as the profile demo records them (num_prefill_tokens,
    num_decode_tokens, num_seqs, step_ms, model_ms). A decoding sequence's context is its prompt
    plus the tokens made before the step."""
    model, dtype = machine_model(machine)
    if model is None:
        return {"available": False, "reason": "the model's config.json could not be read",
                "steps": []}
    rows, decode_steps_seen = [], 0
    for step in steps:
        decoding = int(step["num_decode_tokens"])
        prefill = int(step["num_prefill_tokens"])
        prefill_sequences = max(int(step["num_seqs"]) - decoding, 1 if prefill else 0)
        floor = forward_floor_model(
            model=model, dtype=dtype, machine=machine, prefill_tokens=prefill,
            prefill_sequences=prefill_sequences, decode_sequences=decoding,
            decode_context=prompt_tokens + decode_steps_seen + 1)
        if decoding:
            decode_steps_seen += 1
        predicted = floor["seconds"] * 1e3
        measured = float(step["model_ms"])
        kind = "prefill" if prefill and not decoding else ("mixed" if prefill else "decode")
        rows.append({"index": step["index"], "kind": kind, "bound": floor["bound"],
                     "predicted_forward_ms": predicted, "measured_forward_ms": measured,
                     "step_ms": float(step["step_ms"]),
                     "host_ms": max(float(step["step_ms"]) - measured, 0.0),
                     "ratio": measured / predicted if predicted > 0 else 0.0,
                     "flops": floor["flops"], "bytes": floor["bytes"]})
    return {"available": True, "model": model.name, "steps": rows,
            "rates": {"matmul_flops_per_s": float(machine["matmul_flops_per_s"]),
                      "memory_bytes_per_s": float(machine["memory_bytes_per_s"])}}


def utilization_estimate(*, machine: dict, batch: int, context_tokens: float) -> dict:
    """The arithmetic's decode step for the utilization demo on the measured machine: FLOPs and
    bytes per step, the forward floor (each kernel group's bound, summed) and the MFU a step at
    that floor would reach (FLOP, bytes, seconds, fraction)."""
    from problems.arithmetic.utilization import utilization_point_model

    model, dtype = machine_model(machine)
    if model is None:
        raise ValueError("the model's config.json could not be read")
    rate = float(machine["matmul_flops_per_s"])
    point = utilization_point_model(
        model=model, batch=batch, context_tokens=context_tokens,
        weight_bytes_per_param=dtype.bytes,
        kv_bytes_per_token=model.layers * kv_values_per_token_layer(model)[0] * dtype.bytes,
        bandwidth_bytes_per_second=float(machine["memory_bytes_per_s"]), peak_flops=rate)
    return {"flops": point["flops"], "bytes": point["bytes"],
            "floor_seconds": point["gpu_seconds"], "bound": point["bound"],
            "mfu_at_floor": point["mfu_busy"]}


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
