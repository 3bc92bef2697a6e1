"""Problem 14, the GPU at 30% utilisation: a decode step at two batch sizes with a host time per
step, and what nvidia-smi, MFU and MBU each report; every figure the prose quotes, computed at
render time by problems/arithmetic from the same inputs as the calculator.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.inputs import TOKENS_MAX
from problems.arithmetic.parallel import pipeline_bubble
from problems.arithmetic.steps import Result
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    count_format,
    flops_format,
    flops_rate_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.utilization import (
    BATCH_MAX,
    HOST_MS_MAX,
    HOST_PER_SEQUENCE_US_MAX,
    gpu_utilization,
)
from problems.arithmetic.wording import count_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    ON_OFF,
    bandwidth_input,
    choice_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    memory_inputs,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, sweep_whole

SLUG = "gpu-utilization"
PREFIX = "p14-util"
PLOT_BATCH_MAX = 512
PERCENT = 100
# NVIDIA, "NVIDIA Hopper Architecture In-Depth": the H100 SXM5 has 132 SMs.
H100_SMS = 132
# The question as interviewers ask it.
QUESTION_UTILIZATION = 0.30
# vLLM's v0.6.0 blog: where Llama 3 8B on one H100 spent its time under v0.5.3.
VLLM_V053 = {"model": "Llama 3 8B", "api_server": 0.33, "scheduling": 0.29, "gpu": 0.38}
# The tokenization follow-up: CPU time per request (s) at a request rate (per s).
TOKENIZE_SECONDS, TOKENIZE_RATE = 0.005, 200


def utilization_plot(*, inputs: dict, result: Result) -> Plot:
    """nvidia-smi's reading, MFU and MBU (over wall time) and MFU while busy, against batch;
    batches that do not fit the GPU are left off and the title says from where."""
    top = max(PLOT_BATCH_MAX, inputs["batch_small"], inputs["batch_large"])
    xs = sorted({*sweep_whole(1, top, count=20), inputs["batch_small"], inputs["batch_large"]})
    points = []
    for x in xs:
        r = gpu_utilization(**{**inputs, "batch_small": x, "batch_large": x})["small"]
        points.append(r if r["fits"] else None)
    first_misfit = next((x for x, p in zip(xs, points, strict=True) if p is None), None)

    def values(key: str) -> tuple[float, ...]:
        return tuple(p[key] * PERCENT if p else float("nan") for p in points)

    note = (f" (from {count_phrase(first_misfit, 'sequence')} the batch no longer fits: not "
            "drawn)"
            if first_misfit else "")
    return Plot(
        title="nvidia-smi utilisation, MFU and MBU as the batch grows" + note,
        x_title="Sequences in the step", y_title="% of time or of peak", x_log=True,
        series=(Series("nvidia-smi utilisation (GPU ÷ wall)", tuple(xs), values("utilization")),
                Series("MBU over wall time", tuple(xs), values("mbu_wall")),
                Series("MFU over wall time", tuple(xs), values("mfu_wall")),
                Series("MFU while kernels run", tuple(xs), values("mfu_busy"), dash=True)),
        marks=(Mark(inputs["batch_small"], f"batch {inputs['batch_small']:,}"),
               Mark(inputs["batch_large"], f"batch {inputs['batch_large']:,}")))


def utilization_compute(**inputs) -> Result:
    return gpu_utilization(**inputs)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Busy against efficient: a decode step at two batch sizes",
    explanation=("GPU time per decode step from the roofline (each kernel group's floor, "
                 "summed), a host time per step that you set, and what nvidia-smi, MFU and MBU "
                 "each report. Kernels are assumed to run back to back inside the step; launch "
                 "gaps inside the forward pass count as host time here."),
    inputs=(
        model_input(initial="llama-3-8b", api="llama-3-8b"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        dtype_input(label="Weight format"),
        kv_dtype_input(),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                    api=1_000, maximum=TOKENS_MAX),
        whole_input("batch_small", "First batch", unit="sequences", initial=1, api=1,
                    maximum=BATCH_MAX),
        whole_input("batch_large", "Second batch", unit="sequences", initial=64, api=64,
                    maximum=BATCH_MAX),
        bandwidth_input(),
        real_input("host_ms", "Host time per step", unit="ms", initial=3.0, api=3.0,
                   maximum=HOST_MS_MAX,
                   help="An assumption for the exercise: scheduling, input preparation, "
                        "sampling, detokenization and launch time that the GPU waits for. The "
                        "profile and utilization demos measure this engine's."),
        real_input("host_per_sequence_us", "Host time per sequence in the step", unit="µs",
                   initial=0.0, api=0.0, maximum=HOST_PER_SEQUENCE_US_MAX,
                   help="Host work that grows with the batch: scheduling, building inputs and "
                        "processing outputs for each running sequence. 0 keeps the host cost "
                        "fixed; the utilization demo measures this engine's."),
        choice_input("overlap", "Host work overlapped with the GPU", choices=ON_OFF,
                     initial="off", api="off",
                     help="On: the engine prepares step n+1 while step n runs (SGLang's and "
                          "TensorRT-LLM's overlap schedulers, vLLM's async scheduling)."),
        real_input("target_utilization", "Utilisation to explain", unit="fraction",
                   initial=0.30, api=0.30, minimum=0.01, maximum=1.0,
                   help="The nvidia-smi reading you are asked about, as a fraction."),
        *memory_inputs(),
    ),
    compute=utilization_compute,
    plot=utilization_plot,
    order=76,
    api_path="/gpu-utilization",
    api_summary="nvidia-smi utilisation against MFU and MBU at two batch sizes",
))

SOURCES: list[tuple[str, str]] = [
    ("Huang et al., 'GPipe: Efficient Training of Giant Neural Networks using Pipeline "
     "Parallelism' (the bubble: (p − 1) ÷ (m + p − 1) of each stage's time idle with p stages "
     "and m micro-batches)", "https://arxiv.org/abs/1811.06965"),
    ("NVML API reference: nvmlUtilization_t (GPU utilisation: percent of time one or more "
     "kernels ran; memory: percent of time memory was read or written; sample period)",
     "https://docs.nvidia.com/deploy/nvml-api/structnvmlUtilization__t.html"),
    ("NVIDIA/nccl issue #146, 'Nccl collective block other kernels' (a maintainer: NCCL "
     "operations are CUDA kernels that block, waiting for the other GPUs to launch theirs)",
     "https://github.com/NVIDIA/nccl/issues/146"),
    ("PyTorch documentation: torch.cuda.utilization (the same reading, as nvidia-smi gives it)",
     "https://pytorch.org/docs/stable/generated/torch.cuda.utilization.html"),
    ("NVIDIA DCGM exporter: default counters (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_SM_ACTIVE, "
     "SM_OCCUPANCY, PIPE_TENSOR_ACTIVE, DRAM_ACTIVE)",
     "https://github.com/NVIDIA/dcgm-exporter/blob/main/etc/default-counters.csv"),
    ("NVML API reference: GPM metrics (SM, tensor and DRAM bandwidth utilisation on Hopper)",
     "https://docs.nvidia.com/deploy/nvml-api/group__nvmlGpmEnums.html"),
    ("NVIDIA Technical Blog, 'NVIDIA Hopper Architecture In-Depth' (H100 SXM5: 132 SMs)",
     "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/"),
    ("vLLM blog, 'vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction' (Llama 3 "
     "8B on one H100 under v0.5.3: API server 33%, scheduling 29%, GPU execution 38%)",
     "https://blog.vllm.ai/2024/09/05/perf-update.html"),
    ("LMSYS blog, 'SGLang v0.4' (the zero-overhead batch scheduler, one batch ahead)",
     "https://lmsys.org/blog/2024-12-04-sglang-v0-4/"),
    ("TensorRT-LLM documentation: the overlap scheduler (on by default, one extra decode step)",
     "https://nvidia.github.io/TensorRT-LLM/features/overlap-scheduler.html"),
    ("vLLM blog, 'vLLM V1: A Major Upgrade to vLLM's Core Architecture' (tokenization and "
     "detokenization apart from the engine core, persistent batch)",
     "https://blog.vllm.ai/2025/01/27/v1-alpha-release.html"),
    ("vLLM documentation: engine arguments (--async-scheduling)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("Databricks, 'LLM Inference Performance Engineering: Best Practices' (MBU)",
     "https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices"),
    ("NVIDIA Technical Blog, 'Getting Started with CUDA Graphs' (one launch for many kernels)",
     "https://developer.nvidia.com/blog/cuda-graphs/"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, dense BF16 rate)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("Meta Llama 3 8B config.json (model dimensions)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
]


def _point(p: dict) -> dict:
    return {
        "batch": number_format(p["batch"]),
        "bytes_text": bytes_short(p["bytes"]),
        "flops_text": flops_format(p["flops"]),
        "gpu_time_text": seconds_format(p["gpu_seconds"]),
        "bound": p["bound"],
        "mfu_busy_text": percent_format(p["mfu_busy"]),
        "mbu_busy_text": percent_format(p["mbu_busy"]),
        "wall_text": seconds_format(p["wall_seconds"]),
        "util_text": percent_format(p["utilization"]),
        "mfu_wall_text": percent_format(p["mfu_wall"]),
        "mbu_wall_text": percent_format(p["mbu_wall"]),
        "tokens_per_s_text": rate_format(p["tokens_per_second"], "tokens/s"),
        "host_for_target_text": seconds_format(p["host_for_target_seconds"]),
        "fits": p["fits"],
        "busy_full": p["utilization"] >= 1,
    }


# When the learner leaves the per-sequence host cost at 0, the worked answer shows what one of
# this size does: an illustrative figure, not a measurement (the utilization demo measures this
# engine's own).
PER_SEQUENCE_EXAMPLE_US = 50.0
# Pipeline parallelism for the bubble example: 4 stages, one batch in flight, then four.
PP_STAGES = 4
PP_MICROBATCHES = (1, PP_STAGES)


def context(*, request: HttpRequest) -> dict:
    """The figures problem 14's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:  # the refusal shows beside the calculator's field; the prose keeps the defaults
        inputs = CALCULATOR.defaults()
        r = gpu_utilization(**inputs)
    model, gpu, dtype = (model_get(inputs["model"]), gpu_get(inputs["gpu"]),
                         dtype_get(inputs["dtype"]))
    kv_dtype = kv_dtype_get(inputs["kv_dtype"], model=model)
    per_seq_given = inputs["host_per_sequence_us"] > 0
    per_seq_us = inputs["host_per_sequence_us"] if per_seq_given else PER_SEQUENCE_EXAMPLE_US
    fixed = r if not per_seq_given else gpu_utilization(**{**inputs, "host_per_sequence_us": 0.0})
    grows = r if per_seq_given else gpu_utilization(**{**inputs,
                                                      "host_per_sequence_us": per_seq_us})
    # The per-sequence host cost shows only if the printed gain moves: overlapped and shorter
    # than the GPU's step it stays hidden, and beside a step of seconds it is lost in rounding.
    with_part, without_part = (r, fixed) if per_seq_given else (grows, r)
    per_seq_visible = (number_format(with_part["throughput_gain"])
                       != number_format(without_part["throughput_gain"]))
    misfits = [f"batch {number_format(inputs[k])}" for k in ("batch_small", "batch_large")
               if not r["small" if k == "batch_small" else "large"]["fits"]]
    if len(misfits) == 2 and inputs["batch_small"] == inputs["batch_large"]:
        misfits = misfits[:1]
    bubbles = [pipeline_bubble(stages=PP_STAGES, microbatches=m)["flush"]
               for m in PP_MICROBATCHES]
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "model_name": model.name,
        "gpu_name": gpu.name,
        "dtype_name": dtype.name,
        "kv_dtype_name": kv_dtype.kv_label,
        "context_tokens": number_format(inputs["context_tokens"]),
        "context_tokens_text": count_phrase(inputs["context_tokens"], "token"),
        "bandwidth_text": bandwidth_format(gpu.bandwidth_bytes_per_second),
        "peak_text": flops_rate_format(r["peak_flops"]),
        "bandwidth_efficiency_percent": percent_format(inputs["bandwidth_efficiency"]),
        "at_floor": inputs["bandwidth_efficiency"] >= 1,
        "host_text": seconds_format(inputs["host_ms"] / 1e3),
        "overlap": inputs["overlap"] == "on",
        "host_fixed_zero": inputs["host_ms"] == 0,
        "target_util_text": percent_format(inputs["target_utilization"]),
        "target_util_fraction": number_format(inputs["target_utilization"]),
        "throughput_gain_text": f"{number_format(r['throughput_gain'])}×",
        "step_time_ratio_text": f"{number_format(r['step_time_ratio'])}×",
        # Within 5%, as wording.ratio_phrase counts "about the same".
        "step_time_same": abs(r["step_time_ratio"] - 1) < 0.05,
        "reserve_text": bytes_short(r["reserve_bytes"]),
        "large_is_larger": inputs["batch_large"] > inputs["batch_small"],
        # The host lengthens both steps past their GPU time, so MFU and MBU over wall time fall.
        "host_lowers": all(r[k]["wall_seconds"] > r[k]["gpu_seconds"] for k in ("small", "large")),
        "target_full": inputs["target_utilization"] >= 1,
        # Overlapped, a step lasts the longer of GPU and host time, so nvidia-smi reads GPU ÷
        # host once the host is the longer: the target needs host time = GPU time ÷ target.
        "overlap_host_for_target": {
            k: seconds_format(r[k]["gpu_seconds"] / inputs["target_utilization"])
            for k in ("small", "large")},
        "small": _point(r["small"]),
        "large": _point(r["large"]),
        "per_seq_given": per_seq_given,
        "per_seq_visible": per_seq_visible,
        "per_seq_hidden": inputs["overlap"] == "on"
        and with_part["large"]["utilization"] >= 1,
        "misfit_text": " and ".join(misfits),
        "misfit_both": len(misfits) == 2,
        "host_small_text": seconds_format(inputs["host_ms"] / 1e3 + inputs["batch_small"]
                                          * inputs["host_per_sequence_us"] / 1e6),
        "per_seq_text": seconds_format(per_seq_us / 1e6),
        "fixed": {"small": _point(fixed["small"]), "large": _point(fixed["large"]),
                  "gain_text": f"{number_format(fixed['throughput_gain'])}×"},
        "grows": {"small": _point(grows["small"]), "large": _point(grows["large"]),
                  "gain_text": f"{number_format(grows['throughput_gain'])}×",
                  "host_large_text": seconds_format(inputs["host_ms"] / 1e3 + inputs[
                      "batch_large"] * per_seq_us / 1e6)},
        "pp_stages": PP_STAGES, "pp_many": PP_MICROBATCHES[1],
        "pp_idle_one_text": percent_format(bubbles[0]),
        "pp_busy_one_text": percent_format(1 - bubbles[0]),
        "pp_idle_many_text": percent_format(bubbles[1]),
        "sms": number_format(H100_SMS),
        "question_util_text": percent_format(QUESTION_UTILIZATION),
        "question_idle_text": percent_format(1 - QUESTION_UTILIZATION),
        "full_text": percent_format(1),
        "one_percent_text": percent_format(0.01),
        "vllm_model": VLLM_V053["model"],
        "vllm_api_text": percent_format(VLLM_V053["api_server"]),
        "vllm_sched_text": percent_format(VLLM_V053["scheduling"]),
        "vllm_gpu_text": percent_format(VLLM_V053["gpu"]),
        "tokenize_text": seconds_format(TOKENIZE_SECONDS),
        "tokenize_rate": number_format(TOKENIZE_RATE),
        "tokenize_cpu_text": seconds_format(TOKENIZE_SECONDS * TOKENIZE_RATE),
        "tokenize_cores": count_format(TOKENIZE_SECONDS * TOKENIZE_RATE, "core"),
    }
