"""Inter-token latency against throughput (problem 9): one decode step as a roofline bound at batch
B gives a curve of time per output token (TPOT) against tokens/s; each lever either moves that
curve (fewer bytes per step, more bandwidth, less host time, more tokens per step) or only moves
the operating point along it (the batch size), or only cuts the spikes above it (chunked
prefill, disaggregation, decode-first scheduling).

TPOT at batch B = the GPU's step (the larger of bytes ÷ bandwidth and FLOPs ÷ peak, on each GPU
of a tensor-parallel group, plus that group's all-reduces) + the host's time per step (not
overlapped), or the larger of the two when the host's work is overlapped with the GPU's.
Throughput is counted per GPU, so that a lever that adds GPUs is compared fairly.
"""

import math

from problems.arithmetic.batching import chunked_prefill
from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import peak_flops_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.gpus import tp_allreduce_bytes
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.interconnect import collective_links
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    RESERVE_GB_MAX,
    context_check,
    embedding_dtype_resolve,
    tp_check,
    tp_sizes_model,
    weight_bytes_model,
)
from problems.arithmetic.replica import decode_step_replica, kv_bytes_per_token_gpu
from problems.arithmetic.speculative import DRAFT_TOKENS_MAX
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_short,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import (
    SAME_WITHIN,
    amount_phrase,
    count_phrase,
    list_phrase,
    ratio_phrase,
)

HOST_MS_MAX = 1_000.0
ALLREDUCE_US_MAX = 10_000.0
TP_CHOICES = (1, 2, 4)  # the baseline's; the lever doubles it
BATCH_SEARCH_MAX = USERS_MAX


def target_rate_format(rate: float) -> str:
    """Tokens/s per GPU at the largest batch within the target, or "none" when no batch meets
    it (a zero rate is an absence, not a figure)."""
    return rate_format(rate, "tokens/s") if rate > 0 else "none"


def expected_tokens(alpha: float, gamma: int) -> float:
    """Tokens per verification step, (1 − α^(γ+1)) / (1 − α) (Leviathan et al., eq. 1);
    γ + 1 when every guess is accepted. α 0.8, γ 4: 3.3616."""
    return gamma + 1.0 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def tp_allreduce_seconds(*, layers: int, hidden: int, tokens: int, tp: int,
                         link_bytes_per_second: float, latency_seconds: float) -> float:
    """Time of one step's tensor-parallel all-reduces (seconds): two per layer, each the ring's
    bytes over each GPU's one-way bandwidth in the collective (`link_bytes_per_second`, what
    the GPU's links give a group of `tp`: `Gpu.collective_one_way_bytes_per_second`) plus a
    fixed latency. 1 GPU: 0."""
    if tp == 1:
        return 0.0
    sent = tp_allreduce_bytes(layers=layers, hidden=hidden, tokens=tokens, group=tp)
    return sent / link_bytes_per_second + 2 * layers * latency_seconds


def itl_levers(**inputs: object) -> Result:
    """TPOT and tokens/s per GPU at `batch`, and the largest batch within `tpot_target_ms`
    (and memory), for the baseline and each lever (seconds, tokens/s, sequences).

    The baseline runs on `tp` GPUs (tensor parallel); the tensor-parallel lever doubles them.
    """
    return _levers_result(_levers_build(**inputs))


def tpot_curves(*, inputs: dict, batches: list[int]) -> dict[str, list[tuple[int, float, float]]]:
    """Each lever's (batch, TPOT seconds, tokens/s per GPU) at the batches memory holds."""
    built = _levers_build(**inputs)
    curves = {}
    for key, _name, cfg, _effect in built["levers"]:
        curves[key] = [(b, t, b / t / cfg["group"])
                       for b in batches if b <= cfg["b_mem"]
                       for t in (cfg["tpot"](b)[0],)]
    return curves


def _levers_build(
    *,
    model: str,
    gpu: str,
    batch: int = 64,
    context_tokens: int = 2_000,
    tpot_target_ms: float = 30.0,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    host_ms: float = 2.0,
    lever_dtype: str = "fp8",
    lever_kv_dtype: str = "fp8",
    tp: int = 1,
    allreduce_latency_us: float = 10.0,
    acceptance: float = 0.7,
    draft_tokens: int = 4,
    draft_cost: float = 0.05,
    prompt_tokens: int = 8_000,
    chunk_tokens: int = 512,
    answer_tokens: int = 500,
    draft_host_ms: float = 0.5,
    bandwidth_efficiency: float = 1.0,
    mfu: float = 1.0,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    m, g = model_get(model), gpu_get(gpu)
    w, lever_w = dtype_get(dtype), dtype_get(lever_dtype, field="lever_dtype")
    kv = kv_dtype_get(kv_dtype, model=m)
    lever_kv = kv_dtype_get(lever_kv_dtype, model=m, field="lever_kv_dtype")
    batch = count_check(batch, field="batch", maximum=USERS_MAX)
    context_tokens = count_check(context_tokens, field="context_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=context_tokens, field="context_tokens")
    target = number_check(tpot_target_ms, field="tpot_target_ms", maximum=1e5) / 1e3
    host = number_check(host_ms, field="host_ms", minimum=0.0, maximum=HOST_MS_MAX,
                        allow_minimum=True) / 1e3
    if tp not in TP_CHOICES:
        raise ArithmeticInputError(field="tp", message=f"tensor parallelism is one of "
                                   f"{', '.join(map(str, TP_CHOICES))}")
    tp_check(model=m, tp=tp)
    try:
        # The tensor-parallel lever doubles the baseline: the doubled size must be one the
        # model's heads allow too (Qwen2.5 7B's 28 query heads stop at 4).
        tp_check(model=m, tp=2 * tp)
    except ArithmeticInputError as error:
        doubles = [str(t) for t in TP_CHOICES if 2 * t in tp_sizes_model(m, maximum=2 * t)]
        raise ArithmeticInputError(
            field="tp", message=f"the tensor-parallel lever doubles the baseline to {2 * tp} "
            f"GPUs, but {error.message}, so the baseline here is "
            f"{list_phrase(doubles, conjunction='or')}") from None
    latency = number_check(allreduce_latency_us, field="allreduce_latency_us", minimum=0.0,
                           maximum=ALLREDUCE_US_MAX, allow_minimum=True) / 1e6
    alpha = fraction_check(acceptance, field="acceptance", allow_zero=True)
    gamma = count_check(draft_tokens, field="draft_tokens", maximum=DRAFT_TOKENS_MAX)
    c = number_check(draft_cost, field="draft_cost", minimum=0.0, maximum=10.0,
                     allow_minimum=True)
    draft_host = number_check(draft_host_ms, field="draft_host_ms", minimum=0.0,
                              maximum=HOST_MS_MAX, allow_minimum=True) / 1e3
    answer_tokens = count_check(answer_tokens, field="answer_tokens", maximum=TOKENS_MAX)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    chunk_tokens = count_check(chunk_tokens, field="chunk_tokens", maximum=TOKENS_MAX)
    bw_eff = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    mfu = fraction_check(mfu, field="mfu")
    fraction = fraction_check(memory_fraction, field="memory_fraction")
    reserve = number_check(reserve_gb, field="reserve_gb", minimum=0.0, maximum=RESERVE_GB_MAX,
                           allow_minimum=True) * GB
    usable = g.memory_total_bytes * fraction - reserve

    def config(*, weights=w, kv_d=kv, group=tp, overlap=False, spec=False) -> dict:
        emb = embedding_dtype_resolve(model=m, dtype=weights)
        weights_gpu = weight_bytes_model(model=m, dtype=weights, embedding=emb)["total"] / group
        kv_token = kv_bytes_per_token_gpu(model=m, tp=group, kv=kv_d)
        free = usable - weights_gpu
        b_mem = max(0, math.floor(free / (kv_token * context_tokens))) if free > 0 else 0

        def gpu_step(b: int, queries: int = 1) -> dict:
            s = decode_step_replica(model=m, gpu=g, tp=group, w=weights, emb=emb,
                                    kv_token_gpu=kv_token, batch=b, context=context_tokens,
                                    queries=queries, bandwidth_efficiency=bw_eff, mfu=mfu)
            comm = tp_allreduce_seconds(layers=m.layers, hidden=m.hidden, tokens=b * queries,
                                        tp=group, link_bytes_per_second=g.
                                        collective_one_way_bytes_per_second(group),
                                        latency_seconds=latency)
            return {**s, "allreduce": comm, "gpu": s["seconds"] + comm}

        def gap(b: int) -> float:
            """The longest gap between a sequence's tokens at batch b (seconds): a plain step,
            or a whole speculative pass, which yields a single token whenever the first
            guess is refused (1 − α of passes). Each of the γ draft steps pays its own
            launches and sampling on the host (`draft_host`) besides its GPU time."""
            if not spec:
                s = gpu_step(b)["gpu"]
                return max(s, host) if overlap else s + host
            plain = gpu_step(b)["gpu"]
            verify = gpu_step(b, gamma + 1)["gpu"]
            return verify + gamma * (c * plain + draft_host) + host

        def tpot(b: int) -> tuple[float, float]:
            """(time per output token, tokens per step per sequence) at batch b."""
            if not spec:
                return gap(b), 1.0
            tokens = expected_tokens(alpha, gamma)
            return gap(b) / tokens, tokens

        return {"gpu_step": gpu_step, "tpot": tpot, "gap": gap, "b_mem": b_mem,
                "group": group, "weights_gpu": weights_gpu, "kv_token": kv_token,
                "spec": spec}

    def at_target(cfg: dict, *, per_gap: bool = True) -> dict:
        """The largest batch within the target and memory, and tokens/s per GPU there. The
        target holds for every gap a user sees (`per_gap`): for speculation, the whole pass,
        not the pass ÷ the tokens it yields on average."""
        b_mem = cfg["b_mem"]

        def time(b: int) -> float:
            return cfg["gap"](b) if per_gap else cfg["tpot"](b)[0]
        if b_mem < 1 or time(1) > target:
            return {"batch": 0, "per_gpu": 0.0, "limit": "memory" if b_mem < 1 else "target"}
        low, high = 1, min(b_mem, BATCH_SEARCH_MAX)
        if time(high) <= target:
            low, limit = high, "memory"
        else:
            limit = "target"
            while high - low > 1:
                middle = (low + high) // 2
                if time(middle) <= target:
                    low = middle
                else:
                    high = middle
        return {"batch": low, "per_gpu": low / cfg["tpot"](low)[0] / cfg["group"],
                "limit": limit}

    levers = [
        ("baseline", "Baseline", config(), "the curve itself"),
        ("weights", f"{lever_w.name} weights"
         + (" (faster matmuls too)" if peak_flops_get(gpu=g, dtype=lever_w)
            > peak_flops_get(gpu=g, dtype=w) else " (weight-only: fewer bytes, same matmul rate)"
            if lever_w.bits < w.bits else ""), config(weights=lever_w),
         "moves the curve" if lever_w.bits < w.bits
         else "no gain: more bits than the baseline's weights" if lever_w.bits > w.bits
         else "no gain: not fewer bits than the baseline's weights"),
        ("kv", f"{lever_kv.kv_label} KV cache", config(kv_d=lever_kv),
         "moves the curve" if lever_kv.bits < kv.bits
         else "no gain: more bits than the baseline's KV cache" if lever_kv.bits > kv.bits
         else "no gain: not fewer bits than the baseline's KV cache"),
        ("tp", f"Tensor parallel × {2 * tp}", config(group=2 * tp), "moves the curve"),
        ("overlap", "Host work hidden (CUDA graphs, overlap)", config(overlap=True),
         "moves the curve" if host > 0 else "no gain: no host time to hide"),
        ("speculative", f"Speculative decoding, γ = {gamma}", config(spec=True),
         "moves the curve at small batches" if alpha > 0
         else "no gain: no draft is ever accepted"),
    ]
    return {"levers": levers, "at_target": at_target, "m": m, "g": g, "w": w, "kv": kv,
            "batch": batch, "context_tokens": context_tokens, "target": target, "host": host,
            "tp": tp, "alpha": alpha, "gamma": gamma, "bw_eff": bw_eff, "mfu": mfu,
            "usable": usable, "reserve": reserve, "fraction": fraction,
            "prompt_tokens": prompt_tokens, "chunk_tokens": chunk_tokens,
            "answer_tokens": answer_tokens,
            "model": model, "gpu": gpu, "dtype": dtype, "kv_dtype": kv_dtype}


def _effect(key: str, best: dict, base: dict, cfg: dict, b: dict) -> str:
    """What a lever does at the target, from the numbers: more or fewer tokens/s per GPU at
    the largest batch within it than the baseline, and why there is no gain when there is none
    (a compute-bound step that a format with fewer bytes but the same compute rate cannot
    speed up)."""
    if base["batch"] == 0:
        return ("makes the target reachable" if best["batch"] > 0
                else "no batch meets the target either way")
    if best["batch"] == 0:
        return "no batch meets the target"
    ratio = best["per_gpu"] / base["per_gpu"]
    phrase = ratio_phrase(best["per_gpu"], base["per_gpu"])
    # The verdict and its ratio use one threshold, the phrasing helper's: a 3.8% gain is
    # "about the same", so it must not be called moving the curve (nor a 4.3% loss lowering).
    if ratio > 1 + SAME_WITHIN:
        return f"moves the curve: {phrase} tokens/s per GPU at the target"
    if ratio < 1 - SAME_WITHIN:
        return f"lowers tokens/s per GPU at the target ({phrase})"
    if abs(ratio - 1) > 0.005:
        return "about the same tokens/s per GPU at the target"
    head = "no gain at the target"
    bound = cfg["gpu_step"](best["batch"])["bound"]
    if key == "weights" and bound == "compute":
        return f"{head}: the step is compute-bound and this format does not " \
               "raise the compute rate (weight-only)"
    if key == "kv" and bound == "compute":
        return f"{head}: the step is compute-bound, not reading KV"
    return head


def _levers_result(b: dict) -> Result:
    levers, at_target, m, g, w, kv = (b[k] for k in ("levers", "at_target", "m", "g", "w", "kv"))
    batch, context_tokens, target, host, tp = (b[k] for k in (
        "batch", "context_tokens", "target", "host", "tp"))
    alpha, bw_eff, mfu, usable, reserve, fraction = (b[k] for k in (
        "alpha", "bw_eff", "mfu", "usable", "reserve", "fraction"))
    prompt_tokens, chunk_tokens = b["prompt_tokens"], b["chunk_tokens"]
    rows = []
    base_best = at_target(levers[0][2])
    for key, name, cfg, effect in levers:
        fits = cfg["b_mem"] >= batch
        t, per_step = cfg["tpot"](batch)
        best = at_target(cfg)
        if key != "baseline" and not effect.startswith("no gain"):
            effect = _effect(key, best, base_best, cfg, b)
        elif key != "baseline":
            # A lever with a reason to gain nothing can still cost: a format with more bits, or
            # drafts that are never kept, lower tokens/s per GPU, and the label says so.
            measured = _effect(key, best, base_best, cfg, b)
            # So can one that leaves no batch within the target where the baseline had one.
            if measured.startswith(("lowers", "moves", "no batch")):
                reason = effect.removeprefix("no gain: ")
                effect = measured if measured.startswith("moves") else f"{measured}: {reason}"
        mean_best = at_target(cfg, per_gap=False)
        rows.append({
            "id": key, "name": name, "effect": effect, "fits": fits,
            "gap_seconds": cfg["gap"](batch),
            "batch_at_target_mean": mean_best["batch"],
            "per_gpu_at_target_mean": mean_best["per_gpu"],
            "tpot_seconds": t, "tokens_per_second_per_gpu": batch / t / cfg["group"],
            "tokens_per_step": per_step, "batch_max_memory": cfg["b_mem"],
            "batch_at_target": best["batch"], "per_gpu_at_target": best["per_gpu"],
            "limit_at_target": best["limit"], "gpus": cfg["group"],
        })
    base_cfg = levers[0][2]
    base = rows[0]
    step = base_cfg["gpu_step"](batch)
    # Spikes: a prompt arriving while `batch` sequences decode, whole or in chunks.
    chunk_inputs = dict(model=b["model"], gpu=b["gpu"], prompt_tokens=prompt_tokens,
                        dtype=b["dtype"], kv_dtype=b["kv_dtype"], mfu=mfu, tp=tp,
                        bandwidth_efficiency=bw_eff,
                        decode_batch=batch, decode_context_tokens=context_tokens,
                        memory_fraction=fraction, reserve_gb=reserve / GB)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    chunked = chunked_prefill(**chunk_inputs, chunk_tokens=min(chunk_tokens, prompt_tokens))
    whole_spike = chunked["unchunked_step_seconds"] + host
    chunk_spike = chunked["largest_step_seconds"] + host
    n_chunks = math.ceil(prompt_tokens / min(chunk_tokens, prompt_tokens))
    added_mean = chunked["unchunked_stall_seconds"]
    # In chunks the prefill adds less step time in all: each chunk's compute partly runs under
    # the decode step's memory reads, which the decoders pay for anyway.
    added_chunked = chunked["prefill_seconds"] - n_chunks * chunked["decode_step_seconds"]
    # Steady state: if every request brings such a prompt and leaves after `answer` tokens,
    # the replica prefills B ÷ answer requests per decode step, each adding its stall, so the
    # time between a sequence's tokens is TPOT + B × stall ÷ answer (the prefill's share of
    # the GPU is that extra over the total). Disaggregated, the decode pool keeps the plain
    # TPOT and other GPUs do the prefills: (B ÷ (answer × TPOT)) × the prefill's time each.
    answer = b["answer_tokens"]
    mean_whole = base["tpot_seconds"] + batch * added_mean / answer
    mean_chunked = base["tpot_seconds"] + batch * max(0.0, added_chunked) / answer
    prefill_gpus = batch / (answer * base["tpot_seconds"]) * added_mean
    by_id = {r["id"]: r for r in rows}
    spec = by_id["speculative"]
    values = {
        "levers": rows,
        "gpu_step_seconds": step["gpu"], "gpu_step_bound": step["bound"],
        "allreduce_seconds": step["allreduce"],
        "memory_seconds": step["memory"], "compute_seconds": step["compute"],
        "weights_bytes": step["weights"], "kv_bytes": step["kv"],
        "tpot_seconds": base["tpot_seconds"],
        "tokens_per_second": base["tokens_per_second_per_gpu"],
        "batch_max_memory": base["batch_max_memory"],
        # The weights stored on each GPU against what the engine may use there: when they
        # alone exceed it, no batch fits whatever the context.
        "weights_stored_gpu_bytes": base_cfg["weights_gpu"], "usable_gpu_bytes": usable,
        "batch_at_target": base["batch_at_target"],
        "per_gpu_at_target": base["per_gpu_at_target"],
        "spike_unchunked_seconds": whole_spike, "spike_chunked_seconds": chunk_spike,
        "chunks": n_chunks, "prefill_stall_total_seconds": added_mean,
        "prefill_stall_chunked_total_seconds": added_chunked,
        "speculative_tokens_per_step": spec["tokens_per_step"],
        "speculative_gap_seconds": spec["gap_seconds"],
        "mean_tpot_whole_seconds": mean_whole, "mean_tpot_chunked_seconds": mean_chunked,
        "prefill_share_whole": 1 - base["tpot_seconds"] / mean_whole,
        "prefill_share_chunked": 1 - base["tpot_seconds"] / mean_chunked,
        "prefill_gpus_per_decode_gpu": prefill_gpus / tp,
        "tp_allreduce_seconds": levers[3][2]["gpu_step"](batch)["allreduce"],
        "tp_gpu_step_seconds": levers[3][2]["gpu_step"](batch)["gpu"],
        "fits": base["fits"],
    }
    steps = [
        Step("Bytes per step (batch " + f"{batch:,})",
             f"{bytes_short(step['weights'])} weights ({w.name}, read once for the batch; the "
             f"embedding table is only gathered, a row per token) + "
             f"{count_phrase(batch, 'sequence')} × {count_phrase(context_tokens, 'token')} × "
             f"{bytes_short(base_cfg['kv_token'])} of KV ({kv.kv_label})",
             step["bytes"], "B", bytes_short(step["bytes"])),
        Step(f"GPU step ({step['bound']}-bound)",
             f"max({seconds_format(step['memory'])} reading at "
             f"{bandwidth_format(g.bandwidth_bytes_per_second * bw_eff)}, "
             f"{seconds_format(step['compute'])} computing)"
             + (f" + {seconds_format(step['allreduce'])} of all-reduces among {tp} GPUs (a "
                f"ring sends 2({tp} − 1)/{tp} of the activations through each GPU, over "
                f"{collective_links(g, tp)[1]})"
                if tp > 1 else ""),
             step["gpu"], "s", seconds_format(step["gpu"])),
        Step("TPOT: GPU step + host time",
             f"{seconds_format(step['gpu'])}"
             + (f" (all-reduces over {tp} GPUs included: {seconds_format(step['allreduce'])})"
                if tp > 1 else "")
             + f" + {seconds_format(host)} (not overlapped)",
             base["tpot_seconds"], "s", seconds_format(base["tpot_seconds"])),
        Step("Throughput per GPU at this batch",
             f"{count_phrase(batch, 'token')} ÷ {seconds_format(base['tpot_seconds'])}"
             + (f" ÷ {tp} GPUs" if tp > 1 else ""),
             base["tokens_per_second_per_gpu"], "tokens/s",
             rate_format(base["tokens_per_second_per_gpu"], "tokens/s")),
        Step("Largest batch KV memory holds",
             f"⌊({bytes_short(usable + reserve)} usable − {bytes_short(reserve)} reserve − "
             f"{bytes_short(base_cfg['weights_gpu'])} weights{' per GPU' if tp > 1 else ''}) ÷ "
             f"({bytes_short(base_cfg['kv_token'])} × "
             f"{count_phrase(context_tokens, 'token')})⌋",
             base["batch_max_memory"], "sequences",
             count_phrase(base["batch_max_memory"], "sequence")),
        Step(f"Largest batch within the {seconds_format(target)} TPOT target",
             f"limited by {base['limit_at_target']}",
             base["batch_at_target"], "sequences",
             count_phrase(base["batch_at_target"], "sequence")),
        Step("Throughput per GPU at that batch", "batch ÷ TPOT",
             base["per_gpu_at_target"], "tokens/s",
             target_rate_format(base["per_gpu_at_target"])),
    ]
    for r in rows[1:]:
        steps.append(Step(
            f"{r['name']}: TPOT at batch {batch:,}",
            (f"{count_phrase(r['batch_at_target'], 'sequence')} within the target "
             f"({r['limit_at_target']}-limited), "
             f"{target_rate_format(r['per_gpu_at_target'])} per GPU there"
             + ("" if r["fits"] else f"; batch {batch:,} does not fit in memory")
             + (f"; {amount_phrase(r['tokens_per_step'], 'tokens')} per step at α = "
                f"{number_format(alpha)}, each pass {seconds_format(r['gap_seconds'])} (the gap "
                "after a refused first guess, which the target must cover)"
                if r["id"] == "speculative" else "")
             + (f"; all-reduces add {seconds_format(levers[3][2]['gpu_step'](batch)['allreduce'])}"
                if r["id"] == "tp" else "")),
            r["tpot_seconds"], "s", seconds_format(r["tpot_seconds"])))
    steps += [
        Step(f"Spike: a prompt of {count_phrase(prompt_tokens, 'token')} in one step",
             f"the decoders' step with the whole prefill in it "
             f"({chunked['unchunked_step_bound']}-bound), + host",
             whole_spike, "s", seconds_format(whole_spike)),
        Step(f"Spike with {chunk_tokens:,}-token chunks",
             f"the largest chunk's step ({chunked['largest_step_bound']}-bound) + host, "
             f"repeated {count_phrase(n_chunks, 'time')}",
             chunk_spike, "s", seconds_format(chunk_spike)),
        Step("Mean TPOT under steady load, every request such a prompt",
             f"{seconds_format(base['tpot_seconds'])} + {batch:,} × "
             f"{seconds_format(added_mean)} of prefill step time ÷ "
             f"{count_phrase(answer, 'answer token')} "
             f"(prefill takes {percent_format(1 - base['tpot_seconds'] / mean_whole)} of the "
             "GPU)", mean_whole, "s", seconds_format(mean_whole)),
        Step("The same, in chunks",
             f"{seconds_format(base['tpot_seconds'])} + {batch:,} × "
             f"{seconds_format(max(0.0, added_chunked))} ÷ {answer:,}",
             mean_chunked, "s", seconds_format(mean_chunked)),
        Step("Disaggregated: prefill GPUs per decode GPU",
             f"{batch:,} ÷ ({answer:,} × {seconds_format(base['tpot_seconds'])}) requests/s × "
             f"{seconds_format(added_mean)} each"
             + (f" ÷ {tp} GPUs" if tp > 1 else "") + "; the decode pool keeps "
             f"{seconds_format(base['tpot_seconds'])}",
             prefill_gpus / tp, "GPUs", number_format(prefill_gpus / tp)),
    ]
    return Result(values=values, steps=tuple(steps))
