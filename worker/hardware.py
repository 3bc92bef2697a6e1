"""Measuring the machine a worker runs on, as a roofline: its achieved matmul rate (the flat
roof), its copy bandwidth (the slope), and a decode-shaped multiply swept over batch sizes to
see where real work sits against the line those two numbers draw. Problem 12's demo draws it
beside the four datasheet rooflines. Worker-only (imports torch).

Conventions: FLOP/s counts a multiply and an add as two; copy bandwidth counts every byte read
and every byte written (STREAM's "Copy"), so a copy of n bytes moves 2n; each timing is the
fastest of its repeats.
"""

import platform
import socket
import time
from datetime import UTC, datetime

import torch

CPU_SIZES = {"matmul_n": 1024, "copy_bytes": 64 * 2**20, "sweep_k": 4096,
             "batches": (1, 2, 4, 8, 16, 32, 64, 128, 256)}
CUDA_SIZES = {"matmul_n": 8192, "copy_bytes": 2**30, "sweep_k": 8192,
              "batches": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)}


def sweep_intensity(*, batch: int, k: int, bytes_per_value: int) -> float:
    """FLOPs per byte of y = x @ Wᵀ with x of batch × k and W of k × k: 2·b·k² FLOPs over the
    bytes of W, x and y, (k² + 2·b·k) values (FLOP/B). K = 4,096 in FP32: b = 1 → 0.49976,
    b = 256 → 113.78."""
    return 2 * batch * k * k / (bytes_per_value * (k * k + 2 * batch * k))


def fastest_seconds(run, *, device: str, repeats: int, warmups: int = 2) -> float:  # noqa: ANN001
    """The fastest of `repeats` timed calls of `run()` after `warmups` untimed ones (seconds)."""
    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    for _ in range(warmups):
        run()
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def hardware_measure(*, device: str = "cpu", matmul_n: int | None = None,
                     copy_bytes: int | None = None, sweep_k: int | None = None,
                     batches: tuple[int, ...] | None = None, repeats: int = 5) -> dict:
    """This machine's roofline on `device` with the process's own thread count: `peak_flops`
    from an N × N matmul (2N³ FLOPs over the fastest run), `copy_bytes_per_second` from
    dst.copy_(src) (2 × bytes over the fastest run), their ridge, and a sweep of y = x @ Wᵀ
    (W of K × K) over `batches`, each with its intensity, achieved FLOP/s and the predicted
    min(peak, intensity × bandwidth). FP32 on a CPU, BF16 on CUDA (named in `dtype`)."""
    sizes = CUDA_SIZES if device.startswith("cuda") else CPU_SIZES
    matmul_n = matmul_n or sizes["matmul_n"]
    copy_bytes = copy_bytes or sizes["copy_bytes"]
    sweep_k = sweep_k or sizes["sweep_k"]
    batches = tuple(batches or sizes["batches"])
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    value_bytes = torch.tensor([], dtype=dtype).element_size()
    with torch.inference_mode():
        a = torch.randn(matmul_n, matmul_n, device=device).to(dtype)
        b = torch.randn(matmul_n, matmul_n, device=device).to(dtype)
        seconds = fastest_seconds(lambda a=a, b=b: torch.mm(a, b), device=device, repeats=repeats)
        peak = 2 * matmul_n**3 / seconds
        src = torch.ones(copy_bytes // value_bytes, dtype=dtype, device=device)
        dst = torch.empty_like(src)
        seconds = fastest_seconds(lambda d=dst, s=src: d.copy_(s), device=device, repeats=repeats)
        bandwidth = 2 * src.numel() * value_bytes / seconds
        weight = torch.randn(sweep_k, sweep_k, device=device).to(dtype)
        sweep = []
        for batch in batches:
            x = torch.randn(batch, sweep_k, device=device).to(dtype)
            seconds = fastest_seconds(lambda x=x: x @ weight.T, device=device, repeats=3, warmups=1)
            intensity = sweep_intensity(batch=batch, k=sweep_k, bytes_per_value=value_bytes)
            achieved = 2 * batch * sweep_k * sweep_k / seconds
            predicted = min(peak, intensity * bandwidth)
            sweep.append({"batch": batch, "intensity": intensity, "achieved": achieved,
                          "predicted": predicted, "ratio": achieved / predicted})
    return {
        "device": device,
        "device_name": (torch.cuda.get_device_name(device) if device.startswith("cuda")
                        else platform.processor() or platform.machine()),
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "peak_flops": peak,
        "copy_bytes_per_second": bandwidth,
        "ridge": peak / bandwidth,
        "matmul_n": matmul_n,
        "copy_bytes": copy_bytes,
        "sweep_k": sweep_k,
        "sweep": sweep,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "torch_version": torch.__version__,
    }


def cuda_profiled(run):  # noqa: ANN001, ANN201
    """`run()` under PyTorch's profiler recording CUDA activity: (its result, the profile's
    events), from which a caller reads when kernels were running."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = run()
    return result, prof.events()
