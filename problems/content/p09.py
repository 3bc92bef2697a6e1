"""Problem 9, cutting inter-token latency without losing throughput: the TPOT–throughput curve of
one decode step as a roofline bound, each lever computed on it, and every figure the prose
quotes, computed at render time by problems/arithmetic from the same inputs as the calculator.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.itl import (
    ALLREDUCE_US_MAX,
    HOST_MS_MAX,
    TP_CHOICES,
    itl_levers,
    target_rate_format,
    tpot_curves,
)
from problems.arithmetic.speculative import DRAFT_TOKENS_MAX
from problems.arithmetic.steps import Result
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_in,
    bytes_short,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.arithmetic.wording import (
    amount_phrase,
    count_phrase,
    ratio_phrase,
    share_phrase,
    times_phrase,
)
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    Input,
    bandwidth_input,
    choice_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series

SLUG = "itl-levers"
PREFIX = "p09-itl"
MS = 1e3
FLASH_DECODING_SPEEDUP = 8  # Flash-Decoding blog: up to 8× faster decoding on very long sequences
PLOT_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def curve_plot(*, inputs: dict, result: Result) -> Plot:
    """Tokens/s per GPU against TPOT, one line per lever, the batch growing along each line."""
    batches = sorted({*PLOT_BATCHES, inputs["batch"]})
    curves = tpot_curves(inputs=inputs, batches=batches)
    names = {r["id"]: r["name"] for r in result["levers"]}
    series = []
    for key, points in curves.items():
        if not points:
            continue
        series.append(Series(
            names[key], tuple(t * MS for _, t, _ in points), tuple(p for _, _, p in points),
            markers=True, dash=key == "speculative",
            labels=tuple(f"B={b}" if b == inputs["batch"] else "" for b, _, _ in points)))
    return Plot(
        title="Throughput per GPU against time per output token, batch growing along each line",
        x_title="Time per output token (ms)", y_title="Output tokens/s per GPU",
        series=tuple(series), x_log=True,
        marks=(Mark(inputs["tpot_target_ms"], "TPOT target"),))


TP_LABELS = tuple((str(t), f"{t} GPU{'s' if t > 1 else ''}") for t in TP_CHOICES)

INPUTS = (
    model_input(initial="llama-3-8b", api="llama-3-8b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("batch", "Batch", unit="sequences", initial=64, api=64, maximum=USERS_MAX,
                help="Sequences decoding together in each step."),
    whole_input("context_tokens", "Context per sequence", unit="tokens", initial=2_000,
                api=2_000, maximum=TOKENS_MAX),
    real_input("tpot_target_ms", "TPOT target", unit="ms", initial=15.0, api=15.0,
               minimum=0.01, maximum=1e5,
               help="The service-level objective on time per output token."),
    dtype_input(label="Weight format"),
    kv_dtype_input(),
    choice_input("tp", "Tensor parallel (baseline)", choices=TP_LABELS, initial="1", api="1",
                 help="GPUs the baseline splits the model over; the lever doubles them."),
    real_input("host_ms", "Host time per step", unit="ms", initial=2.0, api=2.0,
               maximum=HOST_MS_MAX,
               help="An assumption for the exercise: scheduling, input preparation, launches, "
                    "sampling and detokenization the GPU waits for. Problem 14 measures it."),
    Input("lever_dtype", "dtype", "Lever: weight format", initial="fp8", api="fp8"),
    Input("lever_kv_dtype", "kv_dtype", "Lever: KV cache format", initial="fp8", api="fp8",
          help="Formats engines offer for the KV cache."),
    real_input("allreduce_latency_us", "All-reduce latency", unit="µs", initial=10.0,
               api=10.0, maximum=ALLREDUCE_US_MAX,
               help="An assumption: the fixed cost of one small all-reduce inside a node, paid "
                    "twice per layer under tensor parallelism."),
    real_input("acceptance", "Speculation: acceptance rate α", unit="fraction", initial=0.7,
               api=0.7, maximum=1.0),
    whole_input("draft_tokens", "Speculation: drafted tokens γ", unit="tokens", initial=4,
                api=4, maximum=DRAFT_TOKENS_MAX),
    real_input("draft_cost", "Speculation: draft step cost", unit="× a plain step",
               initial=0.05, api=0.05, maximum=10.0),
    whole_input("prompt_tokens", "A long prompt arriving", unit="tokens", initial=8_000,
                api=8_000, maximum=TOKENS_MAX),
    whole_input("chunk_tokens", "Prefill chunk", unit="tokens", initial=512, api=512,
                maximum=TOKENS_MAX),
    whole_input("answer_tokens", "Answer length", unit="tokens", initial=500, api=500,
                maximum=TOKENS_MAX,
                help="Tokens each request generates, for the steady state: how often a "
                     "prefill (of the prompt above) lands among the decodes."),
    real_input("draft_host_ms", "Speculation: host time per draft step", unit="ms",
               initial=0.5, api=0.5, maximum=HOST_MS_MAX,
               help="An assumption: launches and sampling each draft step adds on the host."),
    bandwidth_input(),
    mfu_input(initial=0.5, api=0.5),
    *memory_inputs(),
)


def itl_compute(**inputs) -> Result:
    return itl_levers(**{**inputs, "tp": int(inputs["tp"])})


def _plot(*, inputs: dict, result: Result) -> Plot:
    return curve_plot(inputs={**inputs, "tp": int(inputs["tp"])}, result=result)


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Inter-token latency against throughput: the levers",
    explanation=("A decode step's time is the larger of its bytes over bandwidth and its FLOPs "
                 "over the achieved peak, plus the host's time per step. Growing the batch "
                 "moves along the resulting TPOT–throughput curve; fewer bytes, more bandwidth, "
                 "less host time or more tokens per step move the curve itself. Each lever is "
                 "applied alone to the baseline; throughput is per GPU."),
    inputs=INPUTS,
    compute=itl_compute,
    plot=_plot,
    order=65,
    api_path="/itl-levers",
    api_summary="TPOT and tokens/s per GPU for each latency lever, and the batch at a target",
))

SOURCES: list[tuple[str, str]] = [
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth, dense BF16 and FP8 rates, NVLink)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("Meta Llama 3 8B config.json (model dimensions)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(OSDI 2024: chunked prefill and stall-free batching; 2.6× serving capacity for "
     "Mistral-7B on one A100)", "https://arxiv.org/abs/2403.02310"),
    ("Zhong et al., 'DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large "
     "Language Model Serving' (OSDI 2024)", "https://arxiv.org/abs/2401.09670"),
    ("Leviathan, Kalman and Matias, 'Fast Inference from Transformers via Speculative "
     "Decoding' (ICML 2023: expected tokens per step, eq. 1)",
     "https://arxiv.org/abs/2211.17192"),
    ("Shoeybi et al., 'Megatron-LM: Training Multi-Billion Parameter Language Models Using "
     "Model Parallelism' (two all-reduces per layer under tensor parallelism)",
     "https://arxiv.org/abs/1909.08053"),
    ("vLLM documentation: engine arguments (--kv-cache-dtype fp8, --max-num-seqs, "
     "--max-num-batched-tokens, CUDA graph capture)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("NVIDIA Technical Blog, 'Getting Started with CUDA Graphs'",
     "https://developer.nvidia.com/blog/cuda-graphs/"),
    ("vLLM blog, 'vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency Reduction' (host "
     "overhead: API server and scheduling took most of each step for Llama 3 8B on one H100)",
     "https://blog.vllm.ai/2024/09/05/perf-update.html"),
    ("Databricks, 'LLM Inference Performance Engineering: Best Practices' (TPOT, MBU, the "
     "latency–throughput trade of batching)",
     "https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices"),
    ("Dao, Haziza, Massa and Sizov, 'Flash-Decoding for long-context inference' (Stanford CRFM "
     "blog, 2023: the KV sequence split across thread blocks so one query per sequence still "
     "fills the GPU; up to 8× faster decoding on very long sequences)",
     "https://crfm.stanford.edu/2023/10/12/flashdecoding.html"),
    ("Dettmers et al., 'LLM.int8()' and Xiao et al., 'SmoothQuant' (W8A8: weights and "
     "activations in INT8, so the matmuls run on INT8 tensor cores) against Lin et al., 'AWQ' "
     "(weight-only INT4: fewer bytes, matmuls in 16 bits)",
     "https://arxiv.org/abs/2211.10438"),
]


def _row(r: dict) -> dict:
    return {
        "name": r["name"], "effect": r["effect"], "fits": r["fits"],
        "tpot_text": seconds_format(r["tpot_seconds"]),
        "per_gpu_text": rate_format(r["tokens_per_second_per_gpu"], "tokens/s"),
        "batch_at_target_text": count_phrase(r["batch_at_target"], "sequence"),
        "per_gpu_at_target_text": target_rate_format(r["per_gpu_at_target"]),
        "limit": r["limit_at_target"], "gpus": r["gpus"],
        "tokens_per_step_text": number_format(r["tokens_per_step"]),
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 9's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    followed = state.result is not None
    if followed:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        r = state.result
    else:
        inputs = CALCULATOR.defaults()
        r = itl_compute(**inputs)
    m, g = model_get(inputs["model"]), gpu_get(inputs["gpu"])
    w, kv = dtype_get(inputs["dtype"]), kv_dtype_get(inputs["kv_dtype"], model=m)
    rows = {x["id"]: _row(x) for x in r["levers"]}
    base = r["levers"][0]
    spec = r["levers"][5]
    alone = itl_compute(**{**inputs, "batch": 1})
    half = itl_compute(**{**inputs, "batch": max(1, inputs["batch"] // 2)})
    double = itl_compute(**{**inputs, "batch": min(inputs["batch"] * 2, USERS_MAX)})
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_followed": followed,
        "model_name": m.name, "gpu_name": g.name, "dtype_name": w.name,
        "kv_dtype_name": kv.kv_label,
        "batch": f"{inputs['batch']:,}",
        "batch_one": inputs["batch"] == 1,
        "batch_sequences_text": count_phrase(inputs["batch"], "sequence"),
        "half_batch": f"{max(1, inputs['batch'] // 2):,}",
        "double_batch": f"{min(inputs['batch'] * 2, USERS_MAX):,}",
        "context_tokens": f"{inputs['context_tokens']:,}",
        "target_text": seconds_format(inputs["tpot_target_ms"] / MS),
        "host_text": seconds_format(inputs["host_ms"] / MS),
        "tp": int(inputs["tp"]), "tp_double": 2 * int(inputs["tp"]),
        "bandwidth_text": bandwidth_format(g.bandwidth_bytes_per_second),
        "mfu_percent": percent_format(inputs["mfu"]),
        "bw_percent": percent_format(inputs["bandwidth_efficiency"]),
        "bw_at_floor": inputs["bandwidth_efficiency"] >= 1,
        "bytes_text": bytes_short(r["weights_bytes"] + r["kv_bytes"]),
        "weights_text": bytes_short(r["weights_bytes"]),
        "kv_text": bytes_short(r["kv_bytes"]),
        "kv_share_text": percent_format(r["kv_bytes"] / (r["weights_bytes"] + r["kv_bytes"])),
        "memory_time_text": seconds_format(r["memory_seconds"]),
        "compute_time_text": seconds_format(r["compute_seconds"]),
        "gpu_step_text": seconds_format(r["gpu_step_seconds"]),
        "allreduce_text": seconds_format(r["allreduce_seconds"]),
        "bound": r["gpu_step_bound"],
        "tpot_text": seconds_format(r["tpot_seconds"]),
        "per_gpu_text": rate_format(r["tokens_per_second"], "tokens/s"),
        "fits": r["fits"],
        "batch_max_text": count_phrase(r["batch_max_memory"], "sequence"),
        "batch_at_target_text": count_phrase(r["batch_at_target"], "sequence"),
        "per_gpu_at_target_text": target_rate_format(r["per_gpu_at_target"]),
        "target_limit": base["limit_at_target"],
        # No batch meets the target (or memory holds no sequence): there is no point to quote.
        "target_none": base["batch_at_target"] == 0,
        "target_none_memory": base["batch_at_target"] == 0
        and base["limit_at_target"] == "memory",
        "alone_tpot_text": seconds_format(alone["tpot_seconds"]),
        "alone_per_gpu_text": rate_format(alone["tokens_per_second"], "tokens/s"),
        "half_tpot_text": seconds_format(half["tpot_seconds"]),
        "half_per_gpu_text": rate_format(half["tokens_per_second"], "tokens/s"),
        "double_tpot_text": seconds_format(double["tpot_seconds"]),
        "double_per_gpu_text": rate_format(double["tokens_per_second"], "tokens/s"),
        "batch_gain_text": f"{number_format(r['tokens_per_second'] / alone['tokens_per_second'])}×",
        "tpot_cost_text": f"{number_format(r['tpot_seconds'] / alone['tpot_seconds'])}×",
        "spike_whole_text": seconds_format(r["spike_unchunked_seconds"]),
        "spike_chunk_text": seconds_format(r["spike_chunked_seconds"]),
        "prompt_tokens": f"{inputs['prompt_tokens']:,}",
        "chunk_tokens": f"{inputs['chunk_tokens']:,}",
        "chunks_text": count_phrase(r["chunks"], "chunk"),
        # A chunk as long as the prompt is no chunking at all ("repeated over 1 chunk" before).
        "one_chunk": r["chunks"] == 1,
        "stall_total_text": seconds_format(r["prefill_stall_total_seconds"]),
        "stall_chunked_text": seconds_format(r["prefill_stall_chunked_total_seconds"]),
        "stall_chunked_less": r["prefill_stall_chunked_total_seconds"]
        < r["prefill_stall_total_seconds"]
        and seconds_format(r["prefill_stall_chunked_total_seconds"])
        != seconds_format(r["prefill_stall_total_seconds"]),
        "acceptance_text": number_format(inputs["acceptance"]),
        "gamma": inputs["draft_tokens"],
        "draft_cost_text": number_format(inputs["draft_cost"]),
        "spec_tokens_text": number_format(r["speculative_tokens_per_step"]),
        "levers": [rows[k] for k in ("weights", "kv", "tp", "overlap", "speculative")],
        "L": rows,
        # Review: TP's tokens/s per GPU falls at the same batch but can rise at a tight target.
        "tp_per_gpu_text": rows["tp"]["per_gpu_text"],
        "tp_per_gpu_at_target_text": rows["tp"]["per_gpu_at_target_text"],
        "tp_rises_at_target": r["levers"][3]["per_gpu_at_target"] > base["per_gpu_at_target"],
        # Neither meets the target even at batch 1: then TP gives not "less" but 0 against 0.
        "tp_misses_target": r["levers"][3]["batch_at_target"] == base["batch_at_target"] == 0,
        "tp_allreduce_text": seconds_format(r["tp_allreduce_seconds"]),
        "tp_host_share_text": share_phrase(inputs["host_ms"] / MS
                                           / r["levers"][3]["tpot_seconds"]),
        "tp_allreduce_share_text": share_phrase(r["tp_allreduce_seconds"]
                                                / r["levers"][3]["tpot_seconds"]),
        # Per GPU with neither host time nor all-reduces: the doubled GPUs' step alone.
        "tp_gpu_only_phrase": ratio_phrase(
            1 / (2 * (r["tp_gpu_step_seconds"] - r["tp_allreduce_seconds"])),
            1 / (r["gpu_step_seconds"] - r["allreduce_seconds"]),
            more="more", less="less", same="about the same"),
        "host_zero": inputs["host_ms"] == 0,
        "weights_exceed": r["weights_stored_gpu_bytes"] >= r["usable_gpu_bytes"],
        "weights_stored_text": bytes_in(r["weights_stored_gpu_bytes"], "GB"),
        "usable_text": bytes_in(r["usable_gpu_bytes"], "GB"),
        "answer_tokens": f"{inputs['answer_tokens']:,}",
        "answer_tokens_n": count_phrase(inputs["answer_tokens"], "token"),
        "context_tokens_n": count_phrase(inputs["context_tokens"], "token"),
        "prompt_tokens_n": count_phrase(inputs["prompt_tokens"], "token"),
        "spec_tokens_n": amount_phrase(r["speculative_tokens_per_step"], "tokens"),
        "mean_whole_text": seconds_format(r["mean_tpot_whole_seconds"]),
        "mean_chunked_text": seconds_format(r["mean_tpot_chunked_seconds"]),
        "mean_whole_factor": times_phrase(r["mean_tpot_whole_seconds"], r["tpot_seconds"]),
        "prefill_share_text": share_phrase(r["prefill_share_whole"]),
        "prefill_share_chunked_text": share_phrase(r["prefill_share_chunked"]),
        "prefill_gpus_text": number_format(r["prefill_gpus_per_decode_gpu"]),
        "chunking_lowers_mean": r["mean_tpot_chunked_seconds"]
        < r["mean_tpot_whole_seconds"] * 0.995,
        "spec_gap_text": seconds_format(r["speculative_gap_seconds"]),
        "spec_gap_over": r["speculative_gap_seconds"] > inputs["tpot_target_ms"] / MS,
        "spec_reject_text": share_phrase(1 - inputs["acceptance"]),
        "spec_batch_gap_text": count_phrase(spec["batch_at_target"], "sequence"),
        "spec_batch_mean_text": count_phrase(spec["batch_at_target_mean"], "sequence"),
        "spec_gap_binds": spec["batch_at_target"] < spec["batch_at_target_mean"],
        "draft_host_text": seconds_format(inputs["draft_host_ms"] / MS),
        "flash_decoding_text": f"{FLASH_DECODING_SPEEDUP}×",
        "step_compute_bound": r["gpu_step_bound"] == "compute",
    }
