"""Problem 1, from request to first token: its three calculators (one request for scale; a
hundred users sharing the decode step; one long prompt chunk landing among them) and the figures
its prose quotes, all computed at render time by problems/arithmetic.

Each calculator and the prose read the same query, so when a learner changes an input, the
numbers in the text follow the calculator.
"""

import functools
import math
from urllib.parse import urlencode

from django.http import HttpRequest

from problems import arithmetic as a
from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.models import DEMO_MODEL_ID
from problems.arithmetic.compute import peak_describe, peak_flops_get
from problems.arithmetic.memory import (
    RESERVE_GB_DEFAULT,
    embedding_dtype_resolve,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.request import request_for_scale, request_split, seconds_rounded
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    count_format,
    flops_rate_format,
    number_format,
    percent_format,
)
from problems.arithmetic.wording import bytes_phrase, count_phrase, params_phrase
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
# A decode step under this (seconds) is a byte count no engine reaches: each real step also pays
# fixed costs (launching its kernels, scheduling, sampling) that the count leaves out.
FIXED_COSTS_DOMINATE = 1e-4


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
        title=f"Decode step vs batch at {count_phrase(inputs['context_tokens'], 'token')} of "
              "context each",
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


def rate_tokens(value: float) -> str:
    """A token rate said aloud with its noun agreeing: "1 token", "220 tokens", "0.37 tokens"
    (the caller adds "per second")."""
    said = significant_format(value)
    return f"{said} {'token' if said == '1' else 'tokens'}"


def _evaluated(calculator: Calculator, prefix: str, request: HttpRequest) -> tuple[dict, object]:
    """The calculator's inputs and result for this request, or its defaults when the learner's
    inputs are refused: the error shows beside the field, and the refusal is recorded so that
    the page announces it above the Worked answer."""
    inputs, result, _valid = calculator_inputs_result(calculator, query=request.GET, prefix=prefix)
    return inputs, result


def _users_context(inputs: dict, users, alone) -> dict:
    """What the hundred-users paragraph says about the batch against one sequence alone: how
    much longer the step is, and why (each share of the growth named by its cause)."""
    step, alone_step = float(users["step_seconds"]), float(alone["step_seconds"])
    ratio = step / alone_step
    # Under 10% longer, two figures would print "4.5 ms against 4.5 ms": say three, and that
    # batching is almost free here.
    close = ratio < 1.1
    digits = 3 if close else 2
    # For an MoE a batch routes its tokens to more experts than one sequence does, so the
    # weight bytes grow too; split the growth of a memory-bound step into its two causes.
    both_memory = users["bound"] == "memory" and alone["bound"] == "memory"
    bandwidth = float(users["bytes_per_step"]) / float(users["memory_seconds"])
    extra_weights = float(users["weight_bytes_per_step"]) - float(alone["weight_bytes_per_step"])
    extra_kv = float(users["kv_bytes_per_step"]) - float(alone["kv_bytes_per_step"])
    largest = int(users["largest_batch"])
    fitting = (a.decode(**{**inputs, "batch": largest})
               if not users["fits"] and 0 < largest < inputs["batch"] else None)
    return {
        "users_batch_text": count_phrase(inputs["batch"], "sequence"),
        "users_batch_tokens": count_phrase(inputs["batch"], "token"),
        "users_context_text": count_phrase(inputs["context_tokens"], "token"),
        "users_step": seconds_rounded(step, digits=digits),
        "users_alone_step": seconds_rounded(alone_step, digits=digits),
        "users_close": close,
        # Closer still, three figures print the same time twice: give the growth instead.
        "users_same": seconds_rounded(step, digits=digits)
        == seconds_rounded(alone_step, digits=digits),
        "users_unreachable": step < FIXED_COSTS_DOMINATE,
        "users_ratio": number_format(ratio, digits=2),
        "users_alone_bound": alone["bound"],
        "users_bytes_text": bytes_phrase(float(users["bytes_per_step"])),
        "users_mfu": percent_format(inputs["mfu"]),
        "users_weights_grew": both_memory and extra_weights > 0.01 * float(
            alone["weight_bytes_per_step"]),
        "users_alone_weights_text": bytes_phrase(float(alone["weight_bytes_per_step"])),
        "users_growth": seconds_rounded(step - alone_step),
        "users_growth_experts": seconds_rounded(extra_weights / bandwidth),
        "users_growth_kv": seconds_rounded(extra_kv / bandwidth),
        "users_growth_mostly_experts": extra_weights > extra_kv,
        "users_fitting_rate": (rate_tokens(float(fitting["tokens_per_second"]))
                               if fitting else ""),
    }


def _demo_context(inputs: dict) -> dict:
    """A link that puts the course's own small model in the calculator at lengths that fit its
    window (this answer's length if it leaves room, the prompt filling the rest), offered when
    the lengths chosen now would be refused for it."""
    demo = model_get(DEMO_MODEL_ID)
    window = demo.context
    lengths = inputs["prompt_tokens"] + inputs["output_tokens"]
    if inputs["model"] == DEMO_MODEL_ID or lengths <= window:
        return {"demo_link": ""}
    output = min(inputs["output_tokens"], window // 2)
    prompt = window - output
    query = urlencode({f"{PREFIX}-model": DEMO_MODEL_ID, f"{PREFIX}-gpu": inputs["gpu"],
                       f"{PREFIX}-dtype": inputs["dtype"], f"{PREFIX}-prompt_tokens": prompt,
                       f"{PREFIX}-output_tokens": output})
    return {
        "demo_link": f"?{query}#problem-1-worked",
        "demo_name": demo.id,
        "demo_window": count_phrase(window, "token"),
        "demo_prompt": count_phrase(prompt, "token"),
        "demo_output": count_phrase(output, "token"),
    }


# Narrower weight formats to suggest for a model that does not fit, widest first; the last is the
# narrowest one every GPU can serve (weight-only where it has no 4-bit arithmetic): if the model
# does not fit even in it, no smaller format is left to try.
NARROWER_FORMATS = ("fp8", "int4")
NARROWEST_FORMAT = NARROWER_FORMATS[-1]


def _split_context(inputs: dict, result, *, prefix: str) -> dict:
    """What a calculator's inputs that do not fit one GPU would take: whether the weights and
    reserve alone overflow it (then a smaller batch or prompt cannot help), whether a 4-bit copy
    of the model would fit, and the fewest GPUs that could hold it split (a ceiling: the weights
    and KV shared out, each GPU keeping its own reserve)."""
    if result["fits"]:
        return {f"{prefix}_weights_overflow": False}
    model, dtype = model_get(inputs["model"]), dtype_get(inputs["dtype"])
    embedding = embedding_dtype_resolve(model=model, dtype=dtype,
                                        embedding_dtype=inputs.get("embedding_dtype") or None)
    weights = weight_bytes_model(model=model, dtype=dtype, embedding=embedding)["total"]
    usable = float(result["memory_usable_bytes"])
    reserve = float(inputs.get("reserve_gb", RESERVE_GB_DEFAULT)) * GB
    kv = float(result["memory_needed_bytes"]) - weights - reserve
    # The widest narrower format whose copy of the model fits one GPU, if any.
    narrower = ""
    for candidate in map(dtype_get, NARROWER_FORMATS):
        stored = weight_bytes_model(
            model=model, dtype=candidate,
            embedding=embedding_dtype_resolve(model=model, dtype=candidate))["total"]
        if candidate.bits < dtype.bits and stored + kv + reserve <= usable:
            narrower = candidate.name
            break
    per_gpu = usable - reserve
    return {
        f"{prefix}_weights_overflow": weights + reserve > usable,
        f"{prefix}_narrower_fits": narrower,
        f"{prefix}_fewest_gpus": (count_phrase((weights + kv) / per_gpu, "GPU", rounding="ceil")
                                  if per_gpu > 0 else ""),
    }


# The batch the Concepts' MoE remark compares with one sequence: the page's hundred users.
MOE_EXAMPLE_BATCH = 100


def _moe_batch_context(model, inputs: dict) -> dict:
    """For an MoE, the weight bytes one decode step reads for one sequence and for a hundred:
    each token reads only its routed experts, so a bigger batch reads more of them and the
    weights are not "read once whatever the batch" (empty for a dense model)."""
    if not model.is_moe:
        return {}
    one, many = (a.decode(model=model.id, gpu=inputs["gpu"], dtype=inputs["dtype"], batch=b,
                          context_tokens=1, output_tokens=1)
                 for b in (1, MOE_EXAMPLE_BATCH))
    return {
        "moe_example_batch": count_phrase(MOE_EXAMPLE_BATCH, "sequence"),
        "moe_weights_one": bytes_phrase(float(one["weight_bytes_per_step"])),
        "moe_weights_many": bytes_phrase(float(many["weight_bytes_per_step"])),
    }


def _chunk_context(inputs: dict, chunk) -> dict:
    """The long-prompt paragraph's figures and the words that agree with them."""
    streams, chunks = inputs["decode_batch"], int(chunk["chunks"])
    return {
        "chunk_tokens": count_phrase(inputs["chunk_tokens"], "token"),
        # The largest chunk is the budget, or the whole prompt when it is shorter.
        "chunk_size": count_phrase(min(inputs["chunk_tokens"], inputs["prompt_tokens"]),
                                   "token"),
        "chunk_prompt": count_phrase(inputs["prompt_tokens"], "token"),
        "chunk_decoders": count_phrase(streams, "decode token"),
        "chunk_streams": count_phrase(streams, "stream"),
        "chunk_streams_verb": "is" if streams == 1 else "are",
        "chunk_one_stream": streams == 1,
        "chunk_streams_noun": "stream" if streams == 1 else "streams",
        "chunk_no_streams": streams == 0,
        "chunk_count": count_phrase(chunks, "chunk"),
        "chunk_single": chunks == 1,
        # The whole prompt in one step stalls the streams no more than a chunk (within 5%)
        # when their own reads are so large that its compute hides under them.
        "chunk_no_gain": float(chunk["unchunked_stall_seconds"])
        <= 1.05 * float(chunk["max_chunk_stall_seconds"]),
        "chunk_fits": bool(chunk["fits"]),
        # Microsecond steps (a tiny model) are counts that fixed per-step costs outweigh.
        "chunk_unreachable": float(chunk["largest_step_seconds"]) < FIXED_COSTS_DOMINATE,
        "chunk_memory_needed": bytes_phrase(float(chunk["memory_needed_bytes"])),
        "chunk_memory_usable": bytes_phrase(float(chunk["memory_usable_bytes"])),
        "chunk_gpu": gpu_get(inputs["gpu"]).name,
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 1's prose quotes, from the same inputs as its calculators."""
    inputs, result = _evaluated(CALCULATOR, PREFIX, request)
    model, gpu = model_get(inputs["model"]), gpu_get(inputs["gpu"])
    dtype = dtype_get(inputs["dtype"])
    kv_dtype = kv_dtype_get(inputs["kv_dtype"], model=model)
    # The format's short name before "KV cache" in a sentence ("INT8", not "INT8 KV cache
    # (TensorRT-LLM)", whose qualifier the form's option already gives).
    kv_name = (kv_dtype.kv_name.split(" (")[0].removesuffix(" KV cache") if kv_dtype.kv_name
               else kv_dtype.name)
    peak = peak_flops_get(gpu=gpu, dtype=dtype)
    users_inputs, users = _evaluated(USERS_CALCULATOR, USERS_PREFIX, request)
    users_model = model_get(users_inputs["model"])
    kv_per_token = float(users["kv_bytes_per_step"]) / (
        users_inputs["batch"] * users_inputs["context_tokens"])
    # The context at which this batch's KV reads equal the weights' (tokens).
    even_context = float(users["weight_bytes_per_step"]) / (users_inputs["batch"] * kv_per_token)
    alone = a.decode(**{**users_inputs, "batch": 1})
    chunk_inputs, chunk = _evaluated(CHUNK_CALCULATOR, CHUNK_PREFIX, request)
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
        "model_name": model.name,
        "gpu_name": gpu.name,
        "dtype_name": dtype.name,
        "kv_dtype_name": kv_name,
        # "an FP8 KV cache", "a BF16 KV cache": the article goes by how the letters are said.
        "kv_dtype_article": "an" if kv_name[:1] in "AEFHILMNORSX" else "a",
        "attention": model.attention,
        "heads": model.heads,
        "gqa_ratio": number_format(model.heads / model.kv_heads),
        "kv_expression": next(s.expression for s in result.steps
                              if s.label.startswith("KV bytes per token")),
        "layers": model.layers,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "is_moe": model.is_moe,
        "params_text": params_phrase(rule_params),
        "non_embedding_text": params_phrase(refined_params),
        "total_params_text": params_phrase(parts["total"]),
        "prompt_tokens": count_phrase(inputs["prompt_tokens"], "token"),
        "prompt_one": inputs["prompt_tokens"] == 1,
        "output_tokens": f"{inputs['output_tokens']:,}",
        "answer_tokens": count_format(inputs["output_tokens"], "token"),
        "one_token": inputs["output_tokens"] == 1,
        # Under 90% of the time in decode, this answer is not "long" next to its prompt.
        "decode_dominates": float(result["decode_share"]) >= 0.9,
        # How many decode steps take as long as this prefill: the answer length past which the
        # loop is most of the time.
        "steps_matching_prefill": count_phrase(
            max(1.0, float(result["ttft_seconds"]) / float(result["decode_step_seconds"])),
            "decode step", rounding="ceil"),
        # Quantized weights with the embedding and head kept in BF16 read more than the rule of
        # thumb, which puts every parameter in the weights' format.
        "refined_reads_more": float(result["weight_bytes"]) > float(result["rule_weight_bytes"]),
        "decode_steps": f"{int(result['decode_steps']):,}",
        "one_step": int(result["decode_steps"]) == 1,
        "kv_tokens": count_phrase(int(result["kv_tokens"]), "token"),
        "mfu_percent": percent_format(inputs["mfu"]),
        "bandwidth_percent": percent_format(inputs["bandwidth_efficiency"]),
        "bandwidth_full": inputs["bandwidth_efficiency"] >= 1,
        # A step time is a floor only at full bandwidth and for a model one GPU can hold: split
        # over several, each GPU reads only its share (the warning below says so).
        "step_floor_ok": inputs["bandwidth_efficiency"] >= 1 and bool(result["fits"]),
        # A step under a tenth of a millisecond is a byte count no engine reaches.
        "step_unreachable": float(result["decode_step_seconds"]) < FIXED_COSTS_DOMINATE,
        "prefill_unreachable": float(result["ttft_seconds"]) < FIXED_COSTS_DOMINATE,
        # Below full bandwidth a step time is an estimate; the floor is the same bytes at 100%.
        "step_floor_full": seconds_rounded(float(result["decode_weights_floor_seconds"])
                                           * inputs["bandwidth_efficiency"]),
        "prefill_floor": bool(result["fits"]) and (
            (result["prefill_bound"] == "compute" and inputs["mfu"] >= 1)
            or (result["prefill_bound"] == "memory" and inputs["bandwidth_efficiency"] >= 1)),
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
        "dtype_bits_above_four": dtype.bits > dtype_get(NARROWEST_FORMAT).bits,
        "moe_factor": number_format(moe_factor, digits=2),
        "ridge_tokens": count_format(round(ridge_tokens), "token"),
        # Narrow weights multiplied at the BF16 rate (weight-only: INT4 anywhere, FP8 on an A100,
        # FP4 off Blackwell) cut the bytes but not the FLOP rate, so the crossover falls well
        # below a dense model's few hundred tokens.
        "weight_only": dtype.bits < 16 and peak == gpu.rate_get("bf16"),
        "memory_fraction_percent": percent_format(inputs["memory_fraction"]),
        "gpu_memory_label": gpu.memory_label,
        "gpu_memory_mib": gpu.memory_total_text,
        "window": f"{window:,}",
        "max_tokens_default": count_phrase(max(window - inputs["prompt_tokens"], 0), "token"),
        "r": result.values,
        # A hundred users in one step.
        "users_batch": f"{users_inputs['batch']:,}",
        "users_single": users_inputs["batch"] == 1,
        "users_context": f"{users_inputs['context_tokens']:,}",
        "users_model": users_model.name,
        "is_users_moe": users_model.is_moe,
        "users_kv_text": bytes_phrase(float(users["kv_bytes_per_step"])),
        "users_kv_compared": kv_compared,
        "users_weights_text": bytes_phrase(float(users["weight_bytes_per_step"])),
        "users_weight_share": percent_format(float(users["weight_share"])),
        "users_even_context": count_phrase(round(even_context), "token") + " each",
        # Past about W ÷ kv sequences, a single token of context each outweighs the weights.
        "users_even_below_one": even_context < 1,
        "users_even_past_window": bool(users_model.context)
        and even_context > users_model.context,
        "users_window": f"{users_model.context:,}" if users_model.context else "",
        "users_aggregate_tokens": rate_tokens(float(users["tokens_per_second"])),
        "users_alone_rate": significant_format(float(alone["tokens_per_second"])),
        "users_alone_rate_tokens": rate_tokens(float(alone["tokens_per_second"])),
        "users_end_tokens": count_phrase(users_end, "token"),
        # A one-token answer takes no decode step, so its sequences never grow.
        "users_grow": users_end > users_inputs["context_tokens"],
        "users_largest_batch": count_phrase(int(users["largest_batch"]), "sequence"),
        "users_none_fit": int(users["largest_batch"]) == 0,
        "users_memory_needed": bytes_phrase(float(users["memory_needed_bytes"])),
        "users_memory_usable": bytes_phrase(float(users["memory_usable_bytes"])),
        "users_gpu": gpu_get(users_inputs["gpu"]).name,
        "users_bound": users["bound"],
        # Times at full efficiency on their binding side are floors, and the prose says so.
        # ... and only for a batch that fits (otherwise the engine would run a smaller one).
        "users_floor": users["bound"] == "memory" and users_inputs["bandwidth_efficiency"] >= 1
        and bool(users["fits"]),
        "users_fits": users["fits"],
        # One long prompt chunk among running streams.
        **_chunk_context(chunk_inputs, chunk),
        "chunk_model": model_get(chunk_inputs["model"]).name,
        "chunk_alone": seconds_rounded(float(chunk["decode_step_seconds"])),
        "chunk_step": seconds_rounded(float(chunk["largest_step_seconds"])),
        "chunk_stall": seconds_rounded(float(chunk["max_chunk_stall_seconds"])),
        "chunk_unchunked_stall": seconds_rounded(float(chunk["unchunked_stall_seconds"])),
        "chunk_bound": chunk["largest_step_bound"],
        "chunk_alone_floor": chunk["decode_step_bound"] == "memory"
        and chunk_inputs["bandwidth_efficiency"] >= 1 and bool(chunk["fits"]),
        "chunk_step_floor": bool(chunk["fits"]) and (
            (chunk["largest_step_bound"] == "memory" and chunk_inputs["bandwidth_efficiency"] >= 1)
            or (chunk["largest_step_bound"] == "compute" and chunk_inputs["mfu"] >= 1)),
        **_users_context(users_inputs, users, alone),
        **_moe_batch_context(model, inputs),
        **_split_context(inputs, result, prefix="split"),
        **_split_context(chunk_inputs, chunk, prefix="chunk_split"),
        **_demo_context(inputs),
    }
