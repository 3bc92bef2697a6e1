"""Problem 5, why FlashAttention is faster with the same maths: the calculator of attention's
memory traffic, standard against fused (bytes, intermediate memory, time floors, intensity),
the demo's tiled attention source (read as text: the web process imports no torch), and every
figure the prose quotes, from problems/arithmetic at render time."""

import math
from pathlib import Path

from django.http import HttpRequest

from demos.runners.attention_kernels import PARAMS as KERNEL_PARAMS
from problems.arithmetic.attention_io import (
    A100_SRAM_BANDWIDTH,
    FA2_TILE_ROWS,
    FLASH_ATTN2_PAGE_MULTIPLE,
    FLASH_RESULTS,
    ON_CHIP,
    VLLM_FLASH_ATTN_PAGE_MULTIPLE,
    attention_io,
    decode_attention_intensity,
    memory_name,
    tile_working_set_bytes,
)
from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.paging import VLLM_DEFAULT_BLOCK
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_in,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import ratio_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    choice_input,
    gpu_input,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "attention-io"
PREFIX = "p05-attn"
KERNELS_FILE = Path(__file__).resolve().parents[2] / "worker" / "attention_kernels.py"


def _lengths(tokens: int, model: str) -> list[int]:
    """The plots' sequence lengths: from 512 (or the learner's own, if shorter) to 131,072 (or
    theirs, if longer), never past the model's window, with the learner's own always among
    them."""
    top = max(min(131_072, model_get(model).context or 131_072), tokens)
    return sorted(set(sweep_whole(min(512, tokens), top, count=12)) | {tokens})


def _your_length(tokens: int) -> tuple[Mark, ...]:
    return (Mark(tokens, f"your {count_format(tokens, 'token')}"),)


def traffic_plot(*, inputs: dict, result) -> Plot:
    """Memory traffic and the standard path's intermediate memory against sequence length."""
    xs = _lengths(inputs["tokens"], inputs["model"])
    pts = [attention_io(**{**inputs, "tokens": x}) for x in xs]
    g = gpu_get(inputs["gpu"])
    memory = g.memory_total_bytes / GB
    return Plot(
        title=f"{memory_name(g)} traffic of one layer's attention against sequence length",
        x_title="Sequence length (tokens)", y_title="GB (10⁹ bytes)", x_log=True, y_log=True,
        series=(Series("standard: traffic", tuple(xs),
                       tuple(float(p["standard_bytes"]) / GB for p in pts)),
                Series("standard: S and P held at once", tuple(xs),
                       tuple(float(p["intermediate_bytes"]) / GB for p in pts), dash=True),
                Series("fused: traffic, K and V re-read per query tile", tuple(xs),
                       tuple(float(p["fused_tiles_bytes"]) / GB for p in pts)),
                Series("fused: traffic, each tensor once", tuple(xs),
                       tuple(float(p["fused_min_bytes"]) / GB for p in pts)),
                Series(f"{g.short_name or g.name} memory", (xs[0], xs[-1]), (memory, memory),
                       dash=True)),
        marks=_your_length(inputs["tokens"]))


def time_plot(*, inputs: dict, result) -> Plot:
    xs = _lengths(inputs["tokens"], inputs["model"])
    pts = [attention_io(**{**inputs, "tokens": x}) for x in xs]
    return Plot(
        title="Time floor of one layer's attention (roofline)",
        x_title="Sequence length (tokens)", y_title="ms", x_log=True, y_log=True,
        series=(Series("standard", tuple(xs),
                       tuple(float(p["standard_seconds"]) * 1e3 for p in pts), markers=True),
                Series("fused, K and V re-read per tile", tuple(xs),
                       tuple(float(p["fused_tiles_seconds"]) * 1e3 for p in pts), markers=True),
                Series("fused, each tensor once", tuple(xs),
                       tuple(float(p["fused_min_seconds"]) * 1e3 for p in pts), dash=True)),
        marks=_your_length(inputs["tokens"]))


INPUTS = (
    model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("tokens", "Sequence length", unit="tokens", initial=32_768, api=32_768,
                maximum=10**7),
    whole_input("batch", "Sequences", unit="sequences", initial=1, api=1, maximum=4096),
    choice_input("dtype", "Attention precision",
                 choices=(("bf16", "BF16"), ("fp16", "FP16"), ("fp32", "FP32")),
                 initial="bf16", api="bf16"),
    whole_input("tile_rows", "Query rows per tile", unit="rows", initial=128, api=128,
                maximum=4096, help=f"FlashAttention-2 uses tiles of {FA2_TILE_ROWS[0]} to "
                     f"{FA2_TILE_ROWS[-1]} rows."),
    mfu_input(initial=1.0, api=1.0),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Attention's memory traffic: standard against fused",
    explanation=("One layer's attention over a sequence: the FLOPs (the same either way), the "
                 "bytes moved to and from GPU memory (HBM, or the L4's and L40S's GDDR6) by "
                 "the standard three-kernel path and by a fused "
                 "kernel, the memory the standard path needs for its scores, and the time "
                 "floor of each as a roofline bound, with its arithmetic intensity."),
    inputs=INPUTS,
    compute=lambda **k: attention_io(**k),
    plots=lambda *, inputs, result: (traffic_plot(inputs=inputs, result=result),
                                     time_plot(inputs=inputs, result=result)),
    order=23,
    api_path="/attention-io",
    api_summary="Attention's memory traffic, memory and time, standard against fused",
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


def tiled_source() -> str:
    """The demo's tiled attention, as the page shows it."""
    text = KERNELS_FILE.read_text()
    start = text.index("# --- tiled attention: shown on the page ---\n")
    end = text.index("# --- end of tiled attention ---")
    return text[start:end].split("\n", 1)[1].rstrip() + "\n"


def _chip(gid: str) -> dict:
    sms, smem, source = ON_CHIP[gid]
    g = gpu_get(gid)
    l2 = g.l2_bytes
    return {"name": g.short_name or g.name, "sms": f"{sms:,}", "smem_text": bytes_short(smem),
            "smem_kib": f"{smem // 1024:,} KiB", "total_text": bytes_short(sms * smem),
            # NVIDIA's whitepapers give L2 in binary megabytes ("50 MB" is 50 × 2**20 bytes) and
            # HBM as the datasheet's round label; printing either in decimal units (52.4 MB, or
            # the 85.5 GB the driver reports) would contradict the source the page cites.
            "l2_text": f"{l2 // 2**20:,} MB", "hbm_text": g.memory_label,
            "bandwidth_text": bandwidth_format(g.bandwidth_bytes_per_second),
            "ratio_text": f"{number_format(g.memory_bytes / (sms * smem))}×",  # the label's HBM
            "source": source}


def scores_cache_context(*, gpu, intermediate: float, tokens: int) -> dict:
    """The longest sequence whose S and P (this layer, every head and sequence) fit together in
    the GPU's reuse cache, where the standard path's later kernels read them from cache: S and P
    grow with N², so N = ⌊tokens × √(cache ÷ S-and-P at `tokens`)⌋, tokens; 0 where they outgrow
    it at one token; `known` False where no public source gives the cache. Hand, Llama 3.1 70B,
    one sequence, BF16, H100: S and P at N tokens = 2 × N² × 2 B × 64 heads; 50 MiB ÷ 256 B =
    204,800, √ = 452 tokens."""
    cache = gpu.reuse_cache
    if cache is None:
        return {"known": False}
    name, size = cache
    per_token_squared = intermediate / tokens**2
    fit = math.isqrt(int(size // per_token_squared))
    # isqrt of the floor can fall one short of the true root: step up while it still fits.
    while (fit + 1) ** 2 * per_token_squared <= size:
        fit += 1
    return {"known": True, "name": name, "size_text": bytes_in(size, "MiB"),
            "tokens": fit, "tokens_text": count_format(fit, "token")}


# A traffic ratio under this reads "about the same bytes", not "1.01× the bytes".
TRAFFIC_CLOSE = 1.05


def _speedup_text(*, worst: float, best: float) -> str:
    """The fused kernel's time floors against the standard one's, as words: the re-read worst
    case can lose when tiles are small, and where arithmetic bounds both it gains nothing."""
    # Within 5% is no gain a floor can show (one token: 1.01×).
    fastest = "no faster" if best < TRAFFIC_CLOSE else f"{number_format(best)}× faster"
    if worst >= 1:
        if number_format(worst) == number_format(best):
            return fastest
        return f"{number_format(worst)}× to {fastest}"
    return (f"between {number_format(1 / worst)}× slower (K and V re-read for every tile, no "
            f"help from the cache) and {fastest}")


def context(*, request: HttpRequest) -> dict:
    """The figures problem 5's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request)
    m = model_get(inputs["model"])
    g = gpu_get(inputs["gpu"])
    fr = FLASH_RESULTS
    defaults = KERNEL_PARAMS.defaults()
    return {
        "calculator_slug": SLUG, "calculator_prefix": PREFIX, "inputs_valid": valid,
        "model_name": m.name, "gpu_name": g.name, "matrix_units": g.matrix_units,
        "gpu_short": g.short_name or g.name, "memory_name": memory_name(g),
        "cache": scores_cache_context(gpu=g, intermediate=float(r["intermediate_bytes"]),
                                      tokens=inputs["tokens"]),
        "heads": f"{m.heads:,}",
        "head_dim": f"{m.head_dim:,}", "tokens": f"{inputs['tokens']:,}",
        "batch": f"{inputs['batch']:,}", "tile_rows": f"{inputs['tile_rows']:,}",
        "batch_text": count_format(inputs["batch"], "sequence"),
        "tokens_text": count_format(inputs["tokens"], "token"),
        "tile_rows_text": count_format(inputs["tile_rows"], "query row"),
        "tile_rows_short": count_format(inputs["tile_rows"], "row"),
        "mfu_percent": percent_format(inputs["mfu"]), "below_peak": inputs["mfu"] < 1,
        "fp32": inputs["dtype"] == "fp32",
        "dtype_name": {"bf16": "BF16", "fp16": "FP16", "fp32": "FP32"}[inputs["dtype"]],
        "flops_text": flops_format(float(r["flops"])),
        "scores_text": bytes_short(float(r["scores_bytes"])),
        "intermediate_text": bytes_short(float(r["intermediate_bytes"])),
        "gpu_memory_text": bytes_short(float(r["gpu_memory_bytes"])),
        "outgrows": float(r["intermediate_bytes"]) > float(r["gpu_memory_bytes"]),
        "standard_text": bytes_short(float(r["standard_bytes"])),
        "fused_min_text": bytes_short(float(r["fused_min_bytes"])),
        "fused_tiles_text": bytes_short(float(r["fused_tiles_bytes"])),
        "stats_text": bytes_short(float(r["stats_bytes"])),
        "standard_time_text": f"{seconds_format(float(r['standard_seconds']))} "
                              f"({r['standard_bound']}-bound)",
        "fused_min_time_text": f"{seconds_format(float(r['fused_min_seconds']))} "
                               f"({r['fused_min_bound']}-bound)",
        "fused_tiles_time_text": f"{seconds_format(float(r['fused_tiles_seconds']))} "
                                 f"({r['fused_tiles_bound']}-bound)",
        "standard_memory_bound": r["standard_bound"] == "memory",
        # "Far below" the ridge only under a quarter of it (the rate assumed, MFU included).
        "standard_far_below": float(r["standard_intensity"]) < 0.25 * float(r["ridge"]),
        # Tiling turns attention compute-bound only where the standard path was not already.
        "fused_turns_compute": (r["standard_bound"] == "memory"
                                and r["fused_min_bound"] == "compute"),
        "fused_faster": float(r["standard_seconds"] / r["fused_min_seconds"]) >= TRAFFIC_CLOSE,
        "min_close": float(r["standard_bytes"] / r["fused_min_bytes"]) < TRAFFIC_CLOSE,
        "speedup_text": _speedup_text(worst=r["standard_seconds"] / r["fused_tiles_seconds"],
                                      best=r["standard_seconds"] / r["fused_min_seconds"]),
        "tiles_win": float(r["traffic_ratio"]) > 1,
        # Within 5% the two paths move about the same bytes (one token, or a few): no "1.01×".
        "traffic_close": float(r["traffic_ratio"]) < TRAFFIC_CLOSE,
        # A sequence no longer than one tile reads K and V once even with re-reads counted.
        "one_tile": float(r["fused_tiles_bytes"]) <= float(r["fused_min_bytes"]),
        "fused_min_intensity": number_format(float(r["flops"]) / float(r["fused_min_bytes"])),
        "traffic_inverse_text": f"{number_format(1 / float(r['traffic_ratio']))}×",
        "min_ratio_text": f"{number_format(float(r['standard_bytes'] / r['fused_min_bytes']))}×",
        "standard_intensity": number_format(float(r["standard_intensity"])),
        "fused_intensity": number_format(float(r["fused_intensity"])),
        "ridge": number_format(float(r["ridge"])),
        "traffic_ratio_text": f"{number_format(float(r['traffic_ratio']))}×",
        "a100": _chip("a100-80gb-sxm"), "h100": _chip("h100-sxm"),
        "sram_bandwidth_text": bandwidth_format(A100_SRAM_BANDWIDTH),
        "sram_speedup_text": number_format(
            A100_SRAM_BANDWIDTH / gpu_get("a100-80gb-sxm").bandwidth_bytes_per_second) + "×",
        "fa": {
            "fa1_speedup": f"{number_format(fr['fa1_speedup'])}×",
            "fa1_memory": f"{number_format(fr['fa1_memory'])}×",
            "fa1_bert": percent_format(fr["fa1_bert"]),
            "fa2_over_fa1": f"{number_format(fr['fa2_over_fa1'])}×",
            "fa2_mfu_low": percent_format(fr["fa2_mfu_low"]),
            "fa2_mfu_high": percent_format(fr["fa2_mfu_high"]),
            "fa2_h100_mfu": percent_format(fr["fa2_h100_mfu"]),
            "fa3_low": f"{number_format(fr['fa3_low'])}×",
            "fa3_high": f"{number_format(fr['fa3_high'])}×",
            "fa3_mfu": percent_format(fr["fa3_mfu"]),
            "matmul_tflops": number_format(fr["h100_matmul_tflops"]),
            "special_tflops": number_format(fr["h100_special_tflops"]),
            "special_vs_matmul": ratio_phrase(fr["h100_special_tflops"],
                                              fr["h100_matmul_tflops"]),
        },
        "gqa_group": f"{m.heads // m.kv_heads:,}",
        "gqa_packs": m.heads // m.kv_heads > 1,
        "decode_unpacked_intensity": number_format(decode_attention_intensity(
            heads=m.heads, kv_heads=m.kv_heads, value_bytes=dtype_get(inputs["dtype"]).bytes,
            packed=False)),
        "decode_packed_intensity": number_format(decode_attention_intensity(
            heads=m.heads, kv_heads=m.kv_heads, value_bytes=dtype_get(inputs["dtype"]).bytes,
            packed=True)),
        "tile_rows_low": f"{FA2_TILE_ROWS[0]:,}", "tile_rows_high": f"{FA2_TILE_ROWS[-1]:,}",
        "tile_kib": [number_format(tile_working_set_bytes(
            rows=rows, head_dim=m.head_dim, value_bytes=dtype_get(inputs["dtype"]).bytes) / 1024)
            + " KiB" for rows in FA2_TILE_ROWS],
        "fa2_page_multiple": f"{FLASH_ATTN2_PAGE_MULTIPLE:,}",
        "vllm_fa_page_multiple": f"{VLLM_FLASH_ATTN_PAGE_MULTIPLE:,}",
        "vllm_block": f"{VLLM_DEFAULT_BLOCK:,}",
        "tiled_source": tiled_source(),
        "demo_tile": defaults["tile"],
    }


_A100 = gpu_get("a100-80gb-sxm")  # its datasheet figures, as the sources list quotes them
SOURCES: list[tuple[str, str]] = [
    ("Dao et al., 'FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness' "
     "(the standard algorithm's HBM accesses, tiling with an online softmax, recomputation; "
     "A100 SRAM of 192 KB on each of 108 SMs at about 19 TB/s; up to 3× faster, up to 20× "
     "less memory, 15% on BERT-large)", "https://arxiv.org/abs/2205.14135"),
    ("Dao, 'FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning' "
     "(about 2× over FlashAttention; 50–73% of the A100's peak; §3.3, blocks chosen among "
     "{64, 128} × {64, 128})",
     "https://arxiv.org/abs/2307.08691"),
    ("Shah et al., 'FlashAttention-3: Fast and Accurate Attention with Asynchrony and "
     "Low-precision' (1.5–2.0× over FlashAttention-2 on H100; 75% utilisation in FP16; FA2 at "
     "35% on H100; §3: the H100 SXM5's matmul throughput is hundreds of times its throughput "
     "for exponentials, hence ping-pong scheduling of warpgroups and softmax pipelined inside "
     "one)", "https://arxiv.org/abs/2407.08608"),
    ("Ye et al., 'FlashInfer: Efficient and Customizable Attention Engine for LLM Inference "
     "Serving' (GQA decode kernels that load each KV head once for its group of query heads)",
     "https://arxiv.org/abs/2501.01005"),
    ("Milakov and Gimelshein, 'Online normalizer calculation for softmax' (the running maximum "
     "and sum)", "https://arxiv.org/abs/1805.02867"),
    ("Rabe and Staats, 'Self-attention Does Not Need O(n²) Memory'",
     "https://arxiv.org/abs/2112.05682"),
    ("NVIDIA Hopper Tuning Guide (up to 228 KB of shared memory per SM)",
     "https://docs.nvidia.com/cuda/hopper-tuning-guide/index.html"),
    ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (132 SMs on the SXM5, 50 MB L2)",
     "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"),
    ("NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs, 40 MB L2)",
     "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf"),
    ("NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM: "
     f"{number_format(_A100.memory_bytes / 1e9)} GB of {_A100.memory_kind} at "
     f"{number_format(_A100.bandwidth_bytes_per_second / 1e9)} GB/s)",
     "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
     "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, dense BF16 peak)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("Kwon et al., PagedAttention (attention reading K and V through a block table)",
     "https://arxiv.org/abs/2309.06180"),
    ("Dao-AILab flash-attention, csrc/flash_attn/flash_api.cpp (a paged KV cache's block size "
     "must be a multiple of 256 tokens)",
     "https://github.com/Dao-AILab/flash-attention/blob/main/csrc/flash_attn/flash_api.cpp"),
    ("Dao-AILab flash-attention, hopper/flash_api.cpp (FlashAttention-3: any page size; pages "
     "loaded with the TMA only when the page size is a multiple of the key tile; get_pack_gqa: "
     "the query heads that share a KV head packed into one tile, so each KV head is loaded "
     "once)",
     "https://github.com/Dao-AILab/flash-attention/blob/main/hopper/flash_api.cpp"),
    ("vLLM's fork of FlashAttention, vllm-project/flash-attention, csrc/flash_attn/flash_api.cpp "
     "(a paged KV cache's block size must be a multiple of 16)",
     "https://github.com/vllm-project/flash-attention/blob/main/csrc/flash_attn/flash_api.cpp"),
    ("vLLM, vllm/v1/attention/backends/flash_attn.py (the FlashAttention backend reads the "
     "block table through vllm.vllm_flash_attn; block size a multiple of 16)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/attention/backends/flash_attn.py"),
    ("PyTorch, torch.nn.functional.scaled_dot_product_attention (fused backends)",
     "https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html"),
    ("ROCm, 'AMD Instinct MI300 series microarchitecture' (MI300X peaks: matrix FP32 163.4 "
     "TFLOPS, the same as vector FP32, so its Matrix Cores offer FP32 no faster path)",
     "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html"),
    ("ROCm, 'AMD GPU specifications' (MI300X: 4 MiB of L2 per XCD, a 256 MiB Infinity Cache)",
     "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    ("Meta Llama 3.1 70B config.json (64 query heads, head_dim 128)",
     "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
]
