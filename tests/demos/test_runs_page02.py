"""Page 02's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay; tiny
workloads, each run to finished with its events in order."""

import pytest

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


def test_kv_bytes_runs_to_finished_precision_by_precision(site, celery_worker_process):
    _, seen = run_events(site, "kv-bytes", {"precisions": ["bfloat16", "float8_e4m3fn"],
                                            "sequences": 1, "prompt_tokens": 16,
                                            "documents": 2})
    assert [e.type for e in seen] == ["started", "precision", "precision", "finished"]
    rows = seen[-1].data["rows"]
    assert [r["precision"] for r in rows] == ["bfloat16", "float8_e4m3fn"]
    assert all(r["bytes_measured"] == r["bytes_formula_blocks"] for r in rows)
    assert rows[0]["bytes_measured"] == 2 * rows[1]["bytes_measured"]


def test_paged_blocks_runs_to_finished_step_by_step(site, celery_worker_process):
    _, seen = run_events(site, "paged-blocks", {"requests": 2, "samples": 2,
                                                "pool_blocks": 16, "pace_ms": 0})
    types = [e.type for e in seen]
    assert types[0] == "started" and types[-1] == "finished"
    assert set(types[1:-1]) == {"step"}
    assert seen[1].data["forked"] == ["r0:1"]
    assert seen[-1].data["all_blocks_returned"]


def test_bad_parameters_are_a_422_naming_the_field(site):
    status, body = site.request("POST", "/demos/paged-blocks/runs", {"pool_blocks": 1000})
    assert status == 422 and body["field"] == "pool_blocks"


def test_attention_kernels_runs_to_finished_length_by_length(site, celery_worker_process):
    _, seen = run_events(site, "attention-kernels", {"lengths": ["128", "256"], "heads": 1,
                                                     "head_dim": "32", "tile": "32",
                                                     "repeats": 1})
    assert [e.type for e in seen] == ["started", "length", "length", "finished"]
    assert seen[-1].data["agree"]
