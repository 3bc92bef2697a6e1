"""The engine a worker process keeps: loaded on its first demo run, reused by every later one.

Only worker processes import this module's functions' insides (torch, the engine); the web
process never calls them. Loading also measures this machine once (matmul rate, memory
bandwidth), so the lifecycle demo can set the arithmetic's estimate beside what it measured.
"""

import logging
import threading
import time

logger = logging.getLogger(__name__)

# A small pool so that freeing one request's blocks visibly moves the demos' free-blocks bar:
# 128 blocks of 16 tokens hold 2,048 tokens, enough for three 512-token answers at once.
KV_BLOCKS = 128
BLOCK_SIZE = 16

_lock = threading.Lock()
_loaded: tuple | None = None


def machine_measure(*, device: str = "cpu", matmul_size: int = 512,
                    copy_bytes: int = 64 * 2**20, repeats: int = 5) -> dict:
    """This machine's achievable fp32 matmul rate (FLOP/s) and memory copy bandwidth (B/s).

    Best of `repeats` timings: a square matmul of `matmul_size` (2·n³ FLOPs), and a copy of
    `copy_bytes` (read and write, so 2× the bytes move).
    """
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    a = torch.randn(matmul_size, matmul_size, device=device)
    b = torch.randn(matmul_size, matmul_size, device=device)
    torch.mm(a, b)  # warm-up: first call pays for thread-pool (or kernel) start-up
    sync()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = min(best, time.perf_counter() - t)
    flops_per_s = 2 * matmul_size**3 / best

    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    dst.copy_(src)
    sync()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        dst.copy_(src)
        sync()
        best = min(best, time.perf_counter() - t)
    bytes_per_s = 2 * copy_bytes / best
    return {"matmul_flops_per_s": flops_per_s, "memory_bytes_per_s": bytes_per_s,
            "matmul_size": matmul_size, "copy_bytes": copy_bytes,
            "threads": torch.get_num_threads()}


def model_facts(engine) -> dict:
    """The loaded model's size: parameter count and weight bytes as held in memory."""
    runner = getattr(engine, "runner", None)
    model = getattr(engine, "model", None) or getattr(runner, "model", None)
    params = [p for p in model.parameters()] if model is not None else []
    return {
        "parameters": int(sum(p.numel() for p in params)),
        "weight_bytes": int(sum(p.numel() * p.element_size() for p in params)),
        "dtype": str(params[0].dtype).removeprefix("torch.") if params else "unknown",
    }


def engine_get(model_path: str, *, device: str = "cpu") -> tuple:
    """(engine, machine) for this process, loading them on first use."""
    global _loaded
    with _lock:
        if _loaded is None:
            from worker.engine import Engine

            t = time.perf_counter()
            engine = Engine.from_pretrained(model_path, device=device, block_size=BLOCK_SIZE,
                                            num_kv_blocks=KV_BLOCKS)
            machine = {**machine_measure(device=device), **model_facts(engine),
                       "model_path": model_path, "device": device}
            logger.info("engine loaded from %s in %.1f s; machine %s", model_path,
                        time.perf_counter() - t, machine)
            _loaded = (engine, machine)
        return _loaded


def engine_forget() -> None:
    """Drop this process's engine, so the next run loads a fresh one (after a failure that may
    have left it half-way through a step)."""
    global _loaded
    with _lock:
        _loaded = None
