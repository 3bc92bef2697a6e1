"""The rates the engine demos divide by for their floors: each is the fastest this worker was
seen to go, and says how it was measured."""

import time

import pytest

import worker.engine.kernels.cpu as cpu_mod
from worker.demo_engine import machine_measure


class FakeKernels:
    """Stands in for the compiled kernels: a matmul that takes `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def pack(self, weight):  # noqa: ANN001, ANN201
        return weight

    def linear(self, x, packed, threads):  # noqa: ANN001, ANN201
        if self.seconds:
            time.sleep(self.seconds)
        return x


@pytest.mark.parametrize(("seconds", "winner"), [(0.0, "the engine's own kernel"),
                                                 (0.05, "(torch.mm) on this machine")])
def test_the_matmul_rate_is_the_faster_of_torch_and_the_engines_kernel(monkeypatch, seconds,
                                                                       winner) -> None:
    monkeypatch.setattr(cpu_mod, "cpu_kernels", lambda: FakeKernels(seconds))
    machine = machine_measure(matmul_size=128, copy_bytes=2**20, repeats=2)
    assert winner in machine["matmul_how"]
    if seconds:  # 2·128³ FLOPs can't take 50 ms on the torch side
        assert machine["matmul_flops_per_s"] > 2 * 128**3 / 0.05


def test_a_working_set_is_read_and_the_faster_of_read_and_copy_wins(monkeypatch) -> None:
    monkeypatch.setattr(cpu_mod, "cpu_kernels", lambda: None)
    plain = machine_measure(matmul_size=64, copy_bytes=2**20, repeats=2)
    assert plain["memory_how"] == "best of 2 copies of 1 MiB on this machine"
    assert "torch.mm" in plain["matmul_how"]
    measured = machine_measure(matmul_size=64, copy_bytes=2**20, working_set_bytes=4 * 2**20,
                               repeats=2)
    # Whichever was faster sets the rate, and the text names it (with the other's figure).
    assert ("reads of 4.2 MB (the model's weights)" in measured["memory_how"]
            or measured["memory_how"] == "best of 2 copies of 1 MiB on this machine")
    assert measured["memory_bytes_per_s"] > 0


def test_the_engines_kernel_is_timed_for_real_when_it_builds(monkeypatch) -> None:
    monkeypatch.setenv("ENGINE_CPU_KERNELS", "1")
    if cpu_mod.cpu_kernels() is None:
        pytest.skip("no C compiler here")
    machine = machine_measure(matmul_size=256, copy_bytes=2**20, repeats=3)
    assert machine["matmul_flops_per_s"] > 0 and "matmul" in machine["matmul_how"]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_keeps_the_copy_alone() -> None:
    """On a GPU the copy alone sets the bandwidth (the triton-rmsnorm floors are DRAM's)."""
    gpu = machine_measure(device="cuda", matmul_size=64, copy_bytes=2**20,
                          working_set_bytes=2**20, repeats=2)
    assert gpu["memory_how"] == "best of 2 copies of 1 MiB on this machine"
