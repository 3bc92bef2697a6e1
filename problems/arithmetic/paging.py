"""Problem 4: what paging the KV cache saves. For a workload of request classes (share, prompt
tokens, output tokens), the memory a running sequence holds on average under three policies:

- contiguous reservation at the maximum length (each request reserves `max_len` tokens up
  front, as Orca (Max) in the vLLM paper);
- contiguous reservation at the request's exact final length (Orca (Oracle): it knows the
  output length in advance, which no real system does);
- paged blocks of 8, 16 or 32 tokens (vLLM): a sequence holds ⌈tokens ÷ block⌉ blocks, so at
  most one partly filled block each.

Averages are over a running batch: a request is decoding for as many steps as it has output
tokens, so a class's share of the running sequences is its share of requests × its output
length (Little's law), and during decode step t (1 … O) it has P + t tokens in context.
External fragmentation (free memory split into holes too small for a new reservation) is not
modelled, so the contiguous policies' waste here is a floor.

From the memory left after the weights and a reserve, each policy allows a batch; a decode
step at that batch is timed as a roofline bound (weights + KV read at the bandwidth against
the FLOPs at the peak), which gives each policy's tokens/s.
"""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model, peak_flops_get
from problems.arithmetic.decode import decode_flops_per_sequence, decode_step_model
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, number_check
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    batch_max,
    context_check,
)
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_format,
    bytes_short,
    count_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)

BLOCK_SIZES = (8, 16, 32)
# vLLM's default --block-size on CUDA (vLLM engine arguments).
VLLM_DEFAULT_BLOCK = 16
CLASSES_MAX = 8
MIX_DEFAULT = "50:300:250, 35:1500:400, 15:3000:1000"
MIX_HELP = ("Request classes as share:prompt tokens:output tokens, separated by commas "
            "(at most 8). The default is an assumption: chat turns, longer questions, and a "
            "few documents with long answers.")


# vLLM's default cap on running sequences (max_num_seqs) when none is set,
# vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: 1,024 on GPUs of at least 70 GiB
# other than the A100 (H100, H200, MI300X), 256 on every other GPU. Whatever room the cache
# leaves, the scheduler never runs more sequences than this.
VLLM_DEFAULT_MAX_NUM_SEQS = {"large_gpu": 1_024, "other_gpu": 256}
VLLM_LARGE_GPU_BYTES = 70 * 2**30
MAX_NUM_SEQS_MAX = 1_000_000


def vllm_max_num_seqs(gpu: str) -> int:
    """vLLM's default max_num_seqs on `gpu` (sequences): 1,024 on a GPU of 70 GiB or more that
    is not an A100, otherwise 256."""
    g = gpu_get(gpu)
    large = g.memory_total_bytes >= VLLM_LARGE_GPU_BYTES and not g.id.startswith("a100")
    return VLLM_DEFAULT_MAX_NUM_SEQS["large_gpu" if large else "other_gpu"]


def mix_parse(mix: str) -> list[tuple[float, int, int]]:
    """(share, prompt tokens, output tokens) of each class in `mix`; shares normalised to 1."""
    classes = []
    for part in (p for p in str(mix).split(",") if p.strip()):
        fields = part.strip().split(":")
        try:
            share, prompt, output = float(fields[0]), int(fields[1]), int(fields[2])
        except (ValueError, IndexError):
            raise ArithmeticInputError(
                field="mix", message="write each class as share:prompt:output, e.g. 50:300:250"
            ) from None
        if len(fields) != 3 or not math.isfinite(share) or share <= 0:
            raise ArithmeticInputError(field="mix", message="each share must be above 0")
        count_check(prompt, field="mix", maximum=TOKENS_MAX)
        count_check(output, field="mix", maximum=TOKENS_MAX)
        classes.append((share, prompt, output))
    if not classes or len(classes) > CLASSES_MAX:
        raise ArithmeticInputError(field="mix", message=f"give 1 to {CLASSES_MAX} classes")
    total = sum(c[0] for c in classes)
    return [(s / total, p, o) for s, p, o in classes]


def held_blocks_mean(prompt: int, output: int, block: int) -> float:
    """Mean tokens' worth of whole blocks held over the decode steps t = 1 … output, when the
    context is prompt + t tokens (tokens)."""
    total = 0
    # Sum of block·⌈(P + t)/block⌉ over t, in closed form per block: cheap for long outputs.
    first, last = prompt + 1, prompt + output
    b_first, b_last = -(-first // block), -(-last // block)
    for b in range(b_first, b_last + 1):
        lo = max(first, (b - 1) * block + 1)
        hi = min(last, b * block)
        total += (hi - lo + 1) * b * block
    return total / output


def policies_model(classes: list[tuple[float, int, int]], *, max_len: int) -> list[dict]:
    """Mean tokens held and in use per running sequence under each policy (tokens)."""
    weight = [s * o for s, _, o in classes]  # share of the running batch (Little's law)
    w_total = sum(weight)

    def mean(values: list[float]) -> float:
        return sum(w * v for w, v in zip(weight, values, strict=True)) / w_total

    used = mean([p + (o + 1) / 2 for _, p, o in classes])
    final = mean([p + o for _, p, o in classes])
    rows = [
        {"id": "max", "name": f"Contiguous, reserved at the maximum ({max_len:,} tokens)",
         "short": "reserve max", "held": float(max_len), "used": used,
         "future": final - used, "internal": max_len - final},
        {"id": "oracle", "name": "Contiguous, reserved at the exact final length (an oracle)",
         "short": "reserve exact", "held": final, "used": used, "future": final - used,
         "internal": 0.0},
    ]
    for block in BLOCK_SIZES:
        held = mean([held_blocks_mean(p, o, block) for _, p, o in classes])
        rows.append({"id": f"paged-{block}", "name": f"Paged, blocks of {block} tokens",
                     "short": f"paged {block}", "held": held, "used": used, "future": 0.0,
                     "internal": held - used})
    for row in rows:
        row["utilization"] = row["used"] / row["held"]
        row["waste"] = 1 - row["utilization"]
    return rows


def paging(
    *,
    model: str = "llama-3-8b",
    gpu: str = "h100-sxm",
    mix: str = MIX_DEFAULT,
    max_len: int = 8_192,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
    max_num_seqs: int | None = None,
    mfu: float = 1.0,
) -> Result:
    """Memory held per running sequence, the batch and the decode throughput each policy
    allows (tokens, bytes, sequences, tokens/s) for the workload `mix`.

    The batch is what the free memory holds, capped at `max_num_seqs` (None: vLLM's default
    for the GPU, `vllm_max_num_seqs`); the step's floor is the larger of its bytes over the
    bandwidth and its FLOPs over the peak × `mfu`."""
    m = model_get(model)
    g = gpu_get(gpu)
    d = dtype_get(dtype)
    kv_d = kv_dtype_get(kv_dtype, model=m)
    max_len = count_check(max_len, field="max_len", maximum=TOKENS_MAX)
    context_check(model=m, tokens=max_len, field="max_len")
    classes = mix_parse(mix)
    longest = max(p + o for _, p, o in classes)
    if longest > max_len:
        raise ArithmeticInputError(
            field="mix", message=f"a class needs {longest:,} tokens, past the maximum length "
                                 f"of {max_len:,}")
    cap = (vllm_max_num_seqs(gpu) if max_num_seqs is None else
           count_check(max_num_seqs, field="max_num_seqs", maximum=MAX_NUM_SEQS_MAX))
    mfu = number_check(mfu, field="mfu", minimum=0.0, maximum=1.0)
    per_token = kv_bytes_per_token_model(m, kv_d)
    room = batch_max(model=model, gpu=gpu, context_tokens=1, dtype=dtype, kv_dtype=kv_d.id,
                     memory_fraction=memory_fraction, reserve_gb=reserve_gb)
    free = float(room["free_bytes"])
    if free <= 0:
        # Say by how much, and what would make room, rather than only that it does not fit.
        weights = float(room["weights_bytes_per_gpu"])
        usable = float(room["memory_usable_bytes"])
        reserve = float(room["reserve_bytes"])
        gpus = next((tp for tp in (2, 4, 8, 16, 32, 64) if weights / tp + reserve < usable),
                    None)
        more = (f"split over at least {gpus} of them with tensor parallelism (problem 3), the "
                "weights would leave room for one" if gpus else
                "even 64 of them would not leave room for one: choose a narrower format")
        raise ArithmeticInputError(
            field="model",
            message=f"{m.name.split(' (')[0]}'s {bytes_short(weights)} of {d.name} weights and the "
                    f"{bytes_short(reserve)} reserve need {bytes_short(weights + reserve)}, "
                    f"{bytes_short(weights + reserve - usable)} more than the "
                    f"{bytes_short(usable)} one {g.name} lets the engine use, so there is no "
                    f"room for any cache; {more}")
    rows = policies_model(classes, max_len=max_len)
    peak = peak_flops_get(gpu=g, dtype=d)
    e_bytes = dtype_get("bf16").bytes if d.bytes < 2 else d.bytes
    for row in rows:
        row["held_bytes"] = row["held"] * per_token
        row["fits_batch"] = math.floor(free / row["held_bytes"])
        row["batch"] = min(row["fits_batch"], cap)
        row["capped"] = row["fits_batch"] > cap
        batch = max(row["batch"], 1)
        memory = decode_step_model(model=m, gpu=g, batch=batch, context_tokens=row["used"],
                                   weight_bytes_per_param=d.bytes, kv_bytes_per_token=per_token,
                                   bandwidth_efficiency=1.0, embedding_bytes_per_param=e_bytes)
        compute = batch * decode_flops_per_sequence(m, row["used"]) / (peak * mfu)
        row["step_seconds"] = max(memory["seconds"], compute)
        row["bound"] = "memory" if memory["seconds"] >= compute else "compute"
        row["tokens_per_second"] = row["batch"] / row["step_seconds"]
    base = rows[0]
    if base["batch"] < 1:
        longest_fit = math.floor(free / per_token)
        raise ArithmeticInputError(
            field="max_len", message=f"reserving {max_len:,} tokens takes "
                                     f"{bytes_short(base['held_bytes'])} per sequence, more than "
                                     f"the {bytes_short(free)} the weights leave; at most "
                                     f"{longest_fit:,} tokens fit, so choose a shorter maximum")
    paged16 = next(r for r in rows if r["id"] == "paged-16")
    for row in rows:
        row["throughput_ratio"] = row["tokens_per_second"] / base["tokens_per_second"]

    steps = [
        Step("Workload", ", ".join(f"{percent_format(s)} of requests {p:,} + {o:,} tokens"
                                   for s, p, o in classes),
             len(classes), "classes",
             f"{len(classes)} request class{'es' if len(classes) != 1 else ''}"),
        Step("Tokens in use per running sequence (mean)",
             "Σ share × output × (prompt + (output + 1) ÷ 2) ÷ Σ share × output", paged16["used"],
             "tokens", f"{number_format(paged16['used'])} tokens"),
        Step("KV bytes per token", f"{m.name} in {kv_d.kv_label}", per_token, "B",
             bytes_format(per_token)),
        Step("Free for the KV cache",
             f"one {g.name}: {bytes_short(float(room['memory_usable_bytes']))} usable − "
             f"{bytes_short(float(room['weights_bytes_per_gpu']))} weights − "
             f"{bytes_short(float(room['reserve_bytes']))} reserve", free, "B",
             bytes_format(free)),
    ]
    for row in rows:
        steps.append(Step(
            f"{row['name']}: held per sequence",
            f"{number_format(row['held'])} tokens held for {number_format(row['used'])} in use "
            f"({percent_format(row['waste'])} wasted)",
            row["held_bytes"], "B", bytes_format(row["held_bytes"])))
        held_in = (f"⌊{bytes_short(free)} ÷ {bytes_short(row['held_bytes'])}⌋ = "
                   f"{count_format(row['fits_batch'], 'sequence')}")
        if row["capped"]:
            held_in += f", capped at max_num_seqs {cap:,}"
        steps.append(Step(
            f"{row['name']}: batch and decode throughput",
            f"{held_in}; step "
            f"{seconds_format(row['step_seconds'])} ({row['bound']}-bound, floor)",
            row["tokens_per_second"], "tokens/s", rate_format(row["tokens_per_second"],
                                                              "tokens/s")))
    steps.append(Step("Paged (16) against reservation at the maximum",
                      f"{rate_format(paged16['tokens_per_second'], 'tokens/s')} ÷ "
                      f"{rate_format(base['tokens_per_second'], 'tokens/s')}",
                      paged16["throughput_ratio"], "×",
                      f"{number_format(paged16['throughput_ratio'])}×"))
    return Result(
        values={
            "classes": [{"share": s, "prompt": p, "output": o} for s, p, o in classes],
            "policies": [{k: v for k, v in r.items()} for r in rows],
            "free_bytes": free,
            "kv_bytes_per_token": per_token,
            "used_tokens": paged16["used"],
            "paged_over_max": paged16["throughput_ratio"],
            "paged_batch_over_max": paged16["batch"] / base["batch"],
            "max_num_seqs": cap,
            "paged_capped": paged16["capped"],
            "paged_bound": paged16["bound"],
            "base_bound": base["bound"],
        },
        steps=tuple(steps),
    )


# Published measurements quoted by the page (Kwon et al., SOSP 2023, arXiv 2309.06180; the
# vLLM blog of 2023-06-20). Fractions of the KV memory, and throughput ratios.
VLLM_PAPER = {
    "source": "Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
              "PagedAttention', SOSP 2023 (arXiv 2309.06180), Fig. 2, abstract and §6",
    "token_states_low": 0.204,  # Orca (Max): share of KV memory holding token states
    "token_states_high": 0.382,  # Orca (Oracle)
    "token_states_vllm": 0.963,
    "throughput_low": 2.0,  # "improves the LLM serving throughput by 2-4x"
    "throughput_high": 4.0,
    # §6.3, Fig. 15: blocks saved by sharing (OPT-13B), on the Alpaca trace (short prompts) ...
    "sharing_parallel_low": 0.061,  # parallel sampling
    "sharing_parallel_high": 0.098,
    "sharing_beam_low": 0.376,  # beam search
    "sharing_beam_high": 0.552,
    # ... and on ShareGPT, whose longer prompts leave more to share.
    "sharing_parallel_sharegpt_low": 0.162,
    "sharing_parallel_sharegpt_high": 0.305,
    "sharing_beam_sharegpt_low": 0.443,
    "sharing_beam_sharegpt_high": 0.663,
    "blog_waste_low": 0.60,  # blog: "existing systems waste 60% – 80% of memory"
    "blog_waste_high": 0.80,
    "blog_waste_vllm": 0.04,  # "a mere waste of under 4%"
    # §7.1: the PagedAttention kernel's latency 20-26% above FasterTransformer's.
    "kernel_overhead_low": 0.20,
    "kernel_overhead_high": 0.26,
}
