"""SamplingParams.n: samples of one prompt share its blocks, copy the last partial block on
write, and give every block back."""

import pytest
import torch

from worker.engine import Engine, SamplingParams


def prompt(n: int, seed: int = 0) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def run_all(engine: Engine) -> list[dict]:
    events = []
    while engine.has_unfinished():
        events.extend(engine.step())
    return events


@pytest.fixture
def engine(tiny_models) -> Engine:
    # Block size 16: a 20-token prompt fills one block and part of a second.
    return Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32, block_size=16,
                                  enable_prefix_caching=False)


def test_n_must_be_a_positive_integer() -> None:
    for bad in (0, -1, 1.5, 65):
        with pytest.raises(ValueError, match="n must be"):
            SamplingParams(n=bad)


def test_samples_share_the_prompt_blocks_then_copy_the_partial_one(engine) -> None:
    params = SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=6, ignore_eos=True)
    rid = engine.add_request(prompt(20), params, request_id="r")
    events = engine.step()  # the whole prompt in one step, then the fork
    forks = [e for e in events if e["type"] == "forked"]
    assert [e["request_id"] for e in forks] == ["r:1", "r:2"]
    assert all(e["parent"] == rid and e["shared_blocks"] == 2 for e in forks)
    tables = engine.block_tables()
    assert tables["r"] == tables["r:1"] == tables["r:2"]
    bm = engine.block_manager
    # Two blocks held three times each: only 2 of 32 in use.
    assert [bm.blocks[b].ref_count for b in tables["r"]] == [3, 3]
    assert bm.num_free_blocks == 30

    events = engine.step()  # each sample writes its first token at position 20, block 1
    cows = [e for e in events if e["type"] == "copy_on_write"]
    # The first two writers copy the shared partial block; the last holder writes in place.
    assert len(cows) == 2 and {e["source_block"] for e in cows} == {tables["r"][1]}
    tables = engine.block_tables()
    assert len({t[0] for t in tables.values()}) == 1  # the full block stays shared
    assert len({t[1] for t in tables.values()}) == 3  # each sample has its own partial block
    assert bm.blocks[tables["r"][0]].ref_count == 3
    assert bm.num_free_blocks == 28
    events = run_all(engine)
    finished = [e for e in events if e["type"] == "finished"]
    assert sorted(e["request_id"] for e in finished) == ["r", "r:1", "r:2"]
    assert sum(e["blocks_freed"] for e in finished) == 4
    assert bm.num_free_blocks == 32
    assert all(b.ref_count == 0 for b in bm.blocks)


def test_copied_block_keeps_the_prompts_kv(engine) -> None:
    """The samples' copies of the partial block hold the prompt's K/V exactly."""
    params = SamplingParams(n=2, temperature=1.0, seed=3, max_tokens=3, ignore_eos=True)
    engine.add_request(prompt(20, 1), params, request_id="r")
    engine.step()
    shared = engine.block_tables()["r"][1]
    before = [k[shared, :4].clone() for k, _ in engine.runner.kv_caches]
    engine.step()
    for rid in ("r", "r:1"):
        block = engine.block_tables()[rid][1]
        for layer, (k, _) in enumerate(engine.runner.kv_caches):
            assert torch.equal(k[block, :4], before[layer])


def test_each_sample_equals_a_single_request_with_its_seed(tiny_models) -> None:
    """Sample i of n draws the tokens a lone request with seed + i draws: sharing blocks and
    copying on write change nothing about the maths."""
    ids = prompt(20, 2)
    shared = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32)
    out = shared.generate([ids], SamplingParams(n=3, seed=11, max_tokens=8, ignore_eos=True))[0]
    assert len(out.samples) == 3 and out.samples[0].token_ids == out.token_ids
    alone = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32)
    for i, sample in enumerate(out.samples):
        lone = alone.generate([ids], SamplingParams(seed=11 + i, max_tokens=8,
                                                    ignore_eos=True))[0]
        assert sample.token_ids == lone.token_ids
    assert len({tuple(s.token_ids) for s in out.samples}) > 1  # the samples differ
    assert shared.stats()["kv_blocks_free"] == 32


def test_prompt_ending_on_a_block_boundary_needs_no_copy(engine) -> None:
    engine.add_request(prompt(16, 4), SamplingParams(n=2, seed=1, max_tokens=4,
                                                     ignore_eos=True))
    events = run_all(engine)
    assert not [e for e in events if e["type"] == "copy_on_write"]
    assert engine.block_manager.num_free_blocks == 32


def test_aborting_the_request_aborts_every_sample(engine) -> None:
    rid = engine.add_request(prompt(20, 5), SamplingParams(n=4, seed=2, max_tokens=50,
                                                           ignore_eos=True))
    engine.step()
    engine.step()
    assert len(engine.block_tables()) == 4
    assert engine.abort(rid)
    events = engine.step()
    assert sorted(e["request_id"] for e in events if e["type"] == "aborted") == [
        rid, f"{rid}:1", f"{rid}:2", f"{rid}:3"]
    assert engine.block_manager.num_free_blocks == 32 and not engine.has_unfinished()


def test_samples_under_memory_pressure_preempt_and_still_return_every_block(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=8, block_size=8,
                                    max_num_batched_tokens=64)
    engine.add_request(prompt(12, 6), SamplingParams(n=3, seed=4, max_tokens=20,
                                                     ignore_eos=True))
    engine.add_request(prompt(10, 7), SamplingParams(seed=5, max_tokens=20, ignore_eos=True))
    events = run_all(engine)
    assert [e for e in events if e["type"] == "preempted"]
    assert len([e for e in events if e["type"] == "finished"]) == 4
    assert engine.block_manager.num_free_blocks == 8
    assert all(b.ref_count == 0 for b in engine.block_manager.blocks)


def test_n_with_speculative_decoding_is_refused(tiny_models, tiny_draft) -> None:
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32,
                                    speculative_model=tiny_draft)
    with pytest.raises(ValueError, match="n > 1"):
        engine.add_request(prompt(8), SamplingParams(n=2))


def test_a_served_request_leaves_no_bookkeeping_behind(engine) -> None:
    """Through add_request and step (as the shared engine loop drives it), the list of a
    request's samples is dropped once all of them have ended."""
    engine.add_request(prompt(20, 8), SamplingParams(n=3, seed=1, max_tokens=3,
                                                     ignore_eos=True), request_id="s")
    run_all(engine)
    assert engine._samples == {} and engine.block_manager.num_free_blocks == 32
