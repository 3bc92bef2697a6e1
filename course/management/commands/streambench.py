"""`manage.py streambench` (what `make bench-service` calls): batch-1 decode through the service
against the engine alone, on the same machine, one after the other.

1. The engine alone: `python -m worker.engine.bench --batch1-only` in a process of its own (the
   web side never imports torch): one 16-token prompt, 128 output tokens, greedy, EOS ignored,
   `--repeats` times, with the worker's thread rule; its TPOT and the decode floor.
2. Through the service: the site as `make loadtest` serves it (production settings, a private
   Redis, one Celery worker, uvicorn), an account and an API key made for the run, then
   `--repeats` streamed completions one after another through the official `openai` client
   (`max_tokens` 128, temperature 0, `ignore_eos`), after one to warm up. Per stream: the
   client's TPOT (from its first token to its last, over the tokens between, counted by the
   usage the stream ends with), and the engine's own TPOT for that request inside the worker
   (vLLM's `request_time_per_output_token_seconds` at /metrics, its sum and count before and
   after). The difference between the two is the relay (worker → Redis → web → SSE); the
   difference between the engine inside the worker and the engine alone is what serving costs
   the engine (the worker's other threads, Redis, the web process on the same cores).

It prints a table of medians with min and max, and the ratio of the service's TPOT to the
engine alone's beside the goal (1.5x). Numbers, not a test: it asserts nothing.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from course.management.commands._site import http_get, site_manage, site_serve

GOAL_RATIO = 1.5
OUTPUT_TOKENS = 128
PROMPT = "Explain in one paragraph what a KV cache stores and why decode reads it."
TPOT_METRIC = "vllm:request_time_per_output_token_seconds"

MAKE_KEY = """
from django.contrib.auth import get_user_model
from course.api_keys import api_key_create
user, _ = get_user_model().objects.get_or_create(username="streambench")
print(api_key_create(user=user, name="streambench")[1])
"""


def engine_alone(repeats: int) -> dict:
    """The engine's batch-1 TPOT and floor, from `worker.engine.bench --batch1-only`."""
    done = subprocess.run([sys.executable, "-m", "worker.engine.bench", "--batch1-only",
                           "--batch1-repeats", str(repeats)], cwd=settings.BASE_DIR,
                          capture_output=True, text=True)
    if done.returncode:
        raise CommandError(done.stderr[-2000:])
    lines = done.stdout.strip().splitlines()
    return {**json.loads(lines[-1]), "lines": lines[:-1]}


def metric_sum_count(port: int, name: str) -> tuple[float, float]:
    """A histogram's sum and count at /metrics, over every worker."""
    import http.client

    from prometheus_client.parser import text_string_to_metric_families

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    connection.close()
    total = {"_sum": 0.0, "_count": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for suffix in total:
                if sample.name == name + suffix:
                    total[suffix] += sample.value
    return total["_sum"], total["_count"]


def stream_once(client, model: str) -> tuple[float, int]:  # noqa: ANN001
    """(client TPOT in seconds, completion tokens) of one streamed completion."""
    stamps, tokens = [], None
    stream = client.completions.create(
        model=model, prompt=PROMPT, max_tokens=OUTPUT_TOKENS, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            stamps.append(time.perf_counter())
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    if tokens is None or tokens < 2 or len(stamps) < 2:
        raise CommandError(f"the stream ended with {tokens} tokens in {len(stamps)} chunks")
    return (stamps[-1] - stamps[0]) / (tokens - 1), tokens


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"{1000 * statistics.median(ordered):>8.3f}{1000 * ordered[0]:>8.3f}"
            f"{1000 * ordered[-1]:>8.3f}")


class Command(BaseCommand):
    help = "Batch-1 TPOT through /v1 (one stream at a time) against the engine alone."

    def add_arguments(self, parser):
        parser.add_argument("--repeats", type=int, default=5)
        parser.add_argument("--processes", type=int,
                            default=int(os.environ.get("WEB_PROCESSES", os.cpu_count() or 1)))

    def handle(self, *args, repeats: int, processes: int, **options):
        import logging

        from openai import OpenAI

        for name in ("httpx", "httpx2"):  # a line per request otherwise
            logging.getLogger(name).setLevel(logging.WARNING)
        out = self.stdout.write
        alone = engine_alone(repeats)
        for line in alone["lines"]:
            out(line)
        with site_serve(processes=processes, prefix="course-streambench-") as (port, _, env):
            key = site_manage(env, "shell", "-c", MAKE_KEY).strip().splitlines()[-1]
            client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key,
                            max_retries=0, timeout=120)
            model = client.models.list().data[0].id
            stream_once(client, model)  # the worker's engine build and first steps
            served, engine_inside = [], []
            for _ in range(repeats):
                before = metric_sum_count(port, TPOT_METRIC)
                tpot, _tokens = stream_once(client, model)
                served.append(tpot)
                # The worker publishes its metrics every second: wait for this request's.
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    after = metric_sum_count(port, TPOT_METRIC)
                    if after[1] > before[1]:
                        engine_inside.append((after[0] - before[0]) / (after[1] - before[1]))
                        break
                    time.sleep(0.2)
            http_get([None], port, "/healthz")
        engine = alone["batch1_tpot_s"]
        out(f"\nbatch-1 TPOT, one {OUTPUT_TOKENS}-token stream at a time, {repeats} times "
            f"(ms; {alone['threads']} engine thread(s), {processes} web process(es))")
        out(f"{'':<44}{'median':>8}{'min':>8}{'max':>8}")
        out(f"{'engine alone (worker.engine.bench)':<44}{_spread(engine)}")
        if engine_inside:
            out(f"{'engine inside the worker (/metrics)':<44}{_spread(engine_inside)}")
        out(f"{'through /v1, as the client sees it':<44}{_spread(served)}")
        ratio = statistics.median(served) / statistics.median(engine)
        out(f"service / engine alone: {ratio:.2f}x (goal: under {GOAL_RATIO:g}x); the decode "
            f"floor is {1000 * alone['floor_s']:.3f} ms")
