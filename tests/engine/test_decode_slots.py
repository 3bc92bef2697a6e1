"""Decode slots: contiguous copies of decoding contexts give the same tokens as gathering from
the pool, through joins, aborts, preemptions and compaction."""

import pytest
import torch

from worker.engine import Engine, SamplingParams


def ids(n: int, seed: int) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def run(engine: Engine, *, abort_at: int | None = None) -> dict[str, list[int]]:
    """Mixed lengths arriving over time, one request aborted mid-answer; tokens per request."""
    tokens: dict[str, list[int]] = {}
    plan = [(f"r{i}", ids(5 + 7 * i, i), 4 + 5 * i) for i in range(6)]
    step = 0
    while plan or engine.has_unfinished():
        if plan and step % 3 == 0:
            rid, prompt, n = plan.pop(0)
            engine.add_request(prompt, SamplingParams(temperature=0, max_tokens=n,
                                                      ignore_eos=True), request_id=rid)
        if abort_at is not None and step == abort_at:
            engine.abort("r1")
        for event in engine.step():
            if event["type"] == "token":
                tokens.setdefault(event["request_id"], []).append(event["token_id"])
        step += 1
    return tokens


@pytest.mark.parametrize("num_kv_blocks", [64, 9])  # 9 blocks: preemptions happen
def test_slots_give_the_same_tokens_as_gathering(tiny_models, num_kv_blocks):
    def engine(slots: bool) -> Engine:
        e = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=num_kv_blocks,
                                   max_num_batched_tokens=32, enable_prefix_caching=False)
        if not slots:
            e.runner.decode_slots.max_bytes = 0
        return e

    with_slots, gathered = engine(True), engine(False)
    assert run(with_slots, abort_at=8) == run(gathered, abort_at=8)
    assert with_slots.runner.decode_slots.rows > 0 and gathered.runner.decode_slots.rows == 0
    if num_kv_blocks == 9:
        assert with_slots.stats()["num_preemptions"] > 0
    assert not with_slots.runner.decode_slots.slot_of  # every finished sequence let go
    stats = with_slots.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]


def test_a_leaving_sequence_s_hole_is_filled_by_the_last_slot(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64)
    for i in range(3):
        engine.add_request(ids(6, i), SamplingParams(temperature=0, max_tokens=30,
                                                     ignore_eos=True), request_id=f"s{i}")
    for _ in range(4):
        engine.step()
    slots = engine.runner.decode_slots
    assert sorted(slots.slot_of.values()) == [0, 1, 2]
    last_holder = next(s for s, i in slots.slot_of.items() if i == 2)
    row = slots.keys[0][2].clone()
    engine.abort(next(s for s, i in slots.slot_of.items() if i == 0))
    assert slots.slot_of[last_holder] == 0 and sorted(slots.slot_of.values()) == [0, 1]
    assert torch.equal(slots.keys[0][0], row)  # its context moved with it
