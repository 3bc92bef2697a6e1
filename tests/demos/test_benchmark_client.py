"""The benchmark client: its arrivals and prompts, and the command line run against this
course's own /v1 through uvicorn and a real worker."""

import json
import math

import pytest

from demos.benchmark_client import arrival_times, main, prompts_make
from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)


def test_arrivals_are_seeded_poisson_or_all_at_once() -> None:
    times = arrival_times(count=2000, rate=10.0, seed=1)
    assert times == arrival_times(count=2000, rate=10.0, seed=1)
    # 1,999 gaps of mean 0.1 s: the last arrival near 200 s (σ ≈ 4.5 s).
    assert 180 < times[-1] < 220
    assert arrival_times(count=3, rate=math.inf, seed=1) == [0.0, 0.0, 0.0]


def test_prompts_are_cut_to_tokens_and_fresh_past_the_documents() -> None:
    from pathlib import Path

    from tokenizers import Tokenizer

    path = Path(__file__).resolve().parents[2] / "worker" / "models" / "course-lm"
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    prompts = prompts_make(count=70, input_tokens=12, tokenizer_path=str(path / "tokenizer.json"))
    assert len(set(prompts)) == 70  # 32 documents, each pass starting elsewhere
    lengths = {len(tokenizer.encode(p, add_special_tokens=False).ids) for p in prompts}
    assert max(lengths) <= 13 and min(lengths) >= 10  # decode and re-encode may merge a token
    words = prompts_make(count=3, input_tokens=5)
    assert all(len(p.split()) == 5 for p in words)


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_the_command_line_against_the_course_endpoint(asgi_server, celery_worker_process,  # noqa: F811
                                                      django_user_model, tmp_path, capsys):
    from course.api_keys import api_key_create

    user = django_user_model.objects.create_user(username="bench", password="a-long-pass-1")
    _, raw = api_key_create(user=user, name="bench")
    out = tmp_path / "points.json"
    code = main(["--base-url", f"http://127.0.0.1:{asgi_server}/v1", "--api-key", raw,
                 "--num-prompts", "3", "--input-tokens", "12", "--output-tokens", "4",
                 "--request-rate", "4,inf", "--warmup", "1", "--slo-ttft-ms", "60000",
                 "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert printed.count("Serving Benchmark Result") == 2 and "P99 TTFT (ms)" in printed
    points = json.loads(out.read_text())
    assert [p["request_rate"] for p in points] == [4.0, "inf"]
    for p in points:
        assert p["completed"] == 3 and p["failed"] == 0
        assert p["output_tokens"] == 3 * 4  # the server's usage: ignore_eos honoured
        assert 0 < p["p50_ttft"] <= p["p99_e2e"] and p["good"] == 3


def test_run_sync_works_where_an_event_loop_already_runs() -> None:
    """Playwright's sync API (the browser tests) and notebooks leave a loop running in the
    thread: the client then runs its own loop in a thread of its own."""
    import asyncio

    from demos.benchmark_client import run_sync

    async def outer() -> int:
        return run_sync(asyncio.sleep(0, result=7))

    # From plain code (or from under the browser tests' loop), then from inside a running loop.
    assert run_sync(asyncio.sleep(0, result=8)) == 8
    assert run_sync(outer()) == 7
