"""The runners of page 03 (batching, chunked-prefill, fairness) on engines of their own, in this
process, with tiny workloads: events in order, figures that add up, every block back, a cancel
that stops the run."""

import pytest

from demos.runners import RunCancelled, runner_get
from tests.demos.runners.conftest import MODEL, Recorder


@pytest.fixture(scope="module")
def own():
    """An engine of the run's own and the machine's measured rates, as the task builds them."""
    from worker.demo_engine import engine_build, machine_measure, model_facts

    engine = engine_build(str(MODEL))
    machine = {**machine_measure(), **model_facts(engine), "model_path": str(MODEL),
               "device": "cpu"}
    return engine, machine


def run(slug: str, own, recorder: Recorder, **params):
    engine, machine = own
    runner = runner_get(slug)
    return runner.run(engine=engine, machine=machine,
                      params=runner.params.parse(params).as_dict(), ctx=recorder.context())


def blocks_back(summary: dict) -> bool:
    return summary["kv_blocks_free"] == summary["kv_blocks_total"]


def test_batching_runs_both_modes_on_the_same_tokens(own, recorder) -> None:
    outcome = run("batching", own, recorder, num_requests=5, batch=2, output_min=2,
                  output_max=9, prompt_tokens=8)
    types = recorder.types()
    assert types[0] == "started" and types.count("mode") == 2
    modes = [d["mode"] for t, _, d in recorder.events if t == "mode"]
    assert modes == ["static", "continuous"]
    # Every static step event comes before the first continuous one.
    step_modes = [d["mode"] for t, _, d in recorder.events if t == "step"]
    assert step_modes == sorted(step_modes, key=lambda m: m != "static")
    lengths = [d for t, _, d in recorder.events if t == "started"][0]["lengths"]
    summary = outcome.summary
    for mode in ("static", "continuous"):
        m = summary["modes"][mode]
        assert m["tokens"] == sum(lengths) and blocks_back(m)
        assert 0 < m["occupancy"] <= 1
    # No static step ever carried more than the batch, nor a continuous one.
    assert max(d["num_seqs"] for t, _, d in recorder.events if t == "step") <= 2
    c = summary["comparison"]
    assert c["predicted_ratio"] >= 1 and c["measured_ratio"] > 0
    assert len(summary["plots"]) == 3 and "predict" in summary["note"]


def test_chunked_prefill_bounds_the_gaps_and_chunks_the_prompt(own, recorder) -> None:
    outcome = run("chunked-prefill", own, recorder, streams=2, long_prompt_tokens=96,
                  token_budget=18, stream_prompt_tokens=8)
    summary = outcome.summary
    one, chunked = summary["modes"]["one-pass"], summary["modes"]["chunked"]
    assert [d["mode"] for t, _, d in recorder.events if t == "mode"] == ["one-pass", "chunked"]
    assert one["chunks"] == 1
    assert chunked["chunks"] == -(-96 // 16)  # 18 budget − 2 decodes = 16 prompt tokens a step
    gaps = [d for t, _, d in recorder.events if t == "gap" and d["mode"] == "chunked"]
    assert all(g["prefill_tokens"] <= 16 for g in gaps)
    assert one["ttft_ms"] > 0 and chunked["ttft_ms"] > 0
    assert blocks_back(one) and blocks_back(chunked)
    assert summary["predicted"]["available"] and summary["predicted"]["chunks"] == 6
    assert summary["predicted"]["one_pass_gap_ms"] > summary["predicted"]["chunked_max_gap_ms"]
    assert len(summary["plots"]) == 2 and "floor" in summary["note"]


def test_fairness_serves_the_light_tenants_first_under_the_fair_policy(own, recorder) -> None:
    outcome = run("fairness", own, recorder, heavy_requests=8, light_tenants=1,
                  light_requests=2, seats=2, output_tokens=6)
    summary = outcome.summary
    fcfs, fair = summary["policies"]["fcfs"], summary["policies"]["fair"]
    for p in (fcfs, fair):
        assert p["tenants"]["heavy"]["served"] == 8 and p["tenants"]["light-1"]["served"] == 2
        assert p["refused"] == 0 and blocks_back(p)
    # Under FCFS a light request queues behind the whole burst; under fair it takes the next
    # free seat. Counted in steps, this does not depend on the machine's speed.
    assert (summary["light_ttft_predicted_ms"]["fair"]
            < summary["light_ttft_predicted_ms"]["fcfs"])
    order = [d["tenant"] for t, _, d in recorder.events if t == "request"]
    fcfs_order, fair_order = order[:10], order[10:]
    assert fair_order.index("light-1") < fcfs_order.index("light-1")
    assert len(summary["plots"]) == 4


def test_fairness_queue_bound_refuses_the_heavy_burst(own, recorder) -> None:
    outcome = run("fairness", own, recorder, heavy_requests=6, light_tenants=1,
                  light_requests=1, seats=2, output_tokens=4, queue_bound=3)
    refused = [d for t, _, d in recorder.events if t == "refused"]
    assert [d["tenant"] for d in refused] == ["heavy"] * 6  # three a policy
    for p in outcome.summary["policies"].values():
        assert p["tenants"]["heavy"] == {**p["tenants"]["heavy"], "served": 3, "refused": 3}
    assert "queue bound of 3" in outcome.summary["note"]


def test_a_cancel_stops_a_run_and_returns_the_blocks(own, monkeypatch) -> None:
    # The runner reads cancels at most every CANCEL_POLL_S; at 0 it sees this one at its next
    # check, however fast the machine steps (otherwise the count below depends on speed).
    monkeypatch.setattr("demos.runners.base.CANCEL_POLL_S", 0.0)
    recorder = Recorder()
    recorder.cancel_after = ("step", None, "all", "cancelled by the visitor")
    with pytest.raises(RunCancelled):
        run("batching", own, recorder, num_requests=4, batch=2, output_min=4, output_max=8)
    assert recorder.types().count("step") <= 2
