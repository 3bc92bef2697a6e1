"""Calculators for time on one GPU: prefill, a decode step and a whole answer, the roofline."""

from problems import arithmetic as a
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.steps import Result
from problems.calculators.registry import Calculator, calculator_register, result_compose
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
TERA = 1e12


def _efficiency_field(text: str, *, initial: float, help_text: str):
    return real_field(text, unit="fraction of peak", initial=initial, minimum=0.01, maximum=1.0,
                      help_text=help_text)


class PrefillForm(CalculatorForm):
    model = model_field()
    gpu = gpu_field()
    prompt_tokens = whole_field("Prompt length", unit="tokens", initial=1_000, maximum=TOKENS_MAX)
    dtype = dtype_field()
    mfu = _efficiency_field("Model FLOPs utilisation (MFU)", initial=0.5,
                            help_text="An assumption: the share of the dense tensor-core peak "
                                      "the prefill really reaches. Change it to test the answer.")


def prefill_compute(*, model: str, gpu: str, prompt_tokens: int, dtype: str, mfu: float) -> Result:
    return a.prefill(model=model, gpu=gpu, prompt_tokens=prompt_tokens, dtype=dtype, mfu=mfu)


def prefill_plot(*, inputs: dict, result: Result) -> Plot:
    top = max(inputs["prompt_tokens"], a.model_get(inputs["model"]).context)
    xs = sweep_whole(min(128, inputs["prompt_tokens"]), top, count=20)

    def at(x: int) -> Result:
        return prefill_compute(**{**inputs, "prompt_tokens": x})

    return Plot(
        title="Prefill time vs prompt length", x_title="Prompt (tokens)",
        y_title="Prefill time (ms)", x_log=True, y_log=True,
        series=(Series("Linear layers and attention", tuple(xs),
                       series_values(xs, lambda x: at(x)["seconds"] * MS)),
                Series("Linear layers alone", tuple(xs),
                       series_values(xs, lambda x: at(x)["linear_seconds"] * MS), dash=True)),
        marks=(Mark(inputs["prompt_tokens"], "your prompt"),))


class DecodeForm(CalculatorForm):
    model = model_field()
    gpu = gpu_field()
    batch = whole_field("Batch", unit="sequences", initial=1, maximum=USERS_MAX)
    context_tokens = whole_field("Context per sequence", unit="tokens", initial=1_000,
                                 maximum=TOKENS_MAX,
                                 help_text="Tokens already in each sequence's KV cache.")
    output_tokens = whole_field("Answer length", unit="tokens", initial=300, maximum=TOKENS_MAX)
    dtype = dtype_field()
    kv_dtype = dtype_field(label="KV cache format", initial="", required=False)
    bandwidth_efficiency = _efficiency_field(
        "Bandwidth efficiency", initial=1.0,
        help_text="An assumption: the share of the datasheet's memory bandwidth a step "
                  "achieves. 1 gives the floor; real kernels fall short of it.")


def decode_compute(*, model: str, gpu: str, batch: int, context_tokens: int, output_tokens: int,
                   dtype: str, kv_dtype: str, bandwidth_efficiency: float) -> Result:
    return a.decode(model=model, gpu=gpu, batch=batch, context_tokens=context_tokens,
                    output_tokens=output_tokens, dtype=dtype, kv_dtype=kv_dtype or None,
                    bandwidth_efficiency=bandwidth_efficiency)


def decode_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_whole(1, max(512, inputs["batch"]), count=20)

    def at(x: int) -> Result:
        return decode_compute(**{**inputs, "batch": x})

    return Plot(
        title="Decode step time vs batch", x_title="Batch (sequences)",
        y_title="Time per decode step (ms)", x_log=True,
        series=(Series("Step time", tuple(xs),
                       series_values(xs, lambda x: at(x)["step_seconds"] * MS)),
                Series("Floor: reading the weights once", tuple(xs),
                       series_values(xs, lambda x: at(x)["weights_floor_seconds"] * MS), dash=True),
                Series("Compute time", tuple(xs),
                       series_values(xs, lambda x: at(x)["compute_seconds"] * MS), dash=True)),
        marks=(Mark(inputs["batch"], "your batch"),))


class RooflineForm(CalculatorForm):
    gpu = gpu_field()
    dtype = dtype_field(label="Format of the matmuls")
    model = model_field()
    batch = whole_field("Decode batch", unit="sequences", initial=8, maximum=USERS_MAX)
    context_tokens = whole_field("Context per sequence", unit="tokens", initial=1_000,
                                 maximum=TOKENS_MAX)


def roofline_compute(*, gpu: str, dtype: str, model: str, batch: int,
                     context_tokens: int) -> Result:
    # roofline_decode's steps already state the peak, bandwidth and ridge; roofline adds the
    # two rates the plot's roof needs as values only.
    return result_compose(
        a.roofline_decode(model=model, gpu=gpu, batch=batch, context_tokens=context_tokens,
                          dtype=dtype),
        values=a.roofline(gpu=gpu, dtype=dtype).values)


def roofline_plot(*, inputs: dict, result: Result) -> Plot:
    peak = result["peak_flops"]
    bandwidth = result["bandwidth_bytes_per_second"]
    ridge = result["ridge_flops_per_byte"]
    intensities = sweep_points(ridge / 300, ridge * 30, count=40, log=True)
    batches = tuple(sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, inputs["batch"]}))
    sweep = a.roofline_batches(model=inputs["model"], gpu=inputs["gpu"], batches=batches,
                               context_tokens=inputs["context_tokens"], dtype=inputs["dtype"])
    decode_x = tuple(sweep["intensities"])
    return Plot(
        title="Roofline: attainable compute vs arithmetic intensity",
        x_title="Arithmetic intensity (FLOP/byte)", y_title="Attainable (TFLOP/s)",
        x_log=True, y_log=True,
        series=(
            # The roof: bandwidth × intensity below the ridge, the peak above it.
            Series("Roof", tuple(intensities),
                   tuple(min(peak, bandwidth * i) / TERA for i in intensities)),
            Series(f"Decode, batch {batches[0]} to {batches[-1]:,}", decode_x,
                   tuple(min(peak, bandwidth * i) / TERA for i in decode_x), markers=True),
        ),
        marks=(Mark(ridge, "ridge point"),
               Mark(result["intensity_flops_per_byte"], f"batch {inputs['batch']:,}")))


calculator_register(Calculator(
    slug="prefill", title="Prefill time",
    explanation="Prefill runs the whole prompt through the model in one pass: about two FLOPs "
                "per parameter per token, plus attention, which grows with the square of the "
                "prompt. Divide by the GPU's dense peak times the MFU actually reached.",
    form_class=PrefillForm, compute=prefill_compute, plot=prefill_plot, order=40))

calculator_register(Calculator(
    slug="decode", title="Decode step and a whole answer",
    explanation="Each decode step reads every weight and every sequence's KV cache from memory "
                "to produce one token per sequence, so at small batches its time is bytes read "
                "÷ bandwidth. Batching shares the weight reads across sequences until compute "
                "takes over.",
    form_class=DecodeForm, compute=decode_compute, plot=decode_plot, order=50))

calculator_register(Calculator(
    slug="roofline", title="The roofline",
    explanation="A kernel doing fewer FLOPs per byte than the ridge point waits on memory; more, "
                "and it waits on compute. Decode at batch 1 sits far left of the ridge; batching "
                "moves it right.",
    form_class=RooflineForm, compute=roofline_compute, plot=roofline_plot, order=60))
