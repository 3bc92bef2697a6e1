"""Page 08's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay;
tiny workloads, each run to finished with its events in order. The metrics demo's load shows
at /metrics while it is served."""

import time

import pytest

from tests.course.test_metrics import scrape
from tests.demos.conftest import run_wait_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def run_events(site, slug: str, params: dict) -> tuple[dict, list]:
    status, started = site.request("POST", f"/demos/{slug}/runs", params)
    assert status == 201, started
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    assert seen[-1].type == "finished", seen[-1].data
    run_wait_state(site, started["run_id"], {"finished"})
    return started, seen


def test_metrics_runs_to_finished_and_moves_the_metrics_endpoint(site, celery_worker_process):
    deadline = time.monotonic() + 30  # the worker publishes its registry every second
    while "vllm:generation_tokens_total" not in (before := scrape(site.port)):
        assert time.monotonic() < deadline, before
        time.sleep(0.3)
    _, seen = run_events(site, "metrics", {"rate": 5, "duration_s": 1, "prompt_tokens": 24,
                                           "output_tokens": 3, "prefix_tokens": 16})
    types = [e.type for e in seen]
    assert types[0] == "started" and types[-1] == "finished"
    assert set(types[1:-1]) <= {"tick"}
    summary = seen[-1].data
    generated = summary["finished"] * 3
    assert summary["finished"] == summary["requests"] > 0
    assert len(summary["plots"]) == 5 and summary["note"]

    def moved() -> dict | None:
        after = scrape(site.port)
        grew = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
        return after if grew >= generated else None

    # While it ran: the last tick (published before the run finished) carries the worker's
    # registry lines, which already count every request of the run.
    last_tick = [e.data for e in seen if e.type == "tick"][-1]
    live = {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
            for line in last_tick["metrics_text"].splitlines()}
    for name, per_request in (("vllm:time_to_first_token_seconds_count", 1),
                              ("vllm:generation_tokens_total", 3)):
        assert live[name] - before[name] >= summary["finished"] * per_request

    deadline = time.monotonic() + 15
    while (after := moved()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert (after["vllm:time_to_first_token_seconds_count"]
            - before["vllm:time_to_first_token_seconds_count"]) >= summary["finished"]


def test_benchmark_runs_to_finished_point_by_point(site, celery_worker_process):
    _, seen = run_events(site, "benchmark", {"requests": 4, "input_tokens": 8,
                                             "output_tokens": 3, "static_batch": 2,
                                             "rates": ["8", "inf"]})
    assert [e.type for e in seen] == ["started", "warmup", "warmup"] + ["point"] * 4 + [
        "finished"]
    # Levels in order, the backends taking turns at going first.
    assert [(e.data["label"], e.data["backend"]) for e in seen[3:7]] == [
        ("8 req/s", "engine"), ("8 req/s", "hf-static"),
        ("all at once", "hf-static"), ("all at once", "engine")]
    assert all(e.data["completed"] == 4 for e in seen[3:7])
    assert len(seen[-1].data["plots"]) == 3
