"""Disaggregated serving: prefill on one GPU, decode on another, so the prompt's KV cache must
cross the link between them."""

import math

from problems.arithmetic.catalog import gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.links import GPU_HOST_LINK, LINKS, NODE_GPUS
from problems.arithmetic.compute import kv_bytes_per_token_model
from problems.arithmetic.decode import weights_read_params
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.interconnect import collective_links, peer_link
from problems.arithmetic.memory import (
    context_check,
    embedding_dtype_resolve,
    kv_cache,
    params_count_model,
)
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
from problems.arithmetic.wording import count_phrase


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

    The link is `link_gb_per_second` (GB/s, one direction) when given, else what a copy from
    one `gpu` to another of its node gets, one direction (`interconnect.peer_link`: datasheets
    quote both directions together, and an MI300X reaches a peer over one of its 7 links).
    `dtype` is the KV cache's format (None: the model's own precision).
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
        link, link_source = peer_link(gpu_get(gpu))
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
                f"{count_phrase(prompt_tokens, 'token')} ({m.name}, {kv_d.kv_label})",
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


PREFILL_TOKEN_BUDGET = 8_192  # tokens one prefill pass takes, like vLLM's max_num_batched_tokens
KV_BLOCK_TOKENS = 16  # vLLM's default KV block size, tokens
ACTIVATION_BYTES = 2  # BF16 activations, what tensor-parallel all-reduces carry
COLOCATED_BATCH_STEPS = 1.08  # the colocated batch search tries batches about 8% apart


def prefill_batched(*, model, gpu, tp: int, w, emb, kv, prompt_tokens: int, budget: int,
                    bandwidth_efficiency: float, mfu: float) -> dict:
    """Replica-seconds of prefill one prompt costs on a loaded prefill replica that fills each
    pass with up to `budget` tokens (seconds): prompts shorter than the budget share a pass,
    ⌊budget ÷ prompt⌋ of them, and so share its weight reads; a longer prompt is chunked over
    ⌈prompt ÷ budget⌉ passes, each reading the weights again. Compute is the prompt's own.
    DeepSeek-V3 in FP8 on 8 × H200, 256-token prompts, budget 8,192: 32 a pass, so the
    21.8 ms weight read is 0.68 ms each, below the 2.33 ms of compute: 2.33 ms, not 21.8."""
    lone = prefill_pass_replica(model=model, gpu=gpu, tp=tp, w=w, emb=emb, kv=kv,
                                prompt_tokens=prompt_tokens, uncached_tokens=prompt_tokens,
                                bandwidth_efficiency=bandwidth_efficiency, mfu=mfu)
    per_pass = max(1, budget // prompt_tokens)
    passes = math.ceil(prompt_tokens / budget)
    parts = params_count_model(model)
    body = weights_read_params(model=model, batch=min(budget, per_pass * prompt_tokens))
    weights = ((body - parts["head"]) * w.bytes + parts["head"] * emb.bytes) / tp
    memory = (weights * passes / per_pass + lone["kv"]) / (
        gpu.bandwidth_bytes_per_second * bandwidth_efficiency)
    seconds = max(lone["compute"], memory)
    return {"lone": lone, "per_pass": per_pass, "passes": passes, "memory": memory,
            "seconds": seconds, "bound": "compute" if lone["compute"] >= memory else "memory"}


def colocated_capacity(*, prefill_seconds: float, output_tokens: int, step_of, batch_max: int,
                       tpot_target: float) -> dict:
    """Requests per second one colocated replica serves within the TPOT target (requests/s),
    the best over decode batches B up to `batch_max`. Each request's prefill takes
    `prefill_seconds` of the replica, so at λ requests/s prefill holds a share f = λ·P of its
    time and decode the rest: decode keeps up while λ·output ≤ B(1 − f)/s(B), so
    λ ≤ B ÷ (s(B)·output + B·P), and the mean TPOT is s(B) ÷ (1 − f), within the target T
    while λ ≤ (1 − s(B)/T) ÷ P.
    Llama 3.1 70B on 4 × H100, 8,192 + 512 tokens, P = 0.611 s: at B = 55, s = 27.2 ms,
    B ÷ (s·512 + B·P) = 1.16/s but (1 − 27.2/50) ÷ 0.611 = 0.75/s: the target binds."""
    best = {"rate": 0.0, "batch": 1, "step": step_of(1)["seconds"], "binds": "latency target"}
    batch = 1.0
    while True:
        b = min(batch_max, math.floor(batch))
        s = step_of(b)["seconds"]
        if s >= tpot_target:
            break
        decode_rate = b / (s * output_tokens + b * prefill_seconds)
        slo_rate = (1 - s / tpot_target) / prefill_seconds
        rate = min(decode_rate, slo_rate)
        if rate > best["rate"]:
            best = {"rate": rate, "batch": b, "step": s,
                    "binds": "latency target" if slo_rate < decode_rate else "decode work"}
        if b >= batch_max:
            break
        batch = max(batch * COLOCATED_BATCH_STEPS, b + 1)
    best["share"] = best["rate"] * prefill_seconds
    best["tpot"] = best["step"] / (1 - best["share"]) if best["share"] < 1 else math.inf
    return best


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
    prefill_token_budget: int = PREFILL_TOKEN_BUDGET,
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
    budget = count_check(prefill_token_budget, field="prefill_token_budget",
                         maximum=TOKENS_MAX)
    m, g, w, kv, n = k["model"], k["gpu"], k["w"], k["kv"], k["tp"]
    emb = embedding_dtype_resolve(model=m, dtype=w)
    batched = prefill_batched(model=m, gpu=g, tp=n, w=w, emb=emb, kv=kv,
                              prompt_tokens=prompt_tokens, budget=budget,
                              bandwidth_efficiency=k["bandwidth_efficiency"],
                              mfu=k["mfu_prefill"])
    pre = batched["lone"]
    total = prompt_tokens * kv_bytes_per_token_model(m, kv)
    kv_token_gpu = kv_bytes_per_token_gpu(model=m, tp=n, kv=kv)
    per_gpu = prompt_tokens * kv_token_gpu
    # A GPU's network card reaches its memory through the GPU's own PCIe link (GPUDirect RDMA),
    # so a port faster than that link moves no more than the link does.
    host = LINKS[GPU_HOST_LINK[g.id]] if g.id in GPU_HOST_LINK else None
    ib_rate = LINKS["ib-ndr"].bytes_per_second
    ib_capped = host is not None and host.bytes_per_second < ib_rate
    # Prefill and decode replicas share a node's NVLink only if both fit in it. Each prefill
    # GPU sends its share to its own decode GPU: a copy between two GPUs, over one link on a
    # mesh (MI300X), at the whole NVLink figure through NVSwitch.
    in_node = 2 * n <= NODE_GPUS
    links = []
    for name, rate_one_way, applies in (
        (f"{g.interconnect} (within a node"
         + (", one link between each pair of GPUs)" if g.mesh_links else ")"),
         g.peer_one_way_bytes_per_second, in_node),
        (LINKS["ib-ndr"].name + (f", held to the GPU's {host.name}" if ib_capped else ""),
         host.bytes_per_second if ib_capped else ib_rate, True),
        (LINKS["eth-100g"].name, LINKS["eth-100g"].bytes_per_second, True),
    ):
        usable = rate_one_way * link_efficiency
        seconds = per_gpu / usable if rate_one_way > 0 else math.inf
        overlapped = pipelined_seconds(first=pre["seconds"], second=seconds, stages=m.layers)
        links.append({"name": name, "line_rate": rate_one_way, "usable": usable,
                      "seconds": seconds, "ratio": seconds / pre["seconds"],
                      "whole_seconds": total / usable if rate_one_way > 0 else math.inf,
                      "exposed_whole": seconds, "exposed_layered": overlapped - pre["seconds"],
                      "applies": applies})
    # Tensor-parallel prefill all-reduces twice per layer (after attention and after the MLP)
    # the activations of every token: a ring moves 2(n − 1)/n of them through each GPU.
    allreduce_bytes = (2 * m.layers * 2 * (n - 1) / n * prompt_tokens * m.hidden
                       * ACTIVATION_BYTES)
    # Within a node each GPU gets what the GPUs' links give a collective of n (NVLink's whole
    # figure; an MI300X's n − 1 links); a replica wider than a node crosses the network.
    collective_rate, collective_how = collective_links(g, n)
    allreduce_link = (collective_rate if n <= NODE_GPUS
                      else links[1]["line_rate"]) * link_efficiency
    allreduce_seconds = allreduce_bytes / allreduce_link if n > 1 else 0.0
    # A paged KV cache is scattered: each block holds its tokens for one layer (K and V apart,
    # except MLA's single latent), so a prompt is many small regions to move.
    parts_per_layer = 1 if m.attention == "MLA" else 2
    blocks = math.ceil(prompt_tokens / KV_BLOCK_TOKENS)
    regions = blocks * m.layers * parts_per_layer
    region_bytes = KV_BLOCK_TOKENS * kv_token_gpu / (m.layers * parts_per_layer)
    dec = replica_decode(model=m, gpu=g, tp=n, w=w, kv=kv,
                         context=prompt_tokens + output_tokens / 2,
                         memory_fraction=k["memory_fraction"],
                         reserve_bytes=k["reserve_bytes"],
                         bandwidth_efficiency=k["bandwidth_efficiency"], mfu=k["mfu_decode"],
                         tpot_target_seconds=k["tpot_target_seconds"])
    decode_busy = output_tokens * dec["step_seconds"] / dec["batch"]
    prefill_busy = batched["seconds"]
    ratio = prefill_busy / decode_busy
    prefill_replicas = math.ceil(rate * prefill_busy - 1e-9)
    decode_replicas = math.ceil(rate * decode_busy - 1e-9)
    colo = colocated_capacity(prefill_seconds=prefill_busy, output_tokens=output_tokens,
                              step_of=dec["step_of"], batch_max=dec["b_mem"],
                              tpot_target=k["tpot_target_seconds"])
    colocated_replicas = (math.ceil(rate / colo["rate"] - 1e-9) if colo["rate"] > 0
                          else math.inf)
    goodput_split = 1 / (n * (prefill_busy + decode_busy))
    goodput_colocated = colo["rate"] / n
    values = {
        "kv_bytes": total, "kv_bytes_per_gpu": per_gpu,
        "prefill_seconds": pre["seconds"], "prefill_bound": pre["bound"],
        "prefill_busy": prefill_busy, "prefill_busy_bound": batched["bound"],
        "prompts_per_pass": batched["per_pass"], "passes_per_prompt": batched["passes"],
        "prefill_token_budget": budget,
        "allreduce_bytes": allreduce_bytes, "allreduce_seconds": allreduce_seconds,
        "spans_nodes": n > NODE_GPUS, "in_node": in_node, "ib_capped": ib_capped,
        "host_link": host.name if host else "", "kv_regions": regions,
        "kv_region_bytes": region_bytes,
        "colocated_rate": colo["rate"], "colocated_batch": colo["batch"],
        "colocated_share": colo["share"], "colocated_tpot": colo["tpot"],
        "colocated_step": colo["step"], "colocated_binds": colo["binds"],
        "colocated_replicas": colocated_replicas,
        "goodput_split": goodput_split, "goodput_colocated": goodput_colocated,
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
    for link in (x for x in links if x["applies"]):
        link_steps.append(Step(
            f"Transfer over {link['name']}",
            f"{bytes_short(per_gpu)} ÷ ({bandwidth_format(link['line_rate'])} × "
            f"{percent_format(link_efficiency)}): {percent_format(link['ratio'])} of the "
            f"prefill; layer by layer, {seconds_format(link['exposed_layered'])} sticks out",
            link["seconds"], "s", seconds_format(link["seconds"])))
    return Result(values=values, steps=(
        Step("KV the prompt leaves behind", f"{count_phrase(prompt_tokens, 'token')} × "
             f"{bytes_short(kv_bytes_per_token_model(m, kv))} per token ({m.name}, "
             f"{kv.kv_label})", total, "B", bytes_format(total)),
        Step("Each GPU's share",
             (f"{count_phrase(n, 'GPU')}, each holding and sending the whole latent (MLA's "
              "cache is not split by heads)") if m.attention == "MLA" else
             ("the replica's one GPU, sending all of it" if n == 1 else
              f"{count_phrase(n, 'GPU')}, each sending the KV heads it holds"), per_gpu, "B",
             bytes_format(per_gpu)),
        Step("Prefill of the prompt",
             f"{n} × {g.name} at {percent_format(k['mfu_prefill'])} MFU: "
             f"compute {seconds_format(pre['compute'])}, memory "
             f"{seconds_format(pre['memory'])}, {pre['bound']}-bound",
             pre["seconds"], "s", seconds_format(pre["seconds"])),
        *((Step("Tensor-parallel all-reduces in that prefill (if not overlapped)",
             f"2 × {m.layers} layers × 2({n} − 1)/{n} × {count_phrase(prompt_tokens, 'token')} × "
             f"{m.hidden:,} × {ACTIVATION_BYTES} B = {bytes_short(allreduce_bytes)} per GPU ÷ "
             f"{bandwidth_format(allreduce_link)}"
             + (" (the replica spans nodes: over the network)" if n > NODE_GPUS else
                f" ({collective_how}, × {percent_format(link_efficiency)})"),
             allreduce_seconds, "s", seconds_format(allreduce_seconds)),) if n > 1 else ()),
        Step("Prefill replica-time per request, batched",
             f"up to {count_phrase(budget, 'token')} a pass, {batched['per_pass']:,} "
             f"prompt{'s' if batched['per_pass'] != 1 else ''} a pass sharing its weight reads"
             + (f", and each prompt takes {batched['passes']:,} passes" if batched["passes"] > 1
                else "")
             + f"; max(compute {seconds_format(pre['compute'])}, reads "
             f"{seconds_format(batched['memory'])}), {batched['bound']}-bound",
             prefill_busy, "s", seconds_format(prefill_busy)),
        *link_steps,
        Step("Separate regions of paged KV each GPU sends",
             f"⌈{prompt_tokens:,} ÷ {KV_BLOCK_TOKENS}⌉ blocks × {m.layers} layers"
             + (" (one latent each)" if parts_per_layer == 1 else " × K and V")
             + f", {bytes_short(region_bytes)} each", regions, "regions", f"{regions:,}"),
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
             f"{count_phrase(output_tokens, 'token')} × {seconds_format(dec['step_seconds'])} ÷ "
             f"{count_phrase(dec['batch'], 'sequence')}", decode_busy, "s",
             seconds_format(decode_busy)),
        Step("Prefill : decode replicas",
             f"{seconds_format(prefill_busy)} ÷ {seconds_format(decode_busy)}", ratio, "",
             f"{number_format(ratio)} : 1"),
        Step("Replicas for the load",
             f"{number_format(rate)} requests/s: ⌈{number_format(rate)} × "
             f"{seconds_format(prefill_busy)}⌉ prefill, ⌈{number_format(rate)} × "
             f"{seconds_format(decode_busy)}⌉ decode (each at 100% busy, no headroom)",
             prefill_replicas + decode_replicas, "replicas",
             f"{prefill_replicas} prefill + {decode_replicas} decode"),
        Step("One colocated replica's rate within the TPOT target",
             f"best batch {colo['batch']:,}: step {seconds_format(colo['step'])}, prefill "
             f"takes {percent_format(colo['share'])} of the replica, so mean TPOT "
             f"{seconds_format(colo['step'])} ÷ (1 − {percent_format(colo['share'])}) = "
             f"{seconds_format(colo['tpot'])}; the {colo['binds']} binds",
             colo["rate"], "requests/s", f"{number_format(colo['rate'])} requests/s"),
        Step("Colocated replicas for the same load and target",
             f"⌈{number_format(rate)} ÷ {number_format(colo['rate'])}⌉",
             colocated_replicas, "replicas", f"{colocated_replicas:,}"),
        Step("Goodput per GPU, split against colocated",
             f"split: 1 ÷ ({n} × ({seconds_format(prefill_busy)} + "
             f"{seconds_format(decode_busy)})); colocated: {number_format(colo['rate'])} ÷ {n}",
             goodput_split, "requests/s per GPU",
             f"{number_format(goodput_split)} against {number_format(goodput_colocated)}"),
    ))


def kv_handoff_links(*, nbytes: float, gpu: str = "h100-sxm",
                     link_efficiency: float = 1.0) -> list[dict]:
    """Seconds to move `nbytes` of KV from one `gpu` to another over their own interconnect
    (one direction: a copy between two GPUs, one link on an MI300X), a 400 Gb/s InfiniBand
    port and 100 GbE, at `link_efficiency` of each line rate: what the same handoff would take
    between machines. 1 MB over 100 GbE at line rate: 1e6 ÷ 12.5e9 = 80 µs."""
    g = gpu_get(gpu)
    link_efficiency = fraction_check(link_efficiency, field="link_efficiency")
    links = ((f"{g.interconnect} ({g.name})", g.peer_one_way_bytes_per_second),
             (LINKS["ib-ndr"].name, LINKS["ib-ndr"].bytes_per_second),
             (LINKS["eth-100g"].name, LINKS["eth-100g"].bytes_per_second))
    return [{"name": name, "bytes_per_second": rate * link_efficiency,
             "seconds": nbytes / (rate * link_efficiency)} for name, rate in links if rate > 0]
