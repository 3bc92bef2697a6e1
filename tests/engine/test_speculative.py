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
    """Draft from q, verify against p: the first emitted token must follow p, not q."""
    from worker.engine.sequence import Sequence
    from worker.engine.speculative import _verify

    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])
    logits = torch.log(torch.stack([p, p]))  # k = 1: one check row, one bonus row
    seq = Sequence("s", [1], SamplingParams(temperature=1.0, seed=0))
    draft_gen = torch.Generator().manual_seed(1)
    counts = torch.zeros(4)
    trials = 3000
    for _ in range(trials):
        draft = int(torch.multinomial(q, 1, generator=draft_gen))
        accepted, extra = _verify(seq, [draft], [q], logits)
        counts[(accepted + [extra])[0]] += 1
    torch.testing.assert_close(counts / trials, p, atol=0.03, rtol=0)
