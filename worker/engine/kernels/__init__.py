"""Custom kernels for the engine. Only worker processes import them.

`cpu.py` builds and loads `cpu_fused.c`, the C kernels that run the forward pass on a CPU
(packed matrix multiplies, fused RMSNorm, RoPE, decode attention and SwiGLU); `rmsnorm.py` is a
fused RMSNorm written in Triton, for CUDA. The rest of this docstring is about Triton.

Triton runs a kernel one of two ways: compiled for the GPU (CUDA present), or by its
interpreter, which executes the same kernel on the CPU with NumPy (TRITON_INTERPRET=1). Triton
reads that variable once, when it is first imported: its own library functions (tl.sum and
friends) are built for one mode or the other then, and setting the variable later leaves them
unusable ("Cannot call @triton.jit'd outside of the scope of a kernel"). So nothing here sets
it: a process that wants the interpreter is started with it (the kernel tests' subprocess, the
triton-rmsnorm demo's child process on a CPU worker), and every other process, the workers
included, is left as it was.
"""

import os


def triton_mode() -> str | None:
    """How Triton kernels run in this process: "compiled" (CUDA), "interpreter" (started with
    TRITON_INTERPRET=1), or None when they cannot run here (no triton, or a CPU without the
    interpreter)."""
    try:
        import triton
    except ImportError:
        return None
    if triton.knobs.runtime.interpret:
        return "interpreter"
    import torch

    return "compiled" if torch.cuda.is_available() else None


def interpreter_env() -> dict[str, str]:
    """The environment of a child process that runs Triton kernels in the interpreter."""
    return {**os.environ, "TRITON_INTERPRET": "1"}
