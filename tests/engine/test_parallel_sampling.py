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


def test_n_beyond_max_num_seqs_is_refused_and_the_seats_hold(tiny_models) -> None:
    """max_num_seqs 4. n=12 could never run side by side: refused, naming n (it once ran 13
    sequences). n=3 and then a single request: the prompt of the n=3 request takes 3 seats
    (its samples fork off it in the step its prompt goes in), so the single request may take
    the fourth seat and no more; 3 + 1 = 4 sequences at most in any step."""
    from worker.engine.sampling_params import ParamError

    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, block_size=16,
                                    max_num_seqs=4, enable_prefix_caching=False)
    with pytest.raises(ParamError, match="max_num_seqs") as refused:
        engine.add_request(prompt(8), SamplingParams(n=12, max_tokens=2))
    assert refused.value.param == "n"
    assert not engine.has_unfinished()
    engine.add_request(prompt(8), SamplingParams(n=3, seed=1, max_tokens=4, ignore_eos=True))
    engine.add_request(prompt(8, 1), SamplingParams(max_tokens=4, ignore_eos=True))
    engine.add_request(prompt(8, 2), SamplingParams(max_tokens=4, ignore_eos=True))
    most = 0
    while engine.has_unfinished():
        engine.step()
        most = max(most, len(engine.scheduler.running))
    assert most == 4


def test_penalties_lower_the_tokens_already_in_the_output(tiny_models) -> None:
    """Greedy with a frequency penalty of 2 on a tiny random model that repeats itself: every
    logit of a token seen k times drops by 2k, so the greedy output has more distinct tokens
    than without; with the penalty at 0 the output is the unpenalised one, token for token."""
    from worker.engine.layers.sampler import penalties_apply

    logits = torch.zeros(2, 5)
    params = [SamplingParams(frequency_penalty=0.5, presence_penalty=1.0), SamplingParams()]
    out = penalties_apply(logits, params, [[1, 1, 3], [1]])
    # Token 1 twice: -0.5*2 - 1 = -2; token 3 once: -0.5 - 1 = -1.5; the second row untouched.
    assert out[0].tolist() == [0, -2, 0, -1.5, 0] and out[1].tolist() == [0] * 5

    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, block_size=16)
    plain = engine.generate(prompt(6), SamplingParams(temperature=0, max_tokens=24,
                                                      ignore_eos=True))[0].token_ids
    zero = engine.generate(prompt(6), SamplingParams(temperature=0, max_tokens=24,
                                                     ignore_eos=True,
                                                     frequency_penalty=0.0))[0].token_ids
    penalised = engine.generate(prompt(6), SamplingParams(
        temperature=0, max_tokens=24, ignore_eos=True, frequency_penalty=2.0))[0].token_ids
    assert zero == plain
    assert len(set(penalised)) > len(set(plain))


def test_logprobs_report_the_chosen_token_and_its_alternatives(tiny_models) -> None:
    """Greedy with logprobs=3: the chosen token is the most likely, so its log-probability is
    the first alternative's, and the three alternatives come in falling order."""
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, block_size=16)
    engine.add_request(prompt(6), SamplingParams(temperature=0, max_tokens=4, ignore_eos=True,
                                                 logprobs=3), request_id="r")
    tokens = []
    while engine.has_unfinished():
        tokens += [e for e in engine.step() if e["type"] == "token"]
    assert len(tokens) == 4
    for event in tokens:
        top = event["logprobs"]["top"]
        assert len(top) == 3 and top[0][0] == event["token_id"]
        assert event["logprobs"]["logprob"] == pytest.approx(top[0][1])
        assert top[0][1] >= top[1][1] >= top[2][1] and top[0][1] <= 0
    with pytest.raises(ValueError, match="logprobs"):
        SamplingParams(logprobs=21)
    with pytest.raises(ValueError, match="presence_penalty"):
        SamplingParams(presence_penalty=3)
