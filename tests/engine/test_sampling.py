"""Sampling: seeded requests reproduce whatever shares their batch; top-k/top-p cut as told."""

import torch

from worker.engine import Engine, SamplingParams
from worker.engine.layers.sampler import probs_from_logits, tokens_sample


def ids(n: int, seed: int) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_seeded_request_gives_the_same_tokens_alone_or_in_a_crowd(tiny_models):
    engine = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=64)
    seeded = SamplingParams(temperature=1.0, top_p=0.95, seed=1234, max_tokens=16,
                            ignore_eos=True)
    alone = engine.generate([ids(9, 1)], seeded)[0].token_ids
    others = SamplingParams(temperature=1.2, max_tokens=10, ignore_eos=True)
    crowd = engine.generate([ids(30, 2), ids(9, 1), ids(4, 3)], [others, seeded, others])
    assert crowd[1].token_ids == alone
    different_seed = SamplingParams(temperature=1.0, top_p=0.95, seed=99, max_tokens=16,
                                    ignore_eos=True)
    assert engine.generate([ids(9, 1)], different_seed)[0].token_ids != alone


def test_top_k_one_is_greedy(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=32)
    prompts = [ids(5, 1), ids(20, 2)]
    greedy = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=10,
                                                     ignore_eos=True))
    top1 = engine.generate(prompts, SamplingParams(temperature=0.7, top_k=1, max_tokens=10,
                                                   ignore_eos=True))
    assert [o.token_ids for o in greedy] == [o.token_ids for o in top1]


def test_top_k_and_top_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]] * 3))
    params = [SamplingParams(top_k=2), SamplingParams(top_p=0.7), SamplingParams(temperature=0)]
    probs = probs_from_logits(logits, params)
    torch.testing.assert_close(probs[0], torch.tensor([0.625, 0.375, 0, 0]))
    torch.testing.assert_close(probs[1], torch.tensor([0.625, 0.375, 0, 0]))  # 0.5 < 0.7 <= 0.8
    torch.testing.assert_close(probs[2], torch.tensor([1.0, 0, 0, 0]))


def test_sampling_follows_the_distribution():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).repeat(4000, 1)
    generators = [None] * 4000
    torch.manual_seed(0)
    tokens = torch.tensor(tokens_sample(logits, [SamplingParams()] * 4000, generators))
    freq = torch.bincount(tokens, minlength=3).float() / 4000
    torch.testing.assert_close(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.03, rtol=0)
