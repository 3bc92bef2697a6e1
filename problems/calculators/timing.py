"""Calculators for time on one GPU: prefill, a decode step and a whole answer, the roofline; the
roofline's API-only formulas; and the home page's stopping distance as an API endpoint."""

from problems import arithmetic as a
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX, count_check
from problems.arithmetic.reaction import LATENCY_MS_MAX, SPEED_KMH_MAX, reaction_distance
from problems.arithmetic.steps import Result
from problems.calculators.registry import Calculator, calculator_register, result_compose
from problems.forms import (
    Input,
    bandwidth_input,
    dtype_input,
    embedding_dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import (
    Mark,
    Plot,
    Series,
    series_fit_split,
    sweep_points,
    sweep_whole,
)

MS = 1e3  # seconds → milliseconds on plot axes
TERA = 1e12


def prefill_plot(*, inputs: dict, result: Result) -> Plot:
    top = max(inputs["prompt_tokens"], a.model_get(inputs["model"]).context)
    xs = sweep_whole(min(16, inputs["prompt_tokens"]), top, count=24)
    points = [_safe(a.prefill, {**inputs, "prompt_tokens": x}) for x in xs]
    fits = tuple(bool(p and p["fits"]) for p in points)

    def values(key: str) -> tuple[float, ...]:
        return tuple(p[key] * MS if p else float("nan") for p in points)

    marks = [Mark(inputs["prompt_tokens"], "your prompt")]
    if result["crossover_tokens"]:
        marks.append(Mark(result["crossover_tokens"], "compute-bound from here"))
    return Plot(
        title="Prefill time vs prompt length", x_title="Prompt (tokens)",
        y_title="Prefill time (ms)", x_log=True, y_log=True,
        series=(*series_fit_split("Prefill time: max(compute, memory)", xs, values("seconds"),
                                  fits),
                Series("Compute time", tuple(xs), values("compute_seconds"), dash=True),
                Series("Memory time (weights read once)", tuple(xs), values("memory_seconds"),
                       dash=True)),
        marks=tuple(marks))


def _safe(formula, inputs: dict):
    """The formula's result, or None where it refuses these inputs (dropped from the plot)."""
    try:
        return formula(**inputs)
    except (ArithmeticError, ValueError):
        return None


def decode_plot(*, inputs: dict, result: Result) -> Plot:
    largest = int(result["largest_batch"])
    top = max(inputs["batch"], min(512, max(largest, 1) * 2))
    xs = sweep_whole(1, max(top, 2), count=20)
    points = [_safe(a.decode, {**inputs, "batch": x}) for x in xs]
    fits = tuple(bool(p and p["fits"]) for p in points)

    def values(read) -> tuple[float, ...]:
        return tuple(read(p) * MS if p else float("nan") for p in points)

    marks = [Mark(inputs["batch"], "your batch")]
    if largest:
        marks.append(Mark(largest, "memory full"))
    return Plot(
        title="Decode step time vs batch (dashed beyond the largest batch that fits)",
        x_title="Batch (sequences)", y_title="Time per decode step (ms)", x_log=True,
        series=(*series_fit_split("Step time", xs, values(lambda p: p["step_seconds"]), fits),
                Series("Reading the weights once", tuple(xs),
                       values(lambda p: p["weights_floor_seconds"]), dash=True),
                Series("Reading the KV cache", tuple(xs),
                       values(lambda p: p["memory_seconds"] - p["weights_floor_seconds"]),
                       dash=True),
                Series("Compute time", tuple(xs), values(lambda p: p["compute_seconds"]),
                       dash=True)),
        marks=tuple(marks))


def roofline_compute(*, gpu: str, dtype: str, model: str, batch: int, context_tokens: int,
                     kv_dtype: str | None = None) -> Result:
    # roofline_decode's steps already state the peak, bandwidth and ridge; roofline adds the
    # two rates the plot's roof needs as values only.
    return result_compose(
        a.roofline_decode(model=model, gpu=gpu, batch=batch, context_tokens=context_tokens,
                          dtype=dtype, kv_dtype=kv_dtype),
        values=a.roofline(gpu=gpu, dtype=dtype).values)


def roofline_plot(*, inputs: dict, result: Result) -> Plot:
    peak = result["peak_flops"]
    bandwidth = result["bandwidth_bytes_per_second"]
    ridge = result["ridge_flops_per_byte"]
    intensities = sweep_points(ridge / 300, ridge * 30, count=40, log=True)
    candidates = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, inputs["batch"]})
    largest = a.batch_max(model=inputs["model"], gpu=inputs["gpu"], dtype=inputs["dtype"],
                          kv_dtype=inputs.get("kv_dtype"),
                          context_tokens=inputs["context_tokens"])["batch"]
    batches = tuple(b for b in candidates if b <= largest) or (1,)
    sweep = a.roofline_batches(model=inputs["model"], gpu=inputs["gpu"], batches=batches,
                               context_tokens=inputs["context_tokens"], dtype=inputs["dtype"],
                               kv_dtype=inputs.get("kv_dtype"))
    decode_x = tuple(sweep["intensities"])
    fits_note = (f"batch {batches[0]} to {batches[-1]:,} (memory is full beyond {largest:,})"
                 if largest else "no batch fits in memory")
    return Plot(
        title="Roofline: attainable compute vs arithmetic intensity",
        x_title="Arithmetic intensity (FLOP/byte)", y_title="Attainable (TFLOP/s)",
        x_log=True, y_log=True,
        series=(
            # The roof: bandwidth × intensity below the ridge, the peak above it.
            Series("Roof", tuple(intensities),
                   tuple(min(peak, bandwidth * i) / TERA for i in intensities)),
            Series(f"Decode, {fits_note}", decode_x if largest else (),
                   tuple(min(peak, bandwidth * i) / TERA for i in decode_x) if largest else (),
                   markers=True),
        ),
        marks=(Mark(ridge, "ridge point"),
               Mark(result["intensity_flops_per_byte"], f"batch {inputs['batch']:,}")))


def roofline_batches_compute(*, model: str, gpu: str, batches: str, context_tokens: int,
                             dtype: str, kv_dtype: str | None) -> Result:
    """`batches` is a comma-separated list of batch sizes (at most 64 of them)."""
    try:
        sizes = tuple(int(part) for part in batches.split(",") if part.strip())
    except ValueError as exc:
        raise ArithmeticInputError(
            field="batches", message="give whole numbers separated by commas"
        ) from exc
    for size in sizes:
        count_check(size, field="batches", maximum=USERS_MAX)
    return a.roofline_batches(model=model, gpu=gpu, batches=sizes, context_tokens=context_tokens,
                              dtype=dtype, kv_dtype=kv_dtype)


calculator_register(Calculator(
    slug="prefill", title="Prefill time",
    explanation="Prefill runs the prompt through the model in as few passes as the step budget "
                "allows (one here): about two FLOPs per non-embedding parameter per token, the "
                "output head once for the last position, plus attention, which grows with the "
                "square of the prompt. Its time is the larger of that compute at the MFU reached "
                "and one read of the weights at the bandwidth reached: short prompts are "
                "memory-bound, long ones compute-bound.",
    inputs=(
        model_input(), gpu_input(),
        whole_input("prompt_tokens", "Prompt length", unit="tokens", initial=1_000,
                    maximum=TOKENS_MAX),
        dtype_input(), mfu_input(), bandwidth_input(), kv_dtype_input(),
        *memory_inputs(), embedding_dtype_input(),
    ),
    compute=a.prefill, plot=prefill_plot, order=40,
    api_path="/prefill", api_summary="Prefill FLOPs and time: max(compute, weight reads)"))

DECODE_INPUTS = (
    model_input(), gpu_input(),
    whole_input("batch", "Batch", unit="sequences", initial=1, api=1, maximum=USERS_MAX),
    whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                api=1, maximum=TOKENS_MAX,
                help="Tokens already in each sequence's KV cache when the step runs."),
    whole_input("output_tokens", "Answer length", unit="tokens", initial=300, api=1,
                maximum=TOKENS_MAX,
                help="The first comes from prefill; the rest take one step each."),
    dtype_input(), kv_dtype_input(), bandwidth_input(), mfu_input(initial=1.0),
    *memory_inputs(), embedding_dtype_input(),
)

calculator_register(Calculator(
    slug="decode", title="Decode step and a whole answer",
    explanation="Each decode step reads the weights it uses (every layer and the output head; "
                "the embedding is only gathered from) and every sequence's KV cache to produce "
                "one token per sequence, so at small batches its time is bytes read ÷ "
                "bandwidth. Batching shares the weight reads until compute takes over, unless "
                "the KV reads, which grow with every sequence, keep it memory-bound. An answer "
                "of n tokens is one prefill and n − 1 steps.",
    inputs=DECODE_INPUTS,
    compute=a.decode, plot=decode_plot, order=50,
    api_path="/decode", api_summary="One decode step and a whole answer"))

calculator_register(Calculator(
    slug="roofline", title="The roofline",
    explanation="A kernel doing fewer FLOPs per byte than the ridge point waits on memory; more, "
                "and it waits on compute. Decode at batch 1 sits far left of the ridge; batching "
                "moves it right until memory is full or the KV reads hold it back.",
    inputs=(
        gpu_input(), dtype_input(label="Format of the matmuls"), model_input(),
        whole_input("batch", "Decode batch", unit="sequences", initial=8, maximum=USERS_MAX),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                    maximum=TOKENS_MAX),
        kv_dtype_input(),
    ),
    compute=roofline_compute, plot=roofline_plot, order=60))

calculator_register(Calculator(
    slug="roofline-ridge", title="Peak, bandwidth and ridge point",
    explanation="A GPU's dense peak for a format over its memory bandwidth.",
    inputs=(gpu_input(), dtype_input()),
    compute=a.roofline, listed=False, page=False,
    api_path="/roofline", api_summary="Peak, bandwidth and ridge point of a GPU"))

ROOFLINE_DECODE_INPUTS = (
    model_input(), gpu_input(),
    whole_input("batch", "Decode batch", unit="sequences", initial=1, api=1, maximum=USERS_MAX),
    whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1, api=1,
                maximum=TOKENS_MAX),
    dtype_input(), kv_dtype_input(),
)

calculator_register(Calculator(
    slug="roofline-decode", title="Decode intensity against the ridge",
    explanation="FLOPs per byte of one decode step, and the bound.",
    inputs=ROOFLINE_DECODE_INPUTS, compute=a.roofline_decode, listed=False, page=False,
    api_path="/roofline-decode", api_summary="Decode intensity against the ridge"))

calculator_register(Calculator(
    slug="roofline-batches", title="Decode intensity for each batch size",
    explanation="The decode step's intensity at several batch sizes.",
    inputs=(
        model_input(), gpu_input(),
        Input("batches", "text", "Batch sizes, comma-separated",
              initial="1,2,4,8,16,32,64,128,256,512", api="1,2,4,8,16,32,64,128,256,512",
              help="At most 64 batch sizes."),
        *ROOFLINE_DECODE_INPUTS[3:],
    ),
    compute=roofline_batches_compute, listed=False, page=False,
    api_path="/roofline-batches", api_summary="Decode intensity for each batch size"))

calculator_register(Calculator(
    slug="reaction", title="Distance travelled before reacting",
    explanation="Speed × inference latency: the home page's calculator, as an API endpoint.",
    inputs=(
        real_input("speed_kmh", "Speed", unit="km/h", initial=100, maximum=SPEED_KMH_MAX),
        real_input("latency_ms", "Inference latency", unit="ms", initial=300,
                   maximum=LATENCY_MS_MAX),
    ),
    compute=reaction_distance, listed=False, page=False,
    api_path="/reaction",
    api_summary="Distance a machine travels while its model thinks (speed × latency)"))
