"""The roofline: ridge points from datasheets and decode intensity as batch grows."""

import pytest

from problems.arithmetic import ArithmeticInputError, roofline, roofline_batches, roofline_decode


def test_h100_ridge_from_the_datasheet_dense_rate() -> None:
    # H100 SXM datasheet: 1,979 TFLOPS BF16 with sparsity (989.5 dense), 3.35 TB/s.
    result = roofline(gpu="h100-sxm", dtype="bf16")
    assert result["peak_flops"] == 989.5e12
    assert result["ridge_flops_per_byte"] == pytest.approx(989.5e12 / 3.35e12)
    assert round(result["ridge_flops_per_byte"]) == 295


def test_a100_ridge() -> None:
    # A100 80GB SXM datasheet: 312 TFLOPS BF16 dense, 2,039 GB/s → about 153 FLOP/byte.
    result = roofline(gpu="a100-80gb-sxm", dtype="bf16")
    assert round(result["ridge_flops_per_byte"]) == 153


def test_fp4_exists_only_on_blackwell() -> None:
    # HGX B200: 18 PFLOPS FP4 with sparsity per GPU, 9 dense. Elsewhere NVFP4 runs
    # weight-only, at the BF16 rate; so does FP8 on an A100 (W8A16 through FP8 Marlin).
    assert roofline(gpu="b200", dtype="nvfp4")["peak_flops"] == 9e15
    assert roofline(gpu="h100-sxm", dtype="nvfp4")["peak_flops"] == 989.5e12
    assert roofline(gpu="a100-80gb-sxm", dtype="fp8")["peak_flops"] == 312e12
    with pytest.raises(ArithmeticInputError):
        roofline(gpu="a100-80gb-sxm", dtype="fp3")


def test_decode_intensity_is_about_the_batch_size_at_short_context() -> None:
    # 2 FLOPs per parameter per sequence over 2 bytes per parameter: intensity ≈ batch.
    for batch in (1, 8, 64):
        result = roofline_decode(model="llama-3-8b", gpu="h100-sxm", batch=batch)
        assert result["intensity_flops_per_byte"] == pytest.approx(batch, rel=0.01)
        assert result["bound"] == "memory"


def test_batches_cross_the_ridge_between_256_and_512() -> None:
    result = roofline_batches(model="llama-3-8b", gpu="h100-sxm")
    assert result["first_compute_bound_batch"] == 512
    assert result["intensities"] == sorted(result["intensities"])
