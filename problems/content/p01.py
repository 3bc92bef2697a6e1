"""Problem 1, from request to first token: its three calculators (one request for scale; a
hundred users sharing the decode step; one long prompt chunk landing among them) and the figures
its prose quotes, all computed at render time by problems/arithmetic.

Each calculator and the prose read the same query, so when a learner changes an input, the
numbers in the text follow the calculator.
"""

import functools
import math

from django.http import HttpRequest

from problems import arithmetic as a
from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.compute import peak_describe, peak_flops_get
from problems.arithmetic.memory import params_count_model
from problems.arithmetic.request import request_for_scale, request_split, seconds_rounded
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_in,
    count_format,
    flops_rate_format,
    number_format,
    percent_format,
)
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.calculators.serving import CHUNKED_PREFILL_INPUTS
from problems.calculators.timing import DECODE_INPUTS
from problems.forms import (
    bandwidth_input,
    dtype_input,
    embedding_dtype_input,
    gpu_input,
    inputs_initial,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, series_fit_split, series_values, sweep_whole

SLUG = "request-for-scale"
PREFIX = "p1-scale"
USERS_SLUG = "p01-hundred-users"
USERS_PREFIX = "p1-users"
CHUNK_SLUG = "p01-long-prompt"
CHUNK_PREFIX = "p1-chunk"
PROMPT_TOKENS_MAX = 1_000_000
OUTPUT_TOKENS_MAX = 100_000
MS = 1e3


def request_for_scale_plot(*, inputs: dict, result) -> Plot:
    """Prefill against the decode loop as the answer grows, with the learner's length marked."""
    tokens, prefill_seconds, decode_seconds = request_split(
        ttft_seconds=float(result["ttft_seconds"]),
        step_seconds=float(result["decode_step_seconds"]),
        output_tokens=inputs["output_tokens"])
    note = "" if result["fits"] else " (does not fit one GPU: times as if it did)"
    return Plot(
        title="Prefill against the decode loop as the answer grows" + note,
        x_title="Output tokens (the first from prefill, one decode step each after)",
        y_title="Time (s)",
        series=(Series("Prefill (time to first token)", tokens, prefill_seconds, dash=True),
                Series("Decode loop", tokens, decode_seconds)),
        marks=(Mark(float(inputs["output_tokens"]), "this answer"),),
    )


def hundred_users_plot(*, inputs: dict, result) -> Plot:
    """Step time against batch at the chosen context, split into weight and KV reads."""
    largest = int(result["largest_batch"])
    top = max(2, inputs["batch"], min(2 * inputs["batch"], max(largest, 1) * 2, 1024))
    xs = sweep_whole(1, top, count=20)
    points = [a.decode(**{**inputs, "batch": x}) for x in xs]
    fits = tuple(bool(p["fits"]) for p in points)
    marks = [Mark(inputs["batch"], "your batch")]
    if largest and largest <= top:
        marks.append(Mark(largest, "memory full"))
    return Plot(
        title=f"Decode step vs batch at {inputs['context_tokens']:,} tokens of context each",
        x_title="Sequences in the step", y_title="Time per decode step (ms)",
        series=(*series_fit_split("Step time", xs,
                                  tuple(p["step_seconds"] * MS for p in points), fits),
                Series("Reading the weights", tuple(xs),
                       tuple(p["weights_floor_seconds"] * MS for p in points), dash=True),
                Series("Reading every sequence's KV", tuple(xs),
                       tuple((p["memory_seconds"] - p["weights_floor_seconds"]) * MS
                             for p in points), dash=True)),
        marks=tuple(marks))


def long_prompt_plot(*, inputs: dict, result) -> Plot:
    """The running streams' step with and without one chunk, as the chunk grows."""
    xs = sweep_whole(min(16, inputs["prompt_tokens"]), inputs["prompt_tokens"], count=20)

    @functools.cache
    def at(x: int):
        return a.chunked_prefill(**{**inputs, "chunk_tokens": x})

    fits = ("" if result["fits"]
            else " (the streams and prompt do not fit in memory: times as if they did)")
    return Plot(
        title=f"The next token of {inputs['decode_batch']:,} running streams, as one prompt "
              "chunk grows" + fits,
        x_title="Prompt tokens in the step (chunk size)", y_title="Step time (ms)",
        x_log=True, y_log=True,
        series=(Series("Step with the chunk", tuple(xs), series_values(
                    xs, lambda x: at(x)["largest_step_seconds"] * MS)),
                Series("Decode step alone", tuple(xs), series_values(
                    xs, lambda x: at(x)["decode_step_seconds"] * MS), dash=True)),
        marks=(Mark(inputs["chunk_tokens"], "your chunk"),))


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="One request, for scale",
    explanation=("Prefill FLOPs and time, one decode step, the whole answer and the KV cache "
                 "the request holds, for one request alone on one GPU (no queue, no batch): "
                 "the rule of thumb and the refined count side by side, every time the larger "
                 "of its compute and memory sides."),
    inputs=(
        model_input(initial="llama-3-8b", api="llama-3-8b"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        dtype_input(label="Weight format"),
        whole_input("prompt_tokens", "Prompt", unit="tokens", initial=1_000, api=1_000,
                    maximum=PROMPT_TOKENS_MAX),
        whole_input("output_tokens", "Output", unit="tokens", initial=300, api=300,
                    maximum=OUTPUT_TOKENS_MAX),
        mfu_input(initial=0.5, api=0.5),
        bandwidth_input(),
        kv_dtype_input(),
        *memory_inputs(),
        embedding_dtype_input(),
    ),
    compute=request_for_scale,
    plot=request_for_scale_plot,
    listed=False,
    api_path="/request",
    api_summary="One request for scale: prefill, decode steps, the answer, its KV cache",
))

USERS_CALCULATOR = calculator_register(Calculator(
    slug=USERS_SLUG,
    title="A hundred users in one decode step",
    explanation=("Every sequence in the step adds its own KV cache to the bytes read, while the "
                 "weights are read once for all of them. Watch the weights' share of the step "
                 "fall as the batch and the context grow."),
    inputs=inputs_initial(DECODE_INPUTS, batch=100, context_tokens=1_150, output_tokens=300),
    compute=a.decode,
    plot=hundred_users_plot,
    listed=False,
))

CHUNK_CALCULATOR = calculator_register(Calculator(
    slug=CHUNK_SLUG,
    title="One long prompt among running streams",
    explanation=("A new prompt's chunk joins the running streams' decode step. The step takes "
                 "the larger of its memory and compute time, so the stall every stream sees is "
                 "how much longer the step gets."),
    inputs=inputs_initial(CHUNKED_PREFILL_INPUTS, model="llama-3-8b", prompt_tokens=8_000,
                          chunk_tokens=2_048, decode_batch=32, decode_context_tokens=1_000),
    compute=a.chunked_prefill,
    plot=long_prompt_plot,
    listed=False,
))

SOURCES: list[tuple[str, str]] = [
    ("Meta Llama 3 8B config.json (layers, heads, KV heads, head_dim, 8,192-token window)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense BF16 rate, HBM3 bandwidth)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("Kaplan et al., 'Scaling Laws for Neural Language Models' (2N FLOPs per token, N without "
     "the embedding)", "https://arxiv.org/abs/2001.08361"),
    ("vLLM pull request 10511: memory profiling of Llama 3 8B on an H100 (weights 14.96 GiB, "
     "activation peak, the runtime reserve)", "https://github.com/vllm-project/vllm/pull/10511"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (KV blocks)", "https://arxiv.org/abs/2309.06180"),
    ("Yu et al., 'Orca: A Distributed Serving System for Transformer-Based Generative Models' "
     "(iteration-level scheduling)",
     "https://www.usenix.org/conference/osdi22/presentation/yu"),
    ("vLLM blog, 'vLLM V1: A Major Upgrade to vLLM's Core Architecture' (one token budget per "
     "step, prefill and decode in the same step, chunked prefill on by default)",
     "https://blog.vllm.ai/2025/01/27/v1-alpha-release.html"),
    ("vLLM source: the V1 scheduler (admission waits for KV blocks; preemption by recompute)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/scheduler.py"),
    ("vLLM source: get_max_tokens (max_tokens left unset = the rest of the context window)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/utils.py"),
    ("vLLM source: AsyncLLM.generate (abort when the client disconnects)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/async_llm.py"),
    ("vLLM source: incremental detokenizer and stop strings",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/detokenizer.py"),
    ("Hugging Face Transformers: chat templates (the template already adds special tokens; "
     "tokenize without adding them again)",
     "https://huggingface.co/docs/transformers/main/en/chat_templating"),
    ("Holtzman et al., 'The Curious Case of Neural Text Degeneration' (top-p sampling)",
     "https://arxiv.org/abs/1904.09751"),
    ("He and Thinking Machines Lab, 'Defeating Nondeterminism in LLM Inference' (batch-invariant "
     "kernels)", "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(chunked prefill, stall-free batching)", "https://arxiv.org/abs/2403.02310"),
    ("Dao, 'FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning' "
     "(50–73% of an A100's peak in the attention kernel, 72% MFU end to end in training: the "
     "MFU help)", "https://arxiv.org/abs/2307.08691"),
    ("Databricks, 'LLM Inference Performance Engineering: Best Practices' (MBU; a 7B model "
     "in 16 bits at 14 ms per token on a 2 TB/s GPU is 50%: the bandwidth help)",
     "https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices"),
]


def significant_format(value: float, *, digits: int = 2) -> str:
    """A rate rounded as it is said aloud: 11,136 → "11,000"; 221 → "220"."""
    if value <= 0:
        return number_format(value)
    rounded = round(value, digits - 1 - math.floor(math.log10(value)))
    return number_format(int(rounded) if rounded >= 10**(digits - 1) else rounded)


def _evaluated(calculator: Calculator, prefix: str,
               request: HttpRequest) -> tuple[dict, object, bool]:
    """The calculator's inputs and result for this request, or its defaults when the learner's
    inputs are refused (the error shows beside the field; the prose keeps the defaults)."""
    return calculator_inputs_result(calculator, query=request.GET, prefix=prefix)


def context(*, request: HttpRequest) -> dict:
    """The figures problem 1's prose quotes, from the same inputs as its calculators."""
    inputs, result, valid = _evaluated(CALCULATOR, PREFIX, request)
    model, gpu = model_get(inputs["model"]), gpu_get(inputs["gpu"])
    dtype = dtype_get(inputs["dtype"])
    kv_dtype = kv_dtype_get(inputs["kv_dtype"], model=model)
    peak = peak_flops_get(gpu=gpu, dtype=dtype)
    users_inputs, users, users_valid = _evaluated(USERS_CALCULATOR, USERS_PREFIX, request)
    users_model = model_get(users_inputs["model"])
    kv_per_token = float(users["kv_bytes_per_step"]) / (
        users_inputs["batch"] * users_inputs["context_tokens"])
    # The context at which this batch's KV reads equal the weights' (tokens).
    even_context = float(users["weight_bytes_per_step"]) / (users_inputs["batch"] * kv_per_token)
    alone = a.decode(**{**users_inputs, "batch": 1})
    chunk_inputs, chunk, chunk_valid = _evaluated(CHUNK_CALCULATOR, CHUNK_PREFIX, request)
    window = model.context
    # The crossover with compute and bandwidth used equally well, and the ridge behind it.
    equal = a.prefill(model=model.id, gpu=gpu.id, prompt_tokens=min(16, window or 16),
                      dtype=dtype.id, mfu=1.0, bandwidth_efficiency=1.0)
    ridge = a.roofline(gpu=gpu.id, dtype=dtype.id)["ridge_flops_per_byte"]
    users_end = users_inputs["context_tokens"] + users_inputs["output_tokens"] - 1
    parts = params_count_model(model)
    # The rule of thumb counts every parameter a token uses (for an MoE, the active ones); the
    # refined count multiplies the non-embedding ones and the head at one position.
    rule_params = parts["active"]
    refined_params = parts["non_embedding_active"]
    # A weight costs `dtype.bytes` to read and does two operations per token, so a pass turns
    # compute-bound near ridge × bytes ÷ 2 tokens (the ridge at this format's peak). For an MoE
    # a long pass reads every expert but each token multiplies only its own: × total ÷ active.
    moe_factor = parts["total"] / parts["active"]
    ridge_tokens = ridge * dtype.bytes / 2 * moe_factor
    # KV reads against weight reads in the hundred-users step, said in words.
    kv_ratio = float(users["kv_bytes_per_step"]) / float(users["weight_bytes_per_step"])
    if kv_ratio >= 1.1:
        kv_compared = f"{number_format(kv_ratio, digits=2)} times the"
    elif kv_ratio >= 0.9:
        kv_compared = "about as large as the"
    else:
        kv_compared = f"{percent_format(kv_ratio)} of the"
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "users_slug": USERS_SLUG,
        "users_prefix": USERS_PREFIX,
        "chunk_slug": CHUNK_SLUG,
        "chunk_prefix": CHUNK_PREFIX,
        "inputs_valid": valid and users_valid and chunk_valid,
        "model_name": model.name,
        "gpu_name": gpu.name,
        "dtype_name": dtype.name,
        "kv_dtype_name": kv_dtype.kv_label,
        "attention": model.attention,
        "heads": model.heads,
        "gqa_ratio": number_format(model.heads / model.kv_heads),
        "kv_expression": next(s.expression for s in result.steps
                              if s.label.startswith("KV bytes per token")),
        "layers": model.layers,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "is_moe": model.is_moe,
        "params_text": number_format(rule_params / 1e9, digits=3),
        "non_embedding_text": number_format(refined_params / 1e9, digits=3),
        "total_params_text": number_format(parts["total"] / 1e9, digits=3),
        "prompt_tokens": f"{inputs['prompt_tokens']:,}",
        "output_tokens": f"{inputs['output_tokens']:,}",
        "answer_tokens": count_format(inputs["output_tokens"], "token"),
        "one_token": inputs["output_tokens"] == 1,
        # Quantized weights with the embedding and head kept in BF16 read more than the rule of
        # thumb, which puts every parameter in the weights' format.
        "refined_reads_more": float(result["weight_bytes"]) > float(result["rule_weight_bytes"]),
        "decode_steps": f"{int(result['decode_steps']):,}",
        "kv_tokens": f"{int(result['kv_tokens']):,}",
        "mfu_percent": percent_format(inputs["mfu"]),
        "bandwidth_percent": percent_format(inputs["bandwidth_efficiency"]),
        "bandwidth_full": inputs["bandwidth_efficiency"] >= 1,
        "prefill_floor": (result["prefill_bound"] == "compute" and inputs["mfu"] >= 1)
        or (result["prefill_bound"] == "memory" and inputs["bandwidth_efficiency"] >= 1),
        "peak_text": flops_rate_format(peak),
        "peak_described": peak_describe(gpu=gpu, dtype=dtype),
        "bandwidth_text": bandwidth_format(gpu.bandwidth_bytes_per_second),
        "memory_kind": gpu.memory_kind,
        "crossover_tokens": count_format(int(result["prefill_crossover_tokens"]), "token"),
        # A crossover past the model's context window is no prompt anyone can send.
        "crossover_found": 0 < int(result["prefill_crossover_tokens"]) <= (window or math.inf),
        "crossover_equal": count_format(int(equal["crossover_tokens"]), "token"),
        "ridge": number_format(ridge, digits=3),
        "ridge_unit": "OP" if dtype.compute == "int8" else "FLOP",
        "weight_bytes_each": number_format(dtype.bytes, digits=3),
        "weight_bytes_text": count_format(dtype.bytes, "byte"),
        "moe_factor": number_format(moe_factor, digits=2),
        "ridge_tokens": count_format(round(ridge_tokens), "token"),
        "memory_fraction_percent": percent_format(inputs["memory_fraction"]),
        "gpu_memory_label": gpu.memory_label,
        "gpu_memory_mib": gpu.memory_total_text,
        "window": f"{window:,}",
        "max_tokens_default": f"{max(window - inputs['prompt_tokens'], 0):,}",
        "r": result.values,
        # A hundred users in one step.
        "users_batch": f"{users_inputs['batch']:,}",
        "users_single": users_inputs["batch"] == 1,
        "users_context": f"{users_inputs['context_tokens']:,}",
        "users_model": users_model.name,
        "users_kv_text": bytes_in(float(users["kv_bytes_per_step"]), "GB", digits=2),
        "users_kv_compared": kv_compared,
        "users_weights_text": bytes_in(float(users["weight_bytes_per_step"]), "GB", digits=2),
        "users_step": seconds_rounded(float(users["step_seconds"])),
        "users_alone_step": seconds_rounded(float(alone["step_seconds"])),
        "users_ratio": number_format(float(users["step_seconds"]) / float(alone["step_seconds"]),
                                     digits=2),
        "users_end_tokens": f"{users_end:,}",
        "users_weight_share": percent_format(float(users["weight_share"])),
        "users_even_context": f"{round(even_context):,}",
        "users_even_past_window": bool(users_model.context)
        and even_context > users_model.context,
        "users_window": f"{users_model.context:,}" if users_model.context else "",
        "users_aggregate": significant_format(float(users["tokens_per_second"])),
        "users_alone_rate": significant_format(float(alone["tokens_per_second"])),
        "users_largest_batch": f"{int(users['largest_batch']):,}",
        "users_none_fit": int(users["largest_batch"]) == 0,
        "users_memory_needed": bytes_in(float(users["memory_needed_bytes"]), "GB", digits=2),
        "users_memory_usable": bytes_in(float(users["memory_usable_bytes"]), "GB", digits=2),
        "users_gpu": gpu_get(users_inputs["gpu"]).name,
        "users_bound": users["bound"],
        # Times at full efficiency on their binding side are floors, and the prose says so.
        "users_floor": users["bound"] == "memory" and users_inputs["bandwidth_efficiency"] >= 1,
        "users_fits": users["fits"],
        # One long prompt chunk among running streams.
        "chunk_tokens": f"{chunk_inputs['chunk_tokens']:,}",
        "chunk_prompt": f"{chunk_inputs['prompt_tokens']:,}",
        "chunk_decoders": f"{chunk_inputs['decode_batch']:,}",
        "chunk_streams": count_format(chunk_inputs["decode_batch"], "stream"),
        "chunk_no_streams": chunk_inputs["decode_batch"] == 0,
        "chunk_model": model_get(chunk_inputs["model"]).name,
        "chunk_alone": seconds_rounded(float(chunk["decode_step_seconds"])),
        "chunk_step": seconds_rounded(float(chunk["largest_step_seconds"])),
        "chunk_stall": seconds_rounded(float(chunk["max_chunk_stall_seconds"])),
        "chunk_unchunked_stall": seconds_rounded(float(chunk["unchunked_stall_seconds"])),
        "chunk_bound": chunk["largest_step_bound"],
        "chunk_alone_floor": chunk["decode_step_bound"] == "memory"
        and chunk_inputs["bandwidth_efficiency"] >= 1,
        "chunk_step_floor": (chunk["largest_step_bound"] == "memory"
                             and chunk_inputs["bandwidth_efficiency"] >= 1)
        or (chunk["largest_step_bound"] == "compute" and chunk_inputs["mfu"] >= 1),
        "chunk_count": f"{int(chunk['chunks']):,}",
    }
