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


def test_the_cuda_path_hands_each_norm_the_residual(tiny_models, monkeypatch) -> None:
    """Review P0607-19: on CUDA the layers added the residual in Python and called the kernel
    without it. The path CUDA takes (PyTorch's ops for everything but the norm: the fused CPU
    kernels switched off) now gives every RMSNorm but the first layer's input norm the pending
    residual, so the kernel's fused add does the add. With 2 layers that is 2 × 2 + 1 (the final
    norm) = 5 norm calls a forward pass, 4 of them with a residual; the logits still match
    transformers' op-by-op model to 1e-4 (the eager add rounds where the kernel rounds)."""
    from transformers import AutoModelForCausalLM

    from worker.engine import Engine
    from worker.engine.model_runner import BatchEntry

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")
    monkeypatch.setenv("ENGINE_TRITON", "0")
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=8)
    model = engine.runner.model
    calls: list[bool] = []
    real = RMSNorm.forward

    def recording(self, x, residual=None):  # noqa: ANN001, ANN202
        calls.append(residual is not None)
        return real(self, x, residual)

    monkeypatch.setattr(RMSNorm, "forward", recording)
    prompt = [5, 9, 11, 200, 17, 3, 44, 90]
    got = engine.runner.execute([BatchEntry(prompt, 0, list(range(8)), len(prompt))])
    layers = len(model.layers)
    assert layers == 2 and model.cpu_kernels is None
    assert calls == [False] + [True] * (2 * layers)
    reference = AutoModelForCausalLM.from_pretrained(tiny_models["llama"],
                                                     dtype=torch.float32).eval()
    with torch.no_grad():
        expected = reference(torch.tensor([prompt])).logits[0]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_the_fused_add_gives_the_eager_sum_and_its_norm() -> None:
    """RMSNorm.forward(x, residual) on PyTorch's ops returns (norm(x + r), x + r) with the sum
    rounded to the activation dtype first: in BF16, 1 + 2⁻⁹ rounds to 1 (7 mantissa bits), so a
    row of 1s plus a row of 2⁻⁹ sums to exactly 1s and normalises to the weight."""
    norm = RMSNorm(4, 0.0).to(torch.bfloat16)
    x = torch.ones(1, 4, dtype=torch.bfloat16)
    r = torch.full((1, 4), 2.0**-9, dtype=torch.bfloat16)
    y, s = norm.forward(x, r)
    assert torch.equal(s, torch.ones(1, 4, dtype=torch.bfloat16))
    assert torch.equal(y, torch.ones(1, 4, dtype=torch.bfloat16))
