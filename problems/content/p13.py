"""Problem 13, profiling with Nsight: the floor of each kernel group in one decode step (what a
kernel summary ought to show before anyone opens a profile), and every figure the prose quotes,
computed at render time by problems/arithmetic from the same inputs as the calculator.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import peak_describe, peak_flops_get
from problems.arithmetic.inputs import TOKENS_MAX
from problems.arithmetic.memory import embedding_dtype_resolve
from problems.arithmetic.steps import Result
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    count_format,
    flops_format,
    flops_rate_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.utilization import BATCH_MAX, GROUPS, decode_step_breakdown
from problems.arithmetic.wording import list_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    bandwidth_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, series_fit_split, sweep_whole

SLUG = "decode-step-breakdown"
PREFIX = "p13-breakdown"
MS = 1e3
PLOT_BATCH_MAX = 512
# NVIDIA Technical Blog, "Getting Started with CUDA Graphs" (V100, CUDA 10.1): a short kernel's
# run time, and the time per kernel with a sync after each launch and with launches queued.
CUDA_GRAPHS_BLOG_SECONDS = {"kernel": 2.9e-6, "synced": 9.6e-6, "queued": 3.8e-6}


def _at(inputs: dict, batch: int) -> Result | None:
    try:
        return decode_step_breakdown(**{**inputs, "batch": batch})
    except (ArithmeticError, ValueError):
        return None


def breakdown_plot(*, inputs: dict, result: Result) -> Plot:
    """Each group's floor and the step's as the batch grows, the learner's batch marked."""
    xs = sweep_whole(1, max(PLOT_BATCH_MAX, inputs["batch"]), count=20)
    if inputs["batch"] not in xs:
        xs = sorted({*xs, inputs["batch"]})
    points = [_at(inputs, x) for x in xs]
    fits = tuple(bool(p and p["fits"]) for p in points)

    def values(key: str) -> tuple[float, ...]:
        return tuple(p[key] * MS if p else float("nan") for p in points)

    groups = [Series(label, tuple(xs), values(f"{name}_seconds"), markers=False)
              for name, label in (("attn_proj", "Attention projections"), ("mlp", "MLP"),
                                  ("lm_head", "LM head"), ("kv", "KV-cache attention"))]
    return Plot(
        title="Decode step floor by kernel group as the batch grows",
        x_title="Sequences in the step", y_title="Time per step (ms)", x_log=True,
        series=(*groups,
                *series_fit_split("Step (sum of the groups)", xs, values("step_seconds"), fits,
                                  dash=True)),
        marks=(Mark(inputs["batch"], "your batch"),))


def breakdown_compute(**inputs) -> Result:
    return decode_step_breakdown(**inputs)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="What a decode step's kernels must take",
    explanation=("Each group of kernels in one decode step (attention projections, MLP, LM "
                 "head, norms, attention over the KV cache) and its floor: bytes over "
                 "bandwidth or FLOPs over peak, whichever is longer. Kernels run one after "
                 "another, so the step is the sum of the groups."),
    inputs=(
        model_input(initial="llama-3-8b", api="llama-3-8b"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        dtype_input(label="Weight format"),
        kv_dtype_input(),
        whole_input("batch", "Sequences in the step", unit="sequences", initial=64, api=64,
                    maximum=BATCH_MAX,
                    help="Decode batches in serving run from a few to a few hundred "
                         "sequences."),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                    api=1_000, maximum=TOKENS_MAX,
                    help="Tokens already in each sequence's KV cache; at most the model's "
                         "context window."),
        bandwidth_input(),
        mfu_input(initial=1.0, api=1.0),
        *memory_inputs(),
    ),
    compute=breakdown_compute,
    plot=breakdown_plot,
    order=75,
    api_path="/decode-step-breakdown",
    api_summary="One decode step by kernel group: bytes, FLOPs and the floor of each",
))

SOURCES: list[tuple[str, str]] = [
    ("vLLM source: vllm/model_executor/layers/fused_moe/fused_moe.py (an MoE layer's kernels: "
     "the top-k choice, moe_align_block_size sorting tokens by expert, two grouped expert "
     "matmuls and the sum over the chosen experts)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/layers/fused_moe/fused_moe.py"),
    ("vLLM source: vllm/model_executor/models/deepseek_v2.py (MLA's q_a_proj, q_a_layernorm, "
     "q_b_proj, kv_a_proj_with_mqa and kv_a_layernorm in every layer)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/models/deepseek_v2.py"),
    ("NVIDIA Nsight Systems User Guide (nsys profile: --trace, --capture-range, "
     "--capture-range-end, --cuda-graph-trace; nsys stats; GPU Metrics: --gpu-metrics-devices, "
     "--gpu-metrics-set, --gpu-metrics-frequency, SM active, tensor active, DRAM bandwidth "
     "sampled on the timeline, Turing and newer)",
     "https://docs.nvidia.com/nsight-systems/UserGuide/index.html"),
    ("NVIDIA Nsight Compute CLI (--kernel-name, --launch-skip, --launch-count, --section, "
     "--set, --target-processes)",
     "https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html"),
    ("NVIDIA Nsight Compute Profiling Guide (sections, replay, clock and cache control)",
     "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"),
    ("CUDA Runtime API: profiler control (cudaProfilerStart, cudaProfilerStop)",
     "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__PROFILER.html"),
    ("vLLM documentation: Profiling vLLM (Nsight Systems and the PyTorch profiler, "
     "--profiler-config, capture ranges, the kernel summary)",
     "https://docs.vllm.ai/en/stable/contributing/profiling/"),
    ("PyTorch documentation: torch.profiler (profile, schedule, record_function, "
     "key_averages, export_chrome_trace)", "https://pytorch.org/docs/stable/profiler.html"),
    ("PyTorch documentation: torch.cuda.nvtx (NVTX ranges from Python)",
     "https://pytorch.org/docs/stable/cuda.html#nvidia-tools-extension-nvtx"),
    ("NVIDIA Technical Blog, A. Gray, 'Getting Started with CUDA Graphs' (2019: a 2.9 µs "
     "kernel at 9.6 µs per launch with a sync after each, 3.8 µs queued; V100)",
     "https://developer.nvidia.com/blog/cuda-graphs/"),
    ("vLLM blog, 'vLLM V1: A Major Upgrade to vLLM's Core Architecture' (persistent batch)",
     "https://blog.vllm.ai/2025/01/27/v1-alpha-release.html"),
    ("Perfetto UI (opens the PyTorch profiler's Chrome-format traces)",
     "https://ui.perfetto.dev/"),
    ("Meta Llama 3 8B config.json (layers, hidden size, heads, KV heads, FFN width, "
     "vocabulary)", "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("vLLM, model_executor/models/llama.py (the decoder layer passes the residual to each "
     "RMSNorm, which runs fused_add_rms_norm; attention writes the KV cache with "
     "reshape_and_cache; SiluAndMul)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/model_executor/models/llama.py"),
    ("DeepSeek-AI, 'DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts "
     "Language Model' (§2.1.2: MLA's up-projections absorbed into the query and output at "
     "inference)", "https://arxiv.org/abs/2405.04434"),
    ("DeepSeek-AI, FlashMLA (MLA decode kernels for Hopper; its deep-dive explains why the "
     "kernel is compute-bound although it is a decoding kernel)",
     "https://github.com/deepseek-ai/FlashMLA"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, dense BF16 rate)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 13's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:  # the refusal shows beside the calculator's field; the prose keeps the defaults
        inputs = CALCULATOR.defaults()
        r = decode_step_breakdown(**inputs)
    model, gpu, dtype = model_get(inputs["model"]), gpu_get(inputs["gpu"]), dtype_get(
        inputs["dtype"])
    kv_dtype = kv_dtype_get(inputs["kv_dtype"], model=model)
    head_dtype = embedding_dtype_resolve(model=model, dtype=dtype)
    peak = peak_flops_get(gpu=gpu, dtype=dtype)
    c: dict[str, object] = {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "model_name": model.name,
        "gpu_name": gpu.name,
        "dtype_name": dtype.name,
        "kv_dtype_name": kv_dtype.kv_label,
        "head_dtype_name": head_dtype.name,
        "memory_kind": gpu.memory_kind,
        "layers": number_format(model.layers),
        "hidden": number_format(model.hidden),
        "heads": number_format(model.heads),
        "kv_heads": number_format(model.kv_heads),
        "head_dim": number_format(model.head_dim),
        "intermediate": number_format(model.intermediate),
        "vocab": number_format(model.vocab),
        "is_moe": model.is_moe,
        "batch": number_format(inputs["batch"]),
        "batch_sequences": count_format(inputs["batch"], "sequence"),
        "batch_rows": count_format(inputs["batch"], "row"),
        "context_tokens_text": count_format(inputs["context_tokens"], "token"),
        "bandwidth_text": bandwidth_format(gpu.bandwidth_bytes_per_second),
        "peak_text": flops_rate_format(peak),
        "peak_describe": peak_describe(gpu=gpu, dtype=dtype),
        "bandwidth_efficiency_percent": percent_format(inputs["bandwidth_efficiency"]),
        "mfu_percent": percent_format(inputs["mfu"]),
        "at_floor": inputs["bandwidth_efficiency"] >= 1 and inputs["mfu"] >= 1,
        "ridge_text": f"{number_format(r['ridge_flops_per_byte'])} FLOP/B",
        "tied": model.tied_embeddings,
        "kv_per_token_text": bytes_short(r["kv_bytes_per_token"]),
        "kv_intensity_text": f"{number_format(r['kv_intensity'])} FLOP",
        "kv_below_ridge": r["kv_intensity"] < r["attention_ridge_flops_per_byte"],
        "attention_ridge_text": f"{number_format(r['attention_ridge_flops_per_byte'])} FLOP/B",
        "mla": model.attention == "MLA",
        # MLA's absorbed decode attention: FLOPs per head for each byte of cache it reads, and
        # whether an 8-bit cache (half the bytes, the same FLOPs) would lift it over the ridge.
        "kv_per_head_byte_text": number_format(r["kv_intensity"] / model.heads, digits=2),
        "kv_fp8_lifts": (kv_dtype.bytes > 1 and r["kv_intensity"] * kv_dtype.bytes
                         >= r["attention_ridge_flops_per_byte"]),
        "attention_format": "FP32" if dtype.compute == "fp32" else "BF16",
        "step_bytes_text": bytes_short(r["step_bytes"]),
        "step_floor_text": seconds_format(r["step_seconds"]),
        "step_bound": r["step_bound"],
        "small_bytes_text": bytes_short(r["norms_bytes"]),
        "kernels_per_layer": number_format(r["kernels_per_layer"]),
        "kernels_floor": number_format(r["kernels_floor"]),
        "fits": r["fits"],
        "reserve_text": bytes_short(r["reserve_bytes"]),
        "graphs_kernel_text": seconds_format(CUDA_GRAPHS_BLOG_SECONDS["kernel"]),
        "graphs_synced_text": seconds_format(CUDA_GRAPHS_BLOG_SECONDS["synced"]),
        "graphs_queued_text": seconds_format(CUDA_GRAPHS_BLOG_SECONDS["queued"]),
    }
    # The plot's sweep: which weight groups a batch of PLOT_BATCH_MAX turns compute-bound. An
    # MoE's experts each see only their share of the batch and can stay memory-bound.
    sweep_batch = max(PLOT_BATCH_MAX, inputs["batch"])
    sweep = _at(inputs, sweep_batch)
    weight_groups = ("attn_proj", "mlp", "lm_head")
    labels = {"attn_proj": "the attention projections", "mlp": "the MLP",
              "lm_head": "the LM head"}
    turned = [labels[n] for n in weight_groups if sweep and sweep[f"{n}_bound"] == "compute"]
    stay = [labels[n] for n in weight_groups if sweep and sweep[f"{n}_bound"] == "memory"]
    c.update({
        "sweep_batch": number_format(sweep_batch),
        "sweep_turned": list_phrase(turned) if turned else "",
        "sweep_stay": list_phrase(stay) if stay else "",
        "sweep_stay_verb": "stays" if len(stay) == 1 else "stay",
        "sweep_mlp_stays": bool(sweep) and sweep["mlp_bound"] == "memory",
        "dtype_is_fp16": dtype.id == "fp16",
    })
    for name in GROUPS:
        c[f"{name}_params_text"] = number_format(r[f"{name}_params"])
        c[f"{name}_bytes_text"] = bytes_short(r[f"{name}_bytes"])
        c[f"{name}_flops_text"] = flops_format(r[f"{name}_flops"])
        c[f"{name}_time_text"] = seconds_format(r[f"{name}_seconds"])
        c[f"{name}_bound"] = r[f"{name}_bound"]
        c[f"{name}_share_text"] = percent_format(r[f"{name}_share"])
    return c
