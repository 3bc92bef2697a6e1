"""The lifecycle runner drives the shared engine through every stage and leaves it empty."""

import threading

import pytest

from demos.runners import RunCancelled, RunTimeLimit
from demos.runners.lifecycle import lifecycle_run
from tests.demos.runners.conftest import Recorder, engine_idle

PARAMS = {"prompt": "What is a KV cache block?", "max_tokens": 5, "temperature": 0.0,
          "top_p": 1.0}


def test_stages_come_in_order_and_the_summary_adds_up(serving, client, recorder):
    outcome = lifecycle_run(client=client, machine=serving.machine, params=PARAMS,
                            ctx=recorder.context())
    types = recorder.types()
    assert types[:4] == ["tokenized", "queued", "admitted", "prefill"]
    assert set(types[4:]) == {"token", "step"}
    summary = outcome.summary
    assert outcome.state == "finished"
    assert summary["usage"]["completion_tokens"] == types.count("token") <= 5
    # Alone in the engine: every step carried this request only.
    steps = [d for t, _, d in recorder.events if t == "step"]
    assert len(steps) == 1 and steps[0]["num_others"] == 0 and steps[0]["num_visitors"] == 1
    assert summary["sharing"]["shared_steps"] == 0
    assert summary["usage"]["prompt_tokens"] == recorder.events[0][2]["token_count"]
    assert summary["text"] == "".join(d["text"] for t, _, d in recorder.events if t == "token")
    assert summary["ttft_ms"] <= summary["e2e_ms"]
    assert engine_idle(serving)


def test_two_visitors_share_steps(serving, recorder, monkeypatch):
    """Two runs from two visitors at once: their requests ride in the same steps, and each
    run's events stay its own."""
    other = Recorder()
    params = {**PARAMS, "max_tokens": 24, "ignore_eos": True}
    outcomes = {}
    # On a fast machine the first run could finish its 24 tokens before the second is even
    # queued. Until both requests are in, the loop sees nothing ready and waits without its
    # lock (so the second request can get in); from then on it steps as usual.
    engine = serving.loop.engine
    ready, pending = engine.seconds_until_ready, engine.has_pending_events

    def both_in() -> bool:
        return len(engine.scheduler.waiting) + len(engine.scheduler.running) >= 2

    monkeypatch.setattr(engine, "seconds_until_ready", lambda: ready() if both_in() else 0.01)
    monkeypatch.setattr(engine, "has_pending_events", lambda: pending() and both_in())

    def run(name, recorder):
        client = serving.loop.client(owner=f"session:{name}")
        try:
            outcomes[name] = lifecycle_run(client=client, machine=serving.machine,
                                           params=params, ctx=recorder.context())
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(n, r)) for n, r in (("a", recorder),
                                                                       ("b", other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes["a"].state == outcomes["b"].state == "finished"
    for rec in (recorder, other):
        assert rec.types().count("token") == 24  # no token of the other run leaked in
    shared = [d for t, _, d in recorder.events + other.events
              if t == "step" and d["num_others"] > 0]
    assert shared and all(d["num_visitors"] == 2 and d["num_seqs"] == 2 for d in shared), [
        d for d in shared if d["num_visitors"] != 2 or d["num_seqs"] != 2]
    assert outcomes["a"].summary["sharing"]["shared_steps"] >= 1
    assert engine_idle(serving)


def test_special_tokens_show_by_name_on_the_chips(serving, client, recorder):
    lifecycle_run(client=client, machine=serving.machine, params={**PARAMS, "max_tokens": 1},
                  ctx=recorder.context())
    tokenized = recorder.events[0][2]
    assert all(piece for piece in tokenized["pieces"])  # none shows as an empty chip
    assert len(tokenized["pieces"]) == tokenized["token_count"]


def test_cancel_aborts_and_frees_every_block(serving, client, recorder, monkeypatch):
    recorder.cancel_after = ("token", None, "all", "cancelled")
    # 200 tokens take some 0.15 s on an idle machine, less than it may take the runner to read
    # the cancel (it looks every 20 ms, between batches of events). So once the cancel is set,
    # the loop takes no step but the one that hands out the abort's events.
    engine = serving.loop.engine
    ready = engine.seconds_until_ready
    monkeypatch.setattr(engine, "seconds_until_ready",
                        lambda: 0.01 if recorder.cancel else ready())
    with pytest.raises(RunCancelled) as caught:
        lifecycle_run(client=client, machine=serving.machine,
                      params={**PARAMS, "max_tokens": 200, "ignore_eos": True},
                      ctx=recorder.context())
    assert caught.value.summary["reason"] == "cancelled"
    assert caught.value.summary["blocks_freed"] >= 1
    assert engine_idle(serving)


def test_time_limit_stops_the_run(serving, client, recorder):
    with pytest.raises(RunTimeLimit):
        lifecycle_run(client=client, machine=serving.machine, params=PARAMS,
                      ctx=recorder.context(time_limit_s=0))
    client.close()  # what the task does on any failure
    assert engine_idle(serving)


def test_prefill_is_a_measured_duration_from_the_engine(serving, client, recorder):
    """The engine hands out a step's events together once the step is over, so the admission
    and the end of a one-step prefill used to get one timestamp: "Prefill 190 tokens in 0.00 ms"
    with the prefill's time counted as queueing. Both now come from the engine's clock.

    By hand: the prompt is some 30 tokens, one step's budget; that step runs the model over
    every prompt token, which takes well over a microsecond on any machine, so the prefill is
    > 0 ms both live (the step's time) and in the summary (first scheduled → first token), and
    queue + prefill adds up to the engine's TTFT less tokenizing."""
    outcome = lifecycle_run(client=client, machine=serving.machine, params=PARAMS,
                            ctx=recorder.context())
    summary = outcome.summary
    live = next(d for t, _, d in recorder.events if t == "prefill")
    assert live["ms"] > 0
    assert summary["prefill_ms"] > 0
    bars = {b["stage"]: b for b in summary["timeline"]}
    assert bars["prefill"]["end_ms"] - bars["prefill"]["start_ms"] == pytest.approx(
        summary["prefill_ms"], abs=0.01)
    assert bars["queue"]["end_ms"] == bars["prefill"]["start_ms"]
    engine = summary["engine_metrics"]
    assert summary["prefill_ms"] == pytest.approx(engine["prefill_time"] * 1000, abs=0.01)
    assert summary["ttft_ms"] == pytest.approx(
        bars["queue"]["start_ms"] + engine["ttft"] * 1000, abs=0.01)
    assert summary["ttft_ms"] <= summary["e2e_ms"]
