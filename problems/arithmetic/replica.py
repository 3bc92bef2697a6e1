"""One serving replica of `tp` GPUs: how many sequences it decodes at once (the smaller of what its
KV memory holds and what meets the time-per-output-token target, and an engine cap), the decode
step at that batch as a roofline bound, its tokens/s, and what an input and an output token cost
in dollars at an hourly price and a utilisation.

Problem 24 (cost levers) and problem 25 (the capstone's decode pool) both size replicas with
these functions; the GPU memory is the driver's total, of which the engine uses
`memory_fraction`, less a runtime reserve; weights split evenly over the replica's GPUs.
"""

import math

from problems.arithmetic.catalog import (
    Dtype,
    Gpu,
    Model,
    dtype_get,
    gpu_get,
    kv_dtype_get,
    model_get,
)
from problems.arithmetic.compute import attention_flops_per_token_pair, peak_flops_get
from problems.arithmetic.decode import decode_flops_per_sequence, weights_read_params
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import (
    TOKENS_MAX,
    USERS_MAX,
    count_check,
    fraction_check,
    number_check,
)
from problems.arithmetic.memory import (
    RESERVE_GB_MAX,
    TP_MAX,
    context_check,
    embedding_dtype_resolve,
    kv_heads_per_gpu,
    params_count_model,
    tp_check,
    weight_bytes_model,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_format,
    bytes_short,
    count_format,
    flops_format,
    money_format,
    number_format,
    percent_format,
    rate_format,
    rate_of_format,
    scientific_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase

BATCH_SEARCH_MAX = 10**7
SPEC_GAMMA_MAX = 16


def kv_bytes_per_token_gpu(*, model: Model, tp: int, kv: Dtype, field: str = "tp") -> float:
    """KV bytes one token adds on each GPU of a `tp`-way replica (bytes): its share of the KV
    heads (or a replicated head when tp exceeds them); MLA's latent is whole on every GPU. A
    size the model's heads do not allow is refused (`tp_check`, naming `field`), MLA's too."""
    tp_check(model=model, tp=tp, field=field)
    if model.attention == "MLA":
        return model.layers * (model.kv_lora_rank + model.qk_rope_head_dim) * kv.bytes
    heads, _ = kv_heads_per_gpu(model=model, tp=tp)
    return model.layers * 2 * heads * model.head_dim * kv.bytes


def prefill_flops_per_uncached_token(*, model: Model, prompt_tokens: float,
                                     uncached_tokens: float) -> float:
    """FLOPs per prompt token that prefill must compute when only the last `uncached_tokens` of
    a `prompt_tokens` prompt miss the prefix cache (FLOP per token).

    2 per non-embedding (active) parameter, plus attention: each computed token attends to the
    cached prefix and to the computed tokens before it and itself, on average
    prompt − uncached/2 + 1/2 positions (with nothing cached, the familiar (prompt + 1)/2). The
    output head runs for the last position only and is left out per token.
    Llama 3.1 70B, 2,000 tokens all computed: 2 × 68,452,360,192 + 2,621,440 × 1,000.5 =
    139,527,471,104.
    """
    parts = params_count_model(model)
    positions = prompt_tokens - uncached_tokens / 2 + 0.5
    return 2 * parts["non_embedding_active"] + attention_flops_per_token_pair(model) * positions


def prefill_pass_replica(*, model: Model, gpu: Gpu, tp: int, w: Dtype, emb: Dtype, kv: Dtype,
                         prompt_tokens: float, uncached_tokens: float,
                         bandwidth_efficiency: float, mfu: float) -> dict[str, float | str]:
    """One prompt's prefill on a replica of `tp` GPUs as a roofline bound (FLOP, bytes, seconds).

    Compute: the computed tokens (at least one: the last prompt token is always recomputed)
    × FLOPs per computed token ÷ (tp × the format's dense peak × `mfu`). Memory: each GPU reads
    its share of the weights the pass touches (every expert a batch of that many tokens
    reaches) and reads or writes the whole prompt's KV. The pass takes the larger; GPU-seconds
    per computed token are tp × that ÷ the computed tokens (a prefill batched with others can
    only amortise the weight reads further).
    Llama 3.1 70B in BF16 on 4 × H100 SXM, 2,000 tokens all computed, MFU 0.5, 80% of the
    bandwidth: 2,000 × 139,527,471,104 ÷ (4 × 989.5 TFLOP/s × 0.5) = 0.141 s of compute against
    about 36 GB ÷ 2.68 TB/s = 13 ms of reads: compute-bound.
    """
    computed = max(1.0, float(uncached_tokens))
    flops_token = prefill_flops_per_uncached_token(model=model, prompt_tokens=prompt_tokens,
                                                   uncached_tokens=uncached_tokens)
    flops = computed * flops_token / tp
    compute = flops / (peak_flops_get(gpu=gpu, dtype=w) * mfu)
    parts = params_count_model(model)
    body = weights_read_params(model=model, batch=max(1, round(computed))) - parts["head"]
    weights = (body * w.bytes + parts["head"] * emb.bytes) / tp
    kv_bytes = prompt_tokens * kv_bytes_per_token_gpu(model=model, tp=tp, kv=kv)
    memory = (weights + kv_bytes) / (gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
    seconds = max(compute, memory)
    return {"computed": computed, "flops_per_token": flops_token, "flops": flops,
            "weights": weights, "kv": kv_bytes, "bytes": weights + kv_bytes,
            "compute": compute, "memory": memory, "seconds": seconds,
            "bound": "compute" if compute >= memory else "memory",
            "gpu_seconds_per_token": tp * seconds / computed}


def speculative_gain_at_batch(*, step_plain: float, step_verify: float, alpha: float,
                              gamma: int, draft_cost: float) -> float:
    """Tokens per unit of time with speculative decoding over without (×): expected tokens per
    verification step (1 − α^(γ+1))/(1 − α) (Leviathan et al., eq. 1) divided by that step's
    cost relative to a plain step, plus γ draft steps at `draft_cost` of a plain step each.
    At a memory-bound batch the verify step costs what a plain one does: α 0.8, γ 2, c 0.05 →
    2.44 / (1 + 0.1) = 2.218."""
    expected = gamma + 1 if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)
    return expected / (step_verify / step_plain + gamma * draft_cost)


def decode_step_replica(*, model: Model, gpu: Gpu, tp: int, w: Dtype, emb: Dtype,
                        kv_token_gpu: float, batch: float, context: float, queries: int,
                        bandwidth_efficiency: float, mfu: float) -> dict[str, float | str]:
    """One decode step of `batch` sequences of `context` tokens on each GPU of the replica,
    `queries` tokens per sequence (1, or γ + 1 when verifying drafts) (bytes, FLOP, seconds)."""
    parts = params_count_model(model)
    body = weights_read_params(model=model, batch=max(1, round(batch * queries))) - parts["head"]
    weights = (body * w.bytes + parts["head"] * emb.bytes) / tp
    kv = batch * context * kv_token_gpu
    flops = batch * queries * decode_flops_per_sequence(model, context) / tp
    memory = (weights + kv) / (gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
    compute = flops / (peak_flops_get(gpu=gpu, dtype=w) * mfu)
    return {"weights": weights, "kv": kv, "bytes": weights + kv, "flops": flops,
            "memory": memory, "compute": compute, "seconds": max(memory, compute),
            "bound": "memory" if memory >= compute else "compute"}


def decode_batch_for_target(*, step_at, target_seconds: float,
                            high: int = BATCH_SEARCH_MAX) -> int:
    """The largest whole batch whose step `step_at(b)` (seconds) is within `target_seconds`, or 0
    when even one sequence misses it. The step grows with the batch, so a bisection finds it."""
    if step_at(1) > target_seconds:
        return 0
    if step_at(high) <= target_seconds:
        return high
    low = 1
    while high - low > 1:
        middle = (low + high) // 2
        if step_at(middle) <= target_seconds:
            low = middle
        else:
            high = middle
    return low


def replica_decode(*, model: Model, gpu: Gpu, tp: int, w: Dtype, kv: Dtype, context: float,
                   memory_fraction: float, reserve_bytes: float, bandwidth_efficiency: float,
                   mfu: float, tpot_target_seconds: float,
                   batch_cap: int | None = None, field: str = "tp") -> dict:
    """A replica's decode side (bytes, sequences, seconds, tokens/s): weights and free memory
    per GPU, KV per token per GPU, the batch memory holds (`b_mem`), the batch that meets the
    target (`b_slo`), the batch run (the smallest of those and `batch_cap`) and which limit
    binds, the step there and its bound, tokens/s. Refuses (naming `field`) a replica whose
    weights do not fit, or where no batch meets the target."""
    emb = embedding_dtype_resolve(model=model, dtype=w)
    weights = weight_bytes_model(model=model, dtype=w, embedding=emb)["total"] / tp
    usable = gpu.memory_total_bytes * memory_fraction - reserve_bytes
    free = usable - weights
    if free <= 0:
        raise ArithmeticInputError(
            field=field, message=f"{w.name} weights of {model.name} take {bytes_short(weights)} "
            f"on each of {tp} × {gpu.name}, more than the {bytes_short(usable)} usable")
    kv_token = kv_bytes_per_token_gpu(model=model, tp=tp, kv=kv, field=field)
    b_mem = math.floor(free / (kv_token * context))
    if b_mem < 1:
        raise ArithmeticInputError(
            field=field, message=f"no room for one sequence of {number_format(context)} tokens "
            f"beside the weights on {tp} × {gpu.name}")

    def step(batch: float, queries: int = 1) -> dict:
        return decode_step_replica(model=model, gpu=gpu, tp=tp, w=w, emb=emb,
                                   kv_token_gpu=kv_token, batch=batch, context=context,
                                   queries=queries, bandwidth_efficiency=bandwidth_efficiency,
                                   mfu=mfu)

    b_slo = decode_batch_for_target(step_at=lambda b: step(b)["seconds"],
                                    target_seconds=tpot_target_seconds)
    if b_slo < 1:
        raise ArithmeticInputError(
            field="tpot_target_ms",
            message=f"no batch meets the {seconds_format(tpot_target_seconds)} target on "
            f"{tp} × {gpu.name}: one sequence's step takes "
            f"{seconds_format(step(1)['seconds'])}")
    limits = {"KV memory": b_mem, "latency target": b_slo}
    if batch_cap is not None:
        limits["engine cap"] = batch_cap
    limit = min(limits, key=lambda name: limits[name])
    batch = limits[limit]
    at = step(batch)
    return {
        "weights": weights, "usable": usable, "free": free, "kv_token": kv_token,
        "b_mem": b_mem, "b_slo": b_slo, "batch": batch, "limit": limit, "step": at,
        "step_seconds": at["seconds"], "bound": at["bound"],
        "tokens_per_second": batch / at["seconds"], "step_of": step, "emb": emb,
    }


def replica_cost_model(*, model: Model, gpu: Gpu, tp: int, w: Dtype, kv: Dtype,
                       input_tokens: float, output_tokens: float, memory_fraction: float,
                       reserve_bytes: float, bandwidth_efficiency: float, mfu_decode: float,
                       mfu_prefill: float, tpot_target_seconds: float, batch_cap: int | None,
                       price_per_hour: float, discount: float, utilisation: float,
                       prefix_hit: float, spec_alpha: float | None = None, spec_gamma: int = 0,
                       spec_draft_cost: float = 0.0, disagg_gain: float = 1.0,
                       field: str = "tp") -> dict:
    """Dollars per million output and input tokens for one replica, checked inputs assumed
    (USD, and the replica's decode figures).

    Output: the replica's hourly price (`tp` GPUs at `price_per_hour` less `discount`) over the
    output tokens it makes in an hour at its batch, divided by `utilisation` (the share of paid
    hours doing useful work). Speculative decoding multiplies tokens/s by its gain at this
    batch, when that gain exceeds 1; `disagg_gain` multiplies them too. Input: the GPU-time of
    prefilling the uncached share of each prompt (`prefill_pass_replica`, a roofline of its
    FLOPs at `mfu_prefill` and its reads), charged per input token
    (cached ones included), at the same price and utilisation. Prefill and decode time are
    added as if they never overlapped, an upper bound.
    """
    context = input_tokens + output_tokens / 2
    dec = replica_decode(model=model, gpu=gpu, tp=tp, w=w, kv=kv, context=context,
                         memory_fraction=memory_fraction, reserve_bytes=reserve_bytes,
                         bandwidth_efficiency=bandwidth_efficiency, mfu=mfu_decode,
                         tpot_target_seconds=tpot_target_seconds, batch_cap=batch_cap,
                         field=field)
    gain = 1.0
    verify = None
    if spec_alpha is not None and spec_gamma:
        verify = dec["step_of"](dec["batch"], spec_gamma + 1)
        gain = speculative_gain_at_batch(step_plain=dec["step_seconds"],
                                         step_verify=verify["seconds"], alpha=spec_alpha,
                                         gamma=spec_gamma, draft_cost=spec_draft_cost)
    applied = gain > 1
    tps = dec["tokens_per_second"] * (gain if applied else 1.0) * disagg_gain
    price = price_per_hour * (1 - discount)
    out = price * tp / 3600 / tps / utilisation * 1e6
    uncached = input_tokens * (1 - prefix_hit)
    prefill = prefill_pass_replica(model=model, gpu=gpu, tp=tp, w=w, emb=dec["emb"], kv=kv,
                                   prompt_tokens=input_tokens, uncached_tokens=uncached,
                                   bandwidth_efficiency=bandwidth_efficiency, mfu=mfu_prefill)
    flops_in = prefill["flops_per_token"]
    gpu_seconds_in = prefill["gpu_seconds_per_token"]
    dollars_in = price / 3600 * gpu_seconds_in * (1 - prefix_hit) / utilisation * 1e6
    return {**dec, "context": context, "spec_gain": gain, "spec_applied": applied,
            "spec_verify": verify, "tokens_per_second_effective": tps, "price": price,
            "out": out, "in": dollars_in, "prefill_flops_per_token": flops_in,
            "prefill_gpu_seconds_per_token": gpu_seconds_in, "uncached": uncached,
            "prefill": prefill,
            "disagg_gain": disagg_gain}


def replica_inputs_check(*, model: str, gpu: str, tp: int, dtype: str, kv_dtype: str | None,
                         input_tokens: int, output_tokens: int, memory_fraction: float,
                         reserve_gb: float, bandwidth_efficiency: float, mfu_decode: float,
                         mfu_prefill: float, tpot_target_ms: float) -> dict:
    """The replica's inputs resolved and range-checked, each error naming its field."""
    m = model_get(model)
    g = gpu_get(gpu)
    w = dtype_get(dtype)
    peak_flops_get(gpu=g, dtype=w)
    kv = kv_dtype_get(kv_dtype, model=m)
    inp = count_check(input_tokens, field="input_tokens", maximum=TOKENS_MAX)
    out = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=inp + out, field="output_tokens",
                  what=f"the prompt ({inp:,}) plus the answer ({out:,})")
    return {
        "model": m, "gpu": g, "w": w, "kv": kv,
        "tp": tp_check(model=m, tp=count_check(tp, field="tp", maximum=TP_MAX)),
        "input_tokens": inp, "output_tokens": out,
        "memory_fraction": fraction_check(memory_fraction, field="memory_fraction"),
        "reserve_bytes": number_check(reserve_gb, field="reserve_gb", minimum=0.0,
                                      maximum=RESERVE_GB_MAX, allow_minimum=True) * GB,
        "bandwidth_efficiency": fraction_check(bandwidth_efficiency,
                                               field="bandwidth_efficiency"),
        "mfu_decode": fraction_check(mfu_decode, field="mfu_decode"),
        "mfu_prefill": fraction_check(mfu_prefill, field="mfu_prefill"),
        "tpot_target_seconds": number_check(tpot_target_ms, field="tpot_target_ms",
                                            maximum=1e6) / 1e3,
    }


def replica_steps(*, r: dict, k: dict, what: str = "") -> tuple[Step, ...]:
    """The worked steps of one replica's decode and cost (`r` from `replica_cost_model`, `k`
    the checked inputs), each label prefixed by `what`."""
    m, g, w, kv, tp = k["model"], k["gpu"], k["w"], k["kv"], k["tp"]
    at = r["step"]
    pf = r["prefill"]
    pre = f"{what}: " if what else ""
    bw = g.bandwidth_bytes_per_second * k["bandwidth_efficiency"]
    achieved = peak_flops_get(gpu=g, dtype=w) * k["mfu_decode"]
    gains = ((f" × {number_format(r['spec_gain'])} speculative" if r["spec_applied"] else "")
             + (f" × {number_format(r['disagg_gain'])} disaggregation"
                if r["disagg_gain"] != 1 else ""))
    return (
        Step(f"{pre}weights per GPU", f"{w.name} weights of {m.name} (embedding and head in "
             f"{r['emb'].name}) ÷ {tp} GPU{'s' if tp > 1 else ''}", r["weights"], "B",
             bytes_format(r["weights"])),
        Step(f"{pre}free for KV per GPU", f"{bytes_short(g.memory_total_bytes)} × "
             f"{number_format(k['memory_fraction'])} − {bytes_short(k['reserve_bytes'])} reserve "
             f"− {bytes_short(r['weights'])}", r["free"], "B", bytes_format(r["free"])),
        Step(f"{pre}KV per token per GPU ({kv.name})", f"{m.name} over {count_phrase(tp, 'GPU')}",
             r["kv_token"], "B", bytes_format(r["kv_token"])),
        Step(f"{pre}sequences memory holds", f"⌊{bytes_short(r['free'])} ÷ "
             f"({bytes_short(r['kv_token'])} × {number_format(r['context'])} tokens, the prompt "
             "plus half the answer)⌋", r["b_mem"], "sequences",
             count_format(r["b_mem"], "sequence")),
        Step(f"{pre}sequences the latency target allows", "the largest batch whose step is "
             f"within {seconds_format(k['tpot_target_seconds'])}", r["b_slo"], "sequences",
             count_format(r["b_slo"], "sequence")),
        Step(f"{pre}batch (limited by {r['limit']})", "the smallest of the limits",
             r["batch"], "sequences", count_format(r["batch"], "sequence")),
        Step(f"{pre}decode step ({r['bound']}-bound)",
             f"max({bytes_short(at['bytes'])} ÷ {bandwidth_format(bw)}, "
             f"{flops_format(at['flops'])} ÷ {rate_of_format(achieved)})",
             at["seconds"], "s", seconds_format(at["seconds"])),
        Step(f"{pre}output tokens/s per replica",
             f"{r['batch']:,} ÷ {seconds_format(at['seconds'])}{gains}",
             r["tokens_per_second_effective"], "tokens/s",
             rate_format(r["tokens_per_second_effective"], "tokens/s")),
        Step(f"{pre}dollars per million output tokens",
             f"{tp} × {money_format(r['price'])}/h ÷ 3,600 ÷ "
             f"{number_format(r['tokens_per_second_effective'])} tokens/s ÷ "
             f"{percent_format(k['utilisation'])} utilisation × 10⁶", r["out"], "USD",
             money_format(r["out"])),
        Step(f"{pre}prefill of one prompt ({pf['bound']}-bound)",
             f"max({number_format(pf['computed'])} computed tokens × "
             f"{scientific_format(r['prefill_flops_per_token'], digits=4)} FLOP ÷ "
             f"{count_phrase(tp, 'GPU')} ÷ "
             f"({rate_of_format(peak_flops_get(gpu=g, dtype=w))} × "
             f"{number_format(k['mfu_prefill'])}), {bytes_short(pf['bytes'])} of weights and KV "
             f"per GPU ÷ {bandwidth_format(bw)})", pf["seconds"], "s",
             seconds_format(pf["seconds"])),
        Step(f"{pre}dollars per million input tokens",
             f"{tp} × {seconds_format(pf['seconds'])} ÷ {amount_phrase(pf['computed'], 'tokens')} "
             f"= {seconds_format(r['prefill_gpu_seconds_per_token'])} GPU-time per computed "
             f"token × {money_format(r['price'])}/h ÷ 3,600 × "
             f"{percent_format(1 - k['prefix_hit'])} computed ÷ "
             f"{percent_format(k['utilisation'])} × 10⁶", r["in"], "USD", money_format(r["in"])),
    )


def replica_cost(
    *,
    model: str,
    gpu: str,
    tp: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    batch_cap: int | None = None,
    tpot_target_ms: float = 50.0,
    input_tokens: int = 2_000,
    output_tokens: int = 400,
    memory_fraction: float = 0.9,
    reserve_gb: float = 5.0,
    bandwidth_efficiency: float = 0.8,
    mfu_decode: float = 0.5,
    mfu_prefill: float = 0.5,
    price_per_hour: float | None = None,
    discount: float = 0.0,
    utilisation: float = 1.0,
    prefix_hit: float = 0.0,
    spec_alpha: float | None = None,
    spec_gamma: int = 0,
    spec_draft_cost: float = 0.0,
    disagg_gain: float = 1.0,
) -> Result:
    """Dollars per million output and input tokens (USD) for a replica of `tp` `gpu`s, with its
    batch, the limit that sets it, its decode step as a roofline bound and its tokens/s.

    See `replica_cost_model`; `price_per_hour` defaults to the catalog's assumed price.
    """
    k = replica_inputs_check(model=model, gpu=gpu, tp=tp, dtype=dtype, kv_dtype=kv_dtype,
                             input_tokens=input_tokens, output_tokens=output_tokens,
                             memory_fraction=memory_fraction, reserve_gb=reserve_gb,
                             bandwidth_efficiency=bandwidth_efficiency, mfu_decode=mfu_decode,
                             mfu_prefill=mfu_prefill, tpot_target_ms=tpot_target_ms)
    price = (k["gpu"].price_per_hour_assumed if price_per_hour is None
             else number_check(price_per_hour, field="price_per_hour", maximum=1e4))
    k.update(
        utilisation=fraction_check(utilisation, field="utilisation"),
        prefix_hit=fraction_check(prefix_hit, field="prefix_hit", allow_zero=True),
        discount=fraction_check(discount, field="discount", allow_zero=True, allow_one=False))
    cap = None if batch_cap is None else count_check(batch_cap, field="batch_cap",
                                                     maximum=USERS_MAX)
    alpha = None
    gamma = 0
    if spec_alpha is not None:
        alpha = fraction_check(spec_alpha, field="spec_alpha", allow_zero=True)
        gamma = count_check(spec_gamma, field="spec_gamma", maximum=SPEC_GAMMA_MAX)
        number_check(spec_draft_cost, field="spec_draft_cost", minimum=0.0, maximum=1.0,
                     allow_minimum=True)
    number_check(disagg_gain, field="disagg_gain", minimum=1.0, maximum=10.0, allow_minimum=True)
    r = replica_cost_model(model=k["model"], gpu=k["gpu"], tp=k["tp"], w=k["w"], kv=k["kv"],
                           input_tokens=k["input_tokens"], output_tokens=k["output_tokens"],
                           memory_fraction=k["memory_fraction"], reserve_bytes=k["reserve_bytes"],
                           bandwidth_efficiency=k["bandwidth_efficiency"],
                           mfu_decode=k["mfu_decode"], mfu_prefill=k["mfu_prefill"],
                           tpot_target_seconds=k["tpot_target_seconds"], batch_cap=cap,
                           price_per_hour=price, discount=k["discount"],
                           utilisation=k["utilisation"], prefix_hit=k["prefix_hit"],
                           spec_alpha=alpha, spec_gamma=gamma, spec_draft_cost=spec_draft_cost,
                           disagg_gain=disagg_gain)
    return Result(
        values={
            "weights_per_gpu_bytes": r["weights"], "free_bytes": r["free"],
            "kv_bytes_per_token_per_gpu": r["kv_token"], "batch_memory": r["b_mem"],
            "batch_target": r["b_slo"], "batch": r["batch"], "batch_limit": r["limit"],
            "step_seconds": r["step_seconds"], "bound": r["bound"],
            "tokens_per_second": r["tokens_per_second_effective"],
            "spec_gain": r["spec_gain"], "spec_applied": r["spec_applied"],
            "dollars_per_million_output": r["out"], "dollars_per_million_input": r["in"],
            "prefill_flops_per_token": r["prefill_flops_per_token"],
            "prefill_gpu_seconds_per_token": r["prefill_gpu_seconds_per_token"],
        },
        steps=replica_steps(r=r, k=k),
    )
