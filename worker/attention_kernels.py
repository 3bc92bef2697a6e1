"""Three implementations of causal attention with the same maths, for problem 5's demo.

- `attention_naive`: materialise the scores S = Q Kᵀ for every (query, key) pair, mask, softmax
  into P, multiply by V. Memory for S and P grows with N².
- `attention_tiled`: the FlashAttention algorithm in plain PyTorch. Queries are taken in tiles
  of `tile` rows; for each, keys and values stream past in tiles of `tile` columns, and an
  online softmax keeps, per query row, the running maximum m, the running sum of exponentials
  l and an unnormalised output. When a new tile raises the maximum, what was summed so far is
  rescaled by exp(m_old − m_new), so the result is exact without ever holding a row of N
  scores. Tiles wholly above the diagonal are skipped (causal). Memory grows with N.
- `attention_sdpa`: torch.nn.functional.scaled_dot_product_attention, which picks a fused
  kernel (on CPU a flash-style one; on CUDA FlashAttention or memory-efficient attention).

Inputs are [heads, N, head_dim]; each returns [heads, N, head_dim]. The page shows the source
between the two markers below.
"""

import math
import statistics
import time

import torch
import torch.nn.functional as F


def attention_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)).mul_(1 / math.sqrt(q.shape[-1]))  # [heads, N, N]
    future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)
    scores.masked_fill_(future, float("-inf"))
    probs = scores.softmax(dim=-1)  # another [heads, N, N]
    return probs @ v


# --- tiled attention: shown on the page ---
def attention_tiled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    tile: int = 64) -> torch.Tensor:
    heads, n, d = q.shape
    scale = 1 / math.sqrt(d)
    out = torch.empty_like(q)
    for i in range(0, n, tile):  # one tile of query rows at a time
        qi = q[:, i:i + tile] * scale
        rows = qi.shape[1]
        m = torch.full((heads, rows, 1), float("-inf"), device=q.device)  # running max
        l = torch.zeros(heads, rows, 1, device=q.device)  # running sum of exp  # noqa: E741
        acc = torch.zeros(heads, rows, d, device=q.device)  # unnormalised output
        for j in range(0, i + rows, tile):  # key tiles up to the diagonal (causal)
            s = qi @ k[:, j:j + tile].transpose(-1, -2)  # [heads, rows, tile] scores
            if j + tile > i:  # the diagonal tile: mask the keys after each query
                qpos = torch.arange(i, i + rows, device=q.device).view(-1, 1)
                kpos = torch.arange(j, j + s.shape[-1], device=q.device).view(1, -1)
                s = s.masked_fill(kpos > qpos, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            correction = torch.exp(m - m_new)  # rescale what was summed under the old max
            l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
            acc = acc * correction + p @ v[:, j:j + tile]
            m = m_new
        out[:, i:i + rows] = acc / l
    return out
# --- end of tiled attention ---


def attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


IMPLEMENTATIONS = {"naive": attention_naive, "tiled": attention_tiled, "sdpa": attention_sdpa}


def peak_intermediate_bytes(fn, *args, **kwargs) -> tuple[torch.Tensor, int]:  # noqa: ANN001
    """Run `fn` and measure the most memory its intermediate tensors held at once (bytes), its
    output excluded. On CUDA from the allocator's peak; on CPU from the profiler's allocation
    events in time order (a single fused operator's own scratch buffers are freed inside it and
    do not show there, so for SDPA on CPU it is a floor)."""
    if args[0].is_cuda:
        device = args[0].device
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        out = fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        return out, max(0, peak - out.numel() * out.element_size())
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn(*args, **kwargs)
    changes = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()
                     if e.self_cpu_memory_usage)
    held = peak = 0
    for _, change in changes:
        held += change
        peak = max(peak, held)
    return out, max(0, peak - out.numel() * out.element_size())


def tiled_source() -> str:
    """The source of `attention_tiled`, as the page shows it (read as text, no import)."""
    from pathlib import Path

    text = Path(__file__).read_text()
    start = text.index("# --- tiled attention: shown on the page ---\n")
    end = text.index("# --- end of tiled attention ---")
    return text[start:end].split("\n", 1)[1].rstrip() + "\n"


def attention_kernels_measure(*, lengths: list[int], heads: int, head_dim: int, tile: int,
                              repeats: int, device: str, check):  # noqa: ANN001, ANN201
    """For each length (tokens), on the same random inputs (seeded): each implementation's
    median time over `repeats` calls after a warm-up (seconds), the peak bytes its intermediate
    tensors held, and its largest error against a float64 reference. Yields (tokens, {name:
    cell}); calls `check()` between measurements (it raises to stop)."""
    generator = torch.Generator().manual_seed(0)
    for n in lengths:
        check()
        q, k, v = (torch.randn(heads, n, head_dim, generator=generator).to(device)
                   for _ in range(3))
        reference = IMPLEMENTATIONS["naive"](q.double(), k.double(), v.double())
        scale = reference.abs().max().item()
        cells = {}
        for name, fn in IMPLEMENTATIONS.items():
            check()
            kwargs = {"tile": tile} if name == "tiled" else {}
            fn(q, k, v, **kwargs)  # warm-up: first calls pay for allocation and dispatch
            times = []
            for _ in range(repeats):
                if q.is_cuda:
                    torch.cuda.synchronize(q.device)
                t0 = time.perf_counter()
                out = fn(q, k, v, **kwargs)
                if q.is_cuda:
                    torch.cuda.synchronize(q.device)
                times.append(time.perf_counter() - t0)
            _, held = peak_intermediate_bytes(fn, q, k, v, **kwargs)
            error = (out.double() - reference).abs().max().item()
            cells[name] = {"seconds": statistics.median(times), "intermediate_bytes": held,
                           "max_error": error, "relative_error": error / scale if scale else 0.0}
        yield n, cells
