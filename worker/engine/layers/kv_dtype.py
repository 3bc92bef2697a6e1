"""The KV cache's own number format (`kv_cache_dtype`), apart from the model's compute dtype.

The pool may store K and V narrower than the model computes: BF16 or FP16 beside an FP32 model,
or FP8 E4M3 as vLLM's `--kv-cache-dtype fp8` does. Values are converted when they are written
into the pool and converted back to the compute dtype when attention reads them, so the maths
is unchanged and only the stored values are rounded. FP8 uses a scale of 1 (vLLM's default when
no scales are calibrated) and saturates at E4M3's largest value, 448, instead of overflowing to
NaN as a plain cast would.
"""

import torch

# Accepted names -> torch dtypes. "auto" (or None) keeps the model's compute dtype.
KV_CACHE_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float8_e4m3fn": torch.float8_e4m3fn,
}
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn",
            "fp8_e4m3": "float8_e4m3fn"}
FP8_E4M3_MAX = 448.0


def kv_cache_dtype_resolve(name: str | torch.dtype | None, *, model_dtype: torch.dtype
                           ) -> torch.dtype:
    """The pool's torch dtype for a `kv_cache_dtype` argument (a name, a dtype, or None/'auto'
    for the model's own dtype); ValueError naming the choices otherwise."""
    if name is None or name == "auto":
        return model_dtype
    if isinstance(name, torch.dtype):
        if name in KV_CACHE_DTYPES.values():
            return name
        raise ValueError(f"kv_cache_dtype {name} is not one of {sorted(KV_CACHE_DTYPES)}")
    key = _ALIASES.get(str(name), str(name))
    if key not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype must be 'auto' or one of {sorted(KV_CACHE_DTYPES)}, "
                         f"not {name!r}")
    return KV_CACHE_DTYPES[key]


def kv_dtype_name(dtype: torch.dtype) -> str:
    """The name this module accepts for `dtype` ('float8_e4m3fn', 'bfloat16', ...)."""
    return next(k for k, v in KV_CACHE_DTYPES.items() if v == dtype)


def kv_store(x: torch.Tensor, cache_dtype: torch.dtype) -> torch.Tensor:
    """`x` as the pool stores it (FP8 saturating at ±448)."""
    if x.dtype == cache_dtype:
        return x
    if cache_dtype == torch.float8_e4m3fn:
        x = x.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX)
    return x.to(cache_dtype)


def kv_load(x: torch.Tensor, compute_dtype: torch.dtype) -> torch.Tensor:
    """Stored K or V back in the compute dtype (a no-op when they are the same)."""
    return x if x.dtype == compute_dtype else x.to(compute_dtype)


def kv_round(x: torch.Tensor, cache_dtype: torch.dtype) -> torch.Tensor:
    """`x` as a later read of the pool will see it: stored, then read back."""
    return kv_load(kv_store(x, cache_dtype), x.dtype)


def kv_raw(x: torch.Tensor) -> torch.Tensor:
    """`x` as bytes when it is FP8: torch's CPU indexing kernels (index_copy_, index_select)
    have no FP8 version, so the pool is indexed through a uint8 view of the same memory."""
    return x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x


def pool_write(cache: torch.Tensor, slots: torch.Tensor, x: torch.Tensor) -> None:
    """Store `x` [tokens, kv_heads, head_dim] at flat `slots` of a pool
    [blocks, block_size, kv_heads, head_dim], converting to the pool's format."""
    flat = kv_raw(cache).view(-1, *cache.shape[2:])
    flat.index_copy_(0, slots, kv_raw(kv_store(x, cache.dtype)))


def pool_gather(cache: torch.Tensor, block_ids: torch.Tensor,
                compute_dtype: torch.dtype) -> torch.Tensor:
    """Whole blocks of a pool, in the compute dtype."""
    taken = kv_raw(cache).index_select(0, block_ids)
    return kv_load(taken.view(cache.dtype), compute_dtype)
