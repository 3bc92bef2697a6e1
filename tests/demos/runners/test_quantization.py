"""The quantization runner on a private engine of the shipped model, in this process."""

from pathlib import Path

import pytest

from demos.params import run_params_parse
from demos.runners import RunCancelled, runner_get
from demos.runners.quantization import PARAMS as QUANTIZATION_PARAMS
from demos.runners.quantization import quantization_run
from demos.schema import ParamError, SchemaParams
from tests.demos.runners.conftest import Recorder

MODEL = Path(__file__).resolve().parents[3] / "worker" / "models" / "course-lm"
PARAMS = {**QUANTIZATION_PARAMS.defaults(), "documents": 4}


@pytest.fixture(scope="module")
def engine():
    from worker.cpu_threads import one_thread
    from worker.demo_engine import engine_build

    with one_thread():
        return engine_build(str(MODEL))


def test_events_come_in_order_and_the_bytes_equal_the_arithmetic(engine):
    recorder = Recorder()
    outcome = quantization_run(engine=engine, machine={"device": "cpu"}, params=PARAMS,
                               ctx=recorder.context())
    formats = PARAMS["formats"]
    types = recorder.types()
    assert types[0] == "started"
    assert types[1:1 + len(formats)] == ["format_quantized"] * len(formats)
    progress = [d for t, _, d in recorder.events if t == "evaluation_progress"]
    assert progress and progress[-1]["document"] == progress[-1]["of"] == 4
    evaluated_at = types.index("format_evaluated")
    assert set(types[1 + len(formats):evaluated_at]) == {"evaluation_progress"}
    assert types[evaluated_at:] == ["format_evaluated"] * (len(formats) + 1) + ["plot"]
    quantized = [d for t, _, d in recorder.events if t == "format_quantized"]
    assert [d["format"] for d in quantized] == formats
    assert all(d["linear_bytes"] == d["predicted_bytes"] for d in quantized)
    evaluated = [d for t, _, d in recorder.events if t == "format_evaluated"]
    assert evaluated[0]["format"] == "fp32" and evaluated[0]["kl_mean"] == 0
    assert all(d["kl_mean"] >= 0 and 0 <= d["agreement"] <= 1 for d in evaluated)
    # Fewer bits, more loss: INT8 moves the distribution less than any 4-bit format.
    kl = {d["format"]: d["kl_mean"] for d in evaluated}
    assert kl["int8"] < min(kl["int4"], kl["nvfp4"], kl["mxfp4"])
    plot = recorder.events[-1][2]
    assert [f["figure"]["layout"]["title"]["text"] for f in plot["figures"]] == [
        "Weight error, measured and predicted", "Quality lost against bits per weight"]
    assert all(f["table"]["rows"] and f["note"] for f in plot["figures"])
    summary = outcome.summary
    assert outcome.state == "finished" and summary["bytes_match"]
    assert summary["best_4bit"] in ("int4", "nvfp4", "mxfp4")
    assert runner_get("quantization").engine == "own"


def test_a_cancel_stops_the_run_between_steps(engine):
    recorder = Recorder()
    recorder.cancel_after = ("format_quantized", None, "all", "cancelled")
    with pytest.raises(RunCancelled) as stopped:
        quantization_run(engine=engine, machine={}, params=PARAMS, ctx=recorder.context())
    assert stopped.value.reason == "cancelled"
    assert recorder.types().count("format_quantized") == 1


@pytest.mark.parametrize(("body", "field"), [
    (b'{"formats": ["int3"]}', "formats"),
    (b'{"formats": []}', "formats"),
    (b'{"int4_group_size": "100"}', "int4_group_size"),
    (b'{"documents": 99}', "documents"),
    (b'{"documents": "many"}', "documents"),
    (b'{"quantize_embedding": "maybe"}', "quantize_embedding"),
    (b'{"prompt": "hi"}', "prompt"),
])
def test_bad_parameters_name_their_field(body, field):
    with pytest.raises(ParamError) as error:
        run_params_parse(demo="quantization", body=body)
    assert error.value.field == field


def test_good_parameters_and_their_work():
    params = run_params_parse(demo="quantization",
                              body=b'{"formats": ["nvfp4", "int8"], "documents": 8, '
                                   b'"int4_group_size": "32", "quantize_embedding": true}')
    assert isinstance(params, SchemaParams)
    # Kept in the demo's order, whatever order they came in.
    assert params.values == {"formats": ["int8", "nvfp4"], "int4_group_size": "32",
                             "quantize_embedding": True, "documents": 8}
    assert params.work_tokens == 8 * 128


def test_a_format_scoring_better_than_fp32_is_explained() -> None:
    """Issue 35: MXFP4 got a better bits per byte than FP32 without a word. FP32 2.300, MXFP4
    2.280 (0.02 below), INT8 2.301 (above): only MXFP4 is named, as the evaluation's noise,
    with its KL beside it; when none beats FP32 there is nothing to say."""
    from demos.runners.quantization import bpb_note

    scores = {"fp32": {"bpb": 2.300, "kl_mean": 0.0}, "mxfp4": {"bpb": 2.280, "kl_mean": 0.31},
              "int8": {"bpb": 2.301, "kl_mean": 0.002}}
    note = bpb_note(scores=scores, names={"mxfp4": "MXFP4", "int8": "INT8"}, tokens=3456)
    assert note.startswith("MXFP4 (0.02 bits per byte below FP32, mean KL 0.31 nats) scored "
                           "better than FP32 on these 3,456 tokens.")
    assert "INT8" not in note and "cannot make the model better on average" in note
    assert bpb_note(scores={"fp32": scores["fp32"], "int8": scores["int8"]}, names={},
                    tokens=10) == ""
