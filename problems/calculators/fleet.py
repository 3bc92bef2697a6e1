"""Calculators for precision, large models and money: quantization, MoE memory and all-to-all
traffic, cost per million tokens, and capacity planning from daily users."""

from problems import arithmetic as a
from problems.arithmetic.cost import INPUT_THROUGHPUT_DEFAULT, PRICE_MAX, THROUGHPUT_MAX
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.moe import GPUS_MAX
from problems.arithmetic.steps import Result
from problems.arithmetic.units import GB, money_format, number_format, percent_format
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    Input,
    dtype_input,
    embedding_dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import (
    Mark,
    Plot,
    Series,
    series_fit_split,
    series_values,
    sweep_points,
    sweep_whole,
)

MS = 1e3  # seconds → milliseconds on plot axes
# An example for the prompt-throughput help: Llama 3 8B prefilling 1,000-token prompts on an
# H100 at 50% MFU, computed by the arithmetic rather than typed (about 35,000 tokens/s).
EXAMPLE_PREFILL_TOKENS = 1_000
EXAMPLE_PREFILL_MFU = 0.5
EXAMPLE_PREFILL_RATE = EXAMPLE_PREFILL_TOKENS / float(a.prefill(
    model="llama-3-8b", gpu="h100-sxm", prompt_tokens=EXAMPLE_PREFILL_TOKENS,
    mfu=EXAMPLE_PREFILL_MFU)["seconds"])


def _price_input() -> Input:
    return real_input("price_per_hour", "GPU price", unit="$ per GPU-hour", initial=None,
                      api=None, minimum=0.01, maximum=PRICE_MAX, required=False,
                      help="Leave blank for the catalog's assumed price (a round figure, not a "
                           "quote); put in your own.")


def quantization_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_whole(1, max(256, inputs["batch"]), count=16)
    points = [a.quantization(**{**inputs, "batch": x}) for x in xs]
    series = []
    for side, fits_key, key in (("from_dtype", "fits_before", "floor_seconds_before"),
                                ("to_dtype", "fits_after", "floor_seconds_after")):
        series.extend(series_fit_split(
            f"Weights in {a.dtype_get(inputs[side]).name}", xs,
            tuple(p[key] * MS for p in points), tuple(bool(p[fits_key]) for p in points)))
    return Plot(title="Decode floor vs batch, before and after", x_title="Batch (sequences)",
                y_title="Decode step floor (ms)", x_log=True, series=tuple(series),
                marks=(Mark(inputs["batch"], "your batch"),))


def moe_memory_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, inputs["gpus"]})

    def at(x: int) -> Result:
        return a.moe_memory(**{**inputs, "gpus": x})

    series = [Series("Tensor or pipeline parallel", tuple(xs), series_values(
                  xs, lambda x: at(x)["tp_bytes_per_gpu"] / GB), markers=True),
              Series("Expert parallel", tuple(xs), series_values(
                  xs, lambda x: at(x)["ep_bytes_per_gpu"] / GB), markers=True)]
    if inputs.get("gpu"):
        total = a.gpu_get(inputs["gpu"]).memory_total_bytes
        room = (total * inputs["memory_fraction"]) / GB - inputs["reserve_gb"]
        series.append(Series(f"Room for weights on one {a.gpu_get(inputs['gpu']).name}",
                             (xs[0], xs[-1]), (room, room), dash=True))
    # Splits the experts cannot take evenly are refused by the formula and left out.
    return Plot(title="Weights per GPU vs GPUs", x_title="GPUs", y_title="Weights per GPU (GB)",
                x_log=True, y_log=True, series=tuple(series),
                marks=(Mark(inputs["gpus"], "your GPUs"),))


def cost_plot(*, inputs: dict, result: Result) -> Plot:
    rate = inputs["tokens_per_second"]
    xs = sweep_points(max(rate / 30, 1.0), max(rate * 30, 100.0), count=25, log=True)
    name = f"{a.gpu_get(inputs['gpu']).name} at {money_format(result['price_per_hour'])}/h"

    def at(x: float) -> Result:
        return a.cost_per_million(**{**inputs, "tokens_per_second": x})

    return Plot(title="Cost per million output tokens vs output throughput",
                x_title="Output throughput per GPU (tokens/s)",
                y_title="Dollars per million output tokens", x_log=True, y_log=True,
                series=(Series(name, tuple(xs), series_values(
                    xs, lambda x: at(x)["dollars_per_million_tokens"])),),
                marks=(Mark(rate, "your throughput"),))


def capacity_plot(*, inputs: dict, result: Result) -> Plot:
    users = inputs["daily_users"]
    xs = sweep_whole(max(1, users // 100), users * 10, count=25)
    return Plot(title="GPUs needed at the peak vs daily users", x_title="Daily users",
                y_title="GPUs", x_log=True, y_log=True,
                series=(Series("GPUs at peak", tuple(xs), series_values(
                    xs, lambda x: a.capacity_plan(**{**inputs, "daily_users": x})["gpus"])),),
                marks=(Mark(users, "your users"),))


calculator_register(Calculator(
    slug="quantization", title="Quantization: memory and the decode floor",
    explanation="Fewer bits per weight means fewer bytes to hold and to read each decode step. "
                "The embedding and output head usually stay in BF16, and the KV cache keeps its "
                "own format, so at large batches and long contexts the gain on the floor "
                "shrinks. The floor is the larger of the reads and the matmuls at the format's "
                "peak: weight-only formats such as INT4 still multiply in BF16, so once a large "
                "batch makes the step compute-bound they save memory but no time. Each side "
                "says whether it fits the GPU with its KV and a reserve.",
    inputs=(
        model_input(initial="llama-3-70b"), gpu_input(initial="h200"),
        dtype_input(name="from_dtype", label="From format", api="bf16"),
        dtype_input(name="to_dtype", label="To format", initial="fp8", api=...),
        kv_dtype_input(),
        whole_input("batch", "Batch", unit="sequences", initial=1, api=1, maximum=USERS_MAX),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=2_000,
                    api=1, maximum=TOKENS_MAX),
        embedding_dtype_input(), *memory_inputs(),
    ),
    compute=a.quantization, plot=quantization_plot, order=120,
    api_path="/quantization", api_summary="Quantization: memory saved, decode floor, fit"))

calculator_register(Calculator(
    slug="moe-memory", title="MoE weights per GPU",
    explanation="Tensor and pipeline parallelism split every weight evenly; expert parallelism "
                "gives each GPU a share of the routed experts but a full copy of everything "
                "else. Every expert must be held somewhere, however few a token uses.",
    inputs=(
        model_input(initial="deepseek-v3"),
        whole_input("gpus", "GPUs", unit="GPUs", initial=8, maximum=GPUS_MAX),
        dtype_input(initial="fp8"),
        gpu_input(initial="h200", api=None, required=False,
                  blank="none (weights only, no fit check)",
                  help="Check each layout's weights plus the reserve against this GPU."),
        *memory_inputs(),
    ),
    compute=a.moe_memory, plot=moe_memory_plot, order=130,
    api_path="/moe-memory", api_summary="MoE weights per GPU under TP, PP and EP"))

calculator_register(Calculator(
    slug="moe-all-to-all", title="MoE all-to-all traffic",
    explanation="Under expert parallelism each token's hidden vector travels once to every "
                "other GPU that holds one of its experts, and one partial result comes back "
                "from each, in every MoE layer. Dispatching in FP8 halves the outbound half.",
    inputs=(
        model_input(initial="deepseek-v3"),
        whole_input("ep", "Expert-parallel GPUs", unit="GPUs", initial=8, maximum=GPUS_MAX),
        whole_input("tokens", "Tokens in the step", unit="tokens", initial=256, api=1,
                    maximum=USERS_MAX),
        dtype_input(label="Format of the activations sent back (combine)"),
        Input("dispatch_dtype", "dtype", "Format of the activations sent out (dispatch)",
              initial="fp8", api=None, required=False, blank="the same as combine",
              help="DeepSeek-V3 dispatches in FP8 and combines in BF16."),
    ),
    compute=a.moe_all_to_all, order=140,
    api_path="/moe-all-to-all", api_summary="MoE all-to-all bytes per token under EP"))

calculator_register(Calculator(
    slug="cost", title="Cost per million tokens",
    explanation="A GPU-hour's price divided by the tokens it produces in that hour, saying "
                "which tokens are counted: output only (input free), or input and output "
                "priced separately by the GPU time each takes. Throughput is the lever: "
                "doubling it halves the cost.",
    inputs=(
        gpu_input(),
        real_input("tokens_per_second", "Output throughput per GPU", unit="tokens/s",
                   initial=2_000, minimum=0.001, maximum=THROUGHPUT_MAX,
                   help="An assumption: measure your own engine's output tokens/s at the "
                        "latency you promise."),
        _price_input(),
        real_input("input_tokens_per_second", "Prompt throughput per GPU", unit="tokens/s",
                   initial=None, api=None, minimum=0.001, maximum=THROUGHPUT_MAX,
                   required=False,
                   help="Leave blank to charge everything to output tokens; give prefill's "
                        "tokens/s to price input and output separately."),
    ),
    compute=a.cost_per_million, plot=cost_plot, order=150,
    api_path="/cost", api_summary="Dollars per million tokens, naming the tokens counted"))

calculator_register(Calculator(
    slug="capacity", title="Capacity planning",
    explanation="From daily users to the busiest hour's requests, then to the GPU time each "
                "request takes for its prompt and its answer, to GPUs run below full load so "
                "queues stay short, their average utilisation, and a monthly bill, peak-sized "
                "all day or scaled with the load.",
    inputs=(
        whole_input("daily_users", "Daily users", unit="users", initial=1_000_000,
                    maximum=USERS_MAX * 10),
        real_input("requests_per_user", "Requests per user per day", unit="requests",
                   initial=10, minimum=0.001, maximum=1e5),
        whole_input("input_tokens", "Prompt per request", unit="tokens", initial=1_000, api=0,
                    minimum=0, maximum=TOKENS_MAX),
        whole_input("output_tokens", "Answer per request", unit="tokens", initial=500,
                    maximum=TOKENS_MAX),
        real_input("peak_to_average", "Peak-to-average traffic", unit="×", initial=3.0,
                   api=3.0, minimum=1.0, maximum=1e3),
        gpu_input(),
        real_input("tokens_per_second_per_gpu", "Output throughput per GPU", unit="tokens/s",
                   initial=2_000, minimum=0.001, maximum=THROUGHPUT_MAX,
                   help="An assumption: decode tokens/s one GPU sustains within your latency "
                        "targets."),
        real_input("input_tokens_per_second_per_gpu", "Prompt throughput per GPU",
                   unit="tokens/s", initial=INPUT_THROUGHPUT_DEFAULT,
                   api=INPUT_THROUGHPUT_DEFAULT, minimum=0.001, maximum=THROUGHPUT_MAX,
                   help="An assumption: prefill tokens/s one GPU sustains. Compute-bound, so "
                        "far above decode: Llama 3 8B on an H100 at "
                        f"{percent_format(EXAMPLE_PREFILL_MFU)} MFU prefills "
                        f"{EXAMPLE_PREFILL_TOKENS:,}-token prompts at about "
                        f"{number_format(round(EXAMPLE_PREFILL_RATE, -3))} tokens/s (the prefill "
                        "calculator's figure)."),
        real_input("target_utilization", "Target utilisation at peak", unit="fraction",
                   initial=0.7, api=0.7, minimum=0.01, maximum=1.0),
        _price_input(),
    ),
    compute=a.capacity_plan, plot=capacity_plot, order=160,
    api_path="/capacity", api_summary="Capacity plan: peak load, GPUs, utilisation, cost"))
