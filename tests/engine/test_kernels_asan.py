"""The fused CPU kernels' tests again, against a build with AddressSanitizer: a read or write
past any buffer fails the run. Part of the normal pytest run (about a minute on two cores); skipped,
saying why, where the compiler cannot build with -fsanitize=address.

Python itself is not built with AddressSanitizer, so the child process preloads the compiler's
runtime (libasan) and loads the sanitized build through ENGINE_CPU_KERNELS_LIBRARY. A control
call that reads past its buffer on purpose shows that the sanitizer really watches the calls."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from worker.engine.kernels import cpu as cpu_mod

ROOT = Path(__file__).resolve().parents[2]
# The direct kernel tests, and the engines' agreement tests: the engine's forward pass calls
# the compiled functions directly, past the wrappers' checks (arguments prepared per step).
KERNEL_TESTS = ("matmul or add_rmsnorm or embed_packed or rope_store or attention or silu or "
                "indices or refuse or misread or engines_agree or layer_loop")


def _asan_build(tmp_path: Path) -> tuple[Path, str]:
    """The kernels compiled with the engine's first flag set plus AddressSanitizer, and the
    runtime library to preload; skips with the compiler's reason where it cannot."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)),
              None)
    if cc is None:
        pytest.skip("no C compiler on PATH: the engine runs PyTorch's ops")
    runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    if not os.path.isabs(runtime) or not os.path.exists(runtime):
        pytest.skip(f"{cc} has no AddressSanitizer runtime (libasan.so) to preload")
    library = tmp_path / "cpu_fused_asan.so"
    flags = [*cpu_mod.flag_sets()[0], "-O1", "-g", "-fsanitize=address",
             "-fno-omit-frame-pointer"]
    done = subprocess.run([cc, *flags, "-shared", "-o", str(library), str(cpu_mod.SOURCE),
                           "-lm"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"{cc} cannot build with -fsanitize=address: {done.stderr.strip()[-200:]}")
    return library, runtime


def _env(library: Path, runtime: str) -> dict[str, str]:
    return {**os.environ, "LD_PRELOAD": runtime, "ENGINE_CPU_KERNELS_LIBRARY": str(library),
            "ENGINE_CPU_KERNELS": "1",
            # Python's own allocations are never freed at exit: only errors count.
            "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1"}


@pytest.mark.slow
def test_the_kernel_tests_pass_under_addresssanitizer(tmp_path) -> None:
    library, runtime = _asan_build(tmp_path)
    env = _env(library, runtime)

    # The control: silu_mul told of 4 rows of a 2-row buffer reads past it.
    control = (
        "import torch\n"
        "from worker.engine.kernels import cpu\n"
        "k = cpu.cpu_kernels()\n"
        f"assert k.path.name == {library.name!r}, k.path\n"
        "x, out = torch.randn(2, 64), torch.empty(4, 32)\n"
        "k._lib.silu_mul(x.data_ptr(), 4, 32, out.data_ptr())\n"
    )
    caught = subprocess.run([sys.executable, "-c", control], capture_output=True, text=True,
                            timeout=300, env=env, cwd=ROOT)
    assert caught.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in caught.stderr, (
        caught.stderr[-2000:])

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/engine/test_cpu_kernels.py", "-k", KERNEL_TESTS],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    output = done.stdout[-3000:] + done.stderr[-3000:]
    assert "AddressSanitizer" not in done.stderr, output
    assert done.returncode == 0 and " passed" in done.stdout, output
