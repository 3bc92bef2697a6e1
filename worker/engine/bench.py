"""Benchmark: this engine (continuous and static batching) against transformers' `generate`.

    python -m worker.engine.bench [--model DIR] [--num-requests 96] [--batch-size 16]

One mixed workload (prompt and output lengths drawn from ranges, EOS ignored so every request
produces exactly its output length) runs several ways on the same model and device:
- this engine with continuous batching, and the same with its fused C kernels off (PyTorch's
  ops), which splits what the scheduler gives from what the kernels give;
- this engine with static batches of `--batch-size`;
- transformers' `generate` on static batches of `--batch-size`, left-padded, sdpa attention,
  its DynamicCache, each batch running to its longest member's output length (the tokens past
  a member's own length are wasted); with `--generate-batch`, transformers' own continuous
  batching (`generate_batch`) as a row too (it measured slower than static `generate` here).
All requests arrive at time zero. Before any timing, each run is warmed up on a workload of the
real shapes (another seed). The runs go round `--rounds` times (default 3), their order rotated
each round so no run always follows the same one; each round draws its own prompts (seed +
round), the same for every run in it (the engine's prefix cache keeps a round's prompts). A row
prints its median round (TTFT mean/p50/p99, mean TPOT) and the min / median / max output
tokens per second over the rounds, and its throughput against transformers (ratio of the
medians); then each round's ratio, since rounds run back to back under the same load.

Under the table: greedy parity (whether each engine run produced transformers' tokens, request
by request), and batch-1 decode (one request alone, its TPOT) beside its floor: the weights'
bytes over the machine's read bandwidth, from cache and from DRAM, measured here.

Threads: the worker's own rule by default (worker/cpu_threads.py: ENGINE_THREADS, `auto` half
the cores), `--threads` to override. The machine's load is measured before starting; a busy
machine is warned about, since two OpenMP threads stall whenever another process takes a core.
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from worker.engine import Engine, SamplingParams

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "models" / "course-lm"


@dataclass
class Workload:
    prompts: list[list[int]]
    output_lens: list[int]


@dataclass
class RunResult:
    name: str
    seconds: float
    output_tokens: int
    ttft: list[float]  # seconds from the start of the run
    tpot: list[float]  # seconds per output token after the first
    tokens: list[list[int]] = field(default_factory=list)  # each request's output ids

    @property
    def rate(self) -> float:
        return self.output_tokens / self.seconds


def workload_make(*, num_requests: int, prompt_range: tuple[int, int],
                  output_range: tuple[int, int], vocab_size: int, seed: int) -> Workload:
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, vocab_size) for _ in range(rng.randint(*prompt_range))]
               for _ in range(num_requests)]
    return Workload(prompts, [rng.randint(*output_range) for _ in range(num_requests)])


def engine_run(engine: Engine, workload: Workload, name: str) -> RunResult:
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)
              for n in workload.output_lens]
    t0 = time.perf_counter()
    outputs = engine.generate(workload.prompts, params)
    seconds = time.perf_counter() - t0
    ttft, tpot = [], []
    for out in outputs:
        m = out.metrics
        ttft.append(m["first_token_time"] - t0)
        if len(out.token_ids) > 1:
            tpot.append((m["finished_time"] - m["first_token_time"]) / (len(out.token_ids) - 1))
    return RunResult(name, seconds, sum(len(o.token_ids) for o in outputs), ttft, tpot,
                     [list(o.token_ids) for o in outputs])


HF_STATIC = "transformers generate (static)"
HF_CONTINUOUS = "transformers generate_batch"


def transformers_run(model, workload: Workload, *, batch_size: int, device: str) -> RunResult:  # noqa: ANN001
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StepClock(StoppingCriteria):
        """Records when each generation step's token exists (called once per step)."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001, ANN003
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    ttft, tpot, produced, tokens = [], [], 0, []
    t0 = time.perf_counter()
    for b in range(0, len(workload.prompts), batch_size):
        prompts = workload.prompts[b : b + batch_size]
        lens = workload.output_lens[b : b + batch_size]
        width = max(len(p) for p in prompts)
        ids = torch.zeros(len(prompts), width, dtype=torch.long)
        mask = torch.zeros(len(prompts), width, dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding, as decoder-only generation needs
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        clock = StepClock()
        with torch.inference_mode():
            out = model.generate(ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                 max_new_tokens=max(lens), pad_token_id=0,
                                 stopping_criteria=StoppingCriteriaList([clock]))
        for i, n in enumerate(lens):
            ttft.append(clock.times[0] - t0)
            if n > 1:
                tpot.append((clock.times[n - 1] - clock.times[0]) / (n - 1))
            produced += n
            tokens.append(out[i, width : width + n].tolist())
    return RunResult(HF_STATIC, time.perf_counter() - t0, produced, ttft, tpot, tokens)


def transformers_batch_run(model, workload: Workload, *, batch_size: int) -> RunResult:  # noqa: ANN001
    """transformers' continuous batching (`generate_batch`). It takes one max_new_tokens for
    every request: each runs to the longest output, and only its own length is counted."""
    from transformers import GenerationConfig

    config = GenerationConfig(do_sample=False, max_new_tokens=max(workload.output_lens),
                              eos_token_id=None, pad_token_id=0, max_batch_tokens=4096,
                              num_blocks=None)
    t0 = time.perf_counter()
    outputs = model.generate_batch(workload.prompts, generation_config=config, warmup=False)
    seconds = time.perf_counter() - t0
    ordered = sorted(outputs.values(), key=lambda o: int(str(o.request_id).rsplit("_", 1)[-1]))
    tokens = [list(o.generated_tokens)[:n] for o, n in zip(ordered, workload.output_lens,
                                                           strict=True)]
    return RunResult(HF_CONTINUOUS, seconds, sum(workload.output_lens), [], [], tokens)


def parity_line(name: str, result: RunResult, reference: RunResult) -> str:
    """'greedy parity: k of N identical (first divergence at …)', request by request."""
    same = sum(a == b for a, b in zip(result.tokens, reference.tokens, strict=True))
    line = (f"greedy parity, {name} vs {reference.name}: {same} of {len(reference.tokens)} "
            "requests identical")
    for i, (a, b) in enumerate(zip(result.tokens, reference.tokens, strict=True)):
        if a != b:
            pairs = zip(a, b, strict=False)  # the shorter's end is a divergence too
            at = next((j for j, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))
            return f"{line} (first divergence at request {i}, output token {at})"
    return line


def table_format(results: list[RunResult], baseline: RunResult,
                 spread: dict[str, list[float]]) -> str:
    head = (f"{'run':34} {'out tok/s: min':>14} {'median':>7} {'max':>7} {'TTFT mean':>10} "
            f"{'TTFT p50':>9} {'TTFT p99':>9} {'TPOT ms':>8} {'vs HF':>6}")
    lines = [head, "-" * len(head)]
    for r in results:
        rates = sorted(spread[r.name])
        ttft = (f"{statistics.mean(r.ttft):9.2f}s {_percentile(r.ttft, 50):8.2f}s "
                f"{_percentile(r.ttft, 99):8.2f}s" if r.ttft else f"{'-':>10} {'-':>9} {'-':>9}")
        tpot = f"{1000 * statistics.mean(r.tpot):8.2f}" if r.tpot else f"{'-':>8}"
        lines.append(f"{r.name:34} {rates[0]:14.1f} {r.rate:7.1f} {rates[-1]:7.1f} {ttft} "
                     f"{tpot} {r.rate / baseline.rate:5.2f}x")
    return "\n".join(lines)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine_busy(seconds: float = 1.0) -> float | None:
    """The share of the machine's CPU time that was busy over `seconds` (from /proc/stat,
    every process's), or None where it cannot be read."""
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1 - (idle1 - idle0) / total


def read_bandwidth(nbytes: int, *, repeats: int = 20) -> float:
    """Bytes per second reading an fp32 buffer of `nbytes` (summing it), fastest of `repeats`:
    from cache when it fits there, else from DRAM."""
    buffer = torch.ones(max(1, nbytes // 4))
    buffer.sum()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        buffer.sum()
        best = min(best, time.perf_counter() - t)
    return buffer.numel() * 4 / best


_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def last_level_cache_bytes() -> int | None:
    """The size of the CPU's largest cache (its L3 on most machines), from sysfs; None where
    it cannot be read."""
    sizes = []
    for entry in _CACHE_DIR.glob("index*/size"):
        text = entry.read_text().strip().upper()
        try:
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (ValueError, OSError):
            continue
    return max(sizes) if sizes else None


def decode_weight_bytes(engine: Engine) -> int:
    """The bytes one decode step must read: every weight, except an untied embedding table, of
    which a step reads one row."""
    model = engine.runner.model
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    embed = model.embed_tokens.weight
    head = getattr(model, "lm_head", None)
    if head is not None and getattr(head, "weight", None) is not embed:
        total -= embed.numel() * embed.element_size()
    return total


def batch1_tpot(engine: Engine, *, vocab_size: int, output_len: int = 128,
                repeats: int = 5) -> list[float]:
    """One request alone, each time: its TPOT (seconds per token after the first)."""
    out = []
    for i in range(repeats):
        prompt = workload_make(num_requests=1, prompt_range=(16, 16), output_range=(1, 1),
                               vocab_size=vocab_size, seed=1000 + i).prompts[0]
        result = engine_run(engine, Workload([prompt], [output_len]), "batch 1")
        out.append(result.tpot[0])
    return out


@dataclass
class DecodeFloor:
    """What one batch-1 decode step must read and how fast this machine reads it."""

    weight_bytes: int
    cache_bytes: int | None  # the largest CPU cache, None where unknown
    at_size: float  # bytes/s reading a buffer of the weights' size
    dram: float  # bytes/s reading a buffer far larger than any cache

    @property
    def fits_cache(self) -> bool:
        return self.cache_bytes is not None and self.weight_bytes <= self.cache_bytes

    @property
    def seconds(self) -> float:
        """The floor: the weights' bytes at the fastest rate measured for them."""
        return self.weight_bytes / max(self.at_size, self.dram)


def decode_floor(engine: Engine) -> DecodeFloor:
    weights = decode_weight_bytes(engine)
    return DecodeFloor(weights, last_level_cache_bytes(), read_bandwidth(weights),
                       read_bandwidth(max(weights * 16, 256 * 2**20), repeats=5))


def floor_lines(floor: DecodeFloor, tpots: list[float]) -> list[str]:
    ordered = sorted(tpots)
    median = statistics.median(ordered)
    mb = floor.weight_bytes / 1e6
    if floor.cache_bytes is None:
        where = "the CPU's cache size is unknown"
    elif floor.fits_cache:
        where = (f"they fit the {floor.cache_bytes / 2**20:.0f} MiB last-level cache, so a "
                 "step can read them from there")
    else:
        where = (f"they do not fit the {floor.cache_bytes / 2**20:.0f} MiB last-level cache, "
                 "so every step reads them from DRAM")
    return [
        f"batch-1 decode (one 16-token prompt, 128 tokens, {len(tpots)} times): TPOT "
        f"{1000 * median:.3f} ms median (min {1000 * ordered[0]:.3f}, max "
        f"{1000 * ordered[-1]:.3f})",
        f"decode floor: {mb:.1f} MB of weights per token; {where}. Read at "
        f"{floor.at_size / 1e9:.1f} GB/s as a buffer of their size and "
        f"{floor.dram / 1e9:.1f} GB/s as one far larger than the cache: the floor is "
        f"{1000 * floor.seconds:.3f} ms (the faster rate). Batch-1 TPOT is "
        f"{median / floor.seconds:.1f}x the floor.",
    ]


def tiny_model_make(directory: Path) -> Path:
    """A random Llama of demo-model size, for when the shipped model is absent."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=8192, hidden_size=256, intermediate_size=768,
                         num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                         max_position_embeddings=1024, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-requests", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, nargs=2, default=(8, 96))
    parser.add_argument("--output-len", type=int, nargs=2, default=(8, 160))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-static", action="store_true")
    parser.add_argument("--skip-kernels-off", action="store_true",
                        help="leave out the row with the C kernels off")
    parser.add_argument("--generate-batch", action="store_true",
                        help="add transformers' generate_batch (continuous batching) as a row")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: the worker's rule, ENGINE_THREADS)")
    parser.add_argument("--batch1-repeats", type=int, default=5)
    parser.add_argument("--batch1-only", action="store_true",
                        help="only batch-1 decode beside its floor, then a JSON line of it")
    args = parser.parse_args(argv)

    from worker.cpu_threads import engine_threads

    threads = args.threads or engine_threads()
    torch.set_num_threads(threads)
    busy = machine_busy()
    if busy is not None:
        print(f"machine: {os.cpu_count()} cores, {100 * busy:.0f}% busy over the second "
              "before starting", flush=True)
        if busy > 0.25:
            print(f"WARNING: the machine is busy ({100 * busy:.0f}% of its CPU time in the "
                  "second before starting): the numbers below will swing with that load; "
                  "compare the rounds' spread, or run again on an idle machine.", flush=True)
    model_dir = args.model
    if model_dir is None:
        model_dir = DEFAULT_MODEL if (DEFAULT_MODEL / "config.json").is_file() else \
            tiny_model_make(Path(tempfile.mkdtemp()) / "random-llama")
    if args.batch1_only:
        engine = Engine.from_pretrained(model_dir, device=args.device, max_num_seqs=1)
        vocab = engine.runner.model.embed_tokens.weight.shape[0]
        batch1_tpot(engine, vocab_size=vocab, repeats=1)  # the kernels' build and first calls
        print(f"model {model_dir} on {args.device}, fp32, torch threads {threads}", flush=True)
        batch1_report(engine, vocab_size=vocab, repeats=args.batch1_repeats, as_json=True)
        return
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                              attn_implementation="sdpa").to(args.device)
    hf.eval()
    hf.generation_config.eos_token_id = None  # ignore EOS, like the engine's ignore_eos
    engines = {"engine continuous": Engine.from_pretrained(
        model_dir, device=args.device, max_num_seqs=args.batch_size)}
    if not args.skip_kernels_off and args.device == "cpu":
        plain = Engine.from_pretrained(model_dir, device=args.device,
                                       max_num_seqs=args.batch_size)
        plain.runner.model.cpu_kernels = None  # PyTorch's ops: the kernels' share shows
        engines["engine continuous, C kernels off"] = plain
    if not args.skip_static:
        engines["engine static"] = Engine.from_pretrained(
            model_dir, device=args.device, max_num_seqs=args.batch_size, scheduling="static")
    vocab = hf.config.vocab_size
    workloads = [workload_make(num_requests=args.num_requests,
                               prompt_range=tuple(args.prompt_len),
                               output_range=tuple(args.output_len),
                               vocab_size=vocab, seed=args.seed + round_index)
                 for round_index in range(args.rounds)]

    runs = [(name, lambda w, e=e, n=name: engine_run(e, w, n)) for name, e in engines.items()]
    runs.append((HF_STATIC, lambda w: transformers_run(hf, w, batch_size=args.batch_size,
                                                       device=args.device)))
    if args.generate_batch:
        runs.append((HF_CONTINUOUS, lambda w: transformers_batch_run(
            hf, w, batch_size=args.batch_size)))

    warm = workload_make(num_requests=args.num_requests, prompt_range=tuple(args.prompt_len),
                         output_range=tuple(args.output_len), vocab_size=vocab, seed=-1)
    for _, run in runs:  # first-call set-up and the kernels' build, before any timing
        run(warm)

    print(f"model {model_dir} on {args.device}, fp32, torch threads {threads}"
          f"{' (the worker rule)' if not args.threads else ''}; {args.num_requests} requests, "
          f"prompts {args.prompt_len[0]}-{args.prompt_len[1]} tokens, outputs "
          f"{args.output_len[0]}-{args.output_len[1]} tokens, batch size {args.batch_size}")
    print("method: every request arrives at time zero; greedy, EOS ignored. transformers: "
          f"static left-padded batches of {args.batch_size} through generate(), "
          f"{hf.config._attn_implementation} attention, DynamicCache, each batch to its "
          "longest output. Engine: paged KV cache, continuous batching (max_num_seqs "
          f"{args.batch_size}) or static batches; 'C kernels off' is the same engine on "
          f"PyTorch's ops ({engines['engine continuous'].stats()['cpu_kernels']} otherwise). "
          "Each run is warmed up once on a workload of the same shapes (another seed); "
          f"{args.rounds} rounds, the runs' order rotated each round; a row shows its median "
          "round and its min/median/max throughput.", flush=True)
    rounds: dict[str, list[RunResult]] = {name: [] for name, _ in runs}
    for round_index, workload in enumerate(workloads):
        shift = round_index % len(runs)
        for name, run in runs[shift:] + runs[:shift]:
            result = run(workload)
            print(f"round {round_index + 1}: {name}: {result.rate:.1f} output tokens/s",
                  flush=True)
            rounds[name].append(result)
    results = {name: _median_round(rs) for name, rs in rounds.items()}
    baseline = results[HF_STATIC]
    spread = {name: [r.rate for r in rs] for name, rs in rounds.items()}
    print(table_format(list(results.values()), baseline, spread))
    for name, rs in rounds.items():
        if name != HF_STATIC:
            ratios = [r.rate / h.rate for r, h in zip(rs, rounds[HF_STATIC], strict=True)]
            print(f"{name} vs HF per round: " + ", ".join(f"{x:.2f}x" for x in ratios))
    for name, rs in rounds.items():
        if name != HF_STATIC:
            print(parity_line(name, rs[0], rounds[HF_STATIC][0]) + " (round 1)")
    engine = engines["engine continuous"]
    batch1_report(engine, vocab_size=vocab, repeats=args.batch1_repeats)


def batch1_report(engine: Engine, *, vocab_size: int, repeats: int,
                  as_json: bool = False) -> None:
    """Prints batch-1 decode beside its floor; with `as_json`, then one JSON line of the same
    (what `manage.py streambench` reads)."""
    tpots = batch1_tpot(engine, vocab_size=vocab_size, repeats=repeats)
    floor = decode_floor(engine)
    for line in floor_lines(floor, tpots):
        print(line, flush=True)
    if as_json:
        print(json.dumps({"batch1_tpot_s": tpots, "floor_s": floor.seconds,
                          "weight_bytes": floor.weight_bytes, "cache_bytes": floor.cache_bytes,
                          "threads": torch.get_num_threads(),
                          "cpu_kernels": engine.stats().get("cpu_kernels")}), flush=True)


def _median_round(results: list[RunResult]) -> RunResult:
    """The round with the median throughput (the lower middle one for an even count)."""
    ordered = sorted(results, key=lambda r: r.rate)
    return ordered[(len(ordered) - 1) // 2]


if __name__ == "__main__":
    main()
