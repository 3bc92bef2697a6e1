"""The reference codecs of problems/arithmetic/formats.py against values worked by hand."""

import math

import pytest

from problems.arithmetic.formats import (
    E2M1_VALUES,
    bf16_round,
    e2m1_decode,
    e2m1_encode,
    e4m3_decode,
    e4m3_encode,
    fp8_channel_encode,
    int4_group_encode,
    int8_channel_encode,
    matrix_encode,
    mxfp4_encode,
    nvfp4_encode,
    pack_nibbles,
    predicted_squared_error,
    quantized_bytes_shapes,
)

# course-lm's 42 linear matrices, (out, in): q, k, v, o, gate, up, down in each of 6 layers.
COURSE_LM_SHAPES = [(256, 256), (128, 256), (128, 256), (256, 256), (688, 256), (688, 256),
                    (256, 688)] * 6


def test_int8_one_row_with_exact_halves():
    """amax 0.9921875 = 127 × 2⁻⁷, so scale 2⁻⁷; w ÷ scale = [127, 1.5, 0.5, −3.5, −64, 38.4]
    rounds half to even to [127, 2, 0, −4, −64, 38]."""
    row = [0.9921875, 0.01171875, 0.00390625, -0.02734375, -0.5, 0.3]
    out = int8_channel_encode(row)
    assert out["scale"] == 2**-7
    assert out["codes"] == [127, 2, 0, -4, -64, 38]
    assert out["values"] == [0.9921875, 0.015625, 0.0, -0.03125, -0.5, 0.296875]


def test_rounding_noise_prediction_of_the_int8_row():
    """Predicted: sqrt(6 × (2⁻⁷)² ÷ 12 ÷ Σw²) with Σw² = 1.3253363 → 0.0047986. Measured:
    sqrt((3 × 2⁻¹⁶ + 0.003125²) ÷ 1.3253363) → 0.0064736."""
    row = [0.9921875, 0.01171875, 0.00390625, -0.02734375, -0.5, 0.3]
    norm = sum(w * w for w in row)
    assert norm == pytest.approx(1.3253363, rel=1e-7)
    predicted = math.sqrt(predicted_squared_error([row], format="int8") / norm)
    assert predicted == pytest.approx(0.0047986, rel=1e-4)
    read = int8_channel_encode(row)["values"]
    measured = math.sqrt(sum((a - b) ** 2 for a, b in zip(row, read, strict=True)) / norm)
    assert measured == pytest.approx(0.0064736, rel=1e-4)


def test_fp8_one_row():
    """amax 1.75 → scale 1.75 ÷ 448 = 2⁻⁸; w ÷ scale = [448, −168, 22.4, 0.01, 3.5, −0.256]:
    448 (0x7E); −168 ties between 160 (mantissa 010) and 176 (011) and goes to the even 160
    (0xF2); 22.4 → 22 (0x5B); 0.01 is subnormal, 5 × 2⁻⁹ (0x05); 3.5 (0x46); −0.25 (0xA8)."""
    out = fp8_channel_encode([1.75, -0.65625, 0.0875, 0.0000390625, 0.013671875, -0.001])
    assert out["scale"] == 2**-8
    assert out["bits"] == [0x7E, 0xF2, 0x5B, 0x05, 0x46, 0xA8]
    assert out["values"] == [1.75, -0.625, 0.0859375, 5 * 2**-17, 0.013671875, -0.0009765625]


def test_e4m3_saturates_rounds_ties_to_even_and_round_trips_every_pattern():
    """464 (the tie between 448 and 480) and anything larger saturate at 448 (0x7E), never NaN;
    2⁻¹⁰ ties between 0 and 2⁻⁹ and goes to 0; 3 × 2⁻¹⁰ ties between 2⁻⁹ and 2⁻⁸ and goes to the
    even 2⁻⁸; every finite pattern decodes and re-encodes to itself."""
    for value in (464.0, 479.0, 1e6):
        assert e4m3_encode(value) == 0x7E
    assert e4m3_encode(-1e6) == 0xFE
    assert e4m3_encode(2**-10) == 0x00
    assert e4m3_encode(3 * 2**-10) == 0x02
    for bits in [*range(0x00, 0x7F), *range(0x80, 0xFF)]:
        assert e4m3_encode(e4m3_decode(bits)) == bits
    assert math.isnan(e4m3_decode(0x7F)) and math.isnan(e4m3_decode(0xFF))
    assert e4m3_decode(0x7E) == 448 and e4m3_decode(0x08) == 2**-6 and e4m3_decode(0x01) == 2**-9


def test_int4_group_exact():
    """max − min = 0.9375 → scale 0.0625 (exact in FP16); zero = −round(−6) = 6; w ÷ scale =
    [−6, −2, 0, 1, 2.5, 4, 7, 9] → 2.5 rounds to 2 (half to even) → codes [0, 4, 6, 7, 8, 10,
    13, 15]; packed first code low: 0x40, 0x76, 0xA8, 0xFD."""
    out = int4_group_encode([-0.375, -0.125, 0, 0.0625, 0.15625, 0.25, 0.4375, 0.5625])
    assert (out["scale"], out["zero"]) == (0.0625, 6)
    assert out["codes"] == [0, 4, 6, 7, 8, 10, 13, 15]
    assert out["values"] == [-0.375, -0.125, 0, 0.0625, 0.125, 0.25, 0.4375, 0.5625]
    assert pack_nibbles(out["codes"]) == bytes([0x40, 0x76, 0xA8, 0xFD])


def test_int4_group_with_rounded_scale_and_zero_point():
    """(0.55 + 0.35) ÷ 15 = 0.06 (FP32 0.0599999987) → FP16 0.05999755859375; zero =
    −round(−5.8336) = 6; codes [0, 4, 6, 7, 8, 11, 13, 15]; 0.55 reads back as 0.540 because
    the zero point's rounding shifted the grid. Relative error 0.041092."""
    group = [-0.35, -0.1, 0.02, 0.05, 0.12, 0.3, 0.41, 0.55]
    out = int4_group_encode(group)
    assert out["scale"] == 0.05999755859375 and out["zero"] == 6
    assert out["codes"] == [0, 4, 6, 7, 8, 11, 13, 15]
    assert out["values"][-1] == pytest.approx(0.53997803, abs=1e-8)
    assert pack_nibbles(out["codes"]) == bytes([0x40, 0x76, 0xB8, 0xFD])
    rel = math.sqrt(sum((a - b) ** 2 for a, b in zip(group, out["values"], strict=True))
                    / sum(w * w for w in group))
    assert rel == pytest.approx(0.041092, rel=1e-4)


NV_TENSOR = [1.5, -0.0625, 0.1875, 0.3125, 0.4375, 0.625, 0.875, 1.25, -1.375, 0.025, -0.075,
             0.725, 1.1, -0.4, 0, -1.5,
             2.625, *([0.0] * 15),
             1.0, 0.5, -0.25, 0.3, 0.7, -0.9, 0.05, *([0.0] * 8), -0.6]


def test_nvfp4_the_worked_tensor():
    """Tensor scale 2.625 ÷ 2,688 = 2⁻¹⁰. Block scales: 1.5 ÷ 6 ÷ 2⁻¹⁰ = 256 (0x78); 2.625 ÷ 6 ÷
    2⁻¹⁰ = 448 (0x7E); 1 ÷ 6 ÷ 2⁻¹⁰ = 170.67, which E4M3 steps by 16 around: 176 is nearer than
    160 (0x73). Block 1 scaled by 0.25: 6, −0.25 → −0 (code 8), 0.75 → 1 (tie up), 1.25 → 1
    (tie down), 1.75 → 2, 2.5 → 2, 3.5 → 4, 5 → 4, −5.5 → −6, 0.1 → 0, −0.3 → −0.5, 2.9 → 3,
    4.4 → 4, −1.6 → −1.5, 0, −6. Block 3 by 0.171875: the codes of the page's table."""
    out = nvfp4_encode(NV_TENSOR)
    assert out["tensor_scale"] == 2**-10
    assert out["scale_bits"] == [0x78, 0x7E, 0x73]
    assert out["codes"][:16] == [7, 8, 2, 2, 4, 4, 6, 6, 15, 0, 9, 5, 6, 11, 0, 15]
    assert out["values"][:16] == [1.5, -0.0, 0.25, 0.25, 0.5, 0.5, 1, 1, -1.5, 0, -0.125,
                                  0.75, 1, -0.375, 0, -1.5]
    assert out["codes"][16:32] == [7] + [0] * 15 and out["values"][16] == 2.625
    assert out["codes"][32:] == [7, 5, 11, 3, 6, 15, 1, 0, 0, 0, 0, 0, 0, 0, 0, 13]
    assert out["effective"][2] == 0.171875
    packed = pack_nibbles(out["codes"])
    assert packed[:8] == bytes([0x87, 0x22, 0x44, 0x66, 0x0F, 0x59, 0xB6, 0xF0])
    assert packed[8:16] == bytes([0x07] + [0] * 7)
    assert packed[16:] == bytes([0x57, 0x3B, 0xF6, 0x01, 0x00, 0x00, 0x00, 0xD0])


def test_e2m1_table():
    """Codes 0–15 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; each value encodes back to
    its code (−0.0 to 0); past 6 saturates at 6."""
    assert [e2m1_decode(c) for c in range(8)] == list(E2M1_VALUES)
    assert [e2m1_decode(c) for c in range(9, 16)] == [-v for v in E2M1_VALUES[1:]]
    for code in [*range(8), *range(9, 16)]:
        assert e2m1_encode(e2m1_decode(code)) == code
    assert e2m1_encode(-0.0) == 0
    assert e2m1_encode(6.5) == e2m1_encode(1e9) == 7 and e2m1_encode(-7) == 15


def test_mxfp4_blocks():
    """amax 5 → exponent floor(log2 5) − 2 = 0, scale 1 (E8M0 byte 127): 3 → 3, 0.4 → 0.5,
    −5 → −4 (tie to even). Block [7, 1]: exponent 2 − 2 = 0 and 7 saturates at 6."""
    out = mxfp4_encode([3.0, 0.4, -5.0, *([0.0] * 29)])
    assert out["scale_bytes"] == [127]
    assert out["codes"][:3] == [5, 1, 14] and out["values"][:3] == [3.0, 0.5, -4.0]
    out = mxfp4_encode([7.0, 1.0, *([0.0] * 30)])
    assert out["scale_bytes"] == [127] and out["values"][:2] == [6.0, 1.0]


def test_bf16_rounds_to_nearest_even():
    assert bf16_round(1.0) == 1.0
    assert bf16_round(1 + 2**-8) == 1.0  # a tie: keeps the even mantissa
    assert bf16_round(1 + 3 * 2**-8) == 1 + 2**-6  # a tie: rounds up to the even one
    assert bf16_round(1 + 2**-8 + 2**-20) == 1 + 2**-7


@pytest.mark.parametrize("format", ["int8", "fp8", "int4", "nvfp4", "mxfp4", "bf16"])
def test_representable_values_survive_the_round_trip(format):
    """Values already on the grid the encoder will choose read back bit for bit."""
    if format == "int8":
        rows = [[k * 2.0**-7 for k in (127, -3, 0, 64, -127, 5)]]  # amax 127 × 2⁻⁷
    elif format == "fp8":
        s = 2.0**-5
        rows = [[v * s for v in (448, -160, 22, 0.015625, 3.5, -0.25, 1.125)]]
    elif format == "int4":
        s = 2.0**-4
        rows = [[(q - 6) * s for q in (0, 15, 3, 7, 6, 9, 12, 1)]]
    elif format == "nvfp4":
        ts = 2.0**-10
        block_a = [6 * 448 * ts, 0.5 * 448 * ts, -3 * 448 * ts, *([0.0] * 13)]
        sb = 176.0  # an E4M3 value
        block_b = [-6 * sb * ts, 1.5 * sb * ts, 4 * sb * ts, *([2 * sb * ts] * 13)]
        rows = [block_a + block_b]
    elif format == "mxfp4":
        rows = [[6 * 4.0, -3 * 4.0, 0.5 * 4.0, 1.5 * 4.0, *([0.0] * 28)]]
    else:
        rows = [[1.0, -0.5, 0.75, 3.0 + 2**-6]]
    out = matrix_encode(rows, format=format, group_size=8)
    assert out["values"] == rows


def test_bytes_of_the_demo_models_linear_weights():
    """course-lm: 4,349,952 linear weights in 42 matrices, 14,400 output rows. INT8/FP8:
    4,349,952 + 4 × 14,400 = 4,407,552. INT4 g128: codes 2,174,976, FP16 scales 2 × 34,944
    groups = 69,888 (down has in 688 = 5 × 128 + 48: 6 groups a row), zeros 17,472 → 2,262,336.
    NVFP4: 2,174,976 + 271,872 block scales + 4 × 42 = 2,447,016. MXFP4: 2,174,976 + 136,704
    (down: 22 blocks a row, the last of 16) = 2,311,680. BF16 8,699,904; FP32 17,399,808."""
    expected = {"fp32": 17_399_808, "bf16": 8_699_904, "int8": 4_407_552, "fp8": 4_407_552,
                "int4": 2_262_336, "nvfp4": 2_447_016, "mxfp4": 2_311_680}
    for format, total in expected.items():
        assert quantized_bytes_shapes(shapes=COURSE_LM_SHAPES, format=format)["total"] == total
    int4 = quantized_bytes_shapes(shapes=COURSE_LM_SHAPES, format="int4")
    assert (int4["codes"], int4["scales"], int4["zeros"]) == (2_174_976, 69_888, 17_472)
    assert quantized_bytes_shapes(shapes=COURSE_LM_SHAPES, format="int4",
                                  group_size=32)["scales"] == 2 * 6 * (
        (256 + 128 + 128 + 256 + 688 + 688) * 8 + 256 * 22)
    with pytest.raises(ValueError):
        quantized_bytes_shapes(shapes=COURSE_LM_SHAPES, format="int3")
