"""A serving benchmark client in the manner of `vllm bench serve`: it sends a prompt dataset to
any OpenAI-compatible base URL, streaming, at a Poisson request rate or a fixed concurrency,
and measures at the client what users feel: TTFT, TPOT, ITL and end-to-end latency, request
and output-token throughput, and goodput at the SLOs given.

    python -m demos.benchmark_client --base-url http://127.0.0.1:8000/v1 --api-key sk-course-… \\
        --num-prompts 32 --request-rate 2,4,inf --input-tokens 64 --output-tokens 32

Plain Python (no Django, no torch): the official `openai` client over HTTP, so the same code
measures this course's /v1, a vLLM, SGLang or TensorRT-LLM server, and the demo's backends on
the worker. Every request asks for exactly `output_tokens` (`ignore_eos`, vLLM's extension,
sent in the body; `--no-ignore-eos` leaves it out for a server that refuses it, and the output
lengths then vary) at temperature 0, so every server generates the same amount of text.

What is measured per request (seconds, on the client's monotonic clock), as `vllm bench serve`
measures it: TTFT from sending to the first chunk that carries a token; ITL, each gap between
two such chunks (a server that sends several tokens in one chunk shows one gap for them); E2E
from sending to the last such chunk, so E2E = TTFT + the sum of the gaps (the usage chunk and
`[DONE]` after it are not timed); TPOT, (E2E − TTFT) ÷ (output tokens − 1), the output tokens
from the server's usage when it reports them. A chunk carries a token when it has a choice
whose text is not empty or which is not yet finished (a token can decode to no text); a closing
chunk with no text and a finish reason carries none: vLLM's server puts the finish reason on
the last token's chunk, this course's servers send it alone, and timing it would add a gap of
almost nothing to every request.
"""

import argparse
import asyncio
import concurrent.futures
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from problems.arithmetic.benchmarking import benchmark_summary

HELDOUT = Path(__file__).resolve().parents[1] / "worker" / "models" / "heldout.jsonl"
# The connection pool is never the limit unless asked: a client that caps its connections
# turns a request-rate test into a closed loop (problem 18).
POOL_LIMIT = 1000


def prompts_make(*, count: int, input_tokens: int, seed: int = 0,
                 tokenizer_path: str | None = None, offset: int = 0) -> list[str]:
    """`count` prompts from the course's held-out documents, each cut to `input_tokens`
    tokens with the tokenizer at `tokenizer_path` (a tokenizer.json), or to as many words when
    none is given. Documents are taken in a seeded order from `offset`, cycling with a
    different start when there are more prompts than documents."""
    texts = [json.loads(line)["text"] for line in HELDOUT.read_text().splitlines()
             if line.strip()]
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    cut: Callable[[str, int], str]
    if tokenizer_path:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(tokenizer_path)

        def cut(text: str, n: int) -> str:
            encoding = tokenizer.encode(text, add_special_tokens=False)
            ids = encoding.ids[:n]
            return tokenizer.decode(ids)
    else:
        def cut(text: str, n: int) -> str:
            return " ".join(text.split()[:n])
    prompts = []
    for i in range(offset, offset + count):
        text = texts[order[i % len(texts)]]
        words = text.split()
        start = (i // len(texts) * 7) % max(1, len(words) // 2)  # another start on each pass
        prompts.append(cut(" ".join(words[start:]), input_tokens))
    return prompts


def arrival_times(*, count: int, rate: float, seed: int) -> list[float]:
    """When each request is sent, seconds from the start: a Poisson process at `rate` (all at
    once when the rate is infinite)."""
    if math.isinf(rate):
        return [0.0] * count
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(count):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def _one(client, *, model: str, prompt: str, output_tokens: int, sent_at: float,  # noqa: ANN001
               ignore_eos: bool = True) -> dict:
    record = {"ok": False, "ttft": None, "tpot": None, "itl": [], "e2e": None,
              "prompt_tokens": None, "output_tokens": 0, "error": None, "sent_at": sent_at}
    start = time.perf_counter()
    last = None
    chunks = 0
    try:
        stream = await client.completions.create(
            model=model, prompt=prompt, max_tokens=output_tokens, temperature=0.0,
            stream=True, stream_options={"include_usage": True},
            extra_body={"ignore_eos": True} if ignore_eos else None)
        async for chunk in stream:
            now = time.perf_counter()
            choice = chunk.choices[0] if chunk.choices else None
            if choice is not None and (choice.text or choice.finish_reason is None):
                chunks += 1
                if last is None:
                    record["ttft"] = now - start
                else:
                    record["itl"].append(now - last)
                last = now
            if getattr(chunk, "usage", None):
                record["prompt_tokens"] = chunk.usage.prompt_tokens
                record["output_tokens"] = chunk.usage.completion_tokens
    except Exception as exc:  # a failed request is counted as failed, never as fast
        record["error"] = f"{exc.__class__.__name__}: {exc}"[:300]
        return record
    if record["ttft"] is None:
        record["error"] = "no token came back"
        return record
    record["output_tokens"] = record["output_tokens"] or chunks
    record["e2e"] = last - start
    n = record["output_tokens"]
    record["tpot"] = (record["e2e"] - record["ttft"]) / (n - 1) if n > 1 else None
    record["ok"] = True
    return record


async def load_point(*, base_url: str, model: str, prompts: list[str], output_tokens: int,
                     request_rate: float = math.inf, max_concurrency: int | None = None,
                     api_key: str = "none", seed: int = 0, ttft_slo_s: float | None = None,
                     tpot_slo_s: float | None = None, timeout_s: float = 120.0,
                     ignore_eos: bool = True) -> dict:
    """Send every prompt once (Poisson arrivals at `request_rate`, at most `max_concurrency`
    in flight when given) and summarise: the summary of benchmark_summary plus the mode, the
    achieved send rate and every request's record."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    times = arrival_times(count=len(prompts), rate=request_rate, seed=seed)
    start = time.perf_counter()

    async def send(prompt: str, at: float) -> dict:
        delay = at - (time.perf_counter() - start)
        if delay > 0:
            await asyncio.sleep(delay)
        if gate is None:
            return await _one(client, model=model, prompt=prompt, output_tokens=output_tokens,
                              sent_at=time.perf_counter() - start, ignore_eos=ignore_eos)
        async with gate:
            return await _one(client, model=model, prompt=prompt, output_tokens=output_tokens,
                              sent_at=time.perf_counter() - start, ignore_eos=ignore_eos)

    try:
        records = await asyncio.gather(*(send(p, t) for p, t in zip(prompts, times,
                                                                     strict=True)))
    finally:
        await client.close()
    duration = time.perf_counter() - start
    summary = benchmark_summary(records, duration_s=duration, ttft_slo_s=ttft_slo_s,
                                tpot_slo_s=tpot_slo_s)
    last_send = max(r["sent_at"] for r in records) if records else 0.0
    summary.update(
        request_rate=request_rate, max_concurrency=max_concurrency,
        achieved_send_rate=(len(records) - 1) / last_send if last_send > 0 else math.inf,
        errors=sorted({r["error"] for r in records if r["error"]})[:3], requests=records)
    return summary


async def warm_up(*, base_url: str, model: str, api_key: str, prompts: list[str],
                  output_tokens: int, ignore_eos: bool = True) -> None:
    """Requests whose results are thrown away: first-call costs (allocations, graph capture,
    compilation) are paid before anything is measured."""
    await load_point(base_url=base_url, model=model, prompts=prompts,
                     output_tokens=output_tokens, api_key=api_key, ignore_eos=ignore_eos)


def run_sync(coroutine):  # noqa: ANN001, ANN201
    """Run a coroutine to its end from synchronous code: in this thread, or in a thread of its
    own when this one already runs an event loop (asyncio.run refuses to nest)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def model_first(base_url: str, api_key: str) -> str:
    """The first model the server lists (GET /models)."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)
    try:
        return client.models.list().data[0].id
    finally:
        client.close()


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value * 1e3:.2f}"


def report(summary: dict) -> str:
    """One load point as `vllm bench serve` prints it."""
    rate = summary["request_rate"]
    lines = [
        "=" * 20 + " Serving Benchmark Result " + "=" * 20,
        f"{'Request rate (req/s):':<40}{'inf' if math.isinf(rate) else f'{rate:g}'}",
        f"{'Max concurrency:':<40}{summary['max_concurrency'] or 'none'}",
        f"{'Successful requests:':<40}{summary['completed']}",
        f"{'Failed requests:':<40}{summary['failed']}",
        f"{'Benchmark duration (s):':<40}{summary['duration_s']:.2f}",
        f"{'Total input tokens:':<40}{summary['prompt_tokens']}",
        f"{'Total generated tokens:':<40}{summary['output_tokens']}",
        f"{'Request throughput (req/s):':<40}{summary['request_throughput']:.2f}",
        f"{'Output token throughput (tok/s):':<40}{summary['output_throughput']:.2f}",
        f"{'Goodput (req/s):':<40}{summary['goodput']:.2f}",
    ]
    for name, title in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token "
                        "(excl. 1st token)"), ("itl", "Inter-token Latency"),
                        ("e2e", "End-to-end Latency")):
        lines.append(f"{title:-^66}")
        lines.append(f"{f'Mean {name.upper()} (ms):':<40}{_ms(summary[f'mean_{name}'])}")
        for q in (50, 90, 99):
            lines.append(f"{f'P{q} {name.upper()} (ms):':<40}{_ms(summary[f'p{q}_{name}'])}")
    lines.append("=" * 66)
    if summary["errors"]:
        lines.append("errors: " + "; ".join(summary["errors"]))
    return "\n".join(lines)


def _jsonable(value: object) -> object:
    """Infinite rates as "inf": JSON has no infinity."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _rates(text: str) -> list[float]:
    try:
        return [math.inf if part.strip() == "inf" else float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("rates are numbers or inf, comma-separated") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demos.benchmark_client",
        description="Benchmark an OpenAI-compatible server, measured at the client.")
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--model", help="default: the first the server lists")
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--input-tokens", type=int, default=64,
                        help="prompt length: tokens with --tokenizer, else words")
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--tokenizer", help="a tokenizer.json to cut prompts by tokens")
    parser.add_argument("--request-rate", type=_rates, default=[math.inf],
                        help="requests/s, comma-separated for a sweep; inf sends all at once")
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=2, help="requests sent first, unmeasured")
    parser.add_argument("--slo-ttft-ms", type=float, default=None)
    parser.add_argument("--slo-tpot-ms", type=float, default=None)
    parser.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                        help="do not send ignore_eos (a server that refuses it); output "
                             "lengths then depend on where each answer ends")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", dest="json_path", help="write every point's summary here")
    args = parser.parse_args(argv)
    model = args.model or model_first(args.base_url, args.api_key)
    # Fresh prompts for every load point, so no point finds the last one's in a prefix cache.
    n = args.num_prompts
    prompts = prompts_make(count=args.warmup + n * len(args.request_rate),
                           input_tokens=args.input_tokens, seed=args.seed,
                           tokenizer_path=args.tokenizer)
    warm = prompts[:args.warmup]
    if warm:
        run_sync(warm_up(base_url=args.base_url, model=model, api_key=args.api_key,
                            prompts=warm, output_tokens=args.output_tokens,
                            ignore_eos=args.ignore_eos))
    points = []
    for i, rate in enumerate(args.request_rate):
        measured = prompts[args.warmup + i * n:args.warmup + (i + 1) * n]
        summary = run_sync(load_point(
            base_url=args.base_url, model=model, prompts=measured,
            output_tokens=args.output_tokens, request_rate=rate,
            max_concurrency=args.max_concurrency, api_key=args.api_key, seed=args.seed,
            ttft_slo_s=args.slo_ttft_ms / 1e3 if args.slo_ttft_ms else None,
            tpot_slo_s=args.slo_tpot_ms / 1e3 if args.slo_tpot_ms else None,
            ignore_eos=args.ignore_eos))
        print(report(summary))
        points.append({k: v for k, v in summary.items() if k != "requests"})
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(_jsonable(points), indent=1))
    return 0 if all(p["failed"] == 0 for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
