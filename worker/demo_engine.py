"""The engines a worker process holds: the shared one every chat-like request joins, and the
private ones that experiments build for themselves.

A worker that consumes the engine queue (settings.ENGINE_QUEUE) loads its shared engine when it
starts, in a thread of its own, warms it up, starts the engine loop (worker/engine_loop.py) and
only then says it is ready (worker/heartbeat.py); tasks that arrive earlier wait for it.
Loading also measures this machine once (matmul rate, memory bandwidth), so the lifecycle demo
can set the arithmetic's estimate beside what it measured.

Only worker processes call into this module's insides (torch, the engine); the web process
never does.
"""

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# A small pool, so that freeing one request's blocks visibly moves the demos' free-blocks bar,
# yet room for many visitors at once: 256 blocks of 16 tokens hold 4,096 tokens.
KV_BLOCKS = 256
BLOCK_SIZE = 16
MAX_NUM_SEQS = 32


def machine_measure(*, device: str = "cpu", matmul_size: int = 512,
                    copy_bytes: int = 64 * 2**20, working_set_bytes: int | None = None,
                    repeats: int = 5) -> dict:
    """This machine's achievable fp32 matmul rate (FLOP/s) and memory bandwidth (B/s), the
    rates the demos divide by for their floors, so each is the fastest this worker was seen
    to go (a floor from a slower rate would not be a floor).

    Best of `repeats` timings. Matmul: a square matmul of `matmul_size` (2·n³ FLOPs) with
    torch.mm and, on a CPU, with the engine's own packed C kernel (kernels/cpu.py), which is
    what the engine runs there. Memory: a copy of `copy_bytes` (read and write, so 2× the bytes
    move) and, on a CPU given `working_set_bytes` (the model's weights), a read of a buffer
    that size over and over, as decode steps read the same weights: a model small enough for
    the CPU's caches is read from them, faster than any copy through DRAM. (A GPU keeps the copy
    alone, the DRAM figure its demos' floors are written for.) `matmul_how` and
    `memory_how` say which measurement set each rate.
    """
    import torch

    from worker.hardware import fastest_seconds

    def fastest(run) -> float:  # noqa: ANN001
        # One warm-up: the first call pays for thread-pool (or kernel) start-up.
        return fastest_seconds(run, device=device, repeats=repeats, warmups=1)

    a = torch.randn(matmul_size, matmul_size, device=device)
    b = torch.randn(matmul_size, matmul_size, device=device)
    flops = 2 * matmul_size**3
    torch_rate = flops / fastest(lambda: torch.mm(a, b))
    flops_per_s = torch_rate
    matmul_how = (f"best of {repeats} fp32 {matmul_size} × {matmul_size} matmuls (torch.mm) "
                  "on this machine")
    kern = None
    if device == "cpu":
        from worker.engine.kernels.cpu import cpu_kernels

        kern = cpu_kernels()
    if kern is not None:
        packed, threads = kern.pack(b), torch.get_num_threads()
        kernel_rate = flops / fastest(lambda: kern.linear(a, packed, threads))
        if kernel_rate > torch_rate:
            flops_per_s = kernel_rate
            matmul_how = (f"best of {repeats} fp32 {matmul_size} × {matmul_size} matmuls with "
                          f"the engine's own kernel on this machine (torch.mm reached "
                          f"{torch_rate / 1e9:,.0f} GFLOP/s)")

    src = torch.empty(copy_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    copy_rate = 2 * copy_bytes / fastest(lambda: dst.copy_(src))
    bytes_per_s = copy_rate
    memory_how = f"best of {repeats} copies of {copy_bytes / 2**20:,.0f} MiB on this machine"
    if working_set_bytes and device == "cpu":
        weights = torch.ones(max(working_set_bytes // 4, 1), dtype=torch.float32, device=device)
        read_rate = weights.numel() * 4 / fastest(lambda: weights.sum())
        if read_rate > copy_rate:
            bytes_per_s = read_rate
            memory_how = (f"best of {repeats} reads of {working_set_bytes / 1e6:,.1f} MB (the "
                          "model's weights) over and over, as decode steps read them, on this "
                          f"machine (a {copy_bytes / 2**20:,.0f} MiB copy reached "
                          f"{copy_rate / 1e9:,.1f} GB/s)")
    return {"matmul_flops_per_s": flops_per_s, "memory_bytes_per_s": bytes_per_s,
            "matmul_how": matmul_how, "memory_how": memory_how,
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


@dataclass
class Serving:
    """What the worker process serves with: the loop over the shared engine, the machine's
    measured rates, and the metrics the loop feeds."""

    loop: object  # worker.engine_loop.EngineLoop
    machine: dict
    metrics: object  # worker.engine_metrics.EngineMetrics


_lock = threading.Lock()
_loaded = threading.Event()
_serving: Serving | None = None
_load_error: BaseException | None = None


def model_name_of(model_path: str) -> str:
    """The id the API and the metrics use for a model directory: its folder name."""
    return Path(model_path).name


def _context_of(model_path: str) -> int:
    """The model's context from its config.json (the engine's max_model_len by default): the
    metrics' token histograms reach it before the model is loaded."""
    import json

    config = json.loads((Path(model_path) / "config.json").read_text())
    return int(config.get("max_position_embeddings") or 1024)


def engine_build(model_path: str, *, device: str = "cpu", **overrides):  # noqa: ANN003, ANN201
    """A fresh engine with the demos' pool (experiments pass their own settings). A `dtype` may
    be named ("bfloat16"), so the demos' runners need not import torch themselves."""
    import torch

    from worker.engine import Engine

    if isinstance(overrides.get("dtype"), str):
        overrides["dtype"] = getattr(torch, overrides["dtype"])
    settings = {**dict(device=device, block_size=BLOCK_SIZE, num_kv_blocks=KV_BLOCKS,
                       max_num_seqs=MAX_NUM_SEQS), **overrides}
    return Engine.from_pretrained(model_path, **settings)


def engine_warm_up(engine) -> None:  # noqa: ANN001
    """Run a few short requests, so the first learner does not pay for first-call set-up
    (thread pools, allocator, first shapes): a cold first run measured 90 ms per token here,
    a warm one 3."""
    from worker.engine import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    for batch in (1, 4):
        engine.generate([[5 + i, 6, 7, 8, 9] for i in range(batch)], params)


# The shared engine serves its owners (a learner's session or account, an API account) by its
# fair policy: the next seat goes to the owner with the fewest requests running (then the fewest
# tokens served), so one owner's forty streams cannot keep everyone else waiting
# (first-come-first-served let them: another key's time to first token rose from 0.04 s to
# 6.6 s).
SHARED_POLICY = "fair"


def shared_engine_build(model_path: str, *, device: str = "cpu", **overrides):  # noqa: ANN003, ANN201
    """The engine every chat-like request of this process joins: the demos' pool, the fair
    policy."""
    return engine_build(model_path, device=device, **{"policy": SHARED_POLICY, **overrides})


def serving_start(model_path: str, *, device: str = "cpu") -> Serving:
    """Load, warm up and start the shared engine of this process (once; later calls wait for
    the first and return what it built)."""
    global _serving, _load_error
    with _lock:
        if _serving is not None:
            return _serving
        from worker.engine_loop import EngineLoop
        from worker.engine_metrics import EngineMetrics

        t = time.perf_counter()
        machine: dict = {}

        def setup():  # noqa: ANN202 (runs in the loop thread: see EngineLoop)
            if device == "cpu":
                import torch

                from worker.cpu_threads import engine_threads

                # The loop thread runs every step: its setting is the engine's.
                torch.set_num_threads(engine_threads())
            started = time.perf_counter()
            engine = shared_engine_build(model_path, device=device)
            built = time.perf_counter()
            engine_warm_up(engine)
            # The load's own timing (problem 20 sets it beside a large model's cold start).
            facts = model_facts(engine)
            machine.update({**machine_measure(device=device,
                                              working_set_bytes=facts["weight_bytes"]),
                            **facts,
                            "model_path": model_path, "device": device,
                            "load_seconds": built - started,
                            "warmup_seconds": time.perf_counter() - built,
                            "file_bytes": sum(f.stat().st_size for f in
                                              Path(model_path).glob("*.safetensors"))})
            return engine

        metrics = EngineMetrics(model_name=model_name_of(model_path),
                                max_model_len=_context_of(model_path))
        try:
            loop = EngineLoop(model_name=model_name_of(model_path), setup=setup,
                              engine_factory=lambda: shared_engine_build(model_path, device=device),
                              on_events=metrics.observe).start()
        except BaseException as exc:
            _load_error = exc
            _loaded.set()
            raise
        logger.info("shared engine loaded from %s and warmed up in %.1f s; machine %s",
                    model_path, time.perf_counter() - t, machine)
        _serving = Serving(loop=loop, machine=machine, metrics=metrics)
        _loaded.set()
        return _serving


def serving_get(model_path: str, *, device: str = "cpu", timeout: float = 300.0) -> Serving:
    """This process's shared engine: the one the worker is loading or has loaded, else loaded
    now (a process that was not started as an engine worker, such as a test)."""
    if _serving is None and not _loaded.is_set() and not _lock.locked():
        return serving_start(model_path, device=device)
    if not _loaded.wait(timeout):
        raise RuntimeError(f"the shared engine did not load within {timeout:.0f} s")
    if _serving is None:
        raise RuntimeError(f"the shared engine failed to load: {_load_error}")
    return _serving


def serving_metrics_text() -> bytes | None:
    """This process's /metrics registry text (Prometheus format), or None before the shared
    engine is loaded: what the worker publishes for the web's /metrics."""
    return _serving.metrics.text() if _serving is not None else None
