"""Bytes moved by RMSNorm and add + RMSNorm, eager (op by op) against fused (problem 15)."""

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.fusion import rmsnorm_fusion, rmsnorm_traffic_model

BW = 3.35e12


def test_bf16_at_4096_tokens_of_4096() -> None:
    """N = 4,096 × 4,096 = 16,777,216. Eager norm: 36 × N + 24 × 4,096 + 4,096 × 2 =
    603,979,776 + 98,304 + 8,192 = 604,086,272 B in 8 kernels; fused 4 × N + 8,192 =
    67,117,056 B (9.0005×). Eager add + norm: 6 × N + 604,086,272 = 704,749,568 B, 9 kernels;
    fused 8 × N + 8,192 = 134,225,920 B. At 3.35 TB/s: 180.3243, 20.03494, 210.3730 and
    40.06744 µs. A 32-layer pass: 604,086,272 + 64 × 704,749,568 = 45,708,058,624 B against
    67,117,056 + 64 × 134,225,920 = 8,657,575,936 B, saving 37,050,482,688 B = 11.05985 ms."""
    r = rmsnorm_fusion()
    assert (r["norm_eager_bytes"], r["norm_eager_kernels"]) == (604_086_272, 8)
    assert r["norm_fused_bytes"] == 67_117_056
    assert (r["add_eager_bytes"], r["add_eager_kernels"]) == (704_749_568, 9)
    assert r["add_fused_bytes"] == 134_225_920
    for key, micro in (("norm_eager", 180.3243), ("norm_fused", 20.03494),
                       ("add_eager", 210.3730), ("add_fused", 40.06744)):
        assert r[f"{key}_seconds"] == pytest.approx(micro * 1e-6, rel=1e-6)
        assert r[f"{key}_bound"] == "memory"
    assert r["pass_eager_bytes"] == 45_708_058_624
    assert r["pass_fused_bytes"] == 8_657_575_936
    assert r["pass_saved_seconds"] == pytest.approx(11.05985e-3, rel=1e-6)
    assert r["norm_ratio"] == pytest.approx(9.0005, abs=1e-4)
    assert r["add_ratio"] == pytest.approx(5.2505, abs=1e-4)
    assert (r["norms_per_pass"], r["adds_per_pass"]) == (65, 64)


def test_fp32_has_no_casts() -> None:
    """FP32: eager 28 × N + 24 × 4,096 + 4 × 4,096 = 469,762,048 + 98,304 + 16,384 = 469,876,736
    B in 6 kernels; fused 8 × N + 16,384 = 134,234,112 (3.5004×); add eager 12 × N + 469,876,736
    = 671,203,328 B in 7 kernels; add fused 16 × N + 16,384 = 268,451,840 (2.5003×)."""
    t = rmsnorm_traffic_model(tokens=4096, hidden=4096, value_bytes=4)
    assert (t["norm_eager_bytes"], t["norm_eager_kernels"]) == (469_876_736, 6)
    assert t["norm_fused_bytes"] == 134_234_112
    assert (t["add_eager_bytes"], t["add_eager_kernels"]) == (671_203_328, 7)
    assert t["add_fused_bytes"] == 268_451_840


def test_one_decode_token_takes_nanoseconds() -> None:
    """T = 1, H = 4,096, BF16: eager 36 × 4,096 + 24 + 8,192 = 155,672 B → 46.47 ns; fused
    16,384 + 8,192 = 24,576 B → 7.336 ns: far below any kernel's launch cost."""
    r = rmsnorm_fusion(tokens=1)
    assert r["norm_eager_bytes"] == 155_672 and r["norm_fused_bytes"] == 24_576
    assert r["norm_eager_seconds"] == pytest.approx(46.47e-9, rel=1e-3)
    assert r["norm_fused_seconds"] == pytest.approx(7.336e-9, rel=1e-3)


def test_the_norm_is_far_below_the_fp32_ridge() -> None:
    """4 FLOPs per 4 B in BF16 = 1 FLOP/B, per 8 B in FP32 = 0.5 FLOP/B, against the H100's 67
    TFLOP/s FP32 ÷ 3.35 TB/s = 20 FLOP/B."""
    assert rmsnorm_fusion()["intensity_flops_per_byte"] == 1
    fp32 = rmsnorm_fusion(dtype="fp32")
    assert fp32["intensity_flops_per_byte"] == 0.5
    assert fp32["ridge_flops_per_byte"] == pytest.approx(20)


@pytest.mark.parametrize("field, value", [("dtype", "int4"), ("tokens", 0),
                                          ("hidden_size", 65_537), ("hidden_size", 8),
                                          ("bandwidth_efficiency", 0)])
def test_bad_inputs_name_their_field(field, value) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        rmsnorm_fusion(**{field: value})
    assert error.value.field == field


def test_fusing_the_add_on_top_of_a_fused_norm_is_worth_a_fifth_not_a_doubling():
    """Review P0607-18 at the defaults (4,096 × 4,096 BF16 on an H100, 3.35 TB/s): N =
    16,777,216. Eager add + norm 210.37 µs; eager add (3 × 2 × N = 100,663,296 B) then fused norm
    (4 × N + 8,192 B of weight = 67,117,056 B) = 167,780,352 B ÷ 3.35e12 = 50.084 µs; both fused
    (8 × N + 8,192 = 134,225,920 B) = 40.067 µs. The add's fusion makes the pair 50.084 ÷ 40.067
    = 1.25× faster and raises the saving from 160.29 µs to 170.31 µs, by 6.25%: not the
    "doubles the win" the page said."""
    r = rmsnorm_fusion()
    assert r["add_split_bytes"] == 167_780_352 and r["add_split_kernels"] == 2
    assert r["add_split_seconds"] == pytest.approx(50.084e-6, rel=1e-4)
    assert r["add_fused_seconds"] == pytest.approx(40.067e-6, rel=1e-4)
    assert r["residual_split_speedup"] == pytest.approx(1.25, rel=1e-4)
    assert r["residual_extra_saving"] == pytest.approx(0.0625, abs=1e-3)


def test_the_intermediate_is_compared_with_each_gpus_own_cache() -> None:
    """4,096 × 4,096 FP32 values = 67,108,864 B (64 MiB), and each eager kernel reads one while
    it writes another, 128 MiB: over the H100's 50 MiB of L2 even alone; over the B200's 126.5
    MiB as a pair though one alone fits; within the MI300X's 256 MiB Infinity Cache (its 4 MiB
    L2 slices are private to each XCD); the H200's L2 is not in any source found, so no
    verdict."""
    from problems.arithmetic.catalog import gpu_get
    from problems.arithmetic.fusion import intermediate_cache_fit

    n = 4096 * 4096
    h100 = intermediate_cache_fit(gpu=gpu_get("h100-sxm"), elements=n)
    assert h100 == {"bytes": 67_108_864, "pair_bytes": 134_217_728, "cache_name": "L2",
                    "cache_bytes": 52_428_800, "fits": False, "alone_fits": False}
    b200 = intermediate_cache_fit(gpu=gpu_get("b200"), elements=n)
    assert (b200["fits"], b200["alone_fits"]) == (False, True)
    assert intermediate_cache_fit(gpu=gpu_get("b200"), elements=n // 2)["fits"] is True
    mi300x = intermediate_cache_fit(gpu=gpu_get("mi300x"), elements=n)
    assert (mi300x["cache_name"], mi300x["cache_bytes"], mi300x["fits"]) == (
        "Infinity Cache", 256 * 2**20, True)
    h200 = intermediate_cache_fit(gpu=gpu_get("h200"), elements=n)
    assert h200["fits"] is None and h200["alone_fits"] is None
