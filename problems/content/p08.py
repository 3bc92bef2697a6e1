"""Problem 8, prefix caching and cache-aware routing: the "prefix-routing" calculator (what a hit
on a shared system prompt saves, per request and per day, and the hit rate random and
prefix-affine routing reach on a fleet) and every figure the prose quotes, computed at render
time by problems/arithmetic.
"""

from django.http import HttpRequest

from problems import arithmetic as a
from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.units import (
    bytes_in,
    bytes_short,
    count_format,
    flops_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase, times_phrase
from problems.calculators import calculator_evaluate, calculator_get
from problems.forms import inputs_normalise

SLUG = "prefix-routing"
PREFIX = "p8-routing"
DEMO_SLUG = "prefix-cache"
# Published figures the prose quotes, each from an entry in SOURCES.
SGLANG_HIT = (0.524, 0.741)  # SGLang paper: RadixAttention hit rate, LLaVA-Next-34B, Vicuna-33B
SGLANG_MODELS = ("LLaVA-Next-34B", "Vicuna-33B")  # the two models SGLANG_HIT was measured on
SGLANG_TTFT = 1.7  # SGLang paper: TTFT 1.7× lower on average on Vicuna-33B, radix cache on
DEEPSEEK_HIT = 0.563  # DeepSeek Day 6 overview: share of input tokens that hit the disk cache
VLLM_BLOCK = 16  # vLLM's default KV block size, tokens
# CVE-2025-46570 / GHSA-4qjh-9fv9-r85r: TTFT reveals prefix-cache hits; affected from the first
# release up to, not including, 0.9.0, which fixed it with the optional cache_salt (PR 17045).
VLLM_TIMING_FIXED = "0.9.0"
# OpenAI's prompt-caching guide: requests are routed by a hash of the prompt's first tokens
# (typically 256), and caching applies from 1,024 prompt tokens on.
OPENAI_ROUTE_TOKENS = 256
OPENAI_MIN_TOKENS = 1_024
# FlashInfer's cascade-inference post: shared-prefix batch decoding up to 31× faster than
# vLLM's PagedAttention kernel on an H100 SXM.
FLASHINFER_CASCADE = 31
# A small illustration of the block rule: a prefix that ends mid-block shares only full blocks.
BLOCK_EXAMPLE_TOKENS = 2_050

CALCULATOR = calculator_get(SLUG)


def figures(inputs: dict) -> dict:
    """Every figure problem 8's prose quotes, for the calculator's inputs."""
    r = a.prefix_routing(**inputs)
    m = model_get(inputs["model"])
    system, user = inputs["system_tokens"], inputs["user_tokens"]
    full_blocks = BLOCK_EXAMPLE_TOKENS // VLLM_BLOCK
    return {
        "model_name": m.name, "tp": inputs["tp"], "replicas": inputs["replicas"],
        "gpu_name": gpu_get(inputs["gpu"]).name,
        "dtype_name": dtype_get(inputs["dtype"]).name,
        "gpus_text": "one GPU" if inputs["tp"] == 1 else count_format(inputs["tp"], "GPU"),
        "replicas_text": ("one replica" if inputs["replicas"] == 1
                          else count_format(inputs["replicas"], "replica")),
        "applications": inputs["applications"],
        "system_tokens": f"{system:,}", "user_tokens": f"{user:,}",
        "prompt_tokens": f"{system + user:,}",
        "system_tokens_n": count_phrase(system, "token"),
        "user_tokens_n": count_phrase(user, "token"),
        "prompt_tokens_n": count_phrase(system + user, "token"),
        "rpm_n": amount_phrase(inputs["requests_per_minute"], "requests"),
        "requests_day_n": amount_phrase(r["requests_per_day"], "requests"),
        "rpm": number_format(inputs["requests_per_minute"]),
        "mfu_text": percent_format(inputs["mfu"]),
        "cache_gb_text": bytes_in(inputs["cache_gb"] * 1e9, "GB"),
        "miss_flops_text": flops_format(r["miss_flops"]),
        "hit_flops_text": flops_format(r["hit_flops"]),
        "flops_saved_text": flops_format(r["flops_saved"]),
        "miss_text": seconds_format(r["miss_seconds"]), "miss_bound": r["miss_bound"],
        "hit_text": seconds_format(r["hit_seconds"]), "hit_bound": r["hit_bound"],
        "ttft_saved_text": seconds_format(r["ttft_saved"]),
        # Both lone prefills bound by the weight reads: a hit is no shorter (a short prompt on
        # a big model), which gets a sentence of its own, not "0 s of TTFT (0%)".
        "ttft_none": r["ttft_saved"] <= 1e-12,
        "user_one": user == 1,
        "gpu_seconds_text": number_format(r["gpu_seconds_saved"]),
        "saved_share_text": percent_format(r["ttft_saved"] / r["miss_seconds"]),
        # Across the replica's GPUs: MLA's latent, or a head copied past the KV-head count,
        # sits whole on every GPU, so the replica pays for it tp times.
        "kv_token_text": bytes_in(r["kv_token_replica_bytes"], "kB"),
        "kv_replicated": r["kv_replicated"], "mla": m.attention == "MLA",
        "kv_token_gpu_text": bytes_in(r["kv_token_replica_bytes"] / inputs["tp"], "kB"),
        "prefix_kv_text": bytes_short(r["prefix_kv_bytes"]),
        "capacity": f"{r['capacity']:,}",
        # Zero gets words of its own: a prefix larger than the idle cache is never kept.
        "capacity_n": count_phrase(r["capacity"], "prefix"),
        "capacity_none": r["capacity"] == 0,
        # No idle room and nothing in flight: no request ever hits, under either routing.
        "never_hits": r["hit_affine"] == 0,
        "cache_short": r["capacity"] < inputs["applications"],
        "hit_random_text": percent_format(r["hit_random"]),
        "hit_random_idle_text": percent_format(r["hit_random_idle"]),
        "hit_affine_idle_text": percent_format(r["hit_affine_idle"]),
        "sharing_helps": r["hit_random"] > r["hit_random_idle"] + 5e-4,
        "request_seconds_text": number_format(inputs.get("request_seconds", 0.0)),
        # A request cannot run for less than its own prefill: say so when the assumption is
        # shorter than a miss (Llama 3.1 405B on an L4: 5 s against a 29.5 s prefill).
        "request_short": 0 < inputs.get("request_seconds", 0.0) < r["miss_seconds"],
        "in_flight_text": number_format(r["in_flight_replica"]),
        "pinned_text": number_format(r["pinned_random"]),
        "in_flight_none": r["in_flight"] == 0,
        "weights_fit": r["weights_fit"],
        "weights_gpu_text": bytes_in(r["weights_gpu"], "GB"),
        "usable_gpu_text": bytes_in(r["usable_gpu"], "GB"),
        "overloaded": r["prefill_gpus"] > r["fleet_gpus"],
        "prefill_gpus_text": number_format(r["prefill_gpus"]),
        # With the cache the same load can fit: hits skip their prefix's FLOPs.
        "rescued_random": r["prefill_gpus_random"] <= r["fleet_gpus"],
        "rescued_affine": r["prefill_gpus_affine"] <= r["fleet_gpus"],
        "prefill_gpus_random_text": number_format(r["prefill_gpus_random"]),
        "prefill_gpus_affine_text": number_format(r["prefill_gpus_affine"]),
        "fleet_gpus_text": count_phrase(r["fleet_gpus"], "GPU"),
        # Below one request in flight per replica, prefills seldom meet to share weight reads.
        "busy": inputs["requests_per_minute"] / 60 / inputs["replicas"]
        * max(inputs.get("request_seconds", 0.0), r["miss_seconds"]) >= 1,
        "gpu_seconds_lone_text": number_format(r["gpu_seconds_lone"]),
        "views_differ": abs(r["gpu_seconds_lone"] - r["gpu_seconds_saved"])
        > 0.05 * r["gpu_seconds_saved"],
        "lone_vs_throughput": times_phrase(r["gpu_seconds_lone"], r["gpu_seconds_saved"])
        if r["gpu_seconds_saved"] > 0 else "",
        "openai_route_tokens": f"{OPENAI_ROUTE_TOKENS:,}",
        "openai_min_tokens": f"{OPENAI_MIN_TOKENS:,}",
        "flashinfer_cascade_text": f"{FLASHINFER_CASCADE}×",
        "hit_affine_text": percent_format(r["hit_affine"]),
        "hit_affine_busiest_text": percent_format(r["hit_affine_busiest"]),
        "affine_uneven": r["hit_affine_busiest"] < r["hit_affine"] - 1e-9,
        "apps_busiest": f"{r['apps_busiest']:,}",
        "apps_busiest_n": count_phrase(r["apps_busiest"], "application"),
        "busiest_share_text": percent_format(r["busiest_share"]),
        "even_share_text": percent_format(r["even_share"]),
        "unbalanced": r["busiest_share"] > r["even_share"] * (1 + 1e-9),
        "requests_day_text": number_format(r["requests_per_day"]),
        "gpu_hours_random_text": number_format(r["gpu_hours_random"]),
        "gpu_hours_affine_text": number_format(r["gpu_hours_affine"]),
        "flops_day_random_text": flops_format(r["flops_day_random"]),
        "flops_day_affine_text": flops_format(r["flops_day_affine"]),
        "gpu_hours_gap_text": number_format(r["gpu_hours_affine"] - r["gpu_hours_random"]),
        "gpus_day_affine_text": number_format(r["gpu_hours_affine"] / 24),
        "affine_better": r["hit_affine"] > r["hit_random"],
        "sglang_llava_text": percent_format(SGLANG_HIT[0]),
        "sglang_vicuna_text": percent_format(SGLANG_HIT[1]),
        "sglang_ttft_text": f"{SGLANG_TTFT}×",
        "sglang_llava_model": SGLANG_MODELS[0], "sglang_vicuna_model": SGLANG_MODELS[1],
        "deepseek_hit_text": percent_format(DEEPSEEK_HIT),
        "vllm_block": VLLM_BLOCK, "vllm_timing_fixed": VLLM_TIMING_FIXED,
        "block_example_tokens": f"{BLOCK_EXAMPLE_TOKENS:,}",
        "block_example_full": f"{full_blocks:,}",
        "block_example_cached": f"{full_blocks * VLLM_BLOCK:,}",
        "block_example_rest": f"{BLOCK_EXAMPLE_TOKENS - full_blocks * VLLM_BLOCK:,}",
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 8's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        inputs = CALCULATOR.defaults()  # bad input shows beside its field; prose keeps defaults
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "demo_slug": DEMO_SLUG, "inputs_valid": state.result is not None}


SOURCES: list[tuple[str, str]] = [
    ("vLLM documentation, 'Automatic Prefix Caching' (design): each full block hashed with its "
     "prefix's hash, reference counts, LRU eviction of unused blocks",
     "https://docs.vllm.ai/en/latest/design/prefix_caching/"),
    ("vLLM pull request #17045, 'Prevent side-channel attacks via cache salting' (an optional "
     "per-request cache_salt, injected into the first block's hash when present, so that only "
     "requests with the same salt share blocks)",
     "https://github.com/vllm-project/vllm/pull/17045"),
    ("Zheng et al., 'SGLang: Efficient Execution of Structured Language Model Programs' "
     "(RadixAttention; section 6.2, a month serving Chatbot Arena, one SGLang worker per model: "
     "the cache hit rates and the average TTFT reduction the page quotes)",
     "https://arxiv.org/abs/2312.07104"),
    ("DeepSeek, 'Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview' (56.3% of "
     "input tokens hit the on-disk KV cache)",
     "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
     "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md"),
    ("vLLM security advisory GHSA-4qjh-9fv9-r85r (CVE-2025-46570, published 28 May 2025): "
     "prefix-cache hits visible in TTFT to a client sharing the server; all releases before 0.9.0 "
     "affected, fixed in 0.9.0 by pull request 17045, the optional per-request cache_salt mixed "
     "into the first block's hash", "https://github.com/advisories/GHSA-4qjh-9fv9-r85r"),
    ("Song et al., 'The Early Bird Catches the Leak: Unveiling Timing Side Channels in LLM "
     "Serving Systems' (timing classifies cache hits; a token-by-token search recovers shared "
     "prefixes, system prompts and other users' prompts, in the authors' experiments)",
     "https://arxiv.org/abs/2409.20002"),
    ("SGLang repository (sgl-router: cache-aware load balancing)",
     "https://github.com/sgl-project/sglang"),
    ("NVIDIA Dynamo (KV-cache-aware routing: engines publish the KV blocks they store and "
     "evict, and the router keeps an index of them; prefill done locally when the prompt is "
     "short or the remote prefill queue is long)", "https://github.com/ai-dynamo/dynamo"),
    ("OpenAI, 'Prompt caching' guide (requests routed by a hash of the prompt's initial prefix, "
     "typically the first 256 tokens; caching from 1,024 prompt tokens; an optional "
     "prompt_cache_key to refine routing; a prefix sent above a request rate, about 15 a minute "
     "when the guide was updated, overflows to more machines)",
     "https://platform.openai.com/docs/guides/prompt-caching"),
    ("FlashInfer blog, 'Cascade Inference: Memory Bandwidth Efficient Shared Prefix Batch "
     "Decoding' (the shared prefix's attention split from each request's own, its KV read once "
     "per step for the group; up to 31× over vLLM's PagedAttention kernel on an H100 SXM)",
     "https://flashinfer.ai/2024/02/02/cascade-inference.html"),
    ("llm-d (inference scheduler with prefix-cache-aware routing)",
     "https://github.com/llm-d/llm-d"),
    ("Qin et al., 'Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving' "
     "(a KV cache pooled in CPU memory and SSD)", "https://arxiv.org/abs/2407.00079"),
    ("Llama 3.1 70B config.json (80 layers, 8 KV heads of 128)",
     "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense BF16 rate, HBM3 bandwidth, NVLink bandwidth "
     "in both directions)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]
