"""Page 04's live demos end to end: a real worker process, real Redis, uvicorn's SSE relay; tiny
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


def test_prefix_cache_runs_to_finished_part_by_part(site, celery_worker_process):
    seen = run_events(site, "prefix-cache", {"system_tokens": 48, "requests": 2,
                                             "replicas": 2, "applications": 2,
                                             "cached_prefixes": 1, "fleet_requests": 8})
    assert [e.type for e in seen] == (["started"] + ["request_done"] * 4
                                      + ["policy_done"] * 3 + ["plot", "finished"])
    assert seen[0].data["reusable_tokens"] == 48  # three whole 16-token blocks
    parts = [(e.data["caching"], e.data["cached_tokens"]) for e in seen[1:5]]
    # Caching off never hits; on, the second request reuses exactly the predicted blocks.
    assert parts == [("off", 0), ("off", 0), ("on", 0), ("on", 48)]
    policies = [e.data for e in seen[5:8]]
    assert [p["policy"] for p in policies] == ["round-robin", "affine", "affine-limit"]
    assert all(sum(p["served"]) == 8 and 0 <= p["hit_rate"] <= 1 for p in policies)
    assert policies[0]["predicted_steady"] == 0.5 and policies[1]["predicted_steady"] == 1.0
    # Review P8-D4: the prediction takes off each application's first visit to a replica.
    for p in policies[:2]:
        assert 1 <= p["cold_misses"] <= 4
        assert p["predicted_hit_rate"] == p["predicted_steady"] * (8 - p["cold_misses"]) / 8
    assert policies[2]["predicted_hit_rate"] is None
    finished = seen[-1].data
    assert len(finished["plots"]) == 5 and "block rule" in finished["note"]


def test_disagg_runs_to_finished_with_each_handoff_the_predicted_bytes(
        site, celery_worker_process):
    seen = run_events(site, "disagg", {"streams": 2, "stream_tokens": 16, "long_prompts": 2,
                                       "long_tokens": 64})
    assert [e.type for e in seen] == ["started", "layout_done", "layout_done", "plot",
                                      "finished"]
    assert [e.data["layout"] for e in seen[1:3]] == ["colocated", "disaggregated"]
    assert seen[1].data["transfers"] == []
    # Review P22-D1: two engines in both layouts, the colocated pair taking alternate streams
    # and long prompts (2 each); split, the prefill engine makes every first token (4) and
    # the decode engine finishes all 4.
    assert seen[1].data["engine_requests"] == [2, 2]
    assert seen[2].data["engine_requests"] == [4, 4]
    finished = seen[-1].data
    moves = finished["transfers"]
    assert sorted((m["kind"], m["tokens"]) for m in moves) == [
        ("long", 64), ("long", 64), ("stream", 24), ("stream", 24)]
    for m in moves:  # the engine's handoff is exactly the arithmetic's KV bytes
        assert m["bytes"] == m["predicted_bytes"] and m["seconds"] > 0
        assert [link["seconds"] for link in m["links"]] == sorted(
            link["seconds"] for link in m["links"])
    assert len(finished["plots"]) == 3 and "exactly the bytes" in finished["note"]
    assert "host memory copy, not a check of any link" in finished["note"]


@pytest.mark.parametrize(("slug", "params", "field"), [
    ("prefix-cache", {"replicas": 9}, "replicas"),
    ("disagg", {"long_tokens": 5000}, "long_tokens"),
])
def test_bad_parameters_are_a_422_naming_the_field(site, slug, params, field):
    status, body = site.request("POST", f"/demos/{slug}/runs", params)
    assert status == 422 and body["field"] == field


@pytest.mark.parametrize("slug", ["prefix-cache", "disagg"])
def test_a_run_at_the_defaults_fits_the_queues_token_limit(slug) -> None:
    """The queue refuses a run whose work passes DEMO_MAX_QUEUED_TOKENS; the defaults must not."""
    from demos.conf import demo_setting
    from demos.runners import runner_get

    params = runner_get(slug).params
    assert 0 < params.work(params.defaults()) <= int(demo_setting("DEMO_MAX_QUEUED_TOKENS"))
