"""Speculative decoding: greedy output identical to plain decoding; counters add up."""

import torch

from worker.engine import Engine, SamplingParams


def prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(11)
    return [torch.randint(3, 320, (n,), generator=g).tolist() for n in (1, 16, 37, 5)]


GREEDY = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True)


def test_greedy_with_a_draft_equals_plain_greedy(tiny_models, tiny_draft):
    target = tiny_models["llama_tied"]
    plain = Engine.from_pretrained(target, num_kv_blocks=64).generate(prompts(), GREEDY)
    engine = Engine.from_pretrained(target, num_kv_blocks=64, speculative_model=tiny_draft,
                                    num_speculative_tokens=3, max_num_batched_tokens=24)
    spec = engine.generate(prompts(), GREEDY)
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]
    stats = engine.stats()
    assert stats["spec_decode_num_draft_tokens"] > 0
    assert 0 <= stats["spec_decode_num_accepted_tokens"] <= stats["spec_decode_num_draft_tokens"]
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]


def test_a_draft_equal_to_the_target_is_always_accepted(tiny_models):
    target = tiny_models["llama_tied"]
    plain = Engine.from_pretrained(target, num_kv_blocks=64).generate(prompts(), GREEDY)
    engine = Engine.from_pretrained(target, num_kv_blocks=64, speculative_model=target,
                                    num_speculative_tokens=4)
    spec = engine.generate(prompts(), GREEDY)
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]
    # p == q, so min(1, p/q) = 1 even when sampling.
    sampled = SamplingParams(temperature=0.9, seed=5, max_tokens=20, ignore_eos=True)
    engine.generate(prompts(), sampled)
    stats = engine.stats()
    assert stats["spec_decode_num_accepted_tokens"] == stats["spec_decode_num_draft_tokens"] > 0


def test_speculative_output_survives_preemption(tiny_models, tiny_draft):
    target = tiny_models["llama_tied"]
    plain = Engine.from_pretrained(target, num_kv_blocks=64).generate(prompts(), GREEDY)
    engine = Engine.from_pretrained(target, num_kv_blocks=9, block_size=8,
                                    speculative_model=tiny_draft, num_speculative_tokens=3)
    spec = engine.generate(prompts(), GREEDY)
    assert engine.stats()["num_preemptions"] > 0
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]


def test_acceptance_rule_keeps_the_target_distribution():
    """Draft from q, verify against p (Leviathan's rule, unseeded requests): the first emitted
    token must follow p, not q."""
    from worker.engine.sequence import Sequence
    from worker.engine.speculative import _verify

    torch.manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(torch.stack([p, p]))  # k = 1: one check row, one bonus row
    seq = Sequence("s", [1], SamplingParams(temperature=1.0))
    draft_gen = torch.Generator().manual_seed(1)
    counts = torch.zeros(4)
    trials = 3000
    for _ in range(trials):
        draft = int(torch.multinomial(q, 1, generator=draft_gen))
        accepted, extra = _verify(seq, [draft], [q], logits)
        counts[(accepted + [extra])[0]] += 1
    torch.testing.assert_close(counts / trials, p, atol=0.03, rtol=0)


def test_acceptance_of_a_certain_guess_keeps_the_target_distribution():
    """Prompt lookup's guesses are certain (q one-hot): kept with probability p(d), else a
    token from p without d; the first emitted token still follows p."""
    from worker.engine.sequence import Sequence
    from worker.engine.speculative import _verify

    torch.manual_seed(1)
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = torch.log(torch.stack([p, p]))
    seq = Sequence("s", [1], SamplingParams(temperature=1.0))
    counts = torch.zeros(4)
    trials = 3000
    for _ in range(trials):
        accepted, extra = _verify(seq, [2], None, logits)
        counts[(accepted + [extra])[0]] += 1
    torch.testing.assert_close(counts / trials, p, atol=0.03, rtol=0)


def test_seeded_verification_over_seeds_keeps_the_target_distribution():
    """Seeded requests keep a draft only when it equals the target's own token at that
    position; over many seeds the first token still follows p."""
    from worker.engine.sequence import Sequence
    from worker.engine.speculative import _verify

    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(torch.stack([p, p]))
    counts = torch.zeros(4)
    trials = 3000
    for seed in range(trials):
        seq = Sequence("s", [1], SamplingParams(temperature=1.0, seed=seed))
        accepted, extra = _verify(seq, [seed % 4], [q], logits)
        counts[(accepted + [extra])[0]] += 1
    torch.testing.assert_close(counts / trials, p, atol=0.03, rtol=0)


def test_prompt_lookup_proposes_what_followed_the_latest_match():
    from worker.engine.speculative import ngram_propose

    assert ngram_propose([5, 6, 7, 8, 9, 5, 6, 7], 3) == [8, 9, 5]
    # The longest n-gram wins over a later, shorter match.
    assert ngram_propose([1, 2, 3, 4, 9, 3, 7, 1, 2, 3], 2, ngram_max=3) == [4, 9]
    assert ngram_propose([1, 2, 3, 4, 2, 8, 2], 2, ngram_max=1) == [8, 2]
    assert ngram_propose([1, 2, 3], 4) == []
    assert ngram_propose([4, 4, 4], 4) == [4]


def repeating_prompt() -> list[int]:
    g = torch.Generator().manual_seed(3)
    phrase = torch.randint(3, 320, (12,), generator=g).tolist()
    return phrase * 4


def test_prompt_lookup_greedy_equals_plain_greedy(tiny_models):
    target = tiny_models["llama_tied"]
    batch = prompts() + [repeating_prompt()]
    plain = Engine.from_pretrained(target, num_kv_blocks=64).generate(batch, GREEDY)
    engine = Engine.from_pretrained(target, num_kv_blocks=64, speculative_method="ngram",
                                    num_speculative_tokens=4)
    spec = engine.generate(batch, GREEDY)
    assert [o.token_ids for o in spec] == [o.token_ids for o in plain]
    stats = engine.stats()
    assert stats["spec_decode_num_draft_tokens"] > 0
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
    drafted = stats["spec_decode_num_drafts_by_position"]
    accepted = stats["spec_decode_num_accepted_tokens_per_pos"]
    assert len(drafted) == len(accepted) == 4
    assert sum(accepted) == stats["spec_decode_num_accepted_tokens"]
    assert all(a <= d for a, d in zip(accepted, drafted, strict=True))
    # Later guesses are only counted as accepted when every earlier one was.
    assert accepted == sorted(accepted, reverse=True)


def test_speculation_events_report_guesses_and_the_kept_count(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama_tied"], num_kv_blocks=64,
                                    speculative_method="ngram", num_speculative_tokens=3)
    rid = engine.add_request(repeating_prompt(), GREEDY)
    tokens, spec_events = [], []
    while engine.has_unfinished():
        for event in engine.step():
            if event.get("request_id") != rid:
                continue
            if event["type"] == "token":
                tokens.append(event["token_id"])
            elif event["type"] == "speculation":
                spec_events.append(event)
    assert spec_events
    # After the prompt's first token, each step emits the kept guesses plus the target's own.
    rebuilt = []
    for e in spec_events:
        rebuilt += e["drafts"][: e["accepted"]] + [e["token_id"]]
    assert rebuilt == tokens[1:]


def stopping_setup(tiny_models):
    """A greedy answer and a stop token that first appears a few tokens in."""
    target = tiny_models["llama_tied"]
    prompt = repeating_prompt()
    plain = Engine.from_pretrained(target, num_kv_blocks=64).generate([prompt], GREEDY)[0]
    out = plain.token_ids
    index = next(i for i in range(3, len(out)) if out[i] not in out[:i])
    return target, prompt, out, index


def test_a_stop_inside_accepted_drafts_leaves_a_consistent_export(tiny_models):
    target, prompt, out, index = stopping_setup(tiny_models)
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True,
                            stop_token_ids=[out[index]])
    # A draft equal to the target accepts every guess, so the stop lands inside a run of
    # accepted drafts unless it happens to be the step's last token.
    engine = Engine.from_pretrained(target, num_kv_blocks=64, speculative_model=target,
                                    num_speculative_tokens=4)
    rid = engine.add_request(prompt, params, export_kv=True)
    kept_after_stop = []
    while engine.has_unfinished():
        for e in engine.step():
            if e["type"] == "speculation" and e["request_id"] == rid:
                kept_after_stop.append(e["accepted"])
    handoff = engine.kv_take(rid)
    assert handoff.token_ids == prompt + out[: index + 1]
    assert handoff.num_computed_tokens == len(handoff.token_ids) - 1
    # The export imports into a plain engine, which continues exactly as plain greedy would.
    plain = Engine.from_pretrained(target, num_kv_blocks=64)
    rest = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    continued = plain.generate([handoff.token_ids], rest)[0].token_ids
    other = Engine.from_pretrained(target, num_kv_blocks=64)
    imported_id = other.add_request(None, rest, kv=handoff)
    got = []
    while other.has_unfinished():
        got += [e["token_id"] for e in other.step()
                if e["type"] == "token" and e["request_id"] == imported_id]
    assert got == continued


def test_a_stop_inside_accepted_drafts_with_prompt_lookup(tiny_models):
    target, prompt, out, index = stopping_setup(tiny_models)
    params = SamplingParams(temperature=0, max_tokens=20, ignore_eos=True,
                            stop_token_ids=[out[index]])
    engine = Engine.from_pretrained(target, num_kv_blocks=64, speculative_method="ngram",
                                    num_speculative_tokens=4)
    rid = engine.add_request(prompt, params, export_kv=True)
    while engine.has_unfinished():
        engine.step()
    handoff = engine.kv_take(rid)
    assert handoff.token_ids == prompt + out[: index + 1]
    assert handoff.num_computed_tokens == len(handoff.token_ids) - 1
    Engine.from_pretrained(target, num_kv_blocks=64).add_request(
        None, SamplingParams(max_tokens=2), kv=handoff)  # accepted: no ValueError


SEEDED = SamplingParams(temperature=0.8, top_p=0.95, seed=1234, max_tokens=24, ignore_eos=True)


def seeded_tokens(engine, *, crowd: int) -> list[int]:
    """The seeded request's tokens, alone (crowd 0) or among `crowd` other requests."""
    g = torch.Generator().manual_seed(7)
    others = [torch.randint(3, 320, (int(n),), generator=g).tolist()
              for n in torch.randint(2, 40, (crowd,), generator=g)]
    mine = repeating_prompt()
    outs = engine.generate(
        others + [mine],
        [SamplingParams(temperature=1.0, max_tokens=16, ignore_eos=True)] * crowd + [SEEDED])
    return outs[-1].token_ids


def test_a_seeded_request_gives_the_same_tokens_in_any_batch_with_or_without_speculation(
        tiny_models, tiny_draft):
    target = tiny_models["llama_tied"]
    expected = seeded_tokens(Engine.from_pretrained(target, num_kv_blocks=128), crowd=0)
    engines = {
        "plain": dict(),
        "draft": dict(speculative_model=tiny_draft, num_speculative_tokens=3),
        "same-draft": dict(speculative_model=target, num_speculative_tokens=4),
        "ngram": dict(speculative_method="ngram", num_speculative_tokens=4),
        # A small step budget leaves some steps too little room for every guess.
        "draft-tight": dict(speculative_model=tiny_draft, num_speculative_tokens=4,
                            max_num_batched_tokens=20),
    }
    for name, kwargs in engines.items():
        for crowd in (0, 5):
            engine = Engine.from_pretrained(target, num_kv_blocks=128, **kwargs)
            assert seeded_tokens(engine, crowd=crowd) == expected, (name, crowd)
