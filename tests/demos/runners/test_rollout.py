"""The rollout runner on private engines of the shipped model, in this process: events in order,
the gates' rules (the offline evaluation stops the heavy cut and the draft before any traffic,
injected failures roll back through the error gate, a faithful INT8 copy is promoted), and the
threshold's arithmetic."""

from pathlib import Path

import pytest

from demos.runners import RunCancelled, runner_get
from demos.runners.rollout import (
    PARAMS,
    error_threshold,
    gate_check,
    percentile,
    predicted_requests,
    quality_gate,
    rollout_run,
)
from demos.schema import ParamError
from tests.demos.runners.conftest import Recorder

MODEL = Path(__file__).resolve().parents[3] / "worker" / "models" / "course-lm"
MACHINE = {"device": "cpu", "model_path": str(MODEL)}


@pytest.fixture(scope="module")
def engine():
    from worker.cpu_threads import one_thread
    from worker.demo_engine import engine_build

    with one_thread():
        return engine_build(str(MODEL))


def run(engine, **changes):
    recorder = Recorder()
    params = PARAMS.parse(changes).as_dict()
    outcome = rollout_run(engine=engine, machine=MACHINE, params=params,
                          ctx=recorder.context())
    return recorder, outcome


def test_a_faithful_copy_is_promoted_with_events_in_order(engine):
    recorder, outcome = run(engine, candidate="int8", requests=16)
    types = recorder.types()
    assert types[:4] == ["started", "version_loaded", "version_loaded", "evaluated"]
    assert set(types[4:-2]) == {"window"} and types[-2:] == ["gate", "plot"]
    windows = [d for t, _, d in recorder.events if t == "window"]
    assert windows[-1]["sent"] == 16
    assert sum(v["n"] for v in windows[-1]["versions"].values()) == 16
    summary = outcome.summary
    assert outcome.state == "finished" and summary["decision"] == "promote", summary
    assert summary["agreement"] > 0.9
    plot = recorder.events[-1][2]
    assert [f["figure"]["layout"]["title"]["text"] for f in plot["figures"]] == [
        "Canary error rate against the gate's threshold",
        "Time to first token by version (measured)"]
    assert runner_get("rollout").engine == "own"


@pytest.mark.parametrize("candidate", ["int4", "draft"])
def test_a_worse_model_is_stopped_by_the_offline_gate_before_any_traffic(engine, candidate):
    """The heavy INT4 cut and the draft agree with the current model's next token on well under
    90% of the held-out positions: the evaluation set rolls them back before a single request
    is routed to them, and the closing plot shows the scores that decided it."""
    recorder, outcome = run(engine, candidate=candidate, requests=32, canary_percent=50)
    summary = outcome.summary
    assert summary["decision"] == "rollback" and summary["rule"] == "quality"
    assert summary["requests"] == {"current": 0, "candidate": 0}
    assert "no request reached the candidate" in summary["why"]
    assert summary["agreement"] < 0.9
    assert summary["bpb"]["candidate"] > summary["bpb"]["current"]
    assert recorder.types() == ["started", "version_loaded", "version_loaded", "evaluated",
                                "gate", "plot"]
    (figure,) = recorder.events[-1][2]["figures"]
    assert figure["figure"]["layout"]["title"]["text"] == (
        "Evaluation set: bits per byte by version (measured)")
    assert "before any traffic" in figure["note"]


def test_injected_failures_roll_back_through_the_error_gate(engine):
    recorder, outcome = run(engine, candidate="int8", inject_error_rate=0.5,
                            canary_percent=50, requests=32)
    summary = outcome.summary
    assert summary["decision"] == "rollback" and summary["rule"] == "errors"
    assert summary["errors"]["candidate"] >= 1 and summary["errors"]["current"] == 0
    assert summary["predicted_requests"] >= 1
    note = recorder.events[-1][2]["figures"][0]["note"]
    assert "predicts about" in note and "the gate fired after" in note


def test_the_error_threshold_narrows_as_requests_accumulate():
    """A clean baseline of 40: p taken as 1/41; after 4 canary requests the gate allows
    1.645 × √(0.0238 × 0.275) = 13.3%; after 40, 1.645 × √(0.0238 × 0.05) = 5.68%."""
    assert error_threshold(baseline_errors=0, baseline_n=40, canary_n=4) == pytest.approx(
        0.1331, abs=1e-3)
    assert error_threshold(baseline_errors=0, baseline_n=40, canary_n=40) == pytest.approx(
        0.0568, abs=1e-3)


def test_gate_rules_in_order():
    mirror = {"n": 0, "agreement": 1.0}
    clean = {"current": {"n": 20, "errors": 0, "ttft": [0.01] * 20},
             "candidate": {"n": 20, "errors": 0, "ttft": [0.011] * 20}}
    assert gate_check(stats=clean, mirror=mirror) is None
    failing = {**clean, "candidate": {**clean["candidate"], "errors": 4}}
    assert gate_check(stats=failing, mirror=mirror)[0] == "errors"
    slow = {**clean, "candidate": {**clean["candidate"], "ttft": [0.05] * 20}}
    assert gate_check(stats=slow, mirror=mirror)[0] == "latency"
    # 2.0× is the tolerance itself: not above it.
    edge = {**clean, "candidate": {**clean["candidate"], "ttft": [0.02] * 20}}
    assert gate_check(stats=edge, mirror=mirror) is None
    # One slow request among 20 is not the p95 (nearest rank: the 19th of 20).
    one_slow = {**clean, "candidate": {**clean["candidate"], "ttft": [0.011] * 19 + [0.5]}}
    assert gate_check(stats=one_slow, mirror=mirror) is None
    # Under 20 requests a p95 is the slowest one: the latency rule waits.
    few = {**clean, "candidate": {"n": 5, "errors": 0, "ttft": [0.05] * 5}}
    assert gate_check(stats=few, mirror=mirror) is None
    diverging = {"n": 4, "agreement": 0.4}
    assert gate_check(stats=clean, mirror=diverging)[0] == "mirrored answers"
    assert gate_check(stats=clean, mirror={"n": 3, "agreement": 0.4}) is None  # too few yet


def test_the_offline_gate_on_the_evaluation_set():
    """Bits per byte may rise by at most 0.05; next-token agreement must be at least 90%."""
    reference = {"bpb": 1.8, "agreement": 1.0}
    assert quality_gate({"reference": reference,
                         "candidate": {"bpb": 1.84, "agreement": 0.97}}) is None
    rule, why = quality_gate({"reference": reference,
                              "candidate": {"bpb": 1.9, "agreement": 0.97}})
    assert rule == "quality" and "bits per byte" in why
    rule, why = quality_gate({"reference": reference,
                              "candidate": {"bpb": 1.81, "agreement": 0.8}})
    assert rule == "quality" and "agreement" in why


def test_percentile_is_nearest_rank():
    assert percentile([3, 1, 2, 4], 0.5) == 2 and percentile([3, 1, 2, 4], 0.99) == 4
    assert percentile([], 0.5) == 0.0


def test_bad_parameters_name_their_field():
    with pytest.raises(ParamError) as caught:
        PARAMS.parse({"canary_percent": 90})
    assert caught.value.field == "canary_percent"
    with pytest.raises(ParamError):
        PARAMS.parse({"candidate": "fp2"})


def test_a_cancel_stops_the_run(engine):
    recorder = Recorder()
    recorder.cancel_after = ("window", None, "all", "cancelled by the visitor")
    with pytest.raises(RunCancelled):
        rollout_run(engine=engine, machine=MACHINE, params=PARAMS.defaults(),
                    ctx=recorder.context())


def test_the_prediction_uses_the_gates_floored_baseline():
    """A clean baseline of 36, 20% injected, a 25% canary (k = 3): p₀ is the gate's 1/37 =
    2.70%, not 0: (1.6449 √(0.027027 × 0.972973 × 4/3) + 0.8416 √(0.16 + 0.026297/3))² ÷
    0.172973² = (0.30800 + 0.34574)² ÷ 0.029920 = 14.28 requests (p₀ = 0 would say 2.83)."""
    n = predicted_requests(baseline_errors=0, baseline_n=36, inject=0.2, share=0.25)
    assert n == pytest.approx(14.28, abs=0.05)
    assert predicted_requests(baseline_errors=0, baseline_n=36, inject=0.02, share=0.25) is None
