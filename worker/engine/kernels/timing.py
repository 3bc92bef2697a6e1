"""Timing the RMSNorm implementations on a GPU: the triton-rmsnorm demo's measurement."""


def rmsnorm_timings_on_gpu(*, tokens: int, hidden: int, dtype: str, residual: bool) -> dict:
    """Microseconds per call of Hugging Face's op-by-op eager code, the engine's eager RMSNorm
    and the Triton kernel (triton.testing.do_bench: CUDA events, L2 flushed between
    repetitions, after a warm-up that compiles and autotunes), and kernels per call of each."""
    import torch
    import triton.testing
    from torch.profiler import ProfilerActivity, profile

    from worker.engine.kernels.parity import DTYPES, rmsnorm_hf, rmsnorm_inputs
    from worker.engine.kernels.rmsnorm import rmsnorm
    from worker.engine.layers.norm import RMSNorm

    torch_dtype = DTYPES[dtype]
    inputs = rmsnorm_inputs(tokens=tokens, hidden=hidden, dtype=torch_dtype, residual=residual,
                            device="cuda")
    x, w, r = inputs["x"], inputs["weight"], inputs["residual"]
    norm = RMSNorm(hidden, 1e-5).to(device="cuda", dtype=torch_dtype)
    with torch.no_grad():
        norm.weight.copy_(w)
    if r is None:
        calls = {"hf_eager": lambda: rmsnorm_hf(x, w, 1e-5),
                 "engine_eager": lambda: norm.forward_eager(x),
                 "triton": lambda: rmsnorm(x, w, 1e-5)}
    else:
        calls = {"hf_eager": lambda: rmsnorm_hf(x + r, w, 1e-5),
                 "engine_eager": lambda: norm.forward_eager(x + r),
                 "triton": lambda: rmsnorm(x, w, 1e-5, residual=r)}
    result = {"l2_bytes": int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))}
    with torch.no_grad():
        for name, call in calls.items():
            call()  # compile, autotune, first-call allocations
            torch.cuda.synchronize()
            result[f"{name}_us"] = float(triton.testing.do_bench(call, warmup=25, rep=100)) * 1e3
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                call()
                torch.cuda.synchronize()
            result[f"{name}_kernels"] = sum(
                1 for e in prof.events() if e.device_type.name == "CUDA")
    return result
