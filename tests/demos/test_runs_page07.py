"""Page 07's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay; tiny
workloads, each run to finished with its events in order; the profile's trace downloadable by
its owner only."""

import pytest

from tests.demos.conftest import SiteClient, run_wait_state

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


def test_profile_runs_to_finished_with_a_downloadable_trace(site, celery_worker_process):
    started, seen = run_events(site, "profile", {"num_sequences": 2, "prompt_tokens": 16,
                                                 "profile_steps": 2})
    assert [e.type for e in seen] == ["started", "step", "step", "profile", "estimate",
                                      "finished"]
    trace = seen[3].data["trace"]
    assert trace["url"] and trace["bytes"] > 0
    status, _ = site.request("GET", trace["url"])
    assert status == 200
    stranger = SiteClient(port=site.port)
    stranger.visit("/pages/07/")
    assert stranger.request("GET", trace["url"])[0] == 404
    finished = seen[-1].data
    assert len(finished["plots"]) == 2 and finished["note"]
    # The worker's engine names its phases: every step is split into them.
    assert all([r["name"] for r in s["ranges"]] == ["schedule", "prepare_inputs", "forward",
                                                    "attention", "sample", "detokenize"]
               for s in seen[3].data["steps"])


def test_utilization_runs_to_finished_batch_by_batch(site, celery_worker_process):
    """With the lever: each batch measured with the usual host and the lean one."""
    _, seen = run_events(site, "utilization", {"prompt_tokens": 8, "steps": 4,
                                               "lean_host": True})
    assert [e.type for e in seen] == ["started"] + ["batch"] * 6 + ["finished"]
    assert [e.data["batch"] for e in seen[1:-1]] == [1, 2, 4, 8, 16, 32]
    assert all(e.data["lean"]["model_ms"] > 0 for e in seen[1:-1])
    assert seen[-1].data["stats"]["kv_blocks_free"] == seen[-1].data["stats"]["kv_blocks_total"]


def test_triton_rmsnorm_runs_to_finished_in_the_interpreter(site, celery_worker_process):
    _, seen = run_events(site, "triton-rmsnorm", {"tokens": 8, "hidden": 96, "dtype": "bf16",
                                                  "residual": True})
    assert [e.type for e in seen] == ["started", "parity", "finished"]
    assert seen[0].data["mode"] == "interpreter" and seen[1].data["passed"]
    assert seen[-1].data["timing"] is None
