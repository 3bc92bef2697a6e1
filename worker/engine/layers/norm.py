"""RMSNorm: scale each vector by the inverse of its root mean square, then by a weight.

On CUDA, when Triton can compile kernels there, the fused kernel of
worker/engine/kernels/rmsnorm.py runs instead of PyTorch's ops: one read and one write per
element, rounded at the same points, so outputs keep matching the reference. ENGINE_TRITON=0
turns it off; ENGINE_TRITON=force uses it wherever Triton runs, its CPU interpreter included
(how the tests check this path on a machine without a GPU). The choice is made once per module,
on its first call, from the device of what it is given.

`forward(x, residual)` is the fused add-and-norm every decoder layer but the first uses: it
returns the normalised sum and the sum itself (the new residual stream), so on CUDA the add
runs inside the kernel (one launch, one read of each input, one write of each output) instead of
as a separate elementwise op before it, as vLLM's fused_add_rms_norm does.
"""

import os

import torch
import torch.nn.functional as F
from torch import nn


def triton_rmsnorm_wanted(device: torch.device) -> bool:
    """Whether RMSNorm on `device` should run the Triton kernel (see the module's docstring)."""
    setting = os.environ.get("ENGINE_TRITON", "auto").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False
    if setting != "force" and device.type != "cuda":
        return False  # a CPU worker never imports triton
    from worker.engine.kernels import triton_mode

    mode = triton_mode()
    return mode is not None if setting == "force" else mode == "compiled"


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps
        self.use_triton: bool | None = None  # decided on the first call
        self._kernel = None

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """RMSNorm(x), or with `residual` the pair (RMSNorm(x + residual), x + residual)."""
        if self.use_triton is None:
            self.use_triton = triton_rmsnorm_wanted(x.device)
            if self.use_triton:
                from worker.engine.kernels.rmsnorm import rmsnorm

                self._kernel = rmsnorm
        if self.use_triton:
            if residual is None:
                return self._kernel(x, self.weight, self.eps)
            return self._kernel(x, self.weight, self.eps, residual=residual)
        if residual is None:
            return self.forward_eager(x)
        summed = x + residual  # rounded to x's dtype, as the kernel rounds it
        return self.forward_eager(summed), summed

    def forward_eager(self, x: torch.Tensor) -> torch.Tensor:
        """PyTorch's ops: what runs on the CPU, and the reference for the Triton kernel."""
        if x.dtype == torch.float32:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)  # one fused op
        # Lower precision: normalise in fp32, round, then scale, as the reference does.
        return self.weight * F.rms_norm(x.float(), self.weight.shape, eps=self.eps).to(x.dtype)
