"""Problem 7, chunked prefill for a 100K-token prompt: the calculator for one long prompt
arriving among running streams (its FLOPs with attention's share, its prefill alone, its KV and
the fit, the chunks under a per-step token budget, the stall each adds, its own TTFT chunked and
in one pass), the inter-token-gap timeline, and every figure the prose quotes.
"""

import functools

from django.http import HttpRequest

from problems.arithmetic.batching import (
    PUBLISHED_CHUNKED_PREFILL_GAINS,
    SARATHI_MODELS,
    VLLM_DEFAULT_TOKEN_BUDGETS,
    long_prompt,
    mlp_activation_bytes,
)
from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.compute import peak_flops_get, prefill_flops_model
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.memory import TP_MAX
from problems.arithmetic.units import (
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import ratio_phrase, times_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    bandwidth_input,
    dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series

SLUG = "long-prompt"
PREFIX = "p07-long"
# Below this share of the prefill's FLOPs, attention is within the rule of thumb's own slack.
ATTENTION_SHARE_NOTED = 0.1
# A last chunk's step this many times the first's is "growing"; below it, about the same.
CHUNK_GROWTH_NOTED = 1.1
TIMELINE_SLUG = "long-prompt-gaps"
TIMELINE_PREFIX = "p07-gaps"
MS = 1e3
BUDGETS = (2_048, 8_192)
# The two deployments the problem names: the 8B model on one GPU, the 70B on eight.
SCENARIOS = (("llama-3.1-8b", 1), ("llama-3.1-70b", 8))


@functools.cache
def _at(**inputs):
    return long_prompt(**inputs)


def chunk_times_plot(*, inputs: dict, result) -> Plot:
    """Each chunk's step time, against the decode step it stretches."""
    times = result["chunk_seconds"]
    xs = tuple(range(1, len(times) + 1))
    if not times:  # too many chunks to list: the first and the largest, at its end
        times = (result["first_chunk_step_seconds"], result["largest_chunk_step_seconds"])
        xs = (1, result["chunks"])
    return Plot(title="Each chunk's step: later chunks attend to more of the prompt",
                x_title="Chunk number", y_title="Step time (ms)",
                series=(Series("step with the chunk", xs, tuple(t * MS for t in times),
                               markers=len(xs) <= 64),
                        Series("decode step alone", (xs[0], xs[-1]),
                               (result["decode_step_seconds"] * MS,) * 2, dash=True)))


def gaps_plot(*, inputs: dict, result) -> Plot:
    """Every running stream's gap between tokens, from the prompt's arrival, with one-pass
    prefill and with the budget."""
    alone = result["decode_step_seconds"]
    whole = result["ttft_unchunked_seconds"]
    times = result["chunk_seconds"]
    span = max(result["ttft_chunked_seconds"], whole) + 4 * alone
    xs_c, ys_c, t = [], [], 0.0
    for step in times:
        t += step
        xs_c.append(t)
        ys_c.append(step * MS)
    if not times:  # too many chunks to list: the first step, and the largest as the last
        first = result["first_chunk_step_seconds"]
        t = result["ttft_chunked_seconds"]
        xs_c, ys_c = [first, t], [first * MS, result["largest_chunk_step_seconds"] * MS]
    # After the prompt, tokens come at the decode-only pace: two points draw that stretch.
    xs_c += [t + alone, span]
    ys_c += [alone * MS, alone * MS]
    xs_w = [whole, whole + alone, span]
    ys_w = [whole * MS, alone * MS, alone * MS]
    return Plot(title="The running streams' gap between tokens as the long prompt is prefilled",
                x_title="Time since the long prompt arrived (s)",
                y_title="Gap before each token (ms)", y_log=True,
                series=(Series("one pass: every stream waits for the whole prompt",
                               tuple(xs_w), tuple(ys_w), markers=True),
                        Series(f"chunked at a {inputs['token_budget']:,}-token budget",
                               tuple(xs_c), tuple(ys_c), markers=True)),
                marks=(Mark(result["ttft_chunked_seconds"], "long prompt's first token, chunked"),
                       Mark(whole, "its first token, one pass")))


INPUTS = (
    model_input(initial="llama-3.1-8b", api="llama-3.1-8b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    whole_input("tp", "GPUs in tensor parallel", unit="GPUs", initial=1, api=1, maximum=TP_MAX,
                help="The work splits evenly over them; the all-reduces between them are not "
                     "counted, so times are floors."),
    whole_input("prompt_tokens", "The long prompt", unit="tokens", initial=100_000, api=100_000,
                maximum=TOKENS_MAX),
    whole_input("token_budget", "Token budget per step", unit="tokens", initial=2_048,
                api=2_048, maximum=TOKENS_MAX,
                help="Every token a step computes counts: the decoders' one each, the rest goes "
                     "to the prompt's chunk (vLLM's max_num_batched_tokens)."),
    whole_input("decode_batch", "Streams decoding meanwhile", unit="sequences", initial=32,
                api=32, minimum=0, maximum=USERS_MAX),
    whole_input("decode_context_tokens", "Their context", unit="tokens", initial=2_000,
                api=2_000, maximum=TOKENS_MAX),
    dtype_input(), mfu_input(initial=0.5, api=0.5), bandwidth_input(), kv_dtype_input(),
    *memory_inputs(),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="A long prompt among running streams",
    explanation=("One long prompt arrives while streams decode. Its prefill FLOPs (attention "
                 "grows with the square of its length), its KV cache and whether it fits; then "
                 "its chunks under a per-step token budget, the stall each adds to every "
                 "stream's next token, and its own time to first token chunked and in one "
                 "pass. Every step is the larger of its memory and compute time."),
    inputs=INPUTS,
    compute=lambda **k: long_prompt(**k),
    plot=chunk_times_plot,
    order=130,
    api_path="/long-prompt",
    api_summary="A long prompt under a token budget: attention share, chunks, stalls, TTFT",
))

TIMELINE_CALCULATOR = calculator_register(Calculator(
    slug=TIMELINE_SLUG,
    title="The streams' inter-token gaps while a long prompt is prefilled",
    explanation=("Each point is one token of every running stream: how long it waited since "
                 "the previous one. In one pass, the first gap is the whole prefill; chunked, "
                 "every gap is one chunk's step."),
    inputs=INPUTS,
    compute=lambda **k: long_prompt(**k),
    plot=gaps_plot,
    listed=False,
))


def _evaluated(request: HttpRequest, calculator: Calculator, prefix: str) -> tuple[dict, object,
                                                                                   bool]:
    return calculator_inputs_result(calculator, query=request.GET, prefix=prefix)


def _s(value: float) -> str:
    return seconds_format(value)


def scenario_rows(inputs: dict) -> list[dict]:
    """The two deployments under the two budgets, at the calculator's other inputs (a budget
    no larger than the streams' decode tokens leaves no room for the prompt: left out)."""
    rows = []
    for model, tp in SCENARIOS:
        for budget in (b for b in BUDGETS if b > inputs["decode_batch"]):
            r = _at(**{**inputs, "model": model, "tp": tp, "token_budget": budget})
            rows.append({
                "model": model_get(model).name, "tp": tp,
                "gpus_text": f"{tp} × {gpu_get(inputs['gpu']).short_name}",
                "budget": f"{budget:,}", "chunks": f"{r['chunks']:,}",
                "first_stall": _s(r["first_chunk_stall_seconds"]),
                "max_stall": _s(r["max_chunk_stall_seconds"]),
                "whole_stall": _s(r["unchunked_stall_seconds"]),
                "ttft_chunked": _s(r["ttft_chunked_seconds"]),
                "ttft_whole": _s(r["ttft_unchunked_seconds"]),
                "attention_share": percent_format(r["attention_share"]),
                "fits": r["fits"],
            })
    return rows


def scenario_ratios(prompt_tokens: int) -> tuple[float, float]:
    """The larger deployment's linear FLOPs (layers and head) over the smaller's, at this
    prompt, and its GPUs over the smaller's."""
    (small, small_tp), (large, large_tp) = SCENARIOS

    def linear(name: str) -> float:
        f = prefill_flops_model(model_get(name), prompt_tokens)
        return f["linear"] + f["head"]

    return linear(large) / linear(small), large_tp / small_tp


def context(*, request: HttpRequest) -> dict:
    """The figures problem 7's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request, CALCULATOR, PREFIX)
    m = model_get(inputs["model"])
    g = gpu_get(inputs["gpu"])
    first = r["first_chunk_step_seconds"]
    big = _at(**{**inputs, "token_budget": max(BUDGETS)}) if (
        max(BUDGETS) > inputs["decode_batch"]) else r
    streams = inputs["decode_batch"] > 0
    d = dtype_get(inputs["dtype"])
    # Prompt tokens a step needs before its compute catches up with its weight reads: the
    # ridge point (usable FLOP/s over usable bytes/s) × the bytes per weight ÷ 2 FLOPs per
    # weight per token (the decoders' KV reads lengthen the step and raise it).
    ridge_tokens = (peak_flops_get(gpu=g, dtype=d) * inputs["mfu"] * d.bytes
                    / (2 * g.bandwidth_bytes_per_second * inputs["bandwidth_efficiency"]))
    decode = r["decode_step_seconds"]
    largest = r["largest_chunk_step_seconds"]
    # No streams decoding: no decode-only step to compare the chunks' steps with.
    low, high = ((times_phrase(first, decode), times_phrase(largest, decode)) if decode > 0
                 else ("", ""))
    act_whole = mlp_activation_bytes(model=m.id, tokens=inputs["prompt_tokens"],
                                     dtype=inputs["dtype"])
    act_budget = mlp_activation_bytes(model=m.id, tokens=inputs["token_budget"],
                                      dtype=inputs["dtype"])
    return {
        # The figure's chunked steps against a decode-only step, from the numbers: nearly as
        # short when a chunk stays under the ridge point, many times longer past it.
        "chunk_vs_decode_text": low if low == high else f"{low} to {high}",
        "act_whole_text": bytes_short(act_whole),
        "act_budget_text": bytes_short(act_budget),
        "act_ratio_text": ratio_phrase(act_whole, act_budget, more="more", less="less"),
        "calculator_prefix": PREFIX,
        "timeline_prefix": TIMELINE_PREFIX,
        "inputs_valid": valid,
        "model_name": m.name, "gpu_name": g.name, "tp": inputs["tp"],
        "dtype_name": d.name,
        "ridge_tokens_text": count_format(round(ridge_tokens), "token"),
        "gpus_text": (f"{inputs['tp']} × {g.name}" if inputs["tp"] > 1 else f"one {g.name}"),
        "context_text": count_format(m.context, "token"),
        "prompt_text": count_format(inputs["prompt_tokens"], "token"),
        "budget_text": count_format(inputs["token_budget"], "token"),
        "decode_batch_text": count_format(inputs["decode_batch"], "stream"),
        "one_stream": inputs["decode_batch"] == 1,
        "decode_context_text": count_format(inputs["decode_context_tokens"], "token"),
        "mfu_percent": percent_format(inputs["mfu"]),
        "linear_flops_text": flops_format(r["linear_flops"]),
        "attention_flops_text": flops_format(r["attention_flops"]),
        "prefill_flops_text": flops_format(r["prefill_flops"]),
        "attention_share_text": percent_format(r["attention_share"]),
        "prefill_alone_text": _s(r["prefill_alone_seconds"]),
        "prefill_alone_bound": r["prefill_alone_bound"],
        "kv_per_token_text": bytes_short(r["kv_bytes_per_token"]),
        "kv_text": bytes_short(r["kv_bytes"]),
        "fits": r["fits"],
        "needed_text": bytes_short(r["memory_needed_bytes"]),
        "usable_text": bytes_short(r["memory_usable_bytes"]),
        "chunk_text": count_format(r["chunk_tokens"], "token"),
        "chunks_text": count_format(r["chunks"], "chunk"),
        "several_chunks": r["chunks"] > 1,
        "streams_decoding": streams,
        # How many decode steps the one-pass step lasts (none to count with no streams).
        "whole_decode_steps_text": (count_format(
            round(r["ttft_unchunked_seconds"] / r["decode_step_seconds"]), "decode step")
            if streams else ""),
        "decode_step_text": _s(r["decode_step_seconds"]),
        "decode_step_bound": r["decode_step_bound"],
        # Only a step that carries decodes can be called a compute-bound decode step (with no
        # streams it has nothing to compute and takes no time).
        "decode_compute_bound": bool(streams) and r["decode_step_bound"] == "compute",
        "first_step_text": _s(r["first_chunk_step_seconds"]),
        # With no streams decoding there is no decode step to compare with, and no one to notice.
        "first_step_compute_bound": (r["first_step_bound"] == "compute"
                                     and inputs["decode_batch"] > 0),
        "largest_step_text": _s(r["largest_chunk_step_seconds"]),
        "largest_step_bound": r["largest_step_bound"],
        "first_stall_text": _s(r["first_chunk_stall_seconds"]),
        "max_stall_text": _s(r["max_chunk_stall_seconds"]),
        "sarathi_mistral_text":
            f"{number_format(PUBLISHED_CHUNKED_PREFILL_GAINS['sarathi_mistral_7b_1xa100'])}×",
        "sarathi_falcon_text":
            f"{number_format(PUBLISHED_CHUNKED_PREFILL_GAINS['sarathi_falcon_180b_pp'])}×",
        "sarathi_small_model": SARATHI_MODELS["small"],
        "sarathi_large_model": SARATHI_MODELS["large"],
        "growth_text": (f"{number_format(r['largest_chunk_step_seconds'] / first)}×"
                        if first else "1×"),
        # Later chunks grow noticeably only where attention is a real part of the step.
        "chunks_grow": (bool(first)
                        and r["largest_chunk_step_seconds"] / first >= CHUNK_GROWTH_NOTED),
        # Two FLOPs per parameter per token misses attention only when attention is a real
        # share of the prefill: at 1,000 tokens on Llama 3.1 8B it is 1.84%, and the rule holds.
        "attention_matters": r["attention_share"] >= ATTENTION_SHARE_NOTED,
        "whole_stall_text": _s(r["unchunked_stall_seconds"]),
        "ttft_chunked_text": _s(r["ttft_chunked_seconds"]),
        "ttft_whole_text": _s(r["ttft_unchunked_seconds"]),
        # "0.627%" while small; past doubling a multiple reads better than "1,238%".
        "ttft_cost_text": (percent_format(r["ttft_cost_of_chunking"] - 1)
                           if r["ttft_cost_of_chunking"] < 2 else
                           f"{number_format(r['ttft_cost_of_chunking'])}× its one-pass TTFT"),
        # Zero but for rounding when the chunks add up to the one pass (one chunk, or no streams
        # and every chunk's step compute-bound).
        "chunking_costs": r["ttft_cost_of_chunking"] - 1 > 1e-9,
        # Only a memory-bound chunk pays a weight read its compute does not hide.
        "first_step_is_compute_bound": r["first_step_bound"] == "compute",
        "big_budget_text": count_format(max(BUDGETS), "token"),
        "big_chunks_text": count_format(big["chunks"], "chunk"),
        "big_max_stall_text": _s(big["max_chunk_stall_seconds"]),
        "big_largest_step_text": _s(big["largest_chunk_step_seconds"]),
        "big_ttft_text": _s(big["ttft_chunked_seconds"]),
        "rows": scenario_rows(inputs),
        "vllm_large_server_text":
            count_format(VLLM_DEFAULT_TOKEN_BUDGETS["large_gpu_server"], "token"),
        "vllm_large_offline_text":
            count_format(VLLM_DEFAULT_TOKEN_BUDGETS["large_gpu_offline"], "token"),
        "vllm_other_server_text":
            count_format(VLLM_DEFAULT_TOKEN_BUDGETS["other_gpu_server"], "token"),
        "scenario_flops_ratio_text":
            f"{number_format(scenario_ratios(inputs['prompt_tokens'])[0])}×",
        "scenario_gpus_ratio_text":
            f"{number_format(scenario_ratios(inputs['prompt_tokens'])[1])}×",
    }


SOURCES: list[tuple[str, str]] = [
    ("vLLM issue 11797 (the query heads must divide by the tensor-parallel size, which is why "
     "the calculator refuses Qwen2.5 7B's 28 heads over 8 GPUs)",
     "https://github.com/vllm-project/vllm/issues/11797"),
    ("Yang et al. (Meta), 'Context Parallelism for Scalable Million-Token Inference' "
     "(arXiv 2411.01783: a long prompt's prefill split across GPUs by tokens, ring attention "
     "passing keys and values or queries between them)", "https://arxiv.org/abs/2411.01783"),
    ("vLLM pull request 10511 (the memory profiler: a forward pass at the token budget measures "
     "the activation peak, which is taken out of the KV pool)",
     "https://github.com/vllm-project/vllm/pull/10511"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(OSDI 2024: chunked prefills, stall-free batching, a token budget per step; abstract: "
     "2.6x vLLM's serving capacity for Mistral-7B on one A100, up to 5.6x end-to-end for "
     "Falcon-180B with pipeline parallelism, baseline unnamed)",
     "https://arxiv.org/abs/2403.02310"),
    ("Sarathi-Serve's OSDI artifact, 'Hybrid Parallelism (Figure 8)': Falcon-180B on two "
     "4-GPU nodes, tensor parallelism across the nodes against tensor plus pipeline "
     "parallelism, latency and serving capacity",
     "https://github.com/microsoft/sarathi-serve/blob/main/osdi-experiments/figure-8/README.md"),
    ("Agrawal et al., 'SARATHI: Efficient LLM Inference by Piggybacking Decodes with Chunked "
     "Prefills' (2023)", "https://arxiv.org/abs/2308.16369"),
    ("vLLM blog, 'vLLM V1: A Major Upgrade to vLLM's Core Architecture' (prompt and output "
     "tokens scheduled alike; chunked prefill as a fixed token budget per step)",
     "https://blog.vllm.ai/2025/01/27/v1-alpha-release.html"),
    ("vLLM source, vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: the default "
     "max_num_batched_tokens, larger on GPUs past the memory size it names, the A100 excepted",
     "https://github.com/vllm-project/vllm/blob/main/vllm/engine/arg_utils.py"),
    ("vLLM documentation, 'Optimization and Tuning': chunked prefill always on by default in "
     "V1, max_num_batched_tokens, decodes scheduled before prefills",
     "https://docs.vllm.ai/en/latest/configuration/optimization.html"),
    ("Zhong et al., 'DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large "
     "Language Model Serving' (OSDI 2024)", "https://arxiv.org/abs/2401.09670"),
    ("Meta Llama 3.1 8B config.json (32 layers, 8 KV heads, head_dim 128, 131,072 positions)",
     "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
    ("Meta Llama 3.1 70B config.json (80 layers, 8 KV heads, head_dim 128)",
     "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense BF16 rate, HBM3 bandwidth)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]
