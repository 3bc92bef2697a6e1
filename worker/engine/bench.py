"""Benchmark: this engine (continuous and static batching) against transformers' `generate`.

    python -m worker.engine.bench [--model DIR] [--num-requests 96] [--batch-size 16]

One mixed workload (prompt and output lengths drawn from ranges, EOS ignored so every request
produces exactly its output length) runs three ways on the same model and device:
- this engine with continuous batching;
- this engine with static batches of `--batch-size`;
- transformers' `generate` on static batches of `--batch-size`, left-padded, each batch running
  to its longest member's output length (the tokens past a member's own length are wasted).
All requests arrive at time zero. The runs alternate over `--rounds` rounds (default 3) and each
row reports its median round by throughput, so one round slowed by other load on the machine
moves nothing. Each round draws its own prompts (seed + round), the same for every run in it:
the engine's prefix cache keeps a round's prompts, and a later round sending the same ones
would skip most of its prefill, which transformers' `generate` cannot. Printed per row: output
tokens per second, TTFT mean/p50/p99, mean TPOT (time per output token after the first), and
throughput relative to transformers (ratio of the medians); then each round's ratio, since
rounds run back to back under the same load.

On a machine shared with other work, `--threads 1` gives steadier numbers: two OpenMP threads
stall whenever another process takes one of the two cores.
"""

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
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
    return RunResult(name, seconds, sum(len(o.token_ids) for o in outputs), ttft, tpot)


def transformers_run(model, workload: Workload, *, batch_size: int, device: str) -> RunResult:  # noqa: ANN001
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StepClock(StoppingCriteria):
        """Records when each generation step's token exists (called once per step)."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001, ANN003
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    ttft, tpot, produced = [], [], 0
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
            model.generate(ids.to(device), attention_mask=mask.to(device), do_sample=False,
                           max_new_tokens=max(lens), pad_token_id=0,
                           stopping_criteria=StoppingCriteriaList([clock]))
        for n in lens:
            ttft.append(clock.times[0] - t0)
            if n > 1:
                tpot.append((clock.times[n - 1] - clock.times[0]) / (n - 1))
            produced += n
    return RunResult("transformers generate (static)", time.perf_counter() - t0, produced,
                     ttft, tpot)


def table_format(results: list[RunResult], baseline: RunResult) -> str:
    head = (f"{'run':34} {'out tok/s':>10} {'TTFT mean':>10} {'TTFT p50':>9} {'TTFT p99':>9} "
            f"{'TPOT ms':>8} {'vs HF':>6}")
    lines = [head, "-" * len(head)]
    base_rate = baseline.output_tokens / baseline.seconds
    for r in results:
        rate = r.output_tokens / r.seconds
        lines.append(
            f"{r.name:34} {rate:10.1f} {statistics.mean(r.ttft):9.2f}s "
            f"{_percentile(r.ttft, 50):8.2f}s {_percentile(r.ttft, 99):8.2f}s "
            f"{1000 * statistics.mean(r.tpot):8.1f} {rate / base_rate:5.2f}x")
    return "\n".join(lines)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def tiny_model_make(directory: Path) -> Path:
    """A random Llama of demo-model size, for when the shipped model is absent."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=8192, hidden_size=256, intermediate_size=768,
                         num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                         max_position_embeddings=1024, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-requests", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, nargs=2, default=(8, 96))
    parser.add_argument("--output-len", type=int, nargs=2, default=(8, 160))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-static", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    model_dir = args.model
    if model_dir is None:
        model_dir = DEFAULT_MODEL if (DEFAULT_MODEL / "config.json").is_file() else \
            tiny_model_make(Path(tempfile.mkdtemp()) / "random-llama")
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(args.device)
    hf.eval()
    hf.generation_config.eos_token_id = None  # ignore EOS, like the engine's ignore_eos
    engine = Engine.from_pretrained(model_dir, device=args.device, max_num_seqs=args.batch_size)
    static = Engine.from_pretrained(model_dir, device=args.device, max_num_seqs=args.batch_size,
                                    scheduling="static")
    workloads = [workload_make(num_requests=args.num_requests,
                               prompt_range=tuple(args.prompt_len),
                               output_range=tuple(args.output_len),
                               vocab_size=hf.config.vocab_size, seed=args.seed + round_index)
                 for round_index in range(args.rounds)]
    warm = workload_make(num_requests=4, prompt_range=(4, 8), output_range=(4, 8),
                         vocab_size=hf.config.vocab_size, seed=-1)
    # Warm-ups on another workload, so no run pays for first-call setup.
    engine_run(engine, warm, "warm")
    transformers_run(hf, warm, batch_size=4, device=args.device)

    print(f"model {model_dir} on {args.device}, torch threads {torch.get_num_threads()}; "
          f"{args.num_requests} requests, prompts {args.prompt_len[0]}-{args.prompt_len[1]} "
          f"tokens, outputs {args.output_len[0]}-{args.output_len[1]} tokens, "
          f"batch size {args.batch_size}", flush=True)
    if not args.skip_static:
        engine_run(static, warm, "warm")
    # Rounds alternate the runs; each row reports its median round.
    rounds: dict[str, list[RunResult]] = {}
    for round_index, workload in enumerate(workloads):
        runs = [lambda w=workload: engine_run(engine, w, "engine continuous")]
        if not args.skip_static:
            runs.append(lambda w=workload: engine_run(static, w, "engine static"))
        runs.append(lambda w=workload: transformers_run(hf, w, batch_size=args.batch_size,
                                                        device=args.device))
        for run in runs:
            result = run()
            print(f"round {round_index + 1}: {result.name}: "
                  f"{result.output_tokens / result.seconds:.1f} output tokens/s", flush=True)
            rounds.setdefault(result.name, []).append(result)
    results = [_median_round(rs) for rs in rounds.values()]
    print(table_format(results, results[-1]))
    hf = rounds[results[-1].name]
    for name, rs in list(rounds.items())[:-1]:
        ratios = [(r.output_tokens / r.seconds) / (h.output_tokens / h.seconds)
                  for r, h in zip(rs, hf, strict=True)]
        print(f"{name} vs HF per round: " + ", ".join(f"{x:.2f}x" for x in ratios))


def _median_round(results: list[RunResult]) -> RunResult:
    """The round with the median throughput (the lower middle one for an even count)."""
    ordered = sorted(results, key=lambda r: r.output_tokens / r.seconds)
    return ordered[(len(ordered) - 1) // 2]


if __name__ == "__main__":
    main()
