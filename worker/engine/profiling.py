"""Named ranges around the engine's phases, for profilers.

    with phase("schedule"):
        plan = scheduler.schedule()

Each range is `engine.<name>`: a `torch.profiler.record_function` range while a PyTorch
profiler (or `torch.autograd.profiler.emit_nvtx`) is recording, so `torch.profiler` output and
its Chrome trace split a step into the engine's phases; and an NVTX range whenever CUDA is
present, so an `nsys profile --trace=cuda,nvtx` timeline of a GPU worker shows the same names
over the kernels they launched. The phases: schedule, prepare_inputs, forward, attention (once
per layer), sample, detokenize (once per sequence that gets text). With speculative decoding the
draft's and the target's passes are `forward` ranges too, while the acceptance sampling runs
inside the speculative step (speculative.py) and has no range of its own.

Outside a profile a range costs almost nothing: `record_function` goes through the operator
dispatcher (tens of microseconds a call on a loaded two-core machine, against a decode step of
about two milliseconds), so it is entered only while a profiler records; an NVTX push and pop
are a few hundred nanoseconds when no tool listens.
"""

import contextlib

import torch

PHASES = ("schedule", "prepare_inputs", "forward", "attention", "sample", "detokenize")
PREFIX = "engine."

_NOTHING = contextlib.nullcontext()
_nvtx: bool | None = None  # asked on first use, in the process that steps the engine


def nvtx_enabled() -> bool:
    """True when CUDA is present (counting devices does not initialise CUDA)."""
    global _nvtx
    if _nvtx is None:
        _nvtx = torch.cuda.is_available()
    return _nvtx


def phase(name: str) -> contextlib.AbstractContextManager:
    """The range `engine.<name>` around a block of the engine's work; a shared do-nothing
    context when no profiler records and there is no CUDA (the common case on CPU)."""
    recording = torch.autograd._profiler_enabled()
    nvtx = _nvtx if _nvtx is not None else nvtx_enabled()
    if not recording and not nvtx:
        return _NOTHING
    return _Range(PREFIX + name, recording=recording, nvtx=nvtx)


class _Range:
    __slots__ = ("name", "_record", "_nvtx")

    def __init__(self, name: str, *, recording: bool, nvtx: bool) -> None:
        self.name = name
        self._record = torch.profiler.record_function(name) if recording else None
        self._nvtx = nvtx

    def __enter__(self) -> "_Range":
        if self._record is not None:
            self._record.__enter__()
        if self._nvtx:
            torch.cuda.nvtx.range_push(self.name)
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        if self._nvtx:
            torch.cuda.nvtx.range_pop()
        if self._record is not None:
            self._record.__exit__(*exc)


def profiler_activities(*, cuda: bool) -> list:
    """What a profile of the engine records: the CPU, and the GPU's kernels when `cuda`."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def profiler_start(activities: list):  # noqa: ANN201
    """PyTorch's profiler over `activities` (a context manager; its events once it exits)."""
    return torch.profiler.profile(activities=activities, record_shapes=False, with_stack=False)


def profiler_range(name: str):  # noqa: ANN201
    """A named range in the profile being recorded (what `phase` adds only while recording)."""
    return torch.profiler.record_function(name)

