"""Page 03's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay; tiny
workloads, each run to finished with its events in order."""

import pytest

from tests.demos.conftest import run_wait_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def run_events(site, slug: str, params: dict) -> list:
    status, started = site.request("POST", f"/demos/{slug}/runs", params)
    assert status == 201, started
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    assert seen[-1].type == "finished", seen[-1].data
    run_wait_state(site, started["run_id"], {"finished"})
    return seen


def compress(types: list[str]) -> list[str]:
    """Runs of the same event type collapsed to one."""
    return [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]


def test_batching_runs_to_finished_static_then_continuous(site, celery_worker_process):
    seen = run_events(site, "batching", {"num_requests": 3, "batch": 2, "output_min": 2,
                                         "output_max": 5, "prompt_tokens": 8})
    assert compress([e.type for e in seen]) == ["started", "step", "mode", "step", "mode",
                                                "finished"]
    assert [e.data["mode"] for e in seen if e.type == "mode"] == ["static", "continuous"]
    assert len(seen[-1].data["plots"]) == 3 and seen[-1].data["note"]


def test_chunked_prefill_runs_to_finished_one_pass_then_chunked(site, celery_worker_process):
    seen = run_events(site, "chunked-prefill", {"streams": 1, "long_prompt_tokens": 64,
                                                "token_budget": 33, "stream_prompt_tokens": 4})
    assert compress([e.type for e in seen]) == ["started", "gap", "mode", "gap", "mode",
                                                "finished"]
    modes = [e.data for e in seen if e.type == "mode"]
    assert [m["mode"] for m in modes] == ["one-pass", "chunked"] and modes[1]["chunks"] == 2


def test_fairness_runs_to_finished_with_refusals(site, celery_worker_process):
    seen = run_events(site, "fairness", {"heavy_requests": 4, "light_tenants": 1,
                                         "light_requests": 1, "seats": 2, "output_tokens": 4,
                                         "queue_bound": 2})
    types = [e.type for e in seen]
    assert types[0] == "started" and types[-1] == "finished" and types.count("policy") == 2
    assert types.count("refused") == 4  # two of the heavy burst, under each policy
    assert [e.data["policy"] for e in seen if e.type == "policy"] == ["fcfs", "fair"]
