"""Problem 4, PagedAttention: the calculator that sets contiguous reservation (at the maximum
length, and at an oracle's exact length) against paged blocks of 8, 16 and 32 tokens for an
editable workload, and every figure the prose quotes, from problems/arithmetic at render time."""

from django.http import HttpRequest

from problems.arithmetic.catalog import gpu_get, kv_dtype_get, model_get
from problems.arithmetic.paging import (
    BLOCK_SIZES,
    MAX_NUM_SEQS_MAX,
    MIX_DEFAULT,
    MIX_HELP,
    VLLM_DEFAULT_BLOCK,
    VLLM_PAPER,
    paging,
)
from problems.arithmetic.units import (
    bytes_short,
    count_format,
    number_format,
    percent_format,
    rate_format,
    seconds_format,
)
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    Input,
    dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    whole_input,
)
from problems.plots import BarPlot, BarSeries

SLUG = "paging"
PREFIX = "p04-paging"
# Paging's batch within this factor of reservation's is "about as many sequences".
BATCH_CLOSE = 1.05
MAX_LEN_MAX = 1_000_000


def memory_plot(*, inputs: dict, result) -> BarPlot:
    """Tokens' worth of memory per running sequence: in use, slack in the last block or the
    reservation's unused end, and space reserved for tokens not yet written."""
    rows = result["policies"]
    return BarPlot(
        title="What one running sequence holds, on average, under each policy",
        categories=tuple(r["short"] for r in rows), value_title="tokens' worth of KV memory",
        mode="stack",
        series=(BarSeries("tokens in use", tuple(r["used"] for r in rows)),
                BarSeries("reserved for tokens not yet written", tuple(r["future"] for r in rows)),
                BarSeries("never used (past the final length, or a block's empty end)",
                          tuple(r["internal"] for r in rows))),
        columns=(("held in use", tuple(percent_format(r["utilization"]) for r in rows)),
                 ("bytes held", tuple(bytes_short(r["held_bytes"]) for r in rows))))


def throughput_plot(*, inputs: dict, result) -> BarPlot:
    rows = result["policies"]
    return BarPlot(
        title="Batch and decode throughput each policy allows (roofline floor)",
        categories=tuple(r["short"] for r in rows), value_title="output tokens/s",
        series=(BarSeries("tokens/s", tuple(r["tokens_per_second"] for r in rows),
                          labels=tuple(f"{number_format(r['throughput_ratio'])}×" for r in rows)),),
        columns=(("batch", tuple(f"{r['batch']:,}" for r in rows)),
                 ("step", tuple(f"{seconds_format(r['step_seconds'])} ({r['bound']})"
                                for r in rows))))


INPUTS = (
    model_input(initial="llama-3-8b", api="llama-3-8b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    Input("mix", "text", "Workload (share:prompt:output, …)", initial=MIX_DEFAULT,
          api=MIX_DEFAULT, help=MIX_HELP),
    whole_input("max_len", "Maximum length a request may reach", unit="tokens", initial=8_192,
                api=8_192, maximum=MAX_LEN_MAX,
                help="What a contiguous allocator must reserve for every request (prompt plus "
                     "max_tokens, at most the model's window)."),
    dtype_input(),
    kv_dtype_input(),
    *memory_inputs(),
    Input("max_num_seqs", "whole", "Most sequences running at once (max_num_seqs)",
          initial=None, api=None, required=False, unit="sequences",
          blank="vLLM's default for the GPU", maximum=MAX_NUM_SEQS_MAX,
          help="vLLM runs at most 1,024 sequences on a GPU of 70 GiB or more other than the "
               "A100, 256 elsewhere, whatever room the cache leaves."),
    mfu_input(initial=1.0, api=1.0),
)

CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="Paged blocks against contiguous reservation",
    explanation=("For a mix of requests, the memory a running sequence holds under contiguous "
                 "reservation (at the maximum length, or at its exact final length) and under "
                 "paged blocks, the batch each allows beside the weights, and the decode "
                 "throughput at that batch as a roofline floor."),
    inputs=INPUTS,
    compute=lambda **k: paging(**k),
    plots=lambda *, inputs, result: (memory_plot(inputs=inputs, result=result),
                                     throughput_plot(inputs=inputs, result=result)),
    order=22,
    api_path="/paging",
    api_summary="Paged KV blocks against contiguous reservation: memory, batch, throughput",
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


def context(*, request: HttpRequest) -> dict:
    """The figures problem 4's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request)
    m = model_get(inputs["model"])
    g = gpu_get(inputs["gpu"])
    kv_d = kv_dtype_get(inputs["kv_dtype"], model=m)
    rows = {p["id"]: p for p in r["policies"]}

    def row_text(p: dict) -> dict:
        return {"name": p["name"], "short": p["short"],
                "held_text": f"{number_format(p['held'])} tokens' worth",
                "held_bytes_text": bytes_short(p["held_bytes"]),
                "utilization_text": percent_format(p["utilization"]),
                "waste_text": percent_format(p["waste"]),
                "batch_text": count_format(p["batch"], "sequence"),
                "step_text": f"{seconds_format(p['step_seconds'])} ({p['bound']}-bound)",
                "tps_text": rate_format(p["tokens_per_second"], "tokens/s"),
                "ratio_text": f"{number_format(p['throughput_ratio'])}×"}

    classes = [{"share_text": percent_format(c["share"]), "prompt": f"{c['prompt']:,}",
                "output": f"{c['output']:,}"} for c in r["classes"]]
    return {
        "calculator_slug": SLUG, "calculator_prefix": PREFIX, "inputs_valid": valid,
        "model_name": m.name,
        # "course-lm's heads", not "course-lm (this course's demo model)'s heads".
        "model_possessive": f"{m.name.split(' (')[0]}'s",
        "gpu_name": g.name,
        # The format's short name for prose ("an FP8 (E4M3) cache", "an FP32 cache"), with
        # the article its spoken first letter takes, as problem 3 writes it.
        "kv_name": (kv_d.kv_label.split(" (")[0].removesuffix(" KV cache") if kv_d.kv_name
                    else kv_d.kv_label),
        "kv_article": "an" if kv_d.kv_label[:1] in "AEFHILMNORSX" else "a",
        # The scheduler's cap holds paging to the same batch as reserving the maximum: paging
        # then frees memory but adds no sequence, so no throughput.
        "batch_same": float(r["paged_batch_over_max"]) == 1,
        # Requests that nearly reach the maximum leave little reservation to reclaim: paging
        # then seats about as many (a mix of 8,000-token prompts under an 8,192 maximum: 1.02×).
        "batch_close": 1 < float(r["paged_batch_over_max"]) < BATCH_CLOSE,
        "throughput_flat": number_format(float(r["paged_over_max"])) == "1",
        "classes": classes, "max_len": f"{inputs['max_len']:,}",
        "per_token_text": bytes_short(float(r["kv_bytes_per_token"])),
        "free_text": bytes_short(float(r["free_bytes"])),
        "used_text": f"{number_format(float(r['used_tokens']))}",
        "rows": [row_text(p) for p in r["policies"]],
        "p": {k.replace("-", "_"): row_text(v) for k, v in rows.items()},
        "batch_ratio_text": f"{number_format(float(r['paged_batch_over_max']))}×",
        "throughput_ratio_text": f"{number_format(float(r['paged_over_max']))}×",
        "block_sizes_text": ", ".join(str(b) for b in BLOCK_SIZES),
        "vllm_block": VLLM_DEFAULT_BLOCK,
        "block_spread_text": percent_format(rows["paged-32"]["waste"]
                                            - rows["paged-8"]["waste"]),
        "max_num_seqs_text": count_format(r["max_num_seqs"], "sequence"),
        "paged_capped": r["paged_capped"],
        "throughput_keeps_up": abs(float(r["paged_over_max"])
                                   / float(r["paged_batch_over_max"]) - 1) <= 0.05,
        "paged_fits_text": count_format(rows["paged-16"]["fits_batch"], "sequence"),
        "paged_compute_bound": r["paged_bound"] == "compute",
        "base_compute_bound": r["base_bound"] == "compute",
        "mfu_percent": percent_format(inputs["mfu"]),
        # A longer maximum than the default needs a model whose window allows it.
        "window_allows_longer": m.context > inputs["max_len"],
        "long_window_name": model_get("llama-3.1-8b").name,
        "long_window": f"{model_get('llama-3.1-8b').context:,}",
        "paper": {k: (percent_format(v) if v < 1 else f"{number_format(v)}×")
                  for k, v in VLLM_PAPER.items() if k != "source"},
    }


SOURCES: list[tuple[str, str]] = [
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (SOSP 2023): Fig. 2's KV memory usage (20.4–38.2% token states in earlier "
     "systems, 96.3% in vLLM), 2–4× throughput, memory sharing in parallel sampling and beam "
     "search", "https://arxiv.org/abs/2309.06180"),
    ("vLLM blog, 'vLLM: Easy, Fast, and Cheap LLM Serving with PagedAttention' (60–80% of "
     "memory wasted in existing systems, under 4% in vLLM)", "https://blog.vllm.ai/2023/06/20/vllm.html"),
    ("Yu et al., 'Orca: A Distributed Serving System for Transformer-Based Generative Models' "
     "(OSDI 2022)", "https://www.usenix.org/conference/osdi22/presentation/yu"),
    ("vLLM engine arguments (--block-size; 16 tokens by default on CUDA)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("Prabhu et al., 'vAttention: Dynamic Memory Management for Serving LLMs without "
     "PagedAttention' (ASPLOS 2025: contiguous virtual memory, physical pages mapped on demand "
     "with CUDA's virtual-memory APIs, unmodified attention kernels)",
     "https://arxiv.org/abs/2405.04437"),
    ("Zheng et al., 'SGLang: Efficient Execution of Structured Language Model Programs' "
     "(RadixAttention: prefixes shared at any token boundary in a radix tree)",
     "https://arxiv.org/abs/2312.07104"),
    ("vLLM pull request 10980, '[V1] V1 engine implements parallel sampling' (a request with "
     "n > 1 spawns n requests with n = 1; shared prompts through prefix caching)",
     "https://github.com/vllm-project/vllm/pull/10980"),
    ("vLLM docs, Optimization and Tuning: Preemption (in V1 the preemption mode is recompute, "
     "not swap)", "https://docs.vllm.ai/en/latest/configuration/optimization.html"),
    ("vLLM source, vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults: max_num_seqs "
     "defaults by GPU memory and kind)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/engine/arg_utils.py"),
    ("Meta Llama 3 8B config.json (the worked model)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
]
