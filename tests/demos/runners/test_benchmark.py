"""The benchmark runner on an engine of its own: both backends behind the same interface, the
same prompts token for token, every load point measured at the client, the plots and the
methodology in the summary."""

import json
from pathlib import Path

import pytest

from demos.runners.benchmark import PARAMS, benchmark_run
from demos.schema import ParamError

MODEL = Path(__file__).resolve().parents[3] / "worker" / "models" / "course-lm"
TINY = {**PARAMS.defaults(), "requests": 4, "input_tokens": 8, "output_tokens": 3,
        "static_batch": 2, "rates": ["inf"]}


@pytest.fixture
def own():
    from worker.demo_engine import engine_build, model_facts

    engine = engine_build(str(MODEL))
    machine = {**model_facts(engine), "model_path": str(MODEL), "device": "cpu"}
    return engine, machine


def test_the_schema_refuses_an_unknown_rate_naming_the_field() -> None:
    with pytest.raises(ParamError) as error:
        PARAMS.parse({"rates": ["3"]})
    assert error.value.field == "rates"


def test_a_rate_point_on_both_backends(own, recorder) -> None:
    engine, machine = own
    outcome = benchmark_run(engine=engine, machine=machine, params=TINY,
                            ctx=recorder.context())
    assert recorder.types() == ["started", "warmup", "warmup", "point", "point"]
    s = outcome.summary
    points = {p["backend"]: p for p in s["points"]}
    assert set(points) == {"engine", "hf-static"}
    for p in points.values():
        assert p["completed"] == 4 and p["failed"] == 0
        assert p["output_tokens"] == 4 * 3  # ignore_eos: exactly max_tokens each
        assert 0 < p["p50_ttft"] <= p["p99_e2e"]
        assert p["predicted_output_throughput"] is None  # "all at once" has no rate
    # The same prompts, token for token, on both backends.
    assert points["engine"]["prompt_tokens"] == points["hf-static"]["prompt_tokens"] > 4 * 8
    assert max(s["hf_batches"]) <= 2
    assert len(s["plots"]) == 3 and s["note"]
    assert any(row[0] == "batching" for row in s["methodology"])
    json.dumps(s, allow_nan=False)
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]


def test_fixed_concurrency_predicts_with_littles_law(own, recorder) -> None:
    engine, machine = own
    params = {**TINY, "mode": "concurrency", "concurrencies": ["2"]}
    outcome = benchmark_run(engine=engine, machine=machine, params=params,
                            ctx=recorder.context())
    engine_point = next(p for p in outcome.summary["points"] if p["backend"] == "engine")
    assert engine_point["label"] == "2 in flight"
    assert engine_point["predicted_output_throughput"] == pytest.approx(
        2 * 3 / engine_point["mean_e2e"])


def test_the_concurrency_note_says_each_backend_uses_its_own_e2e() -> None:
    """Review: the prediction at fixed concurrency uses each backend's own mean E2E, so the note
    must not say only the engine matches it."""
    from demos.runners.benchmark import _note

    points = [{"backend": b, "label": "2 in flight", "p99_ttft": t, "output_throughput": 10.0}
              for b, t in (("engine", 0.1), ("hf-static", 0.3))]
    text = _note(points, mode="concurrency", levels=[2], batch=2)
    assert "each backend's own mean E2E" in text
    assert "the engine matches it by construction" not in text


def test_the_rate_note_allows_a_draw_that_sent_faster_than_the_rate() -> None:
    """Review: 12 requests at 2 requests/s measured 34 tokens/s against a predicted 32 (their
    draw sent 12 requests over 11 gaps); the note said measured sits at or under."""
    from demos.runners.benchmark import _note

    points = [{"backend": b, "label": "2 req/s", "p99_ttft": 0.05, "output_throughput": 34.0,
               "sent_rate": 2.2} for b in ("engine", "hf-static")]
    text = _note(points, mode="rate", levels=[2.0], batch=8)
    assert "above or below" in text and "2.2 against 2 requests/s" in text
    assert "at or under" not in text


def test_hugging_face_runs_on_the_engines_device(own, recorder, monkeypatch) -> None:
    """Review: the methodology says both backends ran on the same device, but generate was
    always loaded on the CPU, so a GPU worker would have set its engine against a CPU."""
    import worker.bench_backends as backends

    seen = {}

    def refuse(self, model_path, **kwargs):  # noqa: ANN001, ANN003
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(backends.HFStaticBackend, "__init__", refuse)
    engine, machine = own
    with pytest.raises(RuntimeError, match="stop here"):
        benchmark_run(engine=engine, machine={**machine, "device": "cuda:0"}, params=TINY,
                      ctx=recorder.context())
    assert seen["device"] == "cuda:0"


def test_no_prompt_is_tokenized_under_the_engines_lock_while_measuring(own, recorder,
                                                                      monkeypatch) -> None:
    """Review: both servers tokenized each request through the engine's lock, which waits for
    the step under way while the engine (and only the engine) is busy: a few ms of TTFT against
    it. Every prompt is now tokenized before the warm-up."""
    from worker.engine_loop import EngineClient

    calls = []
    original = EngineClient.encode_prompt

    def counted(self, prompt, **kwargs):  # noqa: ANN001, ANN003
        calls.append(prompt)
        return original(self, prompt, **kwargs)

    monkeypatch.setattr(EngineClient, "encode_prompt", counted)
    at_warmup = []
    publish = recorder.publish

    def spy(type: str, data: dict, stream: int | None = None) -> None:  # noqa: A002
        if type == "warmup" and not at_warmup:
            at_warmup.append(len(calls))
        publish(type, data, stream)

    recorder.publish = spy
    engine, machine = own
    benchmark_run(engine=engine, machine=machine, params=TINY, ctx=recorder.context())
    assert at_warmup[0] == len(calls) == 2 + 4  # the warm-up's two and the point's four


def test_a_sweep_too_slow_to_send_in_the_time_limit_is_refused_naming_the_rates() -> None:
    """Review: 32 requests at 1 and 2 requests/s take (31 + 15.5) × 2 backends = 93 s only to
    send, past the 90 s a run may take, so the form accepted a run that could only fail."""
    from demos.runners.benchmark import arrivals_seconds

    assert arrivals_seconds({"mode": "rate", "rates": ["1", "2", "inf"],
                             "requests": 32}) == pytest.approx(93.0)
    with pytest.raises(ParamError) as error:
        PARAMS.parse({"rates": ["1", "2"], "requests": 32})
    assert error.value.field == "rates" and "93 s" in error.value.message
    PARAMS.parse({})  # the defaults: (11/2 + 11/8) × 2 = 13.75 s
    PARAMS.parse({"mode": "concurrency", "rates": ["1", "2"], "requests": 32})
