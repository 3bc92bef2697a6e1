"""Problem 5: the memory traffic of attention, standard against fused (FlashAttention), for one
layer's prefill over N tokens with H query heads of head_dim d, b bytes per value.

Per sequence and head, in values moved to or from GPU memory (HBM):

    standard (three kernels, as the FlashAttention paper's Algorithm 0):
      S = Q Kᵀ      reads Q, K (2·N·d), writes S (N²)
      P = softmax S reads S (N²), writes P (N²)
      O = P V       reads P (N²) and V (N·d), writes O (N·d)
      total 4·N·d + 4·N²  (a separate mask or scale kernel adds 2·N² more: this is a floor)
    fused, each tensor once (the compulsory traffic): Q, K, V read, O written: 4·N·d
    fused, tiles of B query rows with no cache reuse: Q once, K and V once per query tile, O once:
      2·N·d + 2·N·d·⌈N / B⌉, the upper end (the tiles running at once share K and V through L2)

FLOPs are the same either way, 4·N²·d per head (Q Kᵀ and P V, two FLOPs per multiply-add);
softmax's few FLOPs per score are left out, and a causal fused kernel that skips the tiles above
the diagonal does about half. The standard path also has to hold S and P, N² values per head
each, in HBM at once. Times are roofline bounds: the larger of bytes ÷ bandwidth and FLOPs ÷
peak.
"""

import math

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.compute import peak_flops_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, fraction_check
from problems.arithmetic.memory import context_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_short,
    flops_format,
    number_format,
    percent_format,
    rate_of_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

TOKENS_MAX = 10**7
BATCH_MAX = 4096
TILE_MAX = 4096
ATTENTION_DTYPES = ("bf16", "fp16", "fp32")
STATS_BYTES = 4  # one FP32 log-sum-exp per query row and head (kept for the backward pass)

# On-chip memory, for the concepts: (SMs, shared memory per SM in bytes, source); the L2 is
# the catalog's (`Gpu.l2_bytes`).
ON_CHIP = {
    "a100-80gb-sxm": (108, 192 * 1024,
                      "Dao et al., FlashAttention §2.1 (192 KB of SRAM on each of 108 SMs); "
                      "NVIDIA A100 Tensor Core GPU Architecture whitepaper (40 MB L2)"),
    "h100-sxm": (132, 228 * 1024,
                 "NVIDIA Hopper Tuning Guide (up to 228 KB of shared memory per SM); NVIDIA "
                 "H100 Tensor Core GPU Architecture whitepaper (132 SMs on the SXM5, 50 MB L2)"),
}
# The FlashAttention paper's estimate of on-chip SRAM bandwidth on an A100 (bytes/s).
A100_SRAM_BANDWIDTH = 19e12
# FlashAttention-2 (arXiv 2307.08691, §3.3) tunes its blocks among {64, 128} × {64, 128} rows.
FA2_TILE_ROWS = (64, 128)
# Upstream FlashAttention-2's paged path (Dao-AILab flash-attention, flash_attn_with_kvcache
# with a block_table) refuses pages that are not a multiple of 256 tokens
# (csrc/flash_attn/flash_api.cpp, "Paged KV cache block size must be divisible by 256").
FLASH_ATTN2_PAGE_MULTIPLE = 256
# vLLM reads its 16-token blocks with FlashAttention itself, from its own fork
# (vllm-project/flash-attention), whose FlashAttention-2 path relaxes the rule to multiples of
# 16 ("... must be divisible by 16"); vLLM's FlashAttention backend asks for the same.
# Upstream FlashAttention-3 (hopper/flash_api.cpp) sets no multiple, but loads pages with the
# TMA only when a page holds whole tiles of keys.
VLLM_FLASH_ATTN_PAGE_MULTIPLE = 16
ACCUMULATOR_BYTES = 4  # the output accumulator stays in FP32 whatever the inputs are


def tile_working_set_bytes(*, rows: int, head_dim: int, value_bytes: float) -> float:
    """On-chip bytes one thread block of a fused kernel works in: tiles of `rows` queries,
    keys and values, and the FP32 output accumulator of its query rows (bytes)."""
    return 3 * rows * head_dim * value_bytes + rows * head_dim * ACCUMULATOR_BYTES


def attention_traffic_model(*, tokens: int, head_dim: int, value_bytes: float,
                            tile_rows: int) -> dict[str, float]:
    """Bytes per sequence and head of each path, and its FLOPs (bytes, FLOP)."""
    n, d = tokens, head_dim
    tiles = math.ceil(n / tile_rows)
    standard = (4 * n * d + 4 * n * n) * value_bytes
    fused_min = 4 * n * d * value_bytes
    fused_tiles = (2 * n * d + 2 * n * d * tiles) * value_bytes
    return {"standard": standard, "fused_min": fused_min, "fused_tiles": fused_tiles,
            "scores": n * n * value_bytes, "flops": 4 * n * n * d, "tiles": tiles}


def memory_name(gpu) -> str:
    """What the GPU's main memory is called in a sentence: "HBM" for any HBM generation, else
    the catalog's kind ("GDDR6" on the L4 and L40S)."""
    return "HBM" if gpu.memory_kind.startswith("HBM") else gpu.memory_kind


def _bound(bytes_: float, flops: float, *, bandwidth: float, peak: float) -> tuple[float, str]:
    memory, compute = bytes_ / bandwidth, flops / peak
    return (memory, "memory") if memory >= compute else (compute, "compute")


def attention_io(
    *,
    model: str = "llama-3.1-70b",
    gpu: str = "h100-sxm",
    tokens: int = 32_768,
    batch: int = 1,
    dtype: str = "bf16",
    tile_rows: int = 128,
    mfu: float = 1.0,
) -> Result:
    """Memory traffic, intermediate memory, time bound and arithmetic intensity of standard and
    fused attention for one layer's prefill of `batch` sequences of `tokens` (bytes, seconds,
    FLOP/byte). `mfu` scales the dense peak (1 gives floors)."""
    m = model_get(model)
    g = gpu_get(gpu)
    if dtype not in ATTENTION_DTYPES:
        raise ArithmeticInputError(field="dtype", message="attention runs in BF16, FP16 or FP32 "
                                                          "here")
    d = dtype_get(dtype)
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    batch = count_check(batch, field="batch", maximum=BATCH_MAX)
    tile_rows = count_check(tile_rows, field="tile_rows", maximum=TILE_MAX)
    mfu = fraction_check(mfu, field="mfu")
    if m.attention == "MLA":
        raise ArithmeticInputError(field="model", message="choose a model with ordinary "
                                                          "(MHA or GQA) attention")
    # A prefill past the model's window is refused, as a server refuses it (Llama 3.1 405B at
    # a million tokens, against its 131,072).
    context_check(model=m, tokens=tokens, field="tokens")
    heads, hd = m.heads, m.head_dim
    one = attention_traffic_model(tokens=tokens, head_dim=hd, value_bytes=d.bytes,
                                  tile_rows=tile_rows)
    copies = heads * batch
    standard, fused_min, fused_tiles = (one[k] * copies for k in
                                        ("standard", "fused_min", "fused_tiles"))
    flops = one["flops"] * copies
    scores = one["scores"] * copies
    intermediates = 2 * scores
    stats = tokens * copies * STATS_BYTES
    # FP32 attention runs at the GPU's FP32 rate (PyTorch leaves TF32 off for matmuls, and no
    # FlashAttention kernel takes FP32), not at the BF16 tensor-core peak.
    peak = peak_flops_get(gpu=g, dtype=d) * mfu
    bw = g.bandwidth_bytes_per_second
    t_std, b_std = _bound(standard, flops, bandwidth=bw, peak=peak)
    t_min, b_min = _bound(fused_min, flops, bandwidth=bw, peak=peak)
    t_tiles, b_tiles = _bound(fused_tiles, flops, bandwidth=bw, peak=peak)
    ridge = peak / bw
    n, who = f"{tokens:,}", f"× {heads} heads × {batch:,} sequence{'s' if batch != 1 else ''}"
    mem = memory_name(g)

    def label(seconds: float, bound: str) -> str:
        # The memory side runs at peak bandwidth, a floor; the compute side is one only at the
        # full peak, and otherwise an estimate at the MFU assumed.
        kind = "floor" if bound == "memory" or mfu >= 1 else f"at {percent_format(mfu)} MFU"
        return f"{seconds_format(seconds)} ({bound}-bound, {kind})"
    b = number_format(d.bytes)
    steps = (
        Step("FLOPs (Q Kᵀ and P V, both paths)", f"4 × {n}² × {hd} head_dim {who}", flops,
             "FLOP", flops_format(flops)),
        Step("Scores matrix S (one layer)", f"{n}² × {b} B {who}", scores, "B",
             bytes_format(scores)),
        Step(f"Standard: S and P held in {mem}", f"2 × {bytes_short(scores)}", intermediates, "B",
             bytes_format(intermediates)),
        Step(f"Standard: {mem} traffic", f"(4 × {n} × {hd} + 4 × {n}²) × {b} B {who}", standard,
             "B", bytes_format(standard)),
        Step(f"Fused: {mem} traffic, each tensor once", f"4 × {n} × {hd} × {b} B {who}",
             fused_min, "B", bytes_format(fused_min)),
        Step(f"Fused: {mem} traffic with K and V re-read per query tile",
             f"(2 + 2 × {count_phrase(one['tiles'], 'tile')} of "
             f"{count_phrase(tile_rows, 'row')}) × {n} × {hd} × {b} B {who}",
             fused_tiles, "B", bytes_format(fused_tiles)),
        Step("Fused: what it keeps", f"one FP32 log-sum-exp per row and head: {n} {who} × 4 B",
             stats, "B", bytes_format(stats)),
        Step("Standard: time", f"max({bytes_short(standard)} ÷ {bandwidth_format(bw)}, "
             f"{flops_format(flops)} ÷ {rate_of_format(peak)})", t_std, "s",
             label(t_std, b_std)),
        Step("Fused (each tensor once): time", f"max({bytes_short(fused_min)} ÷ "
             f"{bandwidth_format(bw)}, {flops_format(flops)} ÷ {rate_of_format(peak)})", t_min,
             "s", label(t_min, b_min)),
        Step("Fused (tiles re-read): time", f"max({bytes_short(fused_tiles)} ÷ "
             f"{bandwidth_format(bw)}, {flops_format(flops)} ÷ {rate_of_format(peak)})",
             t_tiles, "s", label(t_tiles, b_tiles)),
        Step("Arithmetic intensity: standard", f"{flops_format(flops)} ÷ {bytes_short(standard)}",
             flops / standard, "FLOP/B", f"{number_format(flops / standard)} FLOP/B"),
        Step("Arithmetic intensity: fused (tiles re-read)",
             f"{flops_format(flops)} ÷ {bytes_short(fused_tiles)}", flops / fused_tiles,
             "FLOP/B", f"{number_format(flops / fused_tiles)} FLOP/B"),
        Step(f"Ridge point of the {g.short_name or g.name}",
             f"{rate_of_format(peak)} ÷ {bandwidth_format(bw)}", ridge, "FLOP/B",
             f"{number_format(ridge)} FLOP/B"),
    )
    return Result(
        values={
            "flops": flops, "scores_bytes": scores, "intermediate_bytes": intermediates,
            "standard_bytes": standard, "fused_min_bytes": fused_min,
            "fused_tiles_bytes": fused_tiles, "stats_bytes": stats,
            "standard_seconds": t_std, "standard_bound": b_std,
            "fused_min_seconds": t_min, "fused_min_bound": b_min,
            "fused_tiles_seconds": t_tiles, "fused_tiles_bound": b_tiles,
            "standard_intensity": flops / standard, "fused_intensity": flops / fused_tiles,
            "ridge": ridge, "traffic_ratio": standard / fused_tiles,
            "gpu_memory_bytes": g.memory_total_bytes,
        },
        steps=steps,
    )


def attention_kernels_predict(*, tokens: int, heads: int, head_dim: int, tile: int,
                              value_bytes: float, peak_flops: float,
                              bandwidth: float) -> dict[str, dict[str, float]]:
    """What the demo's three causal implementations should take on a machine of `peak_flops`
    (FLOP/s) and `bandwidth` (bytes/s): a roofline floor each (seconds) and the intermediate
    memory of the naive and tiled ones (bytes).

    Naive computes every score and masks: 4·N²·d FLOPs per head, the standard traffic, and holds
    S and P (N² values per head each) and an N × N boolean mask. Tiled and SDPA skip the tiles
    above the diagonal: about half the FLOPs (the diagonal tiles in full), each tensor read
    once at best; the tiled version holds a tile of scores and one of probabilities and the
    tile's output accumulator and queries, whatever N is.
    """
    one = attention_traffic_model(tokens=tokens, head_dim=head_dim, value_bytes=value_bytes,
                                  tile_rows=tile)
    tiles = math.ceil(tokens / tile)
    # Tile pairs on or below the diagonal: T·(T+1)/2 of T², each costing a full tile's FLOPs.
    causal_share = (tiles * (tiles + 1) / 2) / (tiles * tiles)
    flops_full = one["flops"] * heads
    flops_causal = flops_full * causal_share
    out = {}
    for name, flops, traffic in (("naive", flops_full, one["standard"] * heads),
                                 ("tiled", flops_causal, one["fused_tiles"] * heads),
                                 ("sdpa", flops_causal, one["fused_min"] * heads)):
        compute, memory = flops / peak_flops, traffic / bandwidth
        out[name] = {"seconds": max(compute, memory),
                     "bound": "compute" if compute >= memory else "memory",
                     "flops": flops, "bytes": traffic}
    out["naive"]["intermediate_bytes"] = 2 * one["scores"] * heads + tokens * tokens
    rows = min(tile, tokens)
    out["tiled"]["intermediate_bytes"] = (2 * rows * rows + 2 * rows * head_dim) * heads \
        * value_bytes
    return out


# Published results quoted by the page (FACTS.md; each paper's abstract).
FLASH_RESULTS = {
    "fa1_speedup": 3.0,  # "up to 3x faster" than standard attention (GPT-2, seq 1K)
    "fa1_memory": 20.0,  # "up to 20x more memory efficient than exact attention baselines"
    "fa1_bert": 0.15,  # 15% end-to-end on BERT-large (seq 512) against the MLPerf 1.1 record
    "fa2_over_fa1": 2.0,  # "~2x" over FlashAttention
    "fa2_mfu_low": 0.50,  # "50-73% of the theoretical maximum FLOPs/s on A100"
    "fa2_mfu_high": 0.73,
    "fa2_h100_mfu": 0.35,  # FA2 reaches "only 35% utilization on the H100" (FA3 paper)
    "fa3_low": 1.5,  # FA3: 1.5-2.0x over FA2 on H100
    "fa3_high": 2.0,
    "fa3_mfu": 0.75,  # "up to 740 TFLOPs/s (75% utilization)" in FP16
    # FA3 paper §3: the H100 SXM5 does 989 TFLOPS of FP16 matmul but 3.9 TFLOPS of special
    # functions (exp), so the softmax's exponentials can take a large share of the cycles.
    "h100_matmul_tflops": 989.0,
    "h100_special_tflops": 3.9,
}


def decode_attention_intensity(*, heads: int, kv_heads: int, value_bytes: float,
                               packed: bool) -> float:
    """FLOPs per byte of KV cache read by one decode step's attention (FLOP/B).

    Each cached position holds a key and a value of head_dim d per KV head (2d values). Each
    query head spends 2d FLOPs on q·k and 2d on p·v there, so a kernel that gives each query
    head its own pass over the cache does 4d FLOPs per 2d values loaded: 2 FLOPs per value,
    1 FLOP/B in BF16, whatever the model. A kernel that packs the g = heads ÷ kv_heads query
    heads sharing a KV head into one tile (FlashAttention-3's PackGQA, FlashInfer's GQA decode)
    loads each KV head once for all g: 2g FLOPs per value, g FLOP/B in BF16 (Llama 3.1 70B,
    g = 8: 8 FLOP/B).
    """
    group = heads // kv_heads if packed else 1
    return 2 * group / value_bytes

FLASH_SOURCES = {
    "fa1": "https://arxiv.org/abs/2205.14135",
    "fa2": "https://arxiv.org/abs/2307.08691",
    "fa3": "https://arxiv.org/abs/2407.08608",
}
