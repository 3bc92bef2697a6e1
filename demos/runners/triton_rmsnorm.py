"""Demo `triton-rmsnorm` (problem 15): the engine's Triton RMSNorm on the learner's shape and
precision, checked against the engine's PyTorch RMSNorm; on a GPU worker also timed against
eager PyTorch and set beside the byte arithmetic's floors.

On a CPU worker the kernel runs in Triton's interpreter, which must be chosen before triton is
first imported, so the check runs in a child process started with TRITON_INTERPRET=1 (the
worker itself is left as it is). The interpreter executes the kernel with NumPy: its speed says
nothing about a GPU, so a CPU run reports parity only.

Events, in order: started, parity, timing (GPU workers only); the task then publishes finished
with this runner's summary (plots included), or cancelled.
"""

import json
import math
import subprocess
import sys
import time
from pathlib import Path

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

KERNEL_FILE = Path(__file__).resolve().parents[2] / "worker" / "engine" / "kernels" / "rmsnorm.py"
# The interpreter runs about a microsecond per element here: check at most this many elements
# on a CPU worker (the first rows of the learner's tensor).
INTERPRETER_ELEMENTS_MAX = 2**19
CHILD_TIMEOUT_S = 60.0
DTYPE_CHOICES = (("bf16", "BF16"), ("fp16", "FP16"), ("fp32", "FP32"))
# Float formats' machine epsilon (the spacing of values in [1, 2)), for tolerances in ulps.
EPSILON = {"bf16": 2.0**-7, "fp16": 2.0**-10, "fp32": 2.0**-23}


def rows_checked(*, tokens: int, hidden: int, device: str) -> int:
    """Rows the parity check runs: every row on a GPU, a bounded number in the interpreter."""
    if device.startswith("cuda"):
        return tokens
    return max(1, min(tokens, INTERPRETER_ELEMENTS_MAX // hidden))


PARAMS = ParamSchema(
    specs=(
        ParamSpec("tokens", "Tokens (rows)", "whole", 64, minimum=1, maximum=8192,
                  help="A decode step of B sequences has B rows; a prefill chunk thousands. "
                       "A CPU worker checks at most 524,288 elements (the first rows)."),
        ParamSpec("hidden", "Hidden size", "whole", 896, minimum=16, maximum=16384,
                  help="896 (Qwen2.5-0.5B) is not a power of two: the mask switches off the "
                       "block's last 128 lanes."),
        ParamSpec("dtype", "Format", "choice", "bf16", choices=DTYPE_CHOICES),
        ParamSpec("residual", "Fuse the residual add", "bool", True),
    ),
    # Work for the queue's cap: the rows a CPU worker checks.
    work=lambda v: rows_checked(tokens=v["tokens"], hidden=v["hidden"], device="cpu"),
)

# What each line of the kernel does, keyed by a piece of the line (not its number, so editing
# the kernel cannot move a note onto the wrong line). tests/demos/runners checks each is found.
KERNEL_NOTES = (
    ("@triton.jit", "compile this function as a Triton kernel (or run it in the interpreter)"),
    ("def row_start(", "where a row begins, in elements (a helper the kernel inlines)"),
    ("row.to(tl.int64) * row_stride", "in 64 bits: in int32, row × stride wraps past 2³¹ "
     "elements, 131,072 tokens of a 16,384-wide model"),
    ("HAS_RESIDUAL: tl.constexpr", "known at compile time: one kernel with the add, one without"),
    ("BLOCK_SIZE: tl.constexpr", "the block width, a power of two fixed at compile time"),
    ("tl.program_id(0)", "which row this program handles: one program per token"),
    ("tl.arange(0, BLOCK_SIZE)", "a power-of-two block of column offsets"),
    ("mask = cols < n_cols", "lanes past the row's end do nothing"),
    ("x = tl.load(", "read the row once; masked lanes read 0, so they add nothing to the sum; "
     "widen to FP32"),
    ("r = tl.load(", "fused add: read the residual row too"),
    ("s = (x + r.to(tl.float32))", "add in FP32, round to the activations' format as the eager "
     "add does"),
    ("tl.store(residual_out_ptr", "write the new residual stream (the next layer needs it)"),
    ("x = s.to(tl.float32)", "normalise the rounded sum"),
    ("tl.sum(x * x, axis=0) / n_cols", "sum of squares across the block, divided by the real "
     "width, not the block's"),
    ("tl.rsqrt(mean_sq + eps)", "1 / √(mean + ε): ε keeps an all-zero row finite"),
    ("w = tl.load(weight_ptr", "the weight vector, shared by every row (it stays in cache)"),
    ("x_hat = (x * rstd)", "scale, and round as Hugging Face does before the weight multiply"),
    ("y = x_hat.to(tl.float32) * w", "apply the weight in FP32"),
    ("tl.store(out_ptr", "write the row once, in the output's format"),
)


def _kernel_span(text: str) -> tuple[int, int]:
    """From the first @triton.jit (the row-offset helper) to the end of the kernel itself."""
    return text.index("@triton.jit"), text.index("\n\n\n", text.index("def rmsnorm_kernel"))


def kernel_source_annotated(path: Path = KERNEL_FILE) -> list[dict]:
    """The kernel function's source lines from the engine's file (read as text, never
    imported), each with its note or "" (plain Python: the web process calls it)."""
    text = path.read_text()
    start, end = _kernel_span(text)
    lines = []
    for line in text[start:end].splitlines():
        note = next((n for anchor, n in KERNEL_NOTES if anchor in line), "")
        lines.append({"code": line, "note": note})
    return lines


def kernel_notes_missing(path: Path = KERNEL_FILE) -> list[str]:
    """Anchors of KERNEL_NOTES that no line of the kernel contains (should be none)."""
    text = path.read_text()
    start, end = _kernel_span(text)
    source = text[start:end]
    return [anchor for anchor, _ in KERNEL_NOTES if anchor not in source]


def demo_template_context() -> dict:
    return {"kernel_lines": kernel_source_annotated(),
            "kernel_path": "worker/engine/kernels/rmsnorm.py"}


def _parity_in_child(arguments: dict, ctx: RunContext) -> dict:
    """The parity check in a child process under Triton's interpreter; cancel and the run's
    time limit end the child."""
    from worker.engine.kernels import interpreter_env

    child = subprocess.Popen(
        [sys.executable, "-m", "worker.engine.kernels.parity", json.dumps(arguments)],
        cwd=str(KERNEL_FILE.parents[3]), env=interpreter_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    try:
        while child.poll() is None:
            if "all" in ctx.cancels():
                raise RunCancelled(ctx.cancels()["all"], summary={"parity": None})
            ctx.check_time()
            if time.monotonic() > deadline:
                raise RuntimeError("the interpreter's parity check took too long")
            time.sleep(0.05)
        out, err = child.communicate()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode != 0:
        raise RuntimeError(f"the parity check failed: {err.strip().splitlines()[-1:]}")
    return json.loads(out.strip().splitlines()[-1])


def _ulps_tolerance(parity: dict) -> float:
    """The relative tolerance in ulps of the format (rtol ÷ ε), for the plot's line."""
    return parity["tolerance"]["rtol"] / EPSILON[parity["dtype"]]


def _plots(*, parity: dict, timing: dict | None, estimate: dict | None) -> list[dict]:
    from problems.plots import BarPlot, BarSeries, Line, plot_figure, plot_table

    pairs = (("kernel_vs_engine", "Triton against the engine"),
             ("kernel_vs_fp64", "Triton against FP64"),
             ("engine_vs_fp64", "Engine (PyTorch) against FP64"))
    error = BarPlot(
        title=f"Largest error in ulps of {parity['dtype'].upper()}, against the tests' tolerance",
        categories=tuple(label for _, label in pairs), value_title="ulps",
        series=(BarSeries("measured", tuple(parity[key]["max_ulps"] for key, _ in pairs)),),
        lines=(Line(_ulps_tolerance(parity), "tolerance (rtol ÷ ε)"),))
    plots = [error]
    if timing and estimate:
        names = (("hf_eager", "Hugging Face eager"), ("engine_eager", "Engine eager"),
                 ("triton", "Triton (fused)"))
        plots.append(BarPlot(
            title="Time per call on this GPU against the byte floor",
            categories=tuple(label for _, label in names), value_title="µs",
            series=(BarSeries("measured", tuple(timing[f"{n}_us"] for n, _ in names)),
                    BarSeries("floor: bytes ÷ measured bandwidth",
                              (estimate["eager_us"], math.nan, estimate["fused_us"]),
                              outline=True)),
            columns=(("kernels per call", tuple(str(timing[f"{n}_kernels"]) for n, _ in names)),
                     ("kernels in the byte model",
                      (str(estimate["eager_kernels"]), "", "1")))))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in plots]


def triton_rmsnorm_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Check (and on a GPU, time) the engine's Triton RMSNorm on the learner's shape."""
    from demos.estimate import rmsnorm_estimate

    device = str(machine.get("device", "cpu"))
    tokens, hidden = int(params["tokens"]), int(params["hidden"])
    dtype, residual = str(params["dtype"]), bool(params["residual"])
    on_gpu = device.startswith("cuda")
    rows = rows_checked(tokens=tokens, hidden=hidden, device=device)
    mode = "compiled" if on_gpu else "interpreter"
    ctx.publish("started", {"device": device, "mode": mode, "tokens": tokens, "hidden": hidden,
                            "dtype": dtype, "residual": residual, "rows_checked": rows})
    arguments = {"tokens": rows, "hidden": hidden, "dtype": dtype, "residual": residual}
    if on_gpu:
        from worker.engine.kernels.parity import rmsnorm_parity

        parity = rmsnorm_parity(**arguments, device="cuda")
    else:
        parity = _parity_in_child(arguments, ctx)
    parity = {**parity, "tolerance_ulps": _ulps_tolerance(parity)}
    ctx.publish("parity", parity)
    timing = estimate = None
    if on_gpu:
        ctx.check_time()
        from worker.engine.kernels.timing import rmsnorm_timings_on_gpu

        timing = rmsnorm_timings_on_gpu(tokens=tokens, hidden=hidden, dtype=dtype,
                                        residual=residual)
        estimate = rmsnorm_estimate(tokens=tokens, hidden=hidden, dtype=dtype,
                                    residual=residual, timing=timing, machine=machine)
        ctx.publish("timing", {**timing, **estimate})
    note = _note(parity=parity, timing=timing, estimate=estimate, tokens=tokens)
    return RunOutcome(state="finished", summary={
        "device": device, "mode": parity["mode"], "tokens": tokens, "hidden": hidden,
        "dtype": dtype, "residual": residual, "rows_checked": rows, "parity": parity,
        "timing": timing, "estimate": estimate,
        "timing_absent_reason": None if on_gpu else (
            "the interpreter runs the kernel in NumPy on the CPU; its speed says nothing about "
            "a GPU"),
        "plots": _plots(parity=parity, timing=timing, estimate=estimate),
        "note": note,
    })


def _note(*, parity: dict, timing: dict | None, estimate: dict | None, tokens: int) -> str:
    """Why what was measured differs from what the arithmetic or the tolerance predicts."""
    ulps = parity["kernel_vs_engine"]["max_ulps"]
    verdict = "within" if parity["passed"] else "outside"
    text = (f"The kernel differs from the engine's PyTorch RMSNorm by at most {ulps:.3g} ulps "
            f"of {parity['dtype'].upper()}, {verdict} the tolerance the tests use "
            f"(about {parity['tolerance_ulps']:.3g} ulps). Both round where Hugging Face "
            "rounds; what remains comes from summing the squares in another order")
    if parity["mode"] == "interpreter" and parity["dtype"] == "bf16":
        text += (", and from Triton's interpreter, which converts FP32 to BF16 by truncating "
                 "where a GPU rounds to nearest")
    kernel_exact = parity["kernel_vs_fp64"]["max_ulps"]
    engine_exact = parity["engine_vs_fp64"]["max_ulps"]
    if abs(kernel_exact - engine_exact) <= 1:
        text += (f". Against FP64 the two are about as far off ({kernel_exact:.3g} and "
                 f"{engine_exact:.3g} ulps), the comparison that matters.")
    else:
        text += (f". Against FP64 the kernel is off by {kernel_exact:.3g} ulps and PyTorch by "
                 f"{engine_exact:.3g}: the gap is the interpreter's truncation, not the kernel's "
                 "arithmetic." if parity["mode"] == "interpreter" and parity["dtype"] == "bf16"
                 else f". Against FP64 the kernel is off by {kernel_exact:.3g} ulps and PyTorch "
                 f"by {engine_exact:.3g}.")
    if timing is None or estimate is None:
        return text + (" Timing is left out: the interpreter runs the kernel with NumPy on this "
                       "CPU, so its speed says nothing about a GPU.")
    ratio = timing["triton_us"] / estimate["fused_us"] if estimate["fused_us"] else math.nan
    eager_ratio = timing["hf_eager_us"] / estimate["eager_us"] if estimate["eager_us"] else 0
    launch_bound = estimate["fused_us"] < 5
    text += (f" The fused kernel ran at {estimate['achieved_gbps']:.3g} GB/s, "
             f"{ratio:.3g}× its byte floor; Hugging Face's eager code took {eager_ratio:.3g}× "
             "its own")
    if estimate["intermediate_mb"] <= estimate["l2_mb"]:
        text += (f", helped by the L2 cache, which holds its {estimate['intermediate_mb']:.3g} MB "
                 "FP32 intermediate")
    text += ". " + (f"At {tokens:,} rows each launch costs more than its bytes, so fused and "
                    "eager are closer than their bytes suggest and the saving is launches."
                    if launch_bound else
                    f"At {tokens:,} rows the bytes dominate, so the times follow the byte "
                    "counts.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("triton-rmsnorm", triton_rmsnorm_run, engine="own", params=PARAMS,
                context=demo_template_context)
