"""One serving replica under random load, step by step: what it really serves, and so what a
million tokens really cost, against the steady-state arithmetic that prices tokens by GPU time.

Requests arrive as a Poisson process at a fraction of the replica's predicted capacity. Each has
a prompt of `input_tokens`, of which the cached share is skipped, and an answer whose length is
geometric with mean `output_tokens`. The scheduler works as vLLM's does, in steps: it admits
waiting requests first come, first served while fewer than `batch` are in flight and their
prompts' KV fits; each step every running sequence decodes one token and prefill chunks fill the
rest of a per-step token budget, first come, first served. A request whose prefill completes gets
its first token at the end of that step. A step takes the roofline of what it carries: the
weights and every decoding sequence's KV read once, against the FLOPs of its decode tokens (at
the decode MFU) plus its prefill tokens (at the prefill MFU). No preemption, no speculative
decoding, no second model.

Plain Python floats in the loop (a step is a few arithmetic updates, whatever the batch): a
step's running sequences are counted, not iterated, and finish from per-step buckets.
"""

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

STEPS_PER_LOAD_MAX = 20_000  # keeps a run to a few hundred ms whatever the replica's step
WARMUP_SECONDS = 15.0  # simulated before measuring starts, so the batch has filled


@dataclass(frozen=True)
class ReplicaModel:
    """The replica's costs per step, all per GPU of the replica (bytes, FLOP, bytes/s, FLOP/s).

    `weights_read`: weight bytes a decode step reads. `kv_token`: KV bytes per token.
    `linear_flops`: FLOPs per token through the non-embedding weights (2 per weight);
    `head_flops`: the output head, per decoded token; `pair_flops`: attention per (query,
    key) pair. `kv_capacity_tokens`: tokens of KV the replica holds.
    """

    weights_read: float
    kv_token: float
    linear_flops: float
    head_flops: float
    pair_flops: float
    bandwidth: float
    decode_flops_rate: float
    prefill_flops_rate: float
    kv_capacity_tokens: float

    def step_seconds(self, *, decoding: int, context_sum: float, prefill_tokens: int,
                     prefill_pairs: float) -> float:
        """One step's roofline (s): max(bytes read ÷ bandwidth, decode FLOPs ÷ their rate +
        prefill FLOPs ÷ theirs)."""
        memory = (self.weights_read + context_sum * self.kv_token) / self.bandwidth
        decode = (decoding * (self.linear_flops + self.head_flops)
                  + self.pair_flops * context_sum) / self.decode_flops_rate
        prefill = (prefill_tokens * self.linear_flops
                   + self.pair_flops * prefill_pairs) / self.prefill_flops_rate
        return max(memory, decode + prefill)


def run(*, replica: ReplicaModel, batch: int, input_tokens: int, cached_tokens: int,
        output_tokens: float, arrival_rate: float, seconds: float, chunk_tokens: int,
        seed: int) -> dict:
    """Simulate `seconds` of Poisson arrivals at `arrival_rate` requests/s after a warm-up
    (15 s, or a quarter of `seconds` if less) that is not measured (tokens, seconds). Returns the
    tokens served in the measured window (`input`, prompt tokens whose prefill completed;
    `output`), the `seconds` measured (fewer when the step cap cut the run short: `cut_short`),
    the mean decode batch, and TTFT and TPOT percentiles (p50, p99) of the requests that got
    their first token in the window (NaN when none did)."""
    rng = np.random.default_rng(seed)
    warmup = min(WARMUP_SECONDS, seconds / 4)
    horizon = warmup + seconds
    expected = arrival_rate * horizon
    count = int(rng.poisson(expected)) if expected > 0 else 0
    arrivals = np.sort(rng.random(count) * horizon)
    lengths = (rng.geometric(min(1.0, 1.0 / max(output_tokens, 1.0)), count)
               if count else np.zeros(0, dtype=int))
    uncached = max(1, input_tokens - cached_tokens)
    capacity = replica.kv_capacity_tokens

    waiting: deque = deque()
    prefilling: deque = deque()  # [index, tokens still to prefill, tokens done]
    finishing: dict[int, list[int]] = {}
    first_token = np.full(count, np.nan)
    finished = np.full(count, np.nan)
    running = 0
    context_sum = 0.0
    kv_tokens = 0.0  # held by running and prefilling requests
    now = 0.0
    step = 0
    next_arrival = 0
    served_in = served_out = 0.0
    batch_sum = 0.0
    measured_steps = 0
    cut = False
    while now < horizon:
        while next_arrival < count and arrivals[next_arrival] <= now:
            waiting.append(next_arrival)
            next_arrival += 1
        while waiting and running + len(prefilling) < batch and (
                kv_tokens + input_tokens + 1 <= capacity):
            index = waiting.popleft()
            prefilling.append([index, uncached, cached_tokens])
            kv_tokens += input_tokens
        if not running and not prefilling:
            if next_arrival >= count:
                break
            now = max(now, float(arrivals[next_arrival]))
            continue
        if step >= STEPS_PER_LOAD_MAX:
            cut = True
            break
        budget = chunk_tokens
        chunk_total = 0
        pairs = 0.0
        done_now = []
        for item in prefilling:
            if budget <= 0:
                break
            take = min(item[1], budget)
            # each new token attends to the tokens before it and itself
            pairs += take * item[2] + take * (take + 1) / 2
            item[1] -= take
            item[2] += take
            budget -= take
            chunk_total += take
            if item[1] == 0:
                done_now.append(item[0])
        seconds_step = replica.step_seconds(decoding=running, context_sum=context_sum,
                                            prefill_tokens=chunk_total, prefill_pairs=pairs)
        now += seconds_step
        measuring = now > warmup
        if measuring:
            served_out += running
            batch_sum += running
            measured_steps += 1
        # Every running sequence gained a token; some reached their length.
        context_sum += running
        kv_tokens += running
        for index in finishing.pop(step, ()):
            length = int(lengths[index])
            context_sum -= input_tokens + length
            kv_tokens -= input_tokens + length
            running -= 1
            finished[index] = now
        for index in done_now:
            prefilling.popleft()
            first_token[index] = now
            if measuring:
                served_in += input_tokens
                served_out += 1
            length = int(lengths[index])
            if length <= 1:
                kv_tokens -= input_tokens
                finished[index] = now
                continue
            running += 1
            context_sum += input_tokens + 1
            kv_tokens += 1
            finishing.setdefault(step + length - 1, []).append(index)
        step += 1
    window = max(min(now, horizon) - warmup, 0.0)
    in_window = (first_token > warmup) & ~np.isnan(first_token)
    ttft = (first_token - arrivals)[in_window]
    long_enough = in_window & ~np.isnan(finished) & (lengths > 1)
    tpot = ((finished - first_token) / np.maximum(lengths - 1, 1))[long_enough]
    # Requests still waiting at the end count toward TTFT as at least their wait so far.
    unserved = (arrivals > warmup) & np.isnan(first_token) & (arrivals <= now)
    ttft_all = np.concatenate([ttft, (now - arrivals)[unserved]])
    return {
        "input": served_in, "output": served_out, "seconds": window,
        "mean_batch": batch_sum / measured_steps if measured_steps else 0.0,
        "ttft_p50": _percentile(ttft_all, 50), "ttft_p99": _percentile(ttft_all, 99),
        "tpot_p50": _percentile(tpot, 50), "tpot_p99": _percentile(tpot, 99),
        "steps": step, "cut_short": cut, "arrived": count,
    }


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def loads_sweep(*, replica: ReplicaModel, batch: int, input_tokens: int, cached_tokens: int,
                output_tokens: float, capacity_rps: float, loads: tuple[float, ...],
                seconds: float, chunk_tokens: int, seed: int) -> list[dict]:
    """`run` at each offered load (a fraction of `capacity_rps`, the predicted capacity in
    requests/s), each with its own seed, so one load's randomness does not leak into the next."""
    return [{"load": load, **run(replica=replica, batch=batch, input_tokens=input_tokens,
                                 cached_tokens=cached_tokens, output_tokens=output_tokens,
                                 arrival_rate=load * capacity_rps, seconds=seconds,
                                 chunk_tokens=chunk_tokens, seed=seed + i)}
            for i, load in enumerate(loads)]
