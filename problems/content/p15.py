"""Problem 15, a fused Triton RMSNorm: bytes moved by RMSNorm and by add + RMSNorm, eager (op by
op, as Hugging Face writes it) against fused, and the time floors at the GPU's bandwidth; every
figure the prose quotes, computed at render time by problems/arithmetic from the same inputs as
the calculator.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import DTYPES, Gpu, gpu_get, models_all
from problems.arithmetic.fusion import (
    HIDDEN_MAX,
    LAYERS_MAX,
    RMSNORM_DTYPES,
    TOKENS_MAX,
    intermediate_cache_fit,
    rmsnorm_fusion,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import (
    MIB,
    bandwidth_format,
    bytes_in,
    bytes_short,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    bandwidth_input,
    choice_input,
    gpu_input,
    inputs_normalise,
    whole_input,
)
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "rmsnorm-fusion"
PREFIX = "p15-rmsnorm"
MICRO = 1e6
PLOT_TOKENS_MAX = 65_536
# A hidden size that is not a power of two, from Qwen2.5-0.5B's config.json.
HIDDEN_EXAMPLE = ("Qwen2.5-0.5B", 896)


def hidden_source(hidden: int) -> str:
    """A catalog model with this hidden size, for the reader ("Llama 3 8B"), or ""; Llama 3
    first, the course's most quoted family."""
    models = sorted(models_all().values(), key=lambda m: not m.id.startswith("llama-3"))
    return next((m.name for m in models if m.hidden == hidden and not m.id.startswith("course")),
                "")


def mib_pair(size: float, cache: float) -> tuple[str, str]:
    """A tensor's size and a cache's, in MiB as vendors state caches, with as many digits as it
    takes for two unequal sizes to print unequal ("50.0001 MiB" against "50 MiB"); a tensor
    under 1 MiB in bytes ("64 kB")."""
    if size < MIB:
        return bytes_short(size), bytes_in(cache, "MiB", digits=4)
    for digits in range(4, 12):
        texts = bytes_in(size, "MiB", digits=digits), bytes_in(cache, "MiB", digits=digits)
        if size == cache or texts[0] != texts[1]:
            return texts
    return texts


def cache_context(*, gpu: Gpu, elements: int) -> dict:
    """Problem 15's sentence on the eager intermediate and the cache: the GPU's own cache,
    named and sized from the catalog, or None where no public source gives it."""
    fit = intermediate_cache_fit(gpu=gpu, elements=elements)
    if fit["cache_bytes"] is None:
        return {"cache_known": False, "intermediate_text": bytes_short(fit["bytes"]),
                "pair_text": bytes_short(fit["pair_bytes"])}
    # The pair against the cache decides, so those two print unequal when they differ.
    pair_text, cache_text = mib_pair(fit["pair_bytes"], fit["cache_bytes"])
    size_text = mib_pair(fit["bytes"], fit["cache_bytes"])[0]
    dies = gpu.l2_dies
    return {"cache_known": True, "cache_name": fit["cache_name"], "cache_text": cache_text,
            "intermediate_text": size_text, "pair_text": pair_text,
            "intermediate_fits": fit["fits"], "alone_fits": fit["alone_fits"],
            "cache_split": dies > 1, "dies": number_format(dies),
            "l2_die_text": bytes_in(gpu.l2_bytes / dies, "MiB") if dies > 1 else ""}


def memory_context(*, gpu: Gpu, elements: int, value_bytes: int) -> dict:
    """Whether the step's tensors fit the GPU's memory at all, before any weights (bytes): the
    fused kernel holds its input and output (2 × b per element), eager PyTorch at its peak the
    input and two FP32 intermediates (b + 8 per element: the widened copy and its square, both
    live until the mean). `state` is "both" (everything fits), "fused" (only the fused kernel's
    tensors fit) or "neither". Hand, 1,048,576 tokens × 8,192 in BF16 on an H100 (79.22 GiB =
    85.1 GB): fused 34.4 GB fits, eager 10 × 8.59e9 = 85.9 GB does not."""
    memory = gpu.memory_total_bytes
    fused = 2 * value_bytes * elements
    eager = (value_bytes + 2 * 4) * elements
    state = "both" if eager <= memory else "fused" if fused <= memory else "neither"
    return {"state": state, "memory_text": bytes_short(memory),
            "fused_need_text": bytes_short(fused), "eager_need_text": bytes_short(eager)}


def fusion_plot(*, inputs: dict, result: Result) -> Plot:
    """The four time floors against tokens in the step, log-log, the learner's count marked."""
    xs = sorted({*sweep_whole(1, max(PLOT_TOKENS_MAX, inputs["tokens"]), count=18),
                 inputs["tokens"]})
    points = [rmsnorm_fusion(**{**inputs, "tokens": x}) for x in xs]

    def values(key: str) -> tuple[float, ...]:
        return tuple(p[f"{key}_seconds"] * MICRO for p in points)

    return Plot(
        title="RMSNorm time floor against tokens in the step",
        x_title="Tokens in the step", y_title="Time floor (µs)", x_log=True, y_log=True,
        series=(Series("Eager RMSNorm", tuple(xs), values("norm_eager")),
                Series("Fused RMSNorm", tuple(xs), values("norm_fused"), dash=True),
                Series("Eager add + RMSNorm", tuple(xs), values("add_eager")),
                Series("Fused add + RMSNorm", tuple(xs), values("add_fused"), dash=True)),
        marks=(Mark(inputs["tokens"], "your step"),))


def fusion_compute(**inputs) -> Result:
    return rmsnorm_fusion(**inputs)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Bytes moved by RMSNorm, eager against fused",
    explanation=("Memory traffic of RMSNorm (and of the residual add before it) as Hugging "
                 "Face's eager code runs it, one kernel per operation, against one fused "
                 "kernel, and the time each takes at the GPU's bandwidth. These count traffic "
                 "to DRAM; launch costs are left out."),
    inputs=(
        whole_input("hidden_size", "Hidden size", initial=4_096, api=4_096, minimum=16,
                    maximum=HIDDEN_MAX,
                    help="Llama 3 8B: 4,096; Llama 3 70B: 8,192; Qwen2.5-0.5B: 896 (each "
                         "model's config.json)."),
        whole_input("tokens", "Tokens in the step", unit="tokens", initial=4_096, api=4_096,
                    maximum=TOKENS_MAX,
                    help="A decode step of B sequences has B tokens; a prefill chunk has "
                         "thousands."),
        choice_input("dtype", "Activation and weight format",
                     choices=tuple((d, DTYPES[d].name) for d in RMSNORM_DTYPES),
                     initial="bf16", api="bf16"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        whole_input("layers", "Layers (for a whole forward pass)", initial=32, api=32,
                    maximum=LAYERS_MAX),
        bandwidth_input(),
    ),
    compute=fusion_compute,
    plot=fusion_plot,
    order=77,
    api_path="/rmsnorm-fusion",
    api_summary="RMSNorm and add + RMSNorm: bytes and time floors, eager against fused",
))

SOURCES: list[tuple[str, str]] = [
    ("Zhang and Sennrich, 'Root Mean Square Layer Normalization' (NeurIPS 2019)",
     "https://arxiv.org/abs/1910.07467"),
    ("Hugging Face Transformers: modeling_llama.py, LlamaRMSNorm (the eager code, op by op, "
     "and its rounding points)",
     "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/"
     "modeling_llama.py"),
    ("Tillet, Kung and Cox, 'Triton: an intermediate language and compiler for tiled neural "
     "network computations' (MAPL 2019)",
     "https://www.eecs.harvard.edu/~htk/publication/2019-mapl-tillet-kung-cox.pdf"),
    ("Triton documentation: triton.language (program_id, arange, load and store with mask and "
     "other, sum, rsqrt)", "https://triton-lang.org/main/python-api/triton.language.html"),
    ("Triton documentation: triton.autotune (configs, key, restore_value)",
     "https://triton-lang.org/main/python-api/generated/triton.autotune.html"),
    ("Triton tutorial: Layer Normalization (a program per row; a loop for wide rows)",
     "https://triton-lang.org/main/getting-started/tutorials/05-layer-norm.html"),
    ("Triton documentation: debugging with the interpreter (TRITON_INTERPRET=1)",
     "https://triton-lang.org/main/programming-guide/chapter-3/debugging.html"),
    ("vLLM documentation: Profiling vLLM (its kernel summary lists fused_add_rms_norm)",
     "https://docs.vllm.ai/en/stable/contributing/profiling/"),
    ("FlashInfer: flashinfer.norm.fused_add_rmsnorm",
     "https://docs.flashinfer.ai/api/python/_generate/flashinfer.norm.fused_add_rmsnorm.html"),
    ("NVIDIA Technical Blog, 'NVIDIA Hopper Architecture In-Depth' (H100: 50 MB of L2)",
     "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/"),
    ("NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5: 50 MB of L2)",
     "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"),
    ("Chips and Cheese, 'Nvidia's H100: Funny L2, and Tons of Bandwidth' (H100 PCIe: 50 MB of "
     "L2)", "https://chipsandcheese.com/2023/07/02/nvidias-h100-funny-l2-and-tons-of-bandwidth/"),
    ("NVIDIA A100 Tensor Core GPU Architecture whitepaper (A100: 40 MB of L2)",
     "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
     "nvidia-ampere-architecture-whitepaper.pdf"),
    ("pytorch/ao pull request 4002 (a shipping B200's driver reports 126.50 MB of L2)",
     "https://github.com/pytorch/ao/pull/4002"),
    ("TechPowerUp's GPU database, as reproduced by fpsbench (L4: 48 MB of L2; NVIDIA's L4 "
     "datasheet does not state it)", "https://fpsbench.com/compare/gpu/nvidia-l4-vs-nvidia-tesla-m40"),
    ("ROCm, 'AMD GPU specifications' (MI300X: 32 MiB of L2, 4 per XCD; a 256 MiB L3, the AMD "
     "Infinity Cache)", "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"),
    ("ROCm, 'AMD Instinct MI300 series microarchitecture' (each XCD's compute units share its "
     "own 4 MB L2; Matrix Cores)",
     "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html"),
    ("Modular, Mojo documentation, chiplet_transform_chunked (the MI300X hands a kernel's "
     "workgroups round-robin to its 8 XCDs, each with its own L2)",
     "https://docs.modular.com/mojo/kernels/linalg/matmul/gpu/amd/pingpong_kernel/"
     "chiplet_transform_chunked"),
    ("NVIDIA Technical Blog, 'Getting Started with CUDA Graphs' (launch cost of short "
     "kernels)", "https://developer.nvidia.com/blog/cuda-graphs/"),
    ("Meta Llama 3 8B config.json (hidden size 4,096, 32 layers)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("Qwen2.5-0.5B config.json (hidden size 896)",
     "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, FP32 rate)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 15's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:  # the refusal shows beside the calculator's field; the prose keeps the defaults
        inputs = CALCULATOR.defaults()
        r = rmsnorm_fusion(**inputs)
    gpu = gpu_get(inputs["gpu"])
    dtype = DTYPES[inputs["dtype"]]
    # The same add and norm for one token (a decode step of one sequence): the pair whose
    # launches the prose counts, so its floors, not the plain norm's.
    one_token = rmsnorm_fusion(**{**inputs, "tokens": 1})
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "hidden": number_format(inputs["hidden_size"]),
        "hidden_source": hidden_source(inputs["hidden_size"]),
        "tokens": number_format(inputs["tokens"]),
        "tokens_text": count_phrase(inputs["tokens"], "token"),
        "layers": number_format(inputs["layers"]),
        "dtype_name": dtype.name,
        "dtype_bytes": number_format(r["value_bytes"]),
        "casts": r["casts"],
        "gpu_name": gpu.name,
        "memory_kind": gpu.memory_kind,
        "bandwidth_text": bandwidth_format(gpu.bandwidth_bytes_per_second),
        "bandwidth_efficiency_percent": percent_format(inputs["bandwidth_efficiency"]),
        "at_floor": inputs["bandwidth_efficiency"] >= 1,
        "elements_text": number_format(r["elements"]),
        "norm_unfused_kernels": number_format(r["norm_eager_kernels"]),
        "norm_unfused_per_element": number_format(r["norm_eager_per_element"]),
        "norm_unfused_bytes_text": bytes_short(r["norm_eager_bytes"]),
        "norm_fused_per_element": number_format(r["norm_fused_per_element"]),
        "norm_fused_bytes_text": bytes_short(r["norm_fused_bytes"]),
        "norm_ratio_text": f"{number_format(r['norm_ratio'])}×",
        "add_unfused_kernels": number_format(r["add_eager_kernels"]),
        "add_unfused_bytes_text": bytes_short(r["add_eager_bytes"]),
        "add_fused_bytes_text": bytes_short(r["add_fused_bytes"]),
        "add_split_kernels": number_format(r["add_split_kernels"]),
        "add_split_bytes_text": bytes_short(r["add_split_bytes"]),
        "add_split_time_text": seconds_format(r["add_split_seconds"]),
        "residual_split_speedup_text": f"{number_format(r['residual_split_speedup'])}×",
        "residual_extra_saving_text": percent_format(r["residual_extra_saving"]),
        "add_ratio_text": f"{number_format(r['add_ratio'])}×",
        "flops_per_element": number_format(r["norm_flops"] / r["elements"]),
        "intensity_text": f"{number_format(r['intensity_flops_per_byte'])} FLOP per byte",
        "ridge_text": f"{number_format(r['ridge_flops_per_byte'])} FLOP/B",
        "fp32_rate_text": f"{number_format(gpu.fp32_flops / 1e12)} TFLOP/s",
        "norm_unfused_time_text": seconds_format(r["norm_eager_seconds"]),
        "norm_fused_time_text": seconds_format(r["norm_fused_seconds"]),
        "add_unfused_time_text": seconds_format(r["add_eager_seconds"]),
        "add_fused_time_text": seconds_format(r["add_fused_seconds"]),
        "norms_per_pass": number_format(r["norms_per_pass"]),
        "adds_per_pass": number_format(r["adds_per_pass"]),
        "pass_unfused_time_text": seconds_format(r["pass_eager_seconds"]),
        "pass_fused_time_text": seconds_format(r["pass_fused_seconds"]),
        "pass_saved_time_text": seconds_format(r["pass_saved_seconds"]),
        "one_token_eager_time_text": seconds_format(one_token["add_eager_seconds"]),
        "one_token_fused_time_text": seconds_format(one_token["add_fused_seconds"]),
        "one_token_sub_microsecond": one_token["add_eager_seconds"] < 1e-6,
        # The eager norm's FP32 intermediate against this GPU's own cache.
        "cache": cache_context(gpu=gpu, elements=r["elements"]),
        "memory": memory_context(gpu=gpu, elements=r["elements"], value_bytes=r["value_bytes"]),
        "matrix_units": gpu.matrix_units,
        "hidden_example": f"{HIDDEN_EXAMPLE[0]}'s is {number_format(HIDDEN_EXAMPLE[1])}",
    }
