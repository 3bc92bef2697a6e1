"""Fused RMSNorm in Triton, optionally with the residual add before it: one program per row
(token), one read and one write of each element.

    y = x / sqrt(mean(x**2) + eps) * weight                    (plain)
    s = x + residual;  y = s / sqrt(mean(s**2) + eps) * weight  (fused add; returns y and s)

Rounding follows Hugging Face's LlamaRMSNorm and the eager residual add, so the engine's outputs
do not change when the kernel is switched on: the sum is rounded to the activation dtype before
it is normalised, and the normalised value is rounded before the weight multiply. Sums of
squares accumulate in FP32.

Importing this module imports triton: do it only where `triton_mode()` is not None (see
worker/engine/kernels/__init__.py for why the interpreter must be chosen before that).
"""

import torch
import triton
import triton.language as tl

from worker.engine.kernels import triton_mode

# One row is one block held in registers: at most 64 KiB of input a row, the limit Triton's
# layer-norm tutorial sets (65,536 // element size: 16,384 columns in FP32, 32,768 in BF16; the
# course's catalogue tops out at 16,384). The row is upcast to FP32 in registers, so a BF16 row
# at the limit holds 128 KiB there. Wider rows would spill and need a loop over chunks instead.
MAX_ROW_BYTES = 65_536
# The interpreter cannot autotune (it has no GPU to time on), so it launches a fixed width.
WARPS_INTERPRETER = 4


@triton.jit
def row_start(row, row_stride):
    """Where a row begins, in elements, computed in 64 bits. `tl.program_id` is int32 and Triton
    passes a stride below 2³¹ as int32, so `row * row_stride` in their own type wraps once a
    tensor reaches 2³¹ elements: 131,072 tokens of a 16,384-wide model (one unchunked 128K
    prefill of Llama 3.1 405B) would start row 131,072 at −2³¹ and read out of bounds."""
    return row.to(tl.int64) * row_stride


@triton.jit
def rmsnorm_kernel(
    x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr,
    x_row_stride, residual_row_stride, out_row_stride, residual_out_row_stride,
    n_cols, eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row_start(row, x_row_stride) + cols, mask=mask, other=0.0)
    x = x.to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row_start(row, residual_row_stride) + cols, mask=mask,
                    other=0.0)
        s = (x + r.to(tl.float32)).to(residual_out_ptr.dtype.element_ty)
        tl.store(residual_out_ptr + row_start(row, residual_out_row_stride) + cols, s,
                 mask=mask)
        x = s.to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    rstd = tl.rsqrt(mean_sq + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    x_hat = (x * rstd).to(out_ptr.dtype.element_ty)
    y = x_hat.to(tl.float32) * w
    tl.store(out_ptr + row_start(row, out_row_stride) + cols, y.to(out_ptr.dtype.element_ty),
             mask=mask)


# On a GPU the first call for each key times every warp count and keeps the fastest (Triton
# adds the tensors' dtypes to the key). The kernel writes only its outputs, so the tuner's
# repeated runs on the same arguments are harmless; an in-place kernel would need
# restore_value.
rmsnorm_kernel_tuned = triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (1, 2, 4, 8, 16)],
    key=["n_cols", "HAS_RESIDUAL"],
)(rmsnorm_kernel)


def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """`t` as a 2-D [rows, n_cols] view with contiguous columns (copied only if it must be)."""
    t2 = t.reshape(-1, n_cols)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def rmsnorm_inputs_check(x: torch.Tensor, weight: torch.Tensor,
                         residual: torch.Tensor | None) -> None:
    """Refuse what the kernel would misread, with a ValueError that says which input: it indexes
    `weight` as `weight_ptr + cols` (so the weight must be one contiguous row of x's width), reads
    every tensor through raw pointers (so all must share x's device), and holds a row in one
    block (so a row is at most MAX_ROW_BYTES)."""
    if x.dtype not in KERNEL_DTYPES:
        raise ValueError(f"x is {x.dtype}; the kernel takes float32, float16 or bfloat16")
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (the hidden size)")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,):
        raise ValueError(f"weight has shape {tuple(weight.shape)}; expected ({n_cols},)")
    if not weight.is_contiguous():
        raise ValueError(f"weight must be contiguous (stride {weight.stride(0)}): the kernel "
                         "reads it as consecutive elements")
    if weight.dtype not in KERNEL_DTYPES:
        raise ValueError(f"weight is {weight.dtype}; the kernel takes float32, float16 or "
                         "bfloat16")
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device}, x on {x.device}")
    max_cols = MAX_ROW_BYTES // x.element_size()
    if n_cols > max_cols:
        raise ValueError(f"hidden size {n_cols:,} is above {max_cols:,}, one block's limit "
                         f"({MAX_ROW_BYTES:,} bytes a row in {x.dtype})")
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype
                                 or residual.device != x.device):
        raise ValueError("residual must have x's shape, dtype and device")


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float,
            residual: torch.Tensor | None = None):
    """RMSNorm over the last dimension of `x` (any leading shape), by the Triton kernel.

    Returns y, or (y, x + residual) when `residual` is given; outputs have x's shape and dtype.
    Raises ValueError for inputs the kernel would misread (see `rmsnorm_inputs_check`),
    RuntimeError where Triton cannot run.
    """
    mode = triton_mode()
    if mode is None:
        raise RuntimeError("Triton cannot run here (no CUDA, and the process was not started "
                           "with TRITON_INTERPRET=1)")
    rmsnorm_inputs_check(x, weight, residual)
    n_cols = x.shape[-1]
    x2 = _rows(x, n_cols)
    out = torch.empty_like(x2)
    if residual is not None:
        r2 = _rows(residual, n_cols)
        r_out = torch.empty_like(x2)
    else:
        r2 = r_out = x2  # never read or written: HAS_RESIDUAL is False
    if x2.shape[0] > 0:
        kernel, extra = ((rmsnorm_kernel, {"num_warps": WARPS_INTERPRETER})
                         if mode == "interpreter" else (rmsnorm_kernel_tuned, {}))
        kernel[(x2.shape[0],)](
            x2, r2, weight, out, r_out,
            x2.stride(0), r2.stride(0), out.stride(0), r_out.stride(0),
            n_cols, eps,
            HAS_RESIDUAL=residual is not None,
            BLOCK_SIZE=triton.next_power_of_2(n_cols),
            **extra,
        )
    if residual is None:
        return out.view(x.shape)
    return out.view(x.shape), r_out.view(x.shape)
