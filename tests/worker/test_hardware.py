"""Measuring the worker's roofline (worker/hardware.py), with tiny sizes."""

import pytest

from worker.hardware import hardware_measure, sweep_intensity


def test_sweep_intensity_worked_by_hand():
    """K = 4,096 in FP32: b = 1 → 33,554,432 ÷ (4 × 16,785,408) = 0.49976 FLOP/B; b = 256 →
    8,589,934,592 ÷ (4 × 18,874,368) = 113.78 FLOP/B."""
    assert sweep_intensity(batch=1, k=4096, bytes_per_value=4) == pytest.approx(0.49976,
                                                                               rel=1e-5)
    assert sweep_intensity(batch=256, k=4096, bytes_per_value=4) == pytest.approx(113.78,
                                                                                 rel=1e-4)


def test_a_tiny_measurement_has_every_field():
    m = hardware_measure(matmul_n=64, copy_bytes=2**20, sweep_k=256, batches=(1, 4, 16),
                         repeats=2)
    assert m["device"] == "cpu" and m["dtype"] == "float32" and m["threads"] >= 1
    assert m["peak_flops"] > 0 and m["copy_bytes_per_second"] > 0
    assert m["ridge"] == pytest.approx(m["peak_flops"] / m["copy_bytes_per_second"])
    assert [s["batch"] for s in m["sweep"]] == [1, 4, 16]
    for s in m["sweep"]:
        assert s["intensity"] == sweep_intensity(batch=s["batch"], k=256, bytes_per_value=4)
        assert s["predicted"] == min(m["peak_flops"], s["intensity"] * m["copy_bytes_per_second"])
        assert s["achieved"] > 0 and s["ratio"] == pytest.approx(s["achieved"] / s["predicted"])
