"""Rotary position embedding (RoPE), with the frequency scalings Llama checkpoints use.

The cos/sin tables are built once for every position up to max_model_len; a step only indexes
them with its tokens' positions.
"""

import math

import torch
from torch import nn


def rope_inv_freq(*, head_dim: int, rope: dict) -> torch.Tensor:
    """Inverse frequencies (radians per position) for each pair of channels, in fp32."""
    base = rope["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    rope_type = rope.get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return inv_freq / rope["factor"]
    if rope_type == "llama3":
        return _llama3_inv_freq(inv_freq, rope)
    raise ValueError(f"unsupported rope_type {rope_type!r} (default, linear, llama3)")


def _llama3_inv_freq(inv_freq: torch.Tensor, rope: dict) -> torch.Tensor:
    """Llama 3.1's scaling: long wavelengths slowed by `factor`, short ones kept, the band
    between them interpolated smoothly."""
    factor = rope["factor"]
    low, high = rope["low_freq_factor"], rope["high_freq_factor"]
    old_len = rope["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding(nn.Module):
    def __init__(self, *, head_dim: int, max_positions: int, rope: dict) -> None:
        super().__init__()
        self.head_dim, self.max_positions, self.rope = head_dim, max_positions, rope
        self.register_buffer("cos", torch.empty(max_positions, head_dim), persistent=False)
        self.register_buffer("sin", torch.empty(max_positions, head_dim), persistent=False)
        self.tables_build()

    def tables_build(self) -> None:
        """(Re)compute the cos/sin tables in fp32 on the buffers' device."""
        if self.cos.is_meta:
            return  # built again once the model has real storage
        inv_freq = rope_inv_freq(head_dim=self.head_dim, rope=self.rope).to(self.cos.device)
        positions = torch.arange(self.max_positions, dtype=torch.float32, device=self.cos.device)
        freqs = torch.outer(positions, inv_freq)
        self.cos = torch.cat((freqs, freqs), dim=-1).cos()
        # The sign of rotate_half folded in: rotate_half(x) * sin == x.roll(D/2) * this.
        self.sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1)

    def tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """cos and signed sin [T, 1, D] for the tokens' positions; computed once per step."""
        cos = self.cos[positions].to(dtype).unsqueeze(1)
        return cos, self.sin[positions].to(dtype).unsqueeze(1)


def rope_apply(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, heads, D] by its tokens' angles (cos and signed sin from `tables`).

    The pairs are (i, i + D/2), the layout Hugging Face Llama checkpoints use:
    x * cos + rotate_half(x) * sin, with rotate_half(x) = (-x2, x1).
    """
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin
