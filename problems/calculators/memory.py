"""Calculators for memory: parameters and weight bytes, the KV cache, the largest batch that
fits. Each is declared once: its inputs feed both the form and the JSON API."""

from problems.arithmetic import memory
from problems.arithmetic.catalog import model_get
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.steps import Result
from problems.arithmetic.units import GB
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    dtype_input,
    embedding_dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    model_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series, series_values, sweep_whole

TP_CHOICES_MAX = memory.TP_MAX


def _context_sweep(model: str, tokens: int) -> list[int]:
    # From a short chat to the model's full window.
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


def batch_max_plot(*, inputs: dict, result: Result) -> Plot:
    xs = _context_sweep(inputs["model"], inputs["context_tokens"])
    batches = series_values(
        xs, lambda x: memory.batch_max(**{**inputs, "context_tokens": x})["batch"])
    name = ("Largest batch" if result["fits"]
            else "Largest batch: 0, the weights and reserve alone do not fit")
    return Plot(title="Largest batch vs context length", x_title="Context per sequence (tokens)",
                y_title="Sequences that fit", x_log=True, y_log=bool(result["fits"]),
                series=(Series(name, tuple(xs), batches, markers=True),),
                marks=(Mark(inputs["context_tokens"], "your context"),))


calculator_register(Calculator(
    slug="params", title="Parameters from the architecture",
    explanation="Add up the embedding, each layer's attention and feed-forward matrices, and "
                "the output head. For an MoE model, count every expert for memory and only the "
                "routed few (plus shared ones) for the work each token does.",
    inputs=(model_input(initial="deepseek-v3"),),
    compute=memory.params_count, order=5,
    api_path="/params", api_summary="Parameters from the architecture"))

calculator_register(Calculator(
    slug="weights", title="Weight memory",
    explanation="Count the parameters from the architecture, then multiply by the bytes each "
                "one takes in the chosen format. Quantized checkpoints keep the embedding and "
                "output head in BF16. An MoE model must hold every expert, not only the ones a "
                "token uses.",
    inputs=(model_input(initial="llama-3-70b"), dtype_input(), embedding_dtype_input()),
    compute=memory.weights_bytes, order=10,
    api_path="/weights", api_summary="Weight bytes in a number format"))

calculator_register(Calculator(
    slug="kv-cache", title="KV cache size",
    explanation="Every token in context keeps a key and a value vector per KV head in every "
                "layer (for MLA, one compressed latent plus a small shared RoPE key instead). "
                "Multiply by context and by users. Under tensor parallelism each GPU holds its "
                "share of the KV heads, until there are more GPUs than heads and heads are "
                "copied. Contexts past the model's window are refused.",
    inputs=(
        model_input(initial="llama-3.1-70b"),
        whole_input("tokens", "Context per user", unit="tokens", initial=32_768,
                    maximum=TOKENS_MAX),
        whole_input("users", "Concurrent users", unit="sequences", initial=100, api=1,
                    maximum=USERS_MAX),
        kv_dtype_input(name="dtype", api=None),
        whole_input("tp", "Tensor-parallel GPUs", unit="GPUs", initial=1, api=1,
                    maximum=TP_CHOICES_MAX,
                    help="KV heads split across GPUs while there are enough of them; beyond "
                         "that each GPU keeps a copy."),
    ),
    compute=memory.kv_cache, plot=kv_cache_plot, order=20,
    api_path="/kv-cache", api_summary="KV cache bytes, per GPU under tensor parallelism"))

calculator_register(Calculator(
    slug="batch-max", title="Largest batch that fits",
    explanation="Of the memory the driver reports, the engine may use a share; out of it come "
                "the weights and a runtime reserve for activations and buffers, and what is "
                "left holds the KV cache. Dividing by one sequence's cache gives the most "
                "sequences that can run at once.",
    inputs=(
        model_input(),
        gpu_input(),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=8_192,
                    maximum=TOKENS_MAX),
        dtype_input(),
        kv_dtype_input(),
        whole_input("tp", "Tensor-parallel GPUs", unit="GPUs", initial=1, api=1,
                    maximum=TP_CHOICES_MAX),
        *memory_inputs(),
        embedding_dtype_input(),
    ),
    compute=memory.batch_max, plot=batch_max_plot, order=30,
    api_path="/batch-max", api_summary="Largest batch whose KV fits beside the weights"))
