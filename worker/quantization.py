"""Weight quantization, emulated exactly: codes and scales computed as each format defines them,
stored packed, and dequantized back to the model's precision to compute.

    from worker.quantization import model_quantize, engine_quantize
    quantized = model_quantize(engine.runner.model, format="nvfp4")   # a copy; the original
    quantized.model, quantized.linear_bytes, quantized.layer_errors    # is left untouched
    engine_quantize(engine, format="int4", group_size=128)             # a private engine, idle

Formats (`FORMATS`): fp32 (as shipped), bf16, int8 (symmetric, FP32 scale per output row),
fp8 (E4M3, FP32 scale per output row), int4 (asymmetric, FP16 scale and 4-bit zero point per
group along the input dimension), nvfp4 (E2M1 codes, E4M3 scale per 16, FP32 scale per
matrix), mxfp4 (E2M1 codes, E8M0 scale per 32). The rules are problems/arithmetic/formats.py's,
which a test holds this file to code for code; the byte counts are its `quantized_bytes_shapes`.

The linear weights of every layer are quantized one Hugging Face matrix at a time (q, k, v, o,
gate, up, down: the engine packs q/k/v and gate/up, and is quantized slice by slice), so per-row
and per-matrix scales are those a real checkpoint would hold. The embedding (the output head too
when tied), an untied head and the norms are rounded to BF16 in every format but fp32, as
quantized checkpoints keep them; with `quantize_embedding` the embedding and head take the
format as well. Computing stays in the model's own dtype (FP32 on CPU): this emulates the
numbers a format produces, not its speed. Worker-only (imports torch).
"""

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import nn

from problems.arithmetic.formats import (
    E2M1_BOUNDS,
    E2M1_VALUES,
    E4M3_MAX,
    E4M3_MIN_NORMAL,
    E4M3_MIN_SUBNORMAL,
    E8M0_BIAS,
    FORMATS,
    INT4_GROUP_SIZES,
    INT4_LEVELS,
    INT4_RANGE_MIN,
    INT8_MAX,
    MXFP4_BLOCK,
    MXFP4_EMAX_ELEMENT,
    NVFP4_BLOCK,
    NVFP4_TENSOR_DIVISOR,
    quantized_bytes_shapes,
)
from worker.engine.layers.norm import RMSNorm

GROUP_SIZES = INT4_GROUP_SIZES
MATRICES = ("q", "k", "v", "o", "gate", "up", "down")
_TIES_UP = (0.75, 1.75, 3.5)


@dataclass
class QuantizedTensor:
    """One (out, in) weight matrix as a format stores it.

    `codes`: int8 codes (int8), E4M3 bit patterns (uint8), 4-bit codes two to a byte (uint8,
    first code in the low nibble, over the row-major flattened matrix), or the values themselves
    (bf16, fp32). `scales`: FP32 per row (int8, fp8), FP16 per group (int4), E4M3 bits per block
    (nvfp4), E8M0 bytes per block (mxfp4). `zeros`: INT4 zero points, two to a byte over the
    flattened (row, group) grid. `tensor_scale`: NVFP4's FP32 scale of the whole matrix.
    """

    format: str
    shape: tuple[int, int]
    codes: torch.Tensor
    scales: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.uint8))
    zeros: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.uint8))
    tensor_scale: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    group_size: int = 128

    @property
    def nbytes(self) -> int:
        """Bytes stored: codes, scales, zero points and the tensor scale (bytes)."""
        return sum(t.numel() * t.element_size()
                   for t in (self.codes, self.scales, self.zeros, self.tensor_scale))

    def dequantize(self) -> torch.Tensor:
        """The matrix read back, in FP32."""
        out, in_features = self.shape
        f = self.format
        if f in ("fp32", "bf16"):
            return self.codes.float()
        if f == "int8":
            return self.codes.float() * self.scales[:, None]
        if f == "fp8":
            return self.codes.view(torch.float8_e4m3fn).float() * self.scales[:, None]
        codes = nibbles_unpack(self.codes, out * in_features).view(out, in_features)
        if f == "int4":
            groups = _blocks(in_features, self.group_size)
            zeros = nibbles_unpack(self.zeros, out * groups).view(out, groups)
            column = torch.arange(in_features) // self.group_size
            scale = self.scales.float()[:, column]
            return (codes.float() - zeros[:, column].float()) * scale
        size = NVFP4_BLOCK if f == "nvfp4" else MXFP4_BLOCK
        column = torch.arange(in_features) // size
        if f == "nvfp4":
            block_scale = self.scales.view(torch.float8_e4m3fn).float() * self.tensor_scale
        else:
            block_scale = _pow2(self.scales.long() - E8M0_BIAS)
        return e2m1_decode(codes) * block_scale[:, column]


def _pow2(exponent: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """2 to the power of each (integer) `exponent`, exactly."""
    return torch.ldexp(torch.ones(exponent.shape, dtype=dtype), exponent)


def _blocks(length: int, size: int) -> int:
    return -(-length // size)


def nibbles_pack(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (0–15) two to a byte over the flattened tensor: byte k = code[2k] |
    code[2k+1] << 4; an odd count leaves the last high nibble 0 (uint8)."""
    flat = codes.reshape(-1).to(torch.uint8)
    if flat.numel() % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    return flat[0::2] | (flat[1::2] << 4)


def nibbles_unpack(packed: torch.Tensor, count: int) -> torch.Tensor:
    """The first `count` 4-bit codes of `packed` (uint8)."""
    out = torch.stack([packed & 0x0F, packed >> 4], dim=1).reshape(-1)
    return out[:count]


def e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """E2M1 codes of `v` (FP32): the number of bounds strictly below |v|, one more at the ties
    0.75, 1.75 and 3.5, saturating at 6; bit 3 set for v < 0 (uint8)."""
    a = v.abs()
    index = torch.searchsorted(torch.tensor(E2M1_BOUNDS, dtype=a.dtype), a)
    ties = (a == _TIES_UP[0]) | (a == _TIES_UP[1]) | (a == _TIES_UP[2])
    return ((v < 0).to(torch.uint8) << 3) | (index + ties.long()).to(torch.uint8)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """The FP32 values of E2M1 codes (8 is −0)."""
    table = torch.tensor(list(E2M1_VALUES) + [-x for x in E2M1_VALUES])
    return table[codes.long()]


def _row_blocks_amax(w: torch.Tensor, size: int) -> torch.Tensor:
    """amax of each run of `size` values along each row, a last partial run its own [out, n]."""
    out, in_features = w.shape
    full = in_features // size
    parts = []
    if full:
        parts.append(w[:, :full * size].abs().reshape(out, full, size).amax(dim=2))
    if in_features % size:
        parts.append(w[:, full * size:].abs().amax(dim=1, keepdim=True))
    return torch.cat(parts, dim=1)


def _row_blocks_extreme(w: torch.Tensor, size: int, *, high: bool) -> torch.Tensor:
    out, in_features = w.shape
    full = in_features // size
    reduce = (lambda t, d, **k: t.amax(dim=d, **k)) if high else (
        lambda t, d, **k: t.amin(dim=d, **k))
    parts = []
    if full:
        parts.append(reduce(w[:, :full * size].reshape(out, full, size), 2))
    if in_features % size:
        parts.append(reduce(w[:, full * size:], 1, keepdim=True))
    return torch.cat(parts, dim=1)


def quantize_linear(weight: torch.Tensor, format: str, *, group_size: int = 128
                    ) -> QuantizedTensor:
    """`weight` (out, in) quantized to `format` (see the module docstring for each rule).
    Quantizing runs on the CPU, whatever device the weight lives on."""
    w = weight.detach().float().cpu().contiguous()
    out, in_features = w.shape
    shape = (out, in_features)
    if format == "fp32":
        return QuantizedTensor(format, shape, w.clone())
    if format == "bf16":
        return QuantizedTensor(format, shape, w.to(torch.bfloat16))
    if format in ("int8", "fp8"):
        amax = w.abs().amax(dim=1)
        top = INT8_MAX if format == "int8" else E4M3_MAX
        scale = torch.where(amax > 0, amax / top, torch.ones_like(amax))
        v = w / scale[:, None]
        if format == "int8":
            codes = torch.round(v).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        else:
            codes = v.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
        return QuantizedTensor(format, shape, codes, scales=scale)
    if format == "int4":
        if group_size < 1:
            raise ValueError("group_size must be at least 1")
        high = _row_blocks_extreme(w, group_size, high=True)
        low = _row_blocks_extreme(w, group_size, high=False)
        spread = (high - low).clamp(min=INT4_RANGE_MIN)
        scale = (spread / INT4_LEVELS).to(torch.float16)
        scale32 = scale.float()
        zero = (-torch.round(low / scale32)).clamp(0, INT4_LEVELS)
        column = torch.arange(in_features) // group_size
        codes = (torch.round(w / scale32[:, column]) + zero[:, column]).clamp(0, INT4_LEVELS)
        return QuantizedTensor(format, shape, nibbles_pack(codes), scales=scale,
                               zeros=nibbles_pack(zero), group_size=group_size)
    if format == "nvfp4":
        amax = w.abs().amax()
        tensor_scale = (amax / NVFP4_TENSOR_DIVISOR if amax > 0
                        else torch.ones((), dtype=torch.float32)).reshape(1)
        raw = _row_blocks_amax(w, NVFP4_BLOCK) / (6.0 * tensor_scale)
        raw = torch.where(raw == 0, torch.ones_like(raw), raw)
        raw = raw.clamp(min=E4M3_MIN_SUBNORMAL, max=E4M3_MAX)
        scale_bits = raw.to(torch.float8_e4m3fn)
        effective = scale_bits.float() * tensor_scale
        column = torch.arange(in_features) // NVFP4_BLOCK
        codes = e2m1_encode(w / effective[:, column])
        return QuantizedTensor(format, shape, nibbles_pack(codes),
                               scales=scale_bits.view(torch.uint8), tensor_scale=tensor_scale,
                               group_size=NVFP4_BLOCK)
    if format == "mxfp4":
        amax = _row_blocks_amax(w, MXFP4_BLOCK)
        exponent = torch.frexp(amax).exponent - 1 - MXFP4_EMAX_ELEMENT
        exponent = torch.where(amax > 0, exponent, torch.zeros_like(exponent))
        exponent = exponent.clamp(-E8M0_BIAS, E8M0_BIAS)
        scale = _pow2(exponent)
        column = torch.arange(in_features) // MXFP4_BLOCK
        codes = e2m1_encode(w / scale[:, column])
        return QuantizedTensor(format, shape, nibbles_pack(codes),
                               scales=(exponent + E8M0_BIAS).to(torch.uint8),
                               group_size=MXFP4_BLOCK)
    raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")


def squared_error_predicted(weight: torch.Tensor, quantized: QuantizedTensor) -> float:
    """The rounding-noise model's Σ (w − ŵ)² for one matrix (float64): step² ÷ 12 per weight,
    the step being the format's grid spacing at that weight under the scales it chose, plus the
    exact squared error of any weight outside the grid's range. Same rule as
    formats.predicted_squared_error."""
    w = weight.detach().double().cpu()
    out, in_features = quantized.shape
    f = quantized.format
    if f == "fp32":
        return 0.0
    if f == "bf16":
        exponent = torch.frexp(w).exponent - 1
        step = torch.where(w != 0, _pow2(exponent - 7, torch.float64), torch.zeros_like(w))
        return float((step * step / 12).sum())
    if f == "int8":
        scale = quantized.scales.double()[:, None].expand(out, in_features)
        return float((scale * scale / 12).sum())
    if f == "fp8":
        scale = quantized.scales.double()[:, None]
        v = (w / scale).abs()
        step_v = torch.where(v < E4M3_MIN_NORMAL, torch.full_like(v, E4M3_MIN_SUBNORMAL),
                             _pow2(torch.frexp(v).exponent - 1 - 3, torch.float64))
        step = step_v * scale
        return float((step * step / 12).sum())
    if f == "int4":
        groups = _blocks(in_features, quantized.group_size)
        column = torch.arange(in_features) // quantized.group_size
        scale = quantized.scales.double()[:, column]
        zero = nibbles_unpack(quantized.zeros, out * groups).view(out, groups).double()[:, column]
        low, high = -zero * scale, (INT4_LEVELS - zero) * scale
        inside = (w >= low) & (w <= high)
        clipped = (w - torch.minimum(torch.maximum(w, low), high)) ** 2
        return float(torch.where(inside, scale * scale / 12, clipped).sum())
    size = NVFP4_BLOCK if f == "nvfp4" else MXFP4_BLOCK
    column = torch.arange(in_features) // size
    if f == "nvfp4":
        block = (quantized.scales.view(torch.float8_e4m3fn).float()
                 * quantized.tensor_scale).double()
    else:
        block = _pow2(quantized.scales.long() - E8M0_BIAS, torch.float64)
    eff = block[:, column]
    a = (w / eff).abs()
    step_v = torch.where(a < 2, 0.5, torch.where(a < 4, 1.0, 2.0)).double()
    inside = a <= 6
    clipped = ((a - 6) * eff) ** 2
    return float(torch.where(inside, (step_v * eff) ** 2 / 12, clipped).sum())


def linear_matrices(model: nn.Module) -> list[tuple[int, str, torch.Tensor]]:
    """Every linear weight of the engine's Llama-family model as (layer, name, view): q, k, v
    (slices of the packed qkv_proj), o, gate, up (slices of gate_up_proj), down. Each view is
    (out, in) and writes through to the model."""
    config = model.config
    q = config.num_heads * config.head_dim
    kv = config.num_kv_heads * config.head_dim
    inter = config.intermediate_size
    found = []
    for index, layer in enumerate(model.layers):
        qkv = layer.self_attn.qkv_proj.weight.data
        gate_up = layer.mlp.gate_up_proj.weight.data
        found += [
            (index, "q", qkv.narrow(0, 0, q)),
            (index, "k", qkv.narrow(0, q, kv)),
            (index, "v", qkv.narrow(0, q + kv, kv)),
            (index, "o", layer.self_attn.o_proj.weight.data),
            (index, "gate", gate_up.narrow(0, 0, inter)),
            (index, "up", gate_up.narrow(0, inter, inter)),
            (index, "down", layer.mlp.down_proj.weight.data),
        ]
    return found


@dataclass
class QuantizedModel:
    """A quantized copy of a model, with what quantizing it cost and changed.

    `tensors[(layer, name)]` is each linear matrix as stored; `linear_bytes` their bytes
    (codes, scales, zero points, tensor scales); `predicted_bytes` the same from the arithmetic
    (formats.quantized_bytes_shapes; the two must be equal); `embedding_bytes` and
    `norm_bytes` what the rest is stored in (BF16, or the format when the embedding is
    quantized); `layer_errors` each layer's relative weight error, measured and predicted by
    the rounding-noise model, and `worst` the matrix with the largest error.
    """

    model: nn.Module
    format: str
    group_size: int
    quantize_embedding: bool
    tensors: dict[tuple[int, str], QuantizedTensor]
    linear_weights: int
    linear_bytes: int
    predicted_bytes: int
    embedding_weights: int
    embedding_bytes: int
    norm_bytes: int
    layer_errors: list[dict]
    worst: dict
    error: float
    predicted_error: float

    @property
    def model_bytes(self) -> int:
        """Every stored weight: linear layers, embedding (and untied head), norms (bytes)."""
        return self.linear_bytes + self.embedding_bytes + self.norm_bytes

    @property
    def bits_per_weight(self) -> float:
        """Bits per quantized weight, scales included: the linear layers, plus the embedding
        when it is quantized too (bits)."""
        if self.quantize_embedding and self.format not in ("fp32", "bf16"):
            return 8 * (self.linear_bytes + self.embedding_bytes) / (
                self.linear_weights + self.embedding_weights)
        return 8 * self.linear_bytes / self.linear_weights


def _embedding_matrices(model: nn.Module) -> list[torch.Tensor]:
    """The embedding and, when not tied to it, the output head (as parameters' data)."""
    found = [model.embed_tokens.weight.data]
    if model.lm_head.weight is not model.embed_tokens.weight:
        found.append(model.lm_head.weight.data)
    return found


def model_quantize(model: nn.Module, *, format: str, group_size: int = 128,
                   quantize_embedding: bool = False) -> QuantizedModel:
    """A quantized copy of `model` (the engine's Llama-family module; the original is not
    touched): every linear weight replaced by its `format` codes read back, the embedding, an
    untied head and the norms rounded to BF16 (or, with `quantize_embedding`, the embedding and
    head in `format` too), with the bytes stored and each layer's weight error."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")
    if format == "int4" and group_size not in GROUP_SIZES:
        raise ValueError(f"group_size must be one of {GROUP_SIZES}")
    copied = copy.deepcopy(model)
    tensors: dict[tuple[int, str], QuantizedTensor] = {}
    sums: dict[int, list[float]] = {}
    worst = {"layer": 0, "matrix": "", "rel_error": -1.0}
    shapes = []
    with torch.no_grad():
        for layer, name, view in linear_matrices(copied):
            original = view.detach().float().cpu().clone()
            quantized = quantize_linear(original, format, group_size=group_size)
            restored = quantized.dequantize()
            view.copy_(restored.to(view.device, view.dtype))
            tensors[(layer, name)] = quantized
            shapes.append(tuple(view.shape))
            err = float(((original.double() - restored.double()) ** 2).sum())
            norm = float((original.double() ** 2).sum())
            predicted = squared_error_predicted(original, quantized)
            total = sums.setdefault(layer, [0.0, 0.0, 0.0])
            total[0] += err
            total[1] += norm
            total[2] += predicted
            rel = math.sqrt(err / norm) if norm else 0.0
            if rel > worst["rel_error"]:
                worst = {"layer": layer, "matrix": name, "rel_error": rel}
        embedding_bytes = embedding_weights = 0
        head_format = format if quantize_embedding else ("fp32" if format == "fp32" else "bf16")
        for matrix in _embedding_matrices(copied):
            stored = quantize_linear(matrix.float(), head_format, group_size=group_size)
            matrix.copy_(stored.dequantize().to(matrix.device, matrix.dtype))
            embedding_bytes += stored.nbytes
            embedding_weights += matrix.numel()
        norms = [m for m in copied.modules() if isinstance(m, RMSNorm)]
        norm_values = sum(m.weight.numel() for m in norms)
        if format != "fp32":
            for module in norms:
                module.weight.data.copy_(module.weight.data.to(torch.bfloat16)
                                         .to(module.weight.dtype))
        if getattr(copied, "lm_head_weight", None) is not None:
            # The CPU path keeps a column-major copy of a tied head (column_major_weights).
            copied.lm_head_weight = copied.lm_head.weight.detach().t().contiguous().t()
    linear_bytes = sum(t.nbytes for t in tensors.values())
    predicted = quantized_bytes_shapes(shapes=shapes, format=format,
                                       group_size=group_size)["total"]
    layer_errors = [{"layer": layer, "rel_error": math.sqrt(e / n) if n else 0.0,
                     "predicted_rel_error": math.sqrt(p / n) if n else 0.0}
                    for layer, (e, n, p) in sorted(sums.items())]
    err_all = sum(v[0] for v in sums.values())
    norm_all = sum(v[1] for v in sums.values())
    predicted_all = sum(v[2] for v in sums.values())
    return QuantizedModel(
        model=copied, format=format, group_size=group_size,
        quantize_embedding=quantize_embedding, tensors=tensors,
        linear_weights=sum(t.shape[0] * t.shape[1] for t in tensors.values()),
        linear_bytes=linear_bytes, predicted_bytes=predicted,
        embedding_weights=embedding_weights, embedding_bytes=embedding_bytes,
        norm_bytes=norm_values * (4 if format == "fp32" else 2),
        layer_errors=layer_errors, worst=worst,
        error=math.sqrt(err_all / norm_all) if norm_all else 0.0,
        predicted_error=math.sqrt(predicted_all / norm_all) if norm_all else 0.0,
    )


def engine_quantize(engine, *, format: str, group_size: int = 128,  # noqa: ANN001
                    quantize_embedding: bool = False) -> QuantizedModel:
    """Swap `engine`'s model for a quantized copy (see model_quantize) and return it. For a
    private engine with no request in flight (an experiment, a candidate model version); never
    the worker's shared engine. Its KV pool and settings are unchanged."""
    quantized = model_quantize(engine.runner.model, format=format, group_size=group_size,
                               quantize_embedding=quantize_embedding)
    engine.runner.model = quantized.model
    return quantized
