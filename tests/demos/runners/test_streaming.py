"""The streaming runner: three requests in the shared engine; one aborted, the others go on."""

import pytest

from demos.runners import RunCancelled
from demos.runners.streaming import streaming_prompts, streaming_run
from tests.demos.runners.conftest import engine_idle

PARAMS = {"prompt": "Hello", "max_tokens": 24, "temperature": 0.0, "top_p": 1.0}


def test_cutting_one_stream_frees_its_blocks_while_the_others_finish(serving, client,
                                                                     recorder):
    recorder.cancel_after = ("token", 1, "stream:1", "disconnected")
    outcome = streaming_run(client=client, machine=serving.machine, params=PARAMS,
                            ctx=recorder.context(pace_s=0.02))
    assert outcome.state == "finished"
    states = {s["stream"]: s for s in outcome.summary["streams"]}
    assert [states[i]["state"] for i in range(3)] == ["done", "aborted", "done"]
    assert states[0]["completion_tokens"] == states[2]["completion_tokens"] == 24  # ignore_eos
    assert recorder.types(stream=1)[-1] == "aborted"
    aborted = [d for t, s, d in recorder.events if t == "aborted"][0]
    assert aborted["reason"] == "disconnected" and aborted["blocks_freed"] >= 1
    # The page's bar rises by exactly what the abort returned: both counts are the engine's
    # at the abort, not the pool as the runner finds it later.
    assert aborted["kv_blocks_free"] - aborted["kv_blocks_free_before"] == aborted["blocks_freed"]
    assert outcome.summary["kv_blocks_free"] == outcome.summary["kv_blocks_total"]
    assert len(streaming_prompts("x")) == 3
    assert engine_idle(serving)
    # The run ends with the cut stream measured against problem 2's arithmetic.
    mvp = outcome.summary["measured_vs_predicted"]
    (measured,), (predicted,) = mvp["measured"], mvp["predicted"]
    assert measured["stream"] == predicted["stream"] == 1
    tokens = measured["completion_tokens"]
    # Blocks: the prompt and every token but the newest, whole blocks (some full prompt
    # blocks may stay shared with the other streams' cached prompt, so fewer can come back).
    held = -(-(measured["prompt_tokens"] + max(tokens - 1, 0)) // mvp["block_size"])
    assert predicted["blocks_at_cut"] == held
    assert 1 <= measured["blocks_freed"] <= held
    # Without cancellation: the rest of the answer, one token per pace (0.02 s).
    assert predicted["held_s_without_cancel"] == pytest.approx((24 - max(tokens, 1)) * 0.02)
    assert predicted["freed_within_s"] > 1.0  # a cut waits for the relay's next poll (1 s)
    assert measured["freed_ms"] >= measured["cut_seen_ms"]


def test_cancelling_the_run_aborts_every_stream(serving, client, recorder):
    recorder.cancel_after = ("step", None, "all", "cancelled")
    with pytest.raises(RunCancelled) as caught:
        streaming_run(client=client, machine=serving.machine,
                      params={**PARAMS, "max_tokens": 100}, ctx=recorder.context(pace_s=0.01))
    assert caught.value.summary["blocks_freed"] >= 3
    assert engine_idle(serving)


def test_pacing_leaves_the_steps_between_to_others(serving, client, recorder):
    """A paced stream sits out steps; a lifecycle run alongside is not slowed to its pace."""
    import threading
    import time

    from demos.runners.lifecycle import lifecycle_run
    from tests.demos.runners.conftest import Recorder

    fast = serving.loop.client(owner="session:fast")
    done = {}

    def run_fast():
        time.sleep(0.05)
        t = time.perf_counter()
        lifecycle_run(client=fast, machine=serving.machine,
                      params={"prompt": "Hi", "max_tokens": 20, "temperature": 0.0,
                              "top_p": 1.0, "ignore_eos": True}, ctx=Recorder().context())
        done["seconds"] = time.perf_counter() - t

    thread = threading.Thread(target=run_fast)
    thread.start()
    streaming_run(client=client, machine=serving.machine, params={**PARAMS, "max_tokens": 20},
                  ctx=recorder.context(pace_s=0.25))
    thread.join(timeout=60)
    fast.close()
    # 20 paced tokens take at least 19 x 250 ms; the lifecycle run's 20 tokens do not wait for
    # that pace (a deadline some hundred times its own work on an idle machine, so a loaded
    # one still passes: not a timing assertion on it).
    assert done["seconds"] < 19 * 0.25
