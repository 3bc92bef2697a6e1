"""Disaggregated serving: prefill on one GPU, decode on another, so the prompt's KV cache must
cross the link between them."""

import math

from problems.arithmetic.catalog import gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.links import LINKS
from problems.arithmetic.compute import kv_bytes_per_token_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import context_check, embedding_dtype_resolve, kv_cache
from problems.arithmetic.replica import (
    kv_bytes_per_token_gpu,
    prefill_pass_replica,
    replica_decode,
    replica_inputs_check,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_format,
    bytes_short,
    number_format,
    percent_format,
    seconds_format,
)


def kv_transfer(
    *,
    model: str,
    prompt_tokens: int,
    dtype: str | None = "bf16",
    gpu: str | None = None,
    link_gb_per_second: float | None = None,
    link_efficiency: float = 1.0,
) -> Result:
    """KV bytes of a `prompt_tokens` prompt (bytes) and the time to move them (seconds).

    The link is `link_gb_per_second` (GB/s, one direction) when given, else `gpu`'s
    interconnect in one direction (datasheets quote both directions together). `dtype` is the
    KV cache's format (None: the model's own precision).
    """
    m = model_get(model)
    kv_d = kv_dtype_get(dtype, model=m, field="dtype")
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    context_check(model=m, tokens=prompt_tokens, field="prompt_tokens")
    link_efficiency = fraction_check(link_efficiency, field="link_efficiency")
    if link_gb_per_second is not None:
        link = number_check(link_gb_per_second, field="link_gb_per_second", maximum=1e6) * GB
        link_source = "given link, one direction"
    elif gpu is not None:
        g = gpu_get(gpu)
        link = g.interconnect_one_way_bytes_per_second
        link_source = (
            f"{g.interconnect}: {bandwidth_format(g.interconnect_bytes_per_second)} both ways ÷ 2"
        )
    else:
        raise ArithmeticInputError(field="gpu", message="give a gpu or link_gb_per_second")
    kv = kv_cache(model=model, tokens=prompt_tokens, dtype=kv_d.id)
    total = kv["total_bytes"]
    usable = link * link_efficiency
    seconds = total / usable
    return Result(
        values={
            "bytes": total,
            "bytes_per_token": kv["bytes_per_token"],
            "link_bytes_per_second": usable,
            "seconds": seconds,
        },
        steps=(
            Step(
                "KV to move",
                f"{bytes_short(kv['bytes_per_token'])} per token × "
                f"{prompt_tokens:,} tokens ({m.name}, {kv_d.kv_label})",
                total,
                "B",
                bytes_format(total),
            ),
            Step(
                "Link bandwidth",
                f"{link_source} × {link_efficiency:g} efficiency",
                usable,
                "B/s",
                bandwidth_format(usable),
            ),
            Step(
                "Transfer time",
                f"{bytes_short(total)} ÷ {bandwidth_format(usable)}",
                seconds,
                "s",
                seconds_format(seconds),
            ),
        ),
    )


def pipelined_seconds(*, first: float, second: float, stages: int) -> float:
    """Two stages over `stages` equal pieces, piece i sent as soon as it is made (seconds):
    max(first, second) + min(first, second) / stages. With 80 layers, a 600 ms prefill and a
    60 ms transfer finish together at 600 + 60/80 = 600.75 ms."""
    return max(first, second) + min(first, second) / stages


def disagg_plan(
    *,
    model: str,
    gpu: str,
    tp: int = 4,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    prompt_tokens: int,
    output_tokens: int,
    requests_per_second: float = 1.0,
    link_efficiency: float = 0.8,
    mfu_prefill: float = 0.5,
    mfu_decode: float = 0.5,
    bandwidth_efficiency: float = 0.8,
    tpot_target_ms: float = 50.0,
    memory_fraction: float = 0.9,
    reserve_gb: float = 5.0,
) -> Result:
    """Prefill and decode on separate replicas of `tp` GPUs each: the KV bytes one prompt hands
    over (bytes), its transfer time over NVLink, 400 Gb/s InfiniBand and 100 GbE against the
    prefill time (seconds), and how many prefill and decode replicas a load needs.

    Each GPU of the prefill replica sends its own share of the KV (its KV heads) to its peer
    over its own link, all in parallel (`seconds`); where one link serves the whole replica,
    the prompt's KV crosses it once, each head or MLA latent once (`whole_seconds`: 2.68 GB of
    Llama 3.1 70B at 8,192 tokens over 100 GbE at 80% is 268 ms, 4 × the 67.1 ms of each of 4
    GPUs' shares; DeepSeek-V3's latent, whole on every GPU, the same 57.6 ms). Sent whole
    after prefill the transfer adds its full time to TTFT, sent layer by layer as prefill goes
    only what sticks out (`pipelined_seconds`). Prefill is a roofline bound of one prompt at
    `mfu_prefill`; a decode replica runs the batch its KV memory and the TPOT target allow, at
    a context of the prompt plus half the answer (`replica_decode`). Replica-seconds per
    request: prefill the prompt's pass, decode output_tokens × step ÷ batch; their ratio is the
    pools' ratio.
    """
    k = replica_inputs_check(model=model, gpu=gpu, tp=tp, dtype=dtype, kv_dtype=kv_dtype,
                             input_tokens=prompt_tokens, output_tokens=output_tokens,
                             memory_fraction=memory_fraction, reserve_gb=reserve_gb,
                             bandwidth_efficiency=bandwidth_efficiency, mfu_decode=mfu_decode,
                             mfu_prefill=mfu_prefill, tpot_target_ms=tpot_target_ms)
    rate = number_check(requests_per_second, field="requests_per_second", maximum=1e6)
    link_efficiency = fraction_check(link_efficiency, field="link_efficiency")
    m, g, w, kv, n = k["model"], k["gpu"], k["w"], k["kv"], k["tp"]
    emb = embedding_dtype_resolve(model=m, dtype=w)
    pre = prefill_pass_replica(model=m, gpu=g, tp=n, w=w, emb=emb, kv=kv,
                               prompt_tokens=prompt_tokens, uncached_tokens=prompt_tokens,
                               bandwidth_efficiency=k["bandwidth_efficiency"],
                               mfu=k["mfu_prefill"])
    total = prompt_tokens * kv_bytes_per_token_model(m, kv)
    per_gpu = prompt_tokens * kv_bytes_per_token_gpu(model=m, tp=n, kv=kv)
    links = []
    for name, rate_one_way in (
        (f"{g.interconnect} (within a node)", g.interconnect_one_way_bytes_per_second),
        (LINKS["ib-ndr"].name, LINKS["ib-ndr"].bytes_per_second),
        (LINKS["eth-100g"].name, LINKS["eth-100g"].bytes_per_second),
    ):
        usable = rate_one_way * link_efficiency
        seconds = per_gpu / usable if rate_one_way > 0 else math.inf
        overlapped = pipelined_seconds(first=pre["seconds"], second=seconds, stages=m.layers)
        links.append({"name": name, "line_rate": rate_one_way, "usable": usable,
                      "seconds": seconds, "ratio": seconds / pre["seconds"],
                      "whole_seconds": total / usable if rate_one_way > 0 else math.inf,
                      "exposed_whole": seconds, "exposed_layered": overlapped - pre["seconds"]})
    dec = replica_decode(model=m, gpu=g, tp=n, w=w, kv=kv,
                         context=prompt_tokens + output_tokens / 2,
                         memory_fraction=k["memory_fraction"],
                         reserve_bytes=k["reserve_bytes"],
                         bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu_decode"],
                         tpot_target_seconds=k["tpot_target_seconds"])
    decode_busy = output_tokens * dec["step_seconds"] / dec["batch"]
    ratio = pre["seconds"] / decode_busy
    prefill_replicas = math.ceil(rate * pre["seconds"] - 1e-9)
    decode_replicas = math.ceil(rate * decode_busy - 1e-9)
    values = {
        "kv_bytes": total, "kv_bytes_per_gpu": per_gpu,
        "prefill_seconds": pre["seconds"], "prefill_bound": pre["bound"],
        "step_seconds": dec["step_seconds"], "batch": dec["batch"], "batch_limit": dec["limit"],
        "decode_usable_gpu": dec["usable"], "decode_weights_gpu": dec["weights"],
        "decode_free_gpu": dec["free"], "memory_fraction": k["memory_fraction"],
        "reserve_bytes": k["reserve_bytes"], "decode_kv_sequence_gpu": dec["kv_token"]
        * (prompt_tokens + output_tokens / 2),
        "decode_busy": decode_busy, "ratio": ratio,
        "prefill_replicas": prefill_replicas, "decode_replicas": decode_replicas,
        "links": links,
    }
    link_steps = []
    for link in links:
        link_steps.append(Step(
            f"Transfer over {link['name']}",
            f"{bytes_short(per_gpu)} ÷ ({bandwidth_format(link['line_rate'])} × "
            f"{percent_format(link_efficiency)}): {percent_format(link['ratio'])} of the "
            f"prefill; layer by layer, {seconds_format(link['exposed_layered'])} sticks out",
            link["seconds"], "s", seconds_format(link["seconds"])))
    return Result(values=values, steps=(
        Step("KV the prompt leaves behind", f"{prompt_tokens:,} tokens × "
             f"{bytes_short(kv_bytes_per_token_model(m, kv))} per token ({m.name}, "
             f"{kv.kv_label})", total, "B", bytes_format(total)),
        Step("Each GPU's share",
             (f"{n} GPUs, each holding and sending the whole latent (MLA's cache is not split "
              "by heads)") if m.attention == "MLA" else
             f"{n} GPUs, each sending the KV heads it holds", per_gpu, "B",
             bytes_format(per_gpu)),
        Step("Prefill of the prompt",
             f"{n} × {g.name} at {percent_format(k['mfu_prefill'])} MFU: "
             f"compute {seconds_format(pre['compute'])}, memory "
             f"{seconds_format(pre['memory'])}, {pre['bound']}-bound",
             pre["seconds"], "s", seconds_format(pre["seconds"])),
        *link_steps,
        Step("KV room per GPU on a decode replica",
             f"{bytes_short(g.memory_total_bytes)} × {percent_format(k['memory_fraction'])} − "
             f"{bytes_short(k['reserve_bytes'])} reserve − {bytes_short(dec['weights'])} of "
             f"weights; one sequence at {number_format(prompt_tokens + output_tokens / 2)} "
             f"tokens takes {bytes_short(dec['kv_token'] * (prompt_tokens + output_tokens / 2))}"
             f" of it, so memory holds {dec['b_mem']:,}",
             dec["free"], "B", bytes_format(dec["free"])),
        Step("Decode step on a decode replica",
             f"batch {dec['batch']:,} (set by the {dec['limit']}), context "
             f"{number_format(prompt_tokens + output_tokens / 2)} tokens, {dec['bound']}-bound",
             dec["step_seconds"], "s", seconds_format(dec["step_seconds"])),
        Step("Decode replica-time per request",
             f"{output_tokens:,} tokens × {seconds_format(dec['step_seconds'])} ÷ "
             f"{dec['batch']:,} sequences", decode_busy, "s", seconds_format(decode_busy)),
        Step("Prefill : decode replicas",
             f"{seconds_format(pre['seconds'])} ÷ {seconds_format(decode_busy)}", ratio, "",
             f"{number_format(ratio)} : 1"),
        Step("Replicas for the load",
             f"{number_format(rate)} requests/s: ⌈{number_format(rate)} × "
             f"{seconds_format(pre['seconds'])}⌉ prefill, ⌈{number_format(rate)} × "
             f"{seconds_format(decode_busy)}⌉ decode (each at 100% busy, no headroom)",
             prefill_replicas + decode_replicas, "replicas",
             f"{prefill_replicas} prefill + {decode_replicas} decode"),
    ))


def kv_handoff_links(*, nbytes: float, gpu: str = "h100-sxm",
                     link_efficiency: float = 1.0) -> list[dict]:
    """Seconds to move `nbytes` of KV over `gpu`'s own interconnect (one direction), a 400 Gb/s
    InfiniBand port and 100 GbE, at `link_efficiency` of each line rate: what the same handoff
    would take between machines. 1 MB over 100 GbE at line rate: 1e6 ÷ 12.5e9 = 80 µs."""
    g = gpu_get(gpu)
    link_efficiency = fraction_check(link_efficiency, field="link_efficiency")
    links = ((f"{g.interconnect} ({g.name})", g.interconnect_one_way_bytes_per_second),
             (LINKS["ib-ndr"].name, LINKS["ib-ndr"].bytes_per_second),
             (LINKS["eth-100g"].name, LINKS["eth-100g"].bytes_per_second))
    return [{"name": name, "bytes_per_second": rate * link_efficiency,
             "seconds": nbytes / (rate * link_efficiency)} for name, rate in links if rate > 0]
