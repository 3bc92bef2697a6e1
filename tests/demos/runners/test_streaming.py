"""The streaming runner: three requests in one engine; one aborted, the others carry on."""

import pytest

from demos.runners import RunCancelled
from demos.runners.streaming import streaming_prompts, streaming_run

PARAMS = {"prompt": "Hello", "max_tokens": 12, "temperature": 0.0, "top_p": 1.0}


def test_cutting_one_stream_frees_its_blocks_while_the_others_finish(engine_and_machine,
                                                                     recorder):
    engine, machine = engine_and_machine
    recorder.cancel_after = ("token", 1, "stream:1", "disconnected")
    outcome = streaming_run(engine=engine, machine=machine, params=PARAMS,
                            ctx=recorder.context())
    assert outcome.state == "finished"
    states = {s["stream"]: s for s in outcome.summary["streams"]}
    assert [states[i]["state"] for i in range(3)] == ["done", "aborted", "done"]
    assert states[0]["completion_tokens"] == states[2]["completion_tokens"] == 12  # ignore_eos
    assert recorder.types(stream=1)[-1] == "aborted"
    aborted = [d for t, s, d in recorder.events if t == "aborted"][0]
    assert aborted["reason"] == "disconnected" and aborted["blocks_freed"] >= 1
    assert outcome.summary["kv_blocks_free"] == outcome.summary["kv_blocks_total"]
    assert len(streaming_prompts("x")) == 3


def test_cancelling_the_run_aborts_every_stream(engine_and_machine, recorder):
    engine, machine = engine_and_machine
    recorder.cancel_after = ("step", None, "all", "cancelled")
    with pytest.raises(RunCancelled) as caught:
        streaming_run(engine=engine, machine=machine, params={**PARAMS, "max_tokens": 100},
                      ctx=recorder.context())
    assert caught.value.summary["blocks_freed"] >= 3
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"] and not engine.has_unfinished()
