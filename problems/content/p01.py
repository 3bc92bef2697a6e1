"""Problem 1, from request to first token: the "for scale" calculator and the figures its prose
quotes, all computed at render time by problems/arithmetic.

The page's calculator (prefix `p1-scale`) and the prose read the same query, so when a learner
changes the model, GPU, precision or lengths, the numbers in the text follow the calculator.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.compute import peak_flops_get
from problems.arithmetic.request import request_for_scale, request_split
from problems.arithmetic.units import (
    bandwidth_format,
    flops_rate_format,
    number_format,
    percent_format,
)
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    CalculatorForm,
    dtype_field,
    gpu_field,
    model_field,
    real_field,
    whole_field,
)
from problems.plots import Mark, Plot, Series

SLUG = "request-for-scale"
PREFIX = "p1-scale"
PROMPT_TOKENS_MAX = 1_000_000
OUTPUT_TOKENS_MAX = 100_000


class RequestForScaleForm(CalculatorForm):
    model = model_field(initial="llama-3-8b")
    gpu = gpu_field(initial="h100-sxm")
    dtype = dtype_field(label="Precision (weights and KV cache)", initial="bf16")
    prompt_tokens = whole_field("Prompt", unit="tokens", initial=1_000, maximum=PROMPT_TOKENS_MAX)
    output_tokens = whole_field("Output", unit="tokens", initial=300, maximum=OUTPUT_TOKENS_MAX)
    mfu = real_field("Prefill MFU", unit="fraction of the dense peak", initial=0.5, maximum=1.0,
                     help_text="How much of the GPU's peak the prefill matmuls reach.")


def request_for_scale_plot(*, inputs: dict, result) -> Plot:
    """Prefill against the decode loop as the answer grows, with the learner's length marked."""
    tokens, prefill_seconds, decode_seconds = request_split(
        ttft_seconds=float(result["ttft_seconds"]),
        step_seconds=float(result["decode_step_seconds"]),
        output_tokens=inputs["output_tokens"])
    return Plot(
        title="Prefill against the decode loop as the answer grows",
        x_title="Output tokens",
        y_title="Time (s)",
        series=(Series("Prefill (time to first token)", tokens, prefill_seconds, dash=True),
                Series("Decode loop", tokens, decode_seconds)),
        marks=(Mark(float(inputs["output_tokens"]), "this answer"),),
    )


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="One request, for scale",
    explanation=("Prefill FLOPs and time, one decode step, the whole answer and the KV cache "
                 "the request holds, for one request alone on one GPU (no queue, no batch)."),
    form_class=RequestForScaleForm,
    compute=request_for_scale,
    plot=request_for_scale_plot,
    listed=False,
))

SOURCES: list[tuple[str, str]] = [
    ("Meta Llama 3 8B config.json (layers, heads, KV heads, head_dim)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense BF16 rate, HBM3 bandwidth)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("Kaplan et al., 'Scaling Laws for Neural Language Models' (about 2N FLOPs per token)",
     "https://arxiv.org/abs/2001.08361"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (KV blocks)", "https://arxiv.org/abs/2309.06180"),
    ("Yu et al., 'Orca: A Distributed Serving System for Transformer-Based Generative Models' "
     "(iteration-level scheduling)",
     "https://www.usenix.org/conference/osdi22/presentation/yu"),
    ("vLLM source: the V1 scheduler (admission waits for KV blocks)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/scheduler.py"),
    ("vLLM source: AsyncLLM.generate (abort when the client disconnects)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/async_llm.py"),
    ("vLLM source: incremental detokenizer and stop strings",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/detokenizer.py"),
    ("Hugging Face Transformers: chat templates",
     "https://huggingface.co/docs/transformers/main/en/chat_templating"),
    ("Holtzman et al., 'The Curious Case of Neural Text Degeneration' (top-p sampling)",
     "https://arxiv.org/abs/1904.09751"),
]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 1's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs, result = dict(state.form.cleaned_data), state.result
    else:
        # Bad input shows beside the calculator's field; the prose keeps the defaults.
        inputs = RequestForScaleForm(prefix=PREFIX).defaults()
        result = request_for_scale(**inputs)
    model, gpu = model_get(inputs["model"]), gpu_get(inputs["gpu"])
    dtype = dtype_get(inputs["dtype"])
    peak = peak_flops_get(gpu=gpu, dtype=dtype)
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_valid": state.result is not None,
        "model_name": model.name,
        "gpu_name": gpu.name,
        "dtype_name": dtype.name,
        "attention": model.attention,
        "heads": model.heads,
        "gqa_ratio": number_format(model.heads / model.kv_heads),
        "kv_expression": next(s.expression for s in result.steps
                              if s.label.startswith("KV bytes per token")),
        "layers": model.layers,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "dtype_bytes": number_format(dtype.bytes),
        "prompt_tokens": f"{inputs['prompt_tokens']:,}",
        "output_tokens": f"{inputs['output_tokens']:,}",
        "total_tokens": f"{inputs['prompt_tokens'] + inputs['output_tokens']:,}",
        "mfu_percent": percent_format(inputs["mfu"]),
        "peak_text": flops_rate_format(peak),
        "bandwidth_text": bandwidth_format(gpu.bandwidth_bytes_per_second),
        "memory_kind": gpu.memory_kind,
        "r": result.values,
    }
