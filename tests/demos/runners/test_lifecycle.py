"""The lifecycle runner drives the engine through every stage and leaves it empty."""

import pytest

from demos.runners import RunCancelled, RunTimeLimit
from demos.runners.lifecycle import lifecycle_run

PARAMS = {"prompt": "What is a KV cache block?", "max_tokens": 5, "temperature": 0.0,
          "top_p": 1.0}


def test_stages_come_in_order_and_the_summary_adds_up(engine_and_machine, recorder):
    engine, machine = engine_and_machine
    outcome = lifecycle_run(engine=engine, machine=machine, params=PARAMS,
                            ctx=recorder.context())
    types = recorder.types()
    assert types[:4] == ["tokenized", "queued", "admitted", "prefill"]
    assert set(types[4:]) == {"token"}
    summary = outcome.summary
    assert outcome.state == "finished"
    assert summary["usage"]["completion_tokens"] == len(types) - 4 <= 5
    assert summary["usage"]["prompt_tokens"] == recorder.events[0][2]["token_count"]
    assert summary["text"] == "".join(d["text"] for t, _, d in recorder.events if t == "token")
    assert summary["ttft_ms"] <= summary["e2e_ms"]
    assert summary["kv_blocks_free"] == summary["kv_blocks_total"]
    assert not engine.has_unfinished()


def test_special_tokens_show_by_name_on_the_chips(engine_and_machine, recorder):
    engine, machine = engine_and_machine
    lifecycle_run(engine=engine, machine=machine, params={**PARAMS, "max_tokens": 1},
                  ctx=recorder.context())
    tokenized = recorder.events[0][2]
    assert all(piece for piece in tokenized["pieces"])  # none shows as an empty chip
    assert len(tokenized["pieces"]) == tokenized["token_count"]


def test_cancel_aborts_and_frees_every_block(engine_and_machine, recorder):
    engine, machine = engine_and_machine
    recorder.cancel_after = ("token", None, "all", "cancelled")
    with pytest.raises(RunCancelled) as caught:
        lifecycle_run(engine=engine, machine=machine,
                      params={**PARAMS, "max_tokens": 200, "ignore_eos": True},
                      ctx=recorder.context())
    assert caught.value.summary["reason"] == "cancelled"
    assert caught.value.summary["blocks_freed"] >= 1
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"] and not engine.has_unfinished()


def test_time_limit_stops_the_run(engine_and_machine, recorder):
    engine, machine = engine_and_machine
    with pytest.raises(RunTimeLimit):
        lifecycle_run(engine=engine, machine=machine, params=PARAMS,
                      ctx=recorder.context(time_limit_s=0))
