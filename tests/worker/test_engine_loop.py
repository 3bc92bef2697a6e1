"""The shared engine loop: clients get only their own events, and a failed step fails only the
requests it carried while the loop carries on with a fresh engine."""

import time

import pytest

from worker.engine import Engine, SamplingParams
from worker.engine_loop import EngineLoop

TINY = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            initializer_range=0.3)
PARAMS = SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("loop-model")
    LlamaForCausalLM(LlamaConfig(**TINY)).save_pretrained(directory)
    return directory


def drain(client, request_id: str, *, timeout: float = 20.0) -> list[dict]:
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += client.events(timeout=0.05)
        if any(e["type"] in ("finished", "aborted", "error") and
               e.get("request_id") == request_id for e in seen):
            return seen
    raise AssertionError(f"no end for {request_id}: {seen}")


def test_two_clients_share_steps_and_see_only_their_own_events(model_dir):
    loop = EngineLoop(Engine.from_pretrained(model_dir, num_kv_blocks=32)).start()
    try:
        a, b = loop.client(owner="session:a"), loop.client(owner="session:b")
        with loop.lock:  # both queued before the loop's next step
            ra = a.add_request([5, 6, 7], PARAMS)
            rb = b.add_request([8, 9, 10, 11], PARAMS)
        seen_a, seen_b = drain(a, ra), drain(b, rb)
        assert {e.get("request_id") for e in seen_a if e["type"] != "step"} == {ra}
        assert {e.get("request_id") for e in seen_b if e["type"] != "step"} == {rb}
        shared = [e for e in seen_a if e["type"] == "step" and e["num_owners"] == 2]
        assert shared and all(e["num_mine"] == 1 and e["num_seqs"] == 2 for e in shared)
    finally:
        loop.stop()


def test_a_failed_step_fails_its_requests_and_the_loop_goes_on(model_dir, monkeypatch):
    built = []

    def factory():
        built.append(Engine.from_pretrained(model_dir, num_kv_blocks=32))
        return built[-1]

    loop = EngineLoop(factory(), engine_factory=factory).start()
    try:
        broken = loop.engine

        def boom():
            raise RuntimeError("kernel exploded")

        monkeypatch.setattr(broken, "step", boom)
        client = loop.client(owner="session:x")
        first = client.add_request([5, 6, 7], PARAMS)
        events = drain(client, first)
        assert events[-1] == {"type": "error", "request_id": first,
                              "message": "the engine failed: kernel exploded"}
        assert loop.engine is not broken and len(built) == 2  # reloaded afresh
        second = client.add_request([5, 6, 7], PARAMS)
        assert any(e["type"] == "finished" for e in drain(client, second))
    finally:
        loop.stop()


def test_closing_a_client_aborts_what_it_left_running(model_dir):
    loop = EngineLoop(Engine.from_pretrained(model_dir, num_kv_blocks=32)).start()
    try:
        client = loop.client(owner="session:x")
        rid = client.add_request([5, 6, 7], SamplingParams(temperature=0, max_tokens=200,
                                                           ignore_eos=True))
        client.events(timeout=1.0)
        client.close()
        assert any(e["type"] == "aborted" for e in drain(client, rid))
        stats = client.stats()
        assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
    finally:
        loop.stop()


def test_a_waiting_client_gets_the_lock_before_the_loops_next_step(model_dir):
    """The loop takes the lock again right after each step; a client already waiting for it
    (to abort, say) must get it first, not after however many steps the loop wins."""
    loop = EngineLoop(Engine.from_pretrained(model_dir, num_kv_blocks=32)).start()
    try:
        client = loop.client(owner="session:a")
        request_id = client.add_request([5, 6, 7], SamplingParams(temperature=0, max_tokens=240,
                                                                  ignore_eos=True))
        while loop.steps < 3:
            time.sleep(0.001)
        steps_waited = []
        for _ in range(10):
            before = loop.steps
            with loop.lock:  # at most the step in progress ends first
                steps_waited.append(loop.steps - before)
                still_running = loop.engine.has_unfinished()
            time.sleep(0.002)
        assert still_running  # the loop was busy the whole time
        assert max(steps_waited) <= 1, steps_waited
        client.abort(request_id)
    finally:
        loop.stop()


def test_the_fair_lock_is_re_entrant_and_only_its_holder_releases_it():
    import threading

    from worker.engine_loop import FairLock

    lock = FairLock()
    with lock, lock:  # the holder takes it again without waiting on itself
        errors = []

        def release_from_another_thread():
            try:
                lock.release()
            except RuntimeError as exc:
                errors.append(exc)

        other = threading.Thread(target=release_from_another_thread)
        other.start()
        other.join()
        assert len(errors) == 1
    got = []
    taker = threading.Thread(target=lambda: got.append(lock.acquire()) or lock.release())
    taker.start()
    taker.join(timeout=30)
    assert got == [True]  # released both times: free for the next thread


def test_a_waiter_interrupted_before_its_turn_does_not_stall_the_lock():
    """A thread that stops waiting (KeyboardInterrupt, an exception raised into it) has drawn a
    ticket it will never use: the threads behind it must still be served."""
    import threading

    from worker.engine_loop import FairLock

    class Interrupted(BaseException):
        pass

    lock = FairLock()
    lock.acquire()
    real_wait = lock._cond.wait

    def interrupted_wait(timeout=None):
        raise Interrupted

    lock._cond.wait = interrupted_wait
    outcome = []

    def waiter():
        try:
            lock.acquire()
        except Interrupted:
            outcome.append("interrupted")

    first = threading.Thread(target=waiter)
    first.start()
    first.join()
    lock._cond.wait = real_wait
    assert outcome == ["interrupted"]
    lock.release()
    later = threading.Thread(target=lambda: (lock.acquire(), lock.release()), daemon=True)
    later.start()
    later.join(timeout=30)
    assert not later.is_alive(), "the lock stalled behind the interrupted waiter's ticket"


def test_the_samples_of_an_n_request_reach_its_client(model_dir):
    """n=3: samples r:1 and r:2 fork off r inside the engine; their tokens and ends reach the
    client that added r (they were dropped before, as nobody had added them), and closing the
    client mid-answer aborts all three."""
    loop = EngineLoop(Engine.from_pretrained(model_dir, num_kv_blocks=32)).start()
    try:
        client = loop.client(owner="a")
        rid = client.add_request([5, 6, 7], SamplingParams(n=3, seed=2, max_tokens=4,
                                                             ignore_eos=True))
        seen: list[dict] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and \
                sum(e["type"] == "finished" for e in seen) < 3:
            seen += client.events(timeout=0.05)
        ends = sorted(e["request_id"] for e in seen if e["type"] == "finished")
        assert ends == [rid, f"{rid}:1", f"{rid}:2"]
        tokens = [e for e in seen if e["type"] == "token"]
        assert {e["request_id"] for e in tokens} == set(ends) and len(tokens) == 12

        long = client.add_request([5, 6, 7], SamplingParams(n=2, seed=2, max_tokens=200,
                                                              ignore_eos=True))
        for _ in range(400):  # at most 20 s
            if any(e["type"] == "forked" for e in client.events(timeout=0.05)):
                break
        client.close()
        aborted = []
        while len(aborted) < 2 and time.monotonic() < deadline + 20:
            aborted += [e["request_id"] for e in client.events(timeout=0.05)
                        if e["type"] == "aborted"]
        assert sorted(aborted) == [long, f"{long}:1"]
        assert not client.request_ids
        with loop.lock:
            assert loop.engine.block_manager.num_free_blocks == 32
    finally:
        loop.stop()
