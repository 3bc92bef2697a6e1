"""Calculators for precision, large models and money: quantization, MoE memory and all-to-all
traffic, cost per million tokens, and capacity planning from daily users."""

from problems import arithmetic as a
from problems.arithmetic.cost import PRICE_MAX, THROUGHPUT_MAX
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.moe import GPUS_MAX
from problems.arithmetic.steps import Result
from problems.arithmetic.units import GB, money_format
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    CalculatorForm,
    dtype_field,
    gpu_field,
    model_field,
    real_field,
    whole_field,
)
from problems.plots import Mark, Plot, Series, series_values, sweep_points, sweep_whole

MS = 1e3  # seconds → milliseconds on plot axes


def _price_field():
    return real_field("GPU price", unit="$ per GPU-hour", initial=None, minimum=0.01,
                      maximum=PRICE_MAX, required=False,
                      help_text="Leave blank for the catalog's assumed price (a round figure, "
                                "not a quote); put in your own.")


class QuantizationForm(CalculatorForm):
    model = model_field(initial="llama-3-70b")
    gpu = gpu_field(initial="h200")
    from_dtype = dtype_field(label="From format")
    to_dtype = dtype_field(label="To format", initial="fp8")
    kv_dtype = dtype_field(label="KV cache format", initial="", required=False)
    batch = whole_field("Batch", unit="sequences", initial=1, maximum=USERS_MAX)
    context_tokens = whole_field("Context per sequence", unit="tokens", initial=2_000,
                                 maximum=TOKENS_MAX)


def quantization_compute(*, model: str, gpu: str, from_dtype: str, to_dtype: str, kv_dtype: str,
                         batch: int, context_tokens: int) -> Result:
    return a.quantization(model=model, gpu=gpu, from_dtype=from_dtype, to_dtype=to_dtype,
                          kv_dtype=kv_dtype or None, batch=batch, context_tokens=context_tokens)


def quantization_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_whole(1, max(256, inputs["batch"]), count=16)

    def at(x: int) -> Result:
        return quantization_compute(**{**inputs, "batch": x})

    return Plot(title="Decode floor vs batch, before and after", x_title="Batch (sequences)",
                y_title="Decode step floor (ms)", x_log=True,
                series=(Series(f"Weights in {a.dtype_get(inputs['from_dtype']).name}", tuple(xs),
                               series_values(xs, lambda x: at(x)["floor_seconds_before"] * MS)),
                        Series(f"Weights in {a.dtype_get(inputs['to_dtype']).name}", tuple(xs),
                               series_values(xs, lambda x: at(x)["floor_seconds_after"] * MS))),
                marks=(Mark(inputs["batch"], "your batch"),))


class MoeMemoryForm(CalculatorForm):
    model = model_field(initial="deepseek-v3")
    gpus = whole_field("GPUs", unit="GPUs", initial=8, maximum=GPUS_MAX)
    dtype = dtype_field(initial="fp8")


def moe_memory_compute(*, model: str, gpus: int, dtype: str) -> Result:
    return a.moe_memory(model=model, gpus=gpus, dtype=dtype)


def moe_memory_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, inputs["gpus"]})

    def at(x: int) -> Result:
        return moe_memory_compute(**{**inputs, "gpus": x})

    # Splits the experts cannot take evenly are refused by the formula and left out.
    return Plot(title="Weights per GPU vs GPUs", x_title="GPUs", y_title="Weights per GPU (GB)",
                x_log=True, y_log=True,
                series=(Series("Tensor or pipeline parallel", tuple(xs), series_values(
                            xs, lambda x: at(x)["tp_bytes_per_gpu"] / GB), markers=True),
                        Series("Expert parallel", tuple(xs), series_values(
                            xs, lambda x: at(x)["ep_bytes_per_gpu"] / GB), markers=True)),
                marks=(Mark(inputs["gpus"], "your GPUs"),))


class MoeAllToAllForm(CalculatorForm):
    model = model_field(initial="deepseek-v3")
    ep = whole_field("Expert-parallel GPUs", unit="GPUs", initial=8, maximum=GPUS_MAX)
    tokens = whole_field("Tokens in the step", unit="tokens", initial=256, maximum=USERS_MAX)
    dtype = dtype_field(label="Format of the activations sent")


def moe_all_to_all_compute(*, model: str, ep: int, tokens: int, dtype: str) -> Result:
    return a.moe_all_to_all(model=model, ep=ep, tokens=tokens, dtype=dtype)


class CostForm(CalculatorForm):
    gpu = gpu_field()
    tokens_per_second = real_field("Throughput per GPU", unit="tokens/s", initial=2_000,
                                   minimum=0.001, maximum=THROUGHPUT_MAX,
                                   help_text="An assumption: measure your own engine's output "
                                             "tokens/s at the latency you promise.")
    price_per_hour = _price_field()


def cost_compute(*, gpu: str, tokens_per_second: float, price_per_hour: float | None) -> Result:
    return a.cost_per_million(gpu=gpu, tokens_per_second=tokens_per_second,
                              price_per_hour=price_per_hour)


def cost_plot(*, inputs: dict, result: Result) -> Plot:
    rate = inputs["tokens_per_second"]
    xs = sweep_points(max(rate / 30, 1.0), max(rate * 30, 100.0), count=25, log=True)
    name = f"{a.gpu_get(inputs['gpu']).name} at {money_format(result['price_per_hour'])}/h"

    def at(x: float) -> Result:
        return cost_compute(**{**inputs, "tokens_per_second": x})

    return Plot(title="Cost vs throughput", x_title="Throughput per GPU (tokens/s)",
                y_title="Dollars per million tokens", x_log=True, y_log=True,
                series=(Series(name, tuple(xs), series_values(
                    xs, lambda x: at(x)["dollars_per_million_tokens"])),),
                marks=(Mark(rate, "your throughput"),))


class CapacityForm(CalculatorForm):
    daily_users = whole_field("Daily users", unit="users", initial=1_000_000,
                              maximum=USERS_MAX * 10)
    requests_per_user = real_field("Requests per user per day", unit="requests", initial=10,
                                   minimum=0.001, maximum=1e5)
    input_tokens = whole_field("Prompt per request", unit="tokens", initial=1_000, minimum=0,
                               maximum=TOKENS_MAX)
    output_tokens = whole_field("Answer per request", unit="tokens", initial=500,
                                maximum=TOKENS_MAX)
    peak_to_average = real_field("Peak-to-average traffic", unit="×", initial=3.0, minimum=1.0,
                                 maximum=1e3)
    gpu = gpu_field()
    tokens_per_second_per_gpu = real_field("Output throughput per GPU", unit="tokens/s",
                                           initial=2_000, minimum=0.001, maximum=THROUGHPUT_MAX,
                                           help_text="An assumption: what one GPU sustains "
                                                     "within your latency targets.")
    target_utilization = real_field("Target utilisation at peak", unit="fraction", initial=0.7,
                                    minimum=0.01, maximum=1.0)
    price_per_hour = _price_field()


def capacity_compute(**inputs: object) -> Result:
    return a.capacity_plan(**inputs)


def capacity_plot(*, inputs: dict, result: Result) -> Plot:
    users = inputs["daily_users"]
    xs = sweep_whole(max(1, users // 100), users * 10, count=25)
    return Plot(title="GPUs needed vs daily users", x_title="Daily users", y_title="GPUs",
                x_log=True, y_log=True,
                series=(Series("GPUs at peak", tuple(xs), series_values(
                    xs, lambda x: capacity_compute(**{**inputs, "daily_users": x})["gpus"])),),
                marks=(Mark(users, "your users"),))


calculator_register(Calculator(
    slug="quantization", title="Quantization: memory and the decode floor",
    explanation="Fewer bits per weight means fewer bytes to hold and to read each decode step. "
                "The KV cache keeps its own format, so at large batches and long contexts the "
                "gain on the floor shrinks.",
    form_class=QuantizationForm, compute=quantization_compute, plot=quantization_plot,
    order=120))

calculator_register(Calculator(
    slug="moe-memory", title="MoE weights per GPU",
    explanation="Tensor and pipeline parallelism split every weight evenly; expert parallelism "
                "gives each GPU a share of the routed experts but a full copy of everything "
                "else.",
    form_class=MoeMemoryForm, compute=moe_memory_compute, plot=moe_memory_plot, order=130))

calculator_register(Calculator(
    slug="moe-all-to-all", title="MoE all-to-all traffic",
    explanation="Under expert parallelism each token's hidden vector travels to the GPUs of "
                "its chosen experts and the results travel back, in every MoE layer.",
    form_class=MoeAllToAllForm, compute=moe_all_to_all_compute, order=140))

calculator_register(Calculator(
    slug="cost", title="Cost per million tokens",
    explanation="A GPU-hour's price divided by the tokens it produces in that hour. Throughput "
                "is the lever: doubling it halves the cost.",
    form_class=CostForm, compute=cost_compute, plot=cost_plot, order=150))

calculator_register(Calculator(
    slug="capacity", title="Capacity planning",
    explanation="From daily users to the busiest hour's requests and tokens per second, then "
                "to GPUs run below full load so queues stay short, and to a monthly bill.",
    form_class=CapacityForm, compute=capacity_compute, plot=capacity_plot, order=160))
