"""The engine's Triton kernels: when RMSNorm picks the kernel, and the kernels' own tests
(tests/engine/kernels/) run in a child process under Triton's interpreter, which must be chosen
before triton is first imported, so this process and every other test stay as they are."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from worker.engine.kernels import interpreter_env
from worker.engine.layers.norm import RMSNorm, triton_rmsnorm_wanted

ROOT = Path(__file__).resolve().parents[2]


def test_rmsnorm_on_a_cpu_keeps_pytorchs_ops(monkeypatch) -> None:
    monkeypatch.delenv("ENGINE_TRITON", raising=False)
    assert not triton_rmsnorm_wanted(torch.device("cpu"))
    norm = RMSNorm(8, 1e-6)
    x = torch.randn(3, 8)
    torch.testing.assert_close(norm.forward(x), norm.forward_eager(x), rtol=0, atol=0)
    assert norm.use_triton is False


def test_engine_triton_0_turns_the_kernel_off_even_on_cuda(monkeypatch) -> None:
    monkeypatch.setenv("ENGINE_TRITON", "0")
    assert not triton_rmsnorm_wanted(torch.device("cuda"))


def test_force_needs_somewhere_to_run(monkeypatch) -> None:
    """This process was not started with the interpreter: on a CPU-only machine even "force"
    cannot run the kernel, and RMSNorm stays on PyTorch's ops rather than failing."""
    monkeypatch.setenv("ENGINE_TRITON", "force")
    assert triton_rmsnorm_wanted(torch.device("cpu")) == torch.cuda.is_available()


@pytest.mark.slow
def test_the_kernel_tests_pass_in_triton_interpreter() -> None:
    env = {**interpreter_env(), "PYTHONPATH": str(ROOT)}
    env.pop("ENGINE_TRITON", None)
    # Bare pytest: the kernels import no Django and need neither Redis nor a database.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-o", "addopts=", "-p", "no:django",
         "-p", "no:cacheprovider", "tests/engine/kernels"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert os.environ.get("TRITON_INTERPRET") != "1"  # this process was left alone
