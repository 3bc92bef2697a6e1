"""Page 05's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay; tiny
workloads, each run to finished with its events in order."""

import pytest

from tests.demos.test_runs_page07 import run_events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_speculative_runs_to_finished_step_by_step(site, celery_worker_process):
    _, seen = run_events(site, "speculative", {"draft_tokens": 2, "output_tokens": 4,
                                               "large_batch": 2})
    assert [e.type for e in seen] == ["started", "trace", "acceptance", "speed", "speed",
                                      "compare", "finished"]
    assert [e.data["k"] for e in seen[3:5]] == [1, 2]
    trace = seen[1].data["steps"]
    assert trace and all(0 <= s["accepted"] <= len(s["drafts"]) for s in trace)
    assert len(seen[2].data["measured"]) == 2
    finished = seen[-1].data
    assert len(finished["plots"]) == 2 and finished["note"]
    assert {r["drafter"] for r in finished["compare"]} == {"model", "ngram"}
    assert finished["stats"]["kv_blocks_free"] == finished["stats"]["kv_blocks_total"]


def test_a_bad_parameter_is_refused_naming_it(site):
    status, body = site.request("POST", "/demos/speculative/runs", {"draft_tokens": 9})
    assert status == 422 and "draft_tokens" in str(body)


def test_itl_runs_to_finished_batch_by_batch(site, celery_worker_process):
    _, seen = run_events(site, "itl", {"prompt_tokens": 8, "output_tokens": 4,
                                       "lever": "ngram"})
    assert [e.type for e in seen] == (["started"] + ["batch"] * 6 + ["lever_batch"] * 6
                                      + ["finished"])
    assert [e.data["batch"] for e in seen[1:7]] == [1, 2, 4, 8, 16, 32]
    finished = seen[-1].data
    assert finished["lever"] == "ngram" and len(finished["plots"]) == 2 and finished["note"]
    assert finished["stats"]["kv_blocks_free"] == finished["stats"]["kv_blocks_total"]


def test_tail_latency_runs_to_finished_with_a_breakdown(site, celery_worker_process):
    _, seen = run_events(site, "tail-latency", {"utilization": 0.5, "duration_s": 2})
    types = [e.type for e in seen]
    assert types[:2] == ["started", "capacity"] and types[-1] == "finished"
    assert set(types[2:-1]) <= {"tick"}
    finished = seen[-1].data
    assert finished["requests"] >= 1 and finished["slowest"]
    assert 0 < finished["e2e"]["p50"] <= finished["e2e"]["p99"]
    # Review P17-D2: a batching engine is M/M/c with the measured seats and service, not
    # M/M/1 at the burst's throughput; a replay of the measured service times sits beside it.
    assert finished["seats"] >= 1
    assert finished["predicted"]["p50"] <= finished["predicted"]["p90"] \
        <= finished["predicted"]["p99"]
    assert finished["predicted"]["p50"] >= finished["mean_service_s"] * 0.69  # ln 2 of it
    assert 0 < finished["replayed"]["p50"] <= finished["replayed"]["p99"]
    assert f"M/M/{finished['seats']} predicts" in finished["note"]
    assert len(finished["plots"]) == 4 and finished["note"]
    assert finished["stats"]["kv_blocks_free"] == finished["stats"]["kv_blocks_total"]


def test_itl_bf16_lever_moves_the_floor_and_measures_the_points(site, celery_worker_process):
    """Review P9-D3: a lever that moves the curve. With BF16 weights every lever row's floor is
    the arithmetic's at two bytes a weight (lower than the FP32 floor at the same batch), each
    row is measured on the BF16 engine, and the note sets the two side by side."""
    _, seen = run_events(site, "itl", {"prompt_tokens": 8, "output_tokens": 4,
                                       "lever": "bf16"})
    plain = [e.data for e in seen if e.type == "batch"]
    levered = [e.data for e in seen if e.type == "lever_batch"]
    assert len(plain) == len(levered) == 6
    assert all(r["lever"] == "BF16 weights" for r in levered)
    assert all(lv["floor_ms"] < p["floor_ms"] for p, lv in zip(plain, levered, strict=True))
    assert all(lv["tpot_ms"] > 0 for lv in levered)
    finished = seen[-1].data
    assert finished["lever"] == "bf16" and "With BF16 weights the arithmetic's floor fell" \
        in finished["note"]
