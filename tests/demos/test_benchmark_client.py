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


def test_each_request_is_timed_as_vllm_bench_serve_times_it(monkeypatch) -> None:
    """Review: TTFT to the first chunk carrying a token (even one that decodes to no text),
    ITL between such chunks, E2E to the last of them (not to the end of the stream), TPOT =
    (E2E − TTFT) ÷ (tokens − 1) with the server's token count; a closing chunk with no text
    and a finish reason, the usage chunk and the end of the stream are not timed."""
    from types import SimpleNamespace

    import demos.benchmark_client as bench

    def chunk(text: str | None, finish: str | None = None, usage: dict | None = None):
        choices = [] if text is None else [SimpleNamespace(text=text, finish_reason=finish)]
        return SimpleNamespace(choices=choices,
                               usage=SimpleNamespace(**usage) if usage else None)

    stream = [chunk("The"), chunk(""), chunk(" cat", "length"), chunk("", "length"),
              chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 3})]
    # The clock: sent at 10.0; chunks read at 10.5, 10.6, 10.8, then 11.9 and 12.0.
    clock = iter([10.0, 10.5, 10.6, 10.8, 11.9, 12.0, 13.0])
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))

    class Client:
        class completions:  # noqa: N801 (the openai client's shape)
            @staticmethod
            async def create(**kwargs):
                assert kwargs["stream"] and kwargs["extra_body"] == {"ignore_eos": True}

                async def chunks():
                    for c in stream:
                        yield c
                return chunks()

    # run_sync: the browser tests' Playwright may already run a loop in this thread.
    record = bench.run_sync(bench._one(Client(), model="m", prompt="p", output_tokens=3,
                                       sent_at=0.0))
    assert record["ok"] and record["output_tokens"] == 3 and record["prompt_tokens"] == 5
    assert record["ttft"] == pytest.approx(0.5)
    assert record["itl"] == pytest.approx([0.1, 0.2])
    assert record["e2e"] == pytest.approx(0.8) == pytest.approx(
        record["ttft"] + sum(record["itl"]))
    assert record["tpot"] == pytest.approx((0.8 - 0.5) / 2)


def test_ignore_eos_can_be_left_out_for_a_server_that_refuses_it(capsys) -> None:
    from types import SimpleNamespace

    from demos.benchmark_client import _one, main, run_sync

    sent = {}

    class Client:
        class completions:  # noqa: N801 (the openai client's shape)
            @staticmethod
            async def create(**kwargs):
                sent.update(kwargs)

                async def chunks():
                    yield SimpleNamespace(choices=[SimpleNamespace(text="x", finish_reason=None)],
                                          usage=None)
                return chunks()

    record = run_sync(_one(Client(), model="m", prompt="p", output_tokens=1, sent_at=0.0,
                           ignore_eos=False))
    assert record["ok"] and sent["extra_body"] is None
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--no-ignore-eos" in capsys.readouterr().out


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
