"""The Triton RMSNorm checked against the engine's PyTorch RMSNorm: errors in absolute terms,
relative terms and units in the last place (ulps) of the output format, each also measured
against an FP64 reference so the kernel's error can be set beside the reference's own.

Used by the kernel's tests and by the triton-rmsnorm demo. Run as a module in a child process
started with TRITON_INTERPRET=1 where there is no GPU (what the demo does on a CPU worker):

    TRITON_INTERPRET=1 python -m worker.engine.kernels.parity '{"tokens": 8, "hidden": 96}'

prints one JSON object, the result of `rmsnorm_parity`.
"""

import json
import math
import sys

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def rmsnorm_tolerance(*, dtype: torch.dtype, mode: str) -> dict[str, float]:
    """The closeness the tests demand of the kernel against the engine's PyTorch RMSNorm
    (torch.testing.assert_close's rtol and atol).

    The kernel rounds where the reference rounds, so the two differ only where summing the
    squares in another order flips a rounding: a couple of ulps. BF16 in the interpreter is
    looser: Triton 3.9's interpreter converts FP32 to BF16 by truncation, not round-to-nearest,
    which can add an ulp at each of the three rounding points of the fused add. Compiled on a
    GPU, PyTorch's own default for BF16 applies.
    """
    if dtype == torch.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    if dtype == torch.float16:
        return {"rtol": 2**-9, "atol": 1e-5}
    if mode == "interpreter":
        return {"rtol": 2**-5, "atol": 1e-5}
    return {"rtol": 1.6e-2, "atol": 1e-5}


def ulps(got: torch.Tensor, want: torch.Tensor, *, dtype: torch.dtype) -> torch.Tensor:
    """|got − want| in units in the last place of `dtype` at |want| (float64)."""
    info = torch.finfo(dtype)
    want64 = want.double()
    magnitude = want64.abs().clamp(min=info.tiny)
    spacing = info.eps * torch.exp2(torch.floor(torch.log2(magnitude)))
    return (got.double() - want64).abs() / spacing


def rmsnorm_hf(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face's LlamaRMSNorm.forward, op by op: the eager code the page's byte count
    models (cast up, square, mean, add eps, rsqrt, multiply, cast down, weight multiply)."""
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)


def rmsnorm_inputs(*, tokens: int, hidden: int, dtype: torch.dtype, residual: bool,
                   seed: int = 0, device: str = "cpu") -> dict:
    """Seeded inputs: activations of a few units' size, a weight near 1, a residual stream."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(tokens, hidden, generator=g) * 3).to(dtype)
    weight = (torch.randn(hidden, generator=g) * 0.2 + 1).to(dtype)
    r = torch.randn(tokens, hidden, generator=g).to(dtype) if residual else None
    return {"x": x.to(device), "weight": weight.to(device),
            "residual": None if r is None else r.to(device)}


def _errors(got: torch.Tensor, want: torch.Tensor, *, dtype: torch.dtype) -> dict[str, float]:
    diff = (got.double() - want.double()).abs()
    scale = want.double().abs().clamp(min=torch.finfo(dtype).tiny)
    return {"max_abs": float(diff.max()) if diff.numel() else 0.0,
            "max_rel": float((diff / scale).max()) if diff.numel() else 0.0,
            "max_ulps": float(ulps(got, want, dtype=dtype).max()) if diff.numel() else 0.0}


def rmsnorm_parity(*, tokens: int, hidden: int, dtype: str = "bf16", residual: bool = True,
                   eps: float = 1e-5, seed: int = 0, device: str = "cpu") -> dict:
    """Run the Triton kernel and the engine's PyTorch RMSNorm on the same seeded inputs and
    compare them (and each against FP64). Returns a JSON-ready dict: the mode, the errors, the
    tolerance and whether the kernel passes it."""
    from worker.engine.kernels import triton_mode
    from worker.engine.kernels.rmsnorm import rmsnorm
    from worker.engine.layers.norm import RMSNorm

    mode = triton_mode()
    torch_dtype = DTYPES[dtype]
    inputs = rmsnorm_inputs(tokens=tokens, hidden=hidden, dtype=torch_dtype,
                            residual=residual, seed=seed, device=device)
    x, weight, r = inputs["x"], inputs["weight"], inputs["residual"]
    norm = RMSNorm(hidden, eps).to(device=device, dtype=torch_dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        if r is None:
            summed = x
            got = rmsnorm(x, weight, eps)
            got_sum = None
        else:
            summed = x + r  # the eager residual add, rounded to the activations' format
            got, got_sum = rmsnorm(x, weight, eps, residual=r)
        want = norm.forward_eager(summed)
        # FP64 all the way: what both implementations approximate.
        exact_in = x.double() + (r.double() if r is not None else 0)
        exact = rmsnorm_hf(exact_in, weight.double(), eps)
    tolerance = rmsnorm_tolerance(dtype=torch_dtype, mode=mode or "compiled")
    passed = bool(torch.allclose(got.double(), want.double(), **tolerance))
    sum_errors = None
    if got_sum is not None:
        sum_errors = _errors(got_sum, summed, dtype=torch_dtype)
        passed = passed and bool(torch.allclose(got_sum.double(), summed.double(), **tolerance))
    finite = all(math.isfinite(v) for v in _errors(got, want, dtype=torch_dtype).values())
    return {
        "mode": mode,
        "device": str(device),
        "tokens": tokens,
        "hidden": hidden,
        "dtype": dtype,
        "residual": residual,
        "eps": eps,
        "kernel_vs_engine": _errors(got, want, dtype=torch_dtype),
        "kernel_vs_fp64": _errors(got, exact, dtype=torch_dtype),
        "engine_vs_fp64": _errors(want, exact, dtype=torch_dtype),
        "residual_sum": sum_errors,
        "tolerance": tolerance,
        "passed": passed and finite,
    }


def main(argv: list[str]) -> int:
    """`python -m worker.engine.kernels.parity '<json arguments>'`: print the result as JSON."""
    arguments = json.loads(argv[1]) if len(argv) > 1 else {}
    print(json.dumps(rmsnorm_parity(**arguments)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
