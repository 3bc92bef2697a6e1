"""The engine's API: events, abort, memory accounting, stop conditions, text and bad input."""

import json

import pytest
import torch

from worker.engine import Engine, RequestOutput, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)


def run_all(engine: Engine) -> list[dict]:
    events = []
    while engine.has_unfinished():
        events.extend(engine.step())
    return events


def ids(n: int, seed: int = 0) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.fixture
def engine(tiny_models) -> Engine:
    return Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32,
                                  max_num_batched_tokens=16)


def test_events_tell_one_request_lifecycle_in_order(engine):
    rid = engine.add_request(ids(20), GREEDY, request_id="r1")
    events = run_all(engine)
    json.dumps(events)  # everything streamable as JSON
    mine = [e for e in events if e.get("request_id") == rid]
    kinds = [e["type"] for e in mine]
    assert kinds[:3] == ["queued", "admitted", "prefill_chunk"]
    assert kinds[-1] == "finished" and kinds.count("token") == 8
    chunks = [e for e in mine if e["type"] == "prefill_chunk"]
    # 20 prompt tokens under a 16-token budget: two chunks, the second finishing the prompt.
    assert [(c["start"], c["end"], c["done"]) for c in chunks] == [(0, 16, False), (16, 20, True)]
    assert mine[1]["blocks"] == 1 and mine[1]["prompt_tokens"] == 20
    assert [e["index"] for e in mine if e["type"] == "token"] == list(range(8))
    finished = mine[-1]
    assert finished["finish_reason"] == "length" and finished["num_output_tokens"] == 8
    # 20 prompt tokens + 7 decoded into the cache (the last sampled token never is): 2 blocks.
    assert finished["blocks_freed"] == 2
    assert set(finished["metrics"]) >= {"ttft", "itl", "queue_time", "prefill_time", "e2e"}
    assert len(finished["metrics"]["itl"]) == 7
    steps = [e for e in events if e["type"] == "step"]
    assert sum(s["num_prefill_tokens"] + s["num_decode_tokens"] for s in steps) == 20 + 7
    assert steps[-1]["blocks_free"] == steps[-1]["blocks_total"] == 32


def test_block_tables_show_each_request_its_blocks(engine):
    a = engine.add_request(ids(20, 1), GREEDY)
    b = engine.add_request(ids(5, 2), GREEDY)
    engine.step()  # budget 16: a gets its first chunk, b waits
    engine.step()
    tables = engine.block_tables()
    assert len(tables[a]) == 2 and len(tables[b]) == 1
    assert not set(tables[a]) & set(tables[b])
    step = [e for e in engine.step() if e["type"] == "step"][0]
    assert 0 < step["model_seconds"] <= step["seconds"]


def test_chunked_prefill_shares_steps_with_decodes(engine):
    engine.add_request(ids(3, 1), SamplingParams(temperature=0, max_tokens=20, ignore_eos=True))
    engine.step()  # the short prompt is decoding from here on
    engine.add_request(ids(40, 2), GREEDY)
    mixed = [e for e in run_all(engine) if e["type"] == "step"
             and e["num_prefill_tokens"] and e["num_decode_tokens"]]
    assert mixed and all(e["num_prefill_tokens"] + e["num_decode_tokens"] <= 16 for e in mixed)


def test_abort_frees_blocks_at_once_and_reports_next_step(engine):
    rid = engine.add_request(ids(40), SamplingParams(max_tokens=50))
    before = engine.step() + engine.step()
    sampled = sum(1 for e in before if e["type"] == "token" and e["request_id"] == rid)
    held = engine.stats()["kv_blocks_total"] - engine.stats()["kv_blocks_free"]
    assert held > 0
    assert engine.abort(rid) is True
    assert engine.stats()["kv_blocks_free"] == engine.stats()["kv_blocks_total"]
    events = engine.step()
    # It also says how many tokens the request had generated (none while still in prefill).
    # And the pool's free blocks right after the abort: all of them here.
    assert {"type": "aborted", "request_id": rid, "blocks_freed": held,
            "blocks_free": engine.stats()["kv_blocks_total"],
            "completion_tokens": sampled} in events
    assert not engine.has_unfinished()
    assert engine.abort(rid) is False


def test_blocks_all_return_after_finishes_aborts_and_preemptions(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=10,
                                    max_num_batched_tokens=32, block_size=8)
    rids = [engine.add_request(ids(n, n), SamplingParams(temperature=0, max_tokens=24,
                                                          ignore_eos=True))
            for n in (5, 17, 30, 9, 23, 40)]
    for step in range(12):
        engine.step()
        if step == 6:
            engine.abort(rids[1])
            engine.abort(rids[4])
    run_all(engine)
    stats = engine.stats()
    assert stats["num_preemptions"] > 0
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"] == 10
    assert all(b.ref_count == 0 for b in engine.block_manager.blocks)


def test_kv_block_bytes_follows_the_formula(tiny_models):
    engine = Engine.from_pretrained(tiny_models["mistral"], num_kv_blocks=4, block_size=8)
    # 2 (K and V) x 2 layers x 8 tokens x 2 kv heads x head_dim 24 x 4 bytes (fp32)
    assert engine.stats()["kv_block_bytes"] == 2 * 2 * 8 * 2 * 24 * 4
    assert engine.runner.kv_caches[0][0].shape == (4, 8, 2, 24)


def test_kv_budget_sets_the_block_count(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], kv_cache_memory_bytes=8192 * 20)
    assert engine.stats()["kv_blocks_total"] == 20  # 8192 bytes per 16-token block
    assert engine.max_model_len == 256


def test_shared_prefix_prompts_hit_the_prefix_cache(engine):
    system = ids(32, 5)
    engine.generate([system + ids(4, 6)], GREEDY)
    engine.generate([system + ids(4, 7)], GREEDY)
    stats = engine.stats()
    assert stats["prefix_cache_hits"] == 32
    assert stats["prefix_cache_queries"] == 2 * 36


def test_admitted_event_reports_cached_tokens(engine):
    system = ids(32, 5)
    engine.generate([system + [7]], GREEDY)
    engine.add_request(system + [9], GREEDY, request_id="second")
    admitted = [e for e in run_all(engine) if e["type"] == "admitted"]
    assert admitted[0]["cached_tokens"] == 32


def test_generate_returns_request_outputs_in_prompt_order(engine):
    outputs = engine.generate([ids(5, 1), ids(30, 2)], [GREEDY, SamplingParams(
        temperature=0, max_tokens=3, ignore_eos=True)])
    assert [type(o) for o in outputs] == [RequestOutput, RequestOutput]
    assert [len(o.token_ids) for o in outputs] == [8, 3]
    assert outputs[1].prompt_token_ids == ids(30, 2)
    assert outputs[0].metrics["ttft"] > 0


def test_stop_token_ids_and_eos_end_the_request(engine):
    free_run = engine.generate([ids(6)], SamplingParams(temperature=0, max_tokens=8,
                                                        ignore_eos=True))[0]
    stop_at = free_run.token_ids[3]
    out = engine.generate([ids(6)], SamplingParams(temperature=0, max_tokens=8,
                                                   stop_token_ids=[stop_at]))[0]
    assert out.token_ids == free_run.token_ids[: free_run.token_ids.index(stop_at) + 1]
    assert out.finish_reason == "stop"
    engine.eos_token_ids = {stop_at}
    out = engine.generate([ids(6)], SamplingParams(temperature=0, max_tokens=8))[0]
    assert out.token_ids[-1] == stop_at and out.finish_reason == "stop"


@pytest.mark.parametrize("bad", [
    dict(max_tokens=-1), dict(max_tokens=0), dict(top_p=0.0), dict(top_p=1.5),
    dict(temperature=-0.1), dict(top_k=-2), dict(stop=[""]),
])
def test_invalid_sampling_params_raise(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_invalid_prompts_raise_before_anything_is_queued(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=4, max_model_len=64)
    for bad in ([], ids(64), [5, 400], [-1]):
        with pytest.raises(ValueError):
            engine.generate([ids(5), bad], GREEDY)
    with pytest.raises(ValueError):
        engine.add_request("text without a tokenizer", GREEDY)
    with pytest.raises(ValueError):
        engine.generate([ids(3), ids(3)], [GREEDY])
    assert not engine.has_unfinished()
    assert engine.stats()["kv_blocks_free"] == 4 and engine.stats()["prefix_cache_queries"] == 0


def test_invalid_engine_arguments_raise(tiny_models, tmp_path):
    path = tiny_models["llama"]
    with pytest.raises(ValueError, match="too small"):
        Engine.from_pretrained(path, num_kv_blocks=2, max_model_len=64)
    with pytest.raises(ValueError, match="scheduling"):
        Engine.from_pretrained(path, scheduling="sometimes")
    with pytest.raises(ValueError, match="no block"):
        Engine.from_pretrained(path, kv_cache_memory_bytes=100)
    with pytest.raises(FileNotFoundError):
        Engine.from_pretrained(tmp_path / "missing")
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(ValueError, match="unsupported model_type"):
        Engine.from_pretrained(tmp_path)


def test_duplicate_request_id_is_refused(engine):
    engine.add_request(ids(3), GREEDY, request_id="x")
    with pytest.raises(ValueError, match="already"):
        engine.add_request(ids(3), GREEDY, request_id="x")


def test_kv_handoff_lets_another_engine_continue_without_recomputing(tiny_models):
    path = tiny_models["qwen2"]
    prompt = ids(37, 4)
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    whole = Engine.from_pretrained(path, num_kv_blocks=16).generate([prompt], params)[0]

    prefill = Engine.from_pretrained(path, num_kv_blocks=16)
    rid = prefill.add_request(prompt, SamplingParams(temperature=0, max_tokens=1), export_kv=True)
    run_all(prefill)
    handoff = prefill.kv_take(rid)
    assert handoff.token_ids == prompt + whole.token_ids[:1]
    assert handoff.nbytes == 37 * prefill.stats()["kv_block_bytes"] // 16

    decode = Engine.from_pretrained(path, num_kv_blocks=16, block_size=8)  # other block size
    decode.add_request(None, SamplingParams(temperature=0, max_tokens=9, ignore_eos=True),
                       request_id="d", kv=handoff)
    events = run_all(decode)
    chunks = [e for e in events if e["type"] == "prefill_chunk"]
    # Only the newest token is computed; the 37 prompt tokens arrived as K/V.
    assert [(c["start"], c["end"]) for c in chunks] == [(37, 38)]
    steps = [e for e in events if e["type"] == "step"]
    assert sum(s["num_prefill_tokens"] + s["num_decode_tokens"] for s in steps) == 9
    assert [e["token_id"] for e in events if e["type"] == "token"] == whole.token_ids[1:]
    assert decode.stats()["kv_blocks_free"] == 16
    with pytest.raises(ValueError):
        prefill.kv_take(rid)


def test_prefix_cache_is_shared_only_within_a_salt(engine):
    prompt = ids(40, seed=7)

    def cached(salt):
        engine.add_request(prompt, GREEDY, cache_salt=salt)
        admitted = [e for e in run_all(engine) if e["type"] == "admitted"]
        return admitted[0]["cached_tokens"]

    assert cached("key:1") == 0
    assert cached("key:1") == 32  # the same client finds its two full blocks
    assert cached("key:2") == 0  # another client's timing learns nothing from them
    assert cached(None) == 0


def test_a_paced_request_sits_out_steps_until_its_next_token_is_due(engine, monkeypatch):
    """On a clock of its own, each step taking 62.5 ms (binary fractions, so no rounding): a
    request paced at 250 ms a token is carried once every four steps while an unpaced one
    decodes every step. (On the wall clock this failed under load: once steps took 250 ms the
    paced request was due every step.)"""
    import time

    from worker.engine import engine as engine_mod
    from worker.engine import scheduler as scheduler_mod

    class Clock:
        now = 1024.0

        def perf_counter(self) -> float:
            return self.now

        def __getattr__(self, name: str):  # noqa: ANN204 (the rest of the time module)
            return getattr(time, name)

    clock = Clock()
    monkeypatch.setattr(engine_mod, "time", clock)
    monkeypatch.setattr(scheduler_mod, "time", clock)
    slow = engine.add_request(ids(5), SamplingParams(temperature=0, max_tokens=3,
                                                     ignore_eos=True), pace_s=0.25)
    fast = engine.add_request(ids(5, seed=1), SamplingParams(temperature=0, max_tokens=6,
                                                             ignore_eos=True))
    carried: list[list[str]] = []
    while engine.has_unfinished():
        clock.now += engine.seconds_until_ready()  # waits for the paced one, once it is alone
        for event in engine.step():
            if event["type"] == "step" and event["num_seqs"]:
                carried.append(event["request_ids"])
        clock.now += 0.0625
    assert [i for i, c in enumerate(carried) if fast in c] == [0, 1, 2, 3, 4, 5]
    # The paced one: its first token with the prompt, the next four steps later, and the last
    # once it is due, after the fast one has finished (the engine waits for it, not steps).
    assert [i for i, c in enumerate(carried) if slow in c] == [0, 4, 6]


def test_one_definition_of_decoding(engine):
    from worker.engine.sequence import Sequence

    seq = Sequence("s", [5, 6, 7], GREEDY)
    assert not seq.is_decoding  # a prompt to fill
    seq.num_computed_tokens = 3
    seq.token_ids.append(9)
    assert seq.is_decoding  # only the newest output token lacks K/V
    seq.num_computed_tokens = 0  # preempted: recompute, not decode
    assert not seq.is_decoding
