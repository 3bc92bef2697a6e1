"""Number formats bit by bit: reference codecs for FP8 E4M3, E2M1 (the FP4 value), BF16, INT8
per channel, INT4 with group scales and zero points, NVFP4 and MXFP4, in plain Python (no torch).

They are the course's definition of each format's rules, used three ways: the worked NVFP4 block
on problem 11's page, the exact byte count of the quantization demo's stored weights
(`quantized_bytes_shapes`), and the reference the worker's torch codecs
(worker/quantization.py) must match code for code, scale for scale.

Rounding is round-to-nearest, ties to even, everywhere. Where the torch codecs compute in FP32,
each intermediate here is rounded to FP32 at the same point (`fp32_round`), so the two agree
bit for bit. Sources: FP8 layouts from Micikevicius et al. (arXiv 2209.05433); the NVFP4 recipe
(tensor scale amax ÷ (6 × 448), block scale its block's amax ÷ 6 ÷ tensor scale rounded to E4M3,
E2M1 bounds and tie rule, two codes a byte with the first in the low nibble) from NVIDIA's
TensorRT Model Optimizer (`nvfp4_tensor.py`); INT4 groups from AWQ's `pseudo_quantize_tensor`;
MXFP4 from the OCP Microscaling spec v1.0.
"""

import bisect
import math
import struct

E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # codes 0..7; bit 3 is the sign
# Midpoints between neighbouring E2M1 values: a magnitude above the i-th lies past value i.
E2M1_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
# Ties at these midpoints go up, to the even code (1.0, 2.0, 4.0 have mantissa bit 0).
_E2M1_TIES_UP = (0.75, 1.75, 3.5)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
E4M3_MIN_NORMAL = 2.0**-6
E4M3_MIN_SUBNORMAL = 2.0**-9
E4M3_MAX_BITS = 0x7E  # 448: 0 1111 110 (0 1111 111 is NaN)
INT8_MAX = 127
INT4_LEVELS = 15  # codes 0..15
# AWQ clamps a group's range at this before dividing (a constant group would give scale 0).
INT4_RANGE_MIN = 1e-5
NVFP4_BLOCK = 16
MXFP4_BLOCK = 32
# NVFP4's tensor scale maps the largest block scale onto E4M3's largest value: amax ÷ (6 × 448).
NVFP4_TENSOR_DIVISOR = E2M1_MAX * E4M3_MAX  # 2,688
# MXFP4's scale exponent is the block maximum's minus E2M1's largest exponent (6 = 1.5 × 2²).
MXFP4_EMAX_ELEMENT = 2
E8M0_BIAS = 127

# The formats the demo quantizes to, with the bytes each stores per (out, in) matrix.
FORMATS = ("fp32", "bf16", "int8", "fp8", "int4", "nvfp4", "mxfp4")
INT4_GROUP_SIZES = (32, 64, 128)


def fp32_round(x: float) -> float:
    """`x` rounded to the nearest FP32 value (ties to even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def fp16_round(x: float) -> float:
    """`x` rounded to the nearest FP16 value (ties to even); the value must fit FP16."""
    return struct.unpack("<e", struct.pack("<e", x))[0]


def bf16_round(x: float) -> float:
    """`x` as FP32, then rounded to BF16 (keep the top 16 bits, ties to even)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if (bits & 0x7F800000) == 0x7F800000:  # infinity or NaN pass through
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFF0000))[0]
    lower = bits & 0xFFFF
    upper = bits >> 16
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return struct.unpack("<f", struct.pack("<I", (upper << 16) & 0xFFFFFFFF))[0]


def _exponent(a: float) -> int:
    """floor(log2 a) for a > 0, exactly (no floating-point log)."""
    return math.frexp(a)[1] - 1


def e2m1_encode(x: float) -> int:
    """The 4-bit E2M1 code of `x`: sign (x < 0) in bit 3, the index of the nearest of
    E2M1_VALUES in bits 0–2. The index is the number of E2M1_BOUNDS strictly below |x|, plus one
    at the ties 0.75, 1.75 and 3.5 (to the even code); past 6 it saturates at 6. A negative value
    that rounds to zero keeps its sign bit (code 8), as Model Optimizer's encoder does; −0.0
    encodes as 0."""
    a = abs(x)
    index = bisect.bisect_left(E2M1_BOUNDS, a)
    if a in _E2M1_TIES_UP:
        index += 1
    return (8 if x < 0 else 0) | index


def e2m1_decode(code: int) -> float:
    """The value of a 4-bit E2M1 code (codes 8–15 are the negatives; 8 is −0)."""
    value = E2M1_VALUES[code & 7]
    return -value if code & 8 else value


def e4m3_encode(x: float) -> int:
    """The 8-bit FP8 E4M3 (FN) pattern of `x`: round to nearest, ties to even, saturating at
    ±448 (never NaN). Bits: sign · 4 exponent bits (bias 7) · 3 mantissa bits. Below 2⁻⁶ the
    value is subnormal: mantissa = |x| ÷ 2⁻⁹ rounded (8 becomes the smallest normal, 2⁻⁶)."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a < E4M3_MIN_NORMAL:
        return sign | round(a / E4M3_MIN_SUBNORMAL)  # 0..8; 8 is exponent 1, mantissa 0
    e = _exponent(a)
    q = round(a / 2.0**e * 8)  # 8..16, exact: dividing by a power of two
    if q == 16:
        e, q = e + 1, 8
    if e + 7 > 15 or (e + 7 == 15 and q - 8 > 6):
        return sign | E4M3_MAX_BITS
    return sign | (e + 7) << 3 | (q - 8)


def e4m3_decode(bits: int) -> float:
    """The value of an E4M3 pattern; 0x7F and 0xFF are NaN (never produced by the encoder)."""
    sign = -1.0 if bits & 0x80 else 1.0
    e, m = (bits >> 3) & 0xF, bits & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return sign * m * E4M3_MIN_SUBNORMAL
    return sign * (1 + m / 8) * 2.0 ** (e - 7)


def int8_channel_encode(row: list[float]) -> dict:
    """INT8 symmetric, one FP32 scale per output channel (a row): scale = amax ÷ 127 (1.0 for
    an all-zero row), code = round(w ÷ scale) clamped to ±127. Returns codes, scale, values
    (the codes read back)."""
    amax = max(abs(fp32_round(w)) for w in row)
    scale = fp32_round(amax / INT8_MAX) if amax else 1.0
    codes = [max(-INT8_MAX, min(INT8_MAX, round(fp32_round(w / scale)))) for w in row]
    return {"codes": codes, "scale": scale,
            "values": [fp32_round(c * scale) for c in codes]}


def fp8_channel_encode(row: list[float]) -> dict:
    """FP8 E4M3, one FP32 scale per output channel: scale = amax ÷ 448 (1.0 for an all-zero
    row), each w ÷ scale clamped to ±448 and rounded to E4M3. Returns bits, scale, values."""
    amax = max(abs(fp32_round(w)) for w in row)
    scale = fp32_round(amax / E4M3_MAX) if amax else 1.0
    bits = [e4m3_encode(max(-E4M3_MAX, min(E4M3_MAX, fp32_round(w / scale)))) for w in row]
    return {"bits": bits, "scale": scale,
            "values": [fp32_round(e4m3_decode(b) * scale) for b in bits]}


def int4_group_encode(group: list[float]) -> dict:
    """INT4 asymmetric over one group (AWQ's rule): scale = max(max − min, 1e-5) ÷ 15, stored
    in FP16; zero = −round(min ÷ scale) clamped to 0…15; code = round(w ÷ scale) + zero clamped
    to 0…15; read back as (code − zero) × scale. Returns codes, scale, zero, values."""
    values = [fp32_round(w) for w in group]
    spread = max(fp32_round(max(values) - min(values)), fp32_round(INT4_RANGE_MIN))
    scale = fp16_round(fp32_round(spread / INT4_LEVELS))
    zero = max(0, min(INT4_LEVELS, -round(fp32_round(min(values) / scale))))
    codes = [max(0, min(INT4_LEVELS, round(fp32_round(w / scale)) + zero)) for w in values]
    return {"codes": codes, "scale": scale, "zero": zero,
            "values": [fp32_round((c - zero) * scale) for c in codes]}


def nvfp4_tensor_scale(amax: float) -> float:
    """NVFP4's FP32 tensor scale: amax ÷ (6 × 448), so the largest block scale lands on E4M3's
    largest value (1.0 for an all-zero tensor)."""
    return fp32_round(fp32_round(amax) / NVFP4_TENSOR_DIVISOR) if amax else 1.0


def nvfp4_block_scale_raw(block_amax: float, tensor_scale: float) -> float:
    """A block's scale before rounding to E4M3: its amax ÷ 6 ÷ the tensor scale (1.0 for an
    all-zero block, as Model Optimizer sets it), raised to E4M3's smallest subnormal (2⁻⁹) so it
    never rounds to zero. (Model Optimizer lets it round to zero, which reads the block back as
    zeros; this course keeps the block's values.)"""
    raw = fp32_round(block_amax / fp32_round(E2M1_MAX * tensor_scale))
    if raw == 0:
        return 1.0
    return max(raw, E4M3_MIN_SUBNORMAL)


def nvfp4_encode(values: list[float], *, block: int = NVFP4_BLOCK,
                 tensor_scale: float | None = None) -> dict:
    """NVFP4: E2M1 codes, one E4M3 scale per `block` consecutive values (a last partial block
    gets its own), one FP32 scale for the whole tensor (from these values' amax unless given).
    Each value is divided by (block scale × tensor scale), the effective scale, and rounded to
    E2M1. Returns codes, scale_bits (one per block), tensor_scale, effective (per block), values
    (read back)."""
    xs = [fp32_round(v) for v in values]
    if tensor_scale is None:
        tensor_scale = nvfp4_tensor_scale(max((abs(v) for v in xs), default=0.0))
    codes, scale_bits, effective, read = [], [], [], []
    for start in range(0, len(xs), block):
        chunk = xs[start:start + block]
        raw = nvfp4_block_scale_raw(max(abs(v) for v in chunk), tensor_scale)
        bits = e4m3_encode(min(raw, E4M3_MAX))
        eff = fp32_round(e4m3_decode(bits) * tensor_scale)
        scale_bits.append(bits)
        effective.append(eff)
        for v in chunk:
            code = e2m1_encode(fp32_round(v / eff))
            codes.append(code)
            read.append(fp32_round(e2m1_decode(code) * eff))
    return {"codes": codes, "scale_bits": scale_bits, "tensor_scale": tensor_scale,
            "effective": effective, "values": read}


def mxfp4_encode(values: list[float], *, block: int = MXFP4_BLOCK) -> dict:
    """MXFP4: E2M1 codes, one E8M0 (power-of-two) scale per `block` values. The scale's
    exponent is floor(log2 of the block's amax) − 2 (0 for an all-zero block), stored as the
    byte exponent + 127; values past 6 × scale saturate. Returns codes, scale_exponents,
    scale_bytes, values."""
    xs = [fp32_round(v) for v in values]
    codes, exponents, read = [], [], []
    for start in range(0, len(xs), block):
        chunk = xs[start:start + block]
        amax = max(abs(v) for v in chunk)
        e = _exponent(amax) - MXFP4_EMAX_ELEMENT if amax else 0
        e = max(-E8M0_BIAS, min(E8M0_BIAS, e))
        scale = 2.0**e
        exponents.append(e)
        for v in chunk:
            code = e2m1_encode(fp32_round(v / scale))
            codes.append(code)
            read.append(fp32_round(e2m1_decode(code) * scale))
    return {"codes": codes, "scale_exponents": exponents,
            "scale_bytes": [e + E8M0_BIAS for e in exponents], "values": read}


def pack_nibbles(codes: list[int]) -> bytes:
    """4-bit codes two to a byte: byte k = codes[2k] | codes[2k+1] << 4 (the first code in the
    low nibble); an odd count leaves the last byte's high nibble 0."""
    padded = list(codes) + [0] * (len(codes) % 2)
    return bytes(padded[i] | padded[i + 1] << 4 for i in range(0, len(padded), 2))


def matrix_encode(rows: list[list[float]], *, format: str, group_size: int = 128) -> dict:
    """One (out, in) weight matrix, given as rows, in `format` as the demo stores it: groups and
    blocks run along each row (the input dimension) with a last partial one of their own; NVFP4's
    tensor scale covers the whole matrix. Returns codes (row-major, flat), scales, zeros (INT4),
    tensor_scale (NVFP4) and values (the matrix read back, as rows)."""
    if format == "fp32":
        return {"codes": [], "scales": [], "zeros": [],
                "values": [[fp32_round(w) for w in row] for row in rows]}
    if format == "bf16":
        return {"codes": [], "scales": [], "zeros": [],
                "values": [[bf16_round(w) for w in row] for row in rows]}
    codes: list[int] = []
    scales: list[float] = []
    zeros: list[int] = []
    read: list[list[float]] = []
    tensor_scale = None
    if format == "nvfp4":
        tensor_scale = nvfp4_tensor_scale(max(abs(fp32_round(w)) for row in rows for w in row))
    for row in rows:
        if format == "int8":
            out = int8_channel_encode(row)
            codes.extend(out["codes"])
            scales.append(out["scale"])
            read.append(out["values"])
        elif format == "fp8":
            out = fp8_channel_encode(row)
            codes.extend(out["bits"])
            scales.append(out["scale"])
            read.append(out["values"])
        elif format == "int4":
            values = []
            for start in range(0, len(row), group_size):
                out = int4_group_encode(row[start:start + group_size])
                codes.extend(out["codes"])
                scales.append(out["scale"])
                zeros.append(out["zero"])
                values.extend(out["values"])
            read.append(values)
        elif format == "nvfp4":
            out = nvfp4_encode(row, tensor_scale=tensor_scale)
            codes.extend(out["codes"])
            scales.extend(e4m3_decode(b) for b in out["scale_bits"])
            read.append(out["values"])
        elif format == "mxfp4":
            out = mxfp4_encode(row)
            codes.extend(out["codes"])
            scales.extend(2.0**e for e in out["scale_exponents"])
            read.append(out["values"])
        else:
            raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")
    return {"codes": codes, "scales": scales, "zeros": zeros, "tensor_scale": tensor_scale,
            "values": read}


def _blocks(length: int, size: int) -> int:
    return -(-length // size)


def quantized_bytes_shapes(*, shapes: list[tuple[int, int]], format: str,
                           group_size: int = 128) -> dict[str, int]:
    """Bytes of codes, scales and zero points for weight matrices of (out, in) shapes, exactly
    as the demo stores them (bytes): groups and blocks run along `in`, a last partial one
    included; 4-bit codes and INT4 zero points two to a byte over each matrix's flattened
    (row-major) codes and zeros; INT8 and FP8 one FP32 scale per row; INT4 one FP16 scale per
    group; NVFP4 one E4M3 byte per 16 values plus a 4-byte tensor scale per matrix; MXFP4 one
    E8M0 byte per 32; BF16 2 bytes a value, FP32 4. Returns {"codes", "scales", "zeros",
    "total"}."""
    codes = scales = zeros = 0
    for out_features, in_features in shapes:
        count = out_features * in_features
        if format == "fp32":
            codes += 4 * count
        elif format == "bf16":
            codes += 2 * count
        elif format in ("int8", "fp8"):
            codes += count
            scales += 4 * out_features
        elif format == "int4":
            groups = out_features * _blocks(in_features, group_size)
            codes += _blocks(count, 2)
            scales += 2 * groups
            zeros += _blocks(groups, 2)
        elif format == "nvfp4":
            codes += _blocks(count, 2)
            scales += out_features * _blocks(in_features, NVFP4_BLOCK) + 4
        elif format == "mxfp4":
            codes += _blocks(count, 2)
            scales += out_features * _blocks(in_features, MXFP4_BLOCK)
        else:
            raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")
    return {"codes": codes, "scales": scales, "zeros": zeros, "total": codes + scales + zeros}


def rounding_noise_squared(*, weight: float, step: float) -> float:
    """The rounding-noise model's expected squared error of one weight (units²): step² ÷ 12,
    the variance of an error spread evenly over the `step` between its two grid neighbours."""
    return step * step / 12


def e4m3_step(v: float) -> float:
    """The distance between the two E4M3 values around |v| ≤ 448 (2⁻⁹ below 2⁻⁶, where the
    values are subnormal; else 2^(floor(log2 |v|) − 3): three mantissa bits)."""
    a = abs(v)
    if a < E4M3_MIN_NORMAL:
        return E4M3_MIN_SUBNORMAL
    return 2.0 ** (_exponent(a) - 3)


def e2m1_step(v: float) -> float:
    """The distance between the two E2M1 values around |v| ≤ 6: 0.5 below 2, 1 below 4, else 2."""
    a = abs(v)
    return 0.5 if a < 2 else (1.0 if a < 4 else 2.0)


def bf16_step(w: float) -> float:
    """The distance between the two BF16 values around w (7 mantissa bits); 0 at w = 0."""
    return 2.0 ** (_exponent(abs(w)) - 7) if w else 0.0


def predicted_squared_error(rows: list[list[float]], *, format: str,
                            group_size: int = 128) -> float:
    """The rounding-noise model's predicted Σ (w − ŵ)² of a matrix (units²): step² ÷ 12 per
    weight, the step being the grid's spacing at that weight under the scales `format` would
    choose, plus the exact squared error of any weight outside the grid's range (clipped)."""
    encoded = matrix_encode(rows, format=format, group_size=group_size)
    total = 0.0
    flat_scales = encoded["scales"]
    for r, row in enumerate(rows):
        for i, w in enumerate(row):
            w = fp32_round(w)
            if format == "fp32":
                step = 0.0
            elif format == "bf16":
                step = bf16_step(w)
            elif format == "int8":
                step = flat_scales[r]
            elif format == "fp8":
                step = e4m3_step(w / flat_scales[r]) * flat_scales[r]
            elif format == "int4":
                groups = _blocks(len(row), group_size)
                g = r * groups + i // group_size
                scale, zero = flat_scales[g], encoded["zeros"][g]
                low, high = (0 - zero) * scale, (INT4_LEVELS - zero) * scale
                if w < low or w > high:
                    total += (w - min(max(w, low), high)) ** 2
                    continue
                step = scale
            elif format in ("nvfp4", "mxfp4"):
                size = NVFP4_BLOCK if format == "nvfp4" else MXFP4_BLOCK
                b = r * _blocks(len(row), size) + i // size
                eff = (fp32_round(flat_scales[b] * encoded["tensor_scale"])
                       if format == "nvfp4" else flat_scales[b])
                v = w / eff
                if abs(v) > E2M1_MAX:
                    total += ((abs(v) - E2M1_MAX) * eff) ** 2
                    continue
                step = e2m1_step(v) * eff
            else:
                raise ValueError(f"unknown format {format!r}")
            total += rounding_noise_squared(weight=w, step=step)
    return total
