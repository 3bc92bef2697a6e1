"""Calculators for memory: parameters and weight bytes, the KV cache, the largest batch that
fits."""

from problems.arithmetic import memory
from problems.arithmetic.catalog import model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.steps import Result
from problems.arithmetic.units import GB
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    CalculatorForm,
    dtype_field,
    gpu_field,
    model_field,
    real_field,
    whole_field,
)
from problems.plots import Mark, Plot, Series, sweep_whole

TP_CHOICES_MAX = memory.TP_MAX


class ParamsForm(CalculatorForm):
    model = model_field(initial="deepseek-v3")


def params_compute(*, model: str) -> Result:
    return memory.params_count(model=model)


class WeightsForm(CalculatorForm):
    model = model_field(initial="llama-3-70b")
    dtype = dtype_field()


def weights_compute(*, model: str, dtype: str) -> Result:
    return memory.weights_bytes(model=model, dtype=dtype)


class KvCacheForm(CalculatorForm):
    model = model_field(initial="llama-3-70b")
    tokens = whole_field("Context per user", unit="tokens", initial=32_768, maximum=TOKENS_MAX)
    users = whole_field("Concurrent users", unit="sequences", initial=100, maximum=USERS_MAX)
    dtype = dtype_field(label="KV cache format")
    tp = whole_field("Tensor-parallel GPUs", unit="GPUs", initial=1, maximum=TP_CHOICES_MAX,
                     help_text="KV heads split across GPUs while there are enough of them; "
                               "beyond that each GPU keeps a copy.")


def kv_cache_compute(*, model: str, tokens: int, users: int, dtype: str, tp: int) -> Result:
    return memory.kv_cache(model=model, tokens=tokens, users=users, dtype=dtype, tp=tp)


def _context_sweep(model: str, tokens: int) -> list[int]:
    # From a short chat to the model's full window (or the chosen length, if longer).
    top = max(model_get(model).context, tokens)
    return sweep_whole(min(512, tokens), top, count=20)


def kv_cache_plot(*, inputs: dict, result: Result) -> Plot:
    xs = _context_sweep(inputs["model"], inputs["tokens"])
    totals, per_gpu = [], []
    for x in xs:
        point = memory.kv_cache(model=inputs["model"], tokens=x, users=inputs["users"],
                                dtype=inputs["dtype"], tp=inputs["tp"])
        totals.append(point["total_bytes"] / GB)
        per_gpu.append(point["total_bytes_per_gpu"] / GB)
    series = [Series(f"All {inputs['users']:,} users, in total", tuple(xs), tuple(totals))]
    if inputs["tp"] > 1:
        series.append(Series("On each GPU", tuple(xs), tuple(per_gpu), dash=True))
    return Plot(title="KV cache vs context length", x_title="Context per user (tokens)",
                y_title="KV cache (GB)", series=tuple(series), x_log=True,
                marks=(Mark(inputs["tokens"], "your context"),))


class BatchMaxForm(CalculatorForm):
    model = model_field(initial="llama-3-8b")
    gpu = gpu_field()
    context_tokens = whole_field("Context per sequence", unit="tokens", initial=8_192,
                                 maximum=TOKENS_MAX)
    dtype = dtype_field()
    kv_dtype = dtype_field(label="KV cache format", initial="", required=False)
    tp = whole_field("Tensor-parallel GPUs", unit="GPUs", initial=1, maximum=TP_CHOICES_MAX)
    memory_fraction = real_field("Share of GPU memory the engine may use", unit="fraction",
                                 initial=0.9, minimum=0.01, maximum=1.0,
                                 help_text="vLLM's gpu_memory_utilization defaults to 0.9.")


def batch_max_compute(*, model: str, gpu: str, context_tokens: int, dtype: str, kv_dtype: str,
                      tp: int, memory_fraction: float) -> Result:
    return memory.batch_max(model=model, gpu=gpu, context_tokens=context_tokens, dtype=dtype,
                            kv_dtype=kv_dtype or None, tp=tp, memory_fraction=memory_fraction)


def batch_max_plot(*, inputs: dict, result: Result) -> Plot:
    xs = _context_sweep(inputs["model"], inputs["context_tokens"])
    batches = []
    for x in xs:
        try:
            batches.append(batch_max_compute(**{**inputs, "context_tokens": x})["batch"])
        except ArithmeticInputError:
            batches.append(float("nan"))
    return Plot(title="Largest batch vs context length", x_title="Context per sequence (tokens)",
                y_title="Sequences that fit", x_log=True, y_log=True,
                series=(Series("Largest batch", tuple(xs), tuple(batches), markers=True),),
                marks=(Mark(inputs["context_tokens"], "your context"),))


calculator_register(Calculator(
    slug="params", title="Parameters from the architecture",
    explanation="Add up the embedding, each layer's attention and feed-forward matrices, and "
                "the output head. For an MoE model, count every expert for memory and only the "
                "routed few (plus shared ones) for the work each token does.",
    form_class=ParamsForm, compute=params_compute, order=5))

calculator_register(Calculator(
    slug="weights", title="Weight memory",
    explanation="Count the parameters from the architecture, then multiply by the bytes each "
                "one takes in the chosen format. An MoE model must hold every expert, not only "
                "the ones a token uses.",
    form_class=WeightsForm, compute=weights_compute, order=10))

calculator_register(Calculator(
    slug="kv-cache", title="KV cache size",
    explanation="Every token in context keeps a key and a value vector per KV head in every "
                "layer (for MLA, one compressed latent plus a small shared RoPE key instead). "
                "Multiply by context and by users. Under tensor parallelism each GPU holds its "
                "share of the KV heads, until there are more GPUs than heads and heads are "
                "copied.",
    form_class=KvCacheForm, compute=kv_cache_compute, plot=kv_cache_plot, order=20))

calculator_register(Calculator(
    slug="batch-max", title="Largest batch that fits",
    explanation="What is left of GPU memory after the weights holds the KV cache; dividing it "
                "by one sequence's cache gives the most sequences that can run at once.",
    form_class=BatchMaxForm, compute=batch_max_compute, plot=batch_max_plot, order=30))
