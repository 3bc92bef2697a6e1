"""The rates the engine demos divide by for their floors: each is the fastest this worker was
seen to go, and says how it was measured."""

import pytest

import worker.engine.kernels.cpu as cpu_mod
from worker.demo_engine import machine_measure


class FakeClock:
    """time.perf_counter for machine_measure: each reading moves on by a millisecond, and the
    fakes below move it on by the time they stand for, so which rate wins is decided by the
    test, not by how busy the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 1e-3
        return self.now


class FakeKernels:
    """Stands in for the compiled kernels: a matmul that takes `seconds` of the fake clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def pack(self, weight):  # noqa: ANN001, ANN201
        return weight

    def linear(self, x, packed, threads):  # noqa: ANN001, ANN201
        self.clock.now += self.seconds
        return x


@pytest.mark.parametrize(("kernel_s", "mm_s", "winner"),
                         [(0.0, 0.01, "the engine's own kernel"),
                          (0.05, 0.0, "(torch.mm) on this machine")])
def test_the_matmul_rate_is_the_faster_of_torch_and_the_engines_kernel(monkeypatch, kernel_s,
                                                                       mm_s, winner) -> None:
    import torch

    import worker.hardware as hardware

    clock = FakeClock()
    real_mm = torch.mm

    def timed_mm(a, b):  # noqa: ANN001, ANN202
        clock.now += mm_s
        return real_mm(a, b)

    monkeypatch.setattr(hardware, "time", clock)  # machine_measure times with its fastest_seconds
    monkeypatch.setattr(torch, "mm", timed_mm)
    monkeypatch.setattr(cpu_mod, "cpu_kernels", lambda: FakeKernels(clock, kernel_s))
    machine = machine_measure(matmul_size=128, copy_bytes=2**20, repeats=2)
    assert winner in machine["matmul_how"]
    fastest = 1e-3 + min(kernel_s, mm_s)  # one clock tick plus the faster fake's time
    assert machine["matmul_flops_per_s"] == pytest.approx(2 * 128**3 / fastest)


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
