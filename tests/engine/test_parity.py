"""The engine's greedy output equals transformers' token for token (fp32, tiny random models)."""

import pytest
import torch

from tests.engine.conftest import FAMILIES
from worker.engine import Engine, SamplingParams
from worker.engine.model_runner import BatchEntry

# 1 token, exact block multiples (16, 32), and longer ragged prompts.
PROMPT_LENGTHS = (1, 16, 32, 45, 7)
MAX_TOKENS = 12


def prompts_make(vocab_size: int = 320) -> list[list[int]]:
    g = torch.Generator().manual_seed(7)
    return [torch.randint(3, vocab_size, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


@pytest.fixture(scope="module")
def references(tiny_models) -> dict[str, tuple[torch.nn.Module, list[list[int]]]]:
    """family -> (the transformers model, its greedy outputs for prompts_make())."""
    from transformers import AutoModelForCausalLM

    refs = {}
    for family, path in tiny_models.items():
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        outputs = []
        for prompt in prompts_make():
            ids = torch.tensor([prompt])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=MAX_TOKENS, pad_token_id=0)
            outputs.append(out[0, len(prompt):].tolist())
        refs[family] = (model, outputs)
    return refs


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_logits_match_transformers(family, tiny_models, references):
    model, _ = references[family]
    engine = Engine.from_pretrained(tiny_models[family], num_kv_blocks=8)
    prompt = prompts_make()[3]
    with torch.no_grad():
        expected = model(torch.tensor([prompt])).logits[0]
    got = engine.runner.execute([BatchEntry(prompt, 0, list(range(8)), len(prompt))])
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


ENGINE_VARIANTS = {
    "prefix_cache": dict(enable_prefix_caching=True),
    "no_prefix_cache": dict(enable_prefix_caching=False),
    "chunked_prefill": dict(max_num_batched_tokens=8),
    "static": dict(scheduling="static", max_num_seqs=2),
}


@pytest.mark.parametrize("variant", ENGINE_VARIANTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_generate_matches_transformers(family, variant, tiny_models, references):
    _, expected = references[family]
    engine = Engine.from_pretrained(tiny_models[family], num_kv_blocks=64,
                                    **ENGINE_VARIANTS[variant])
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS)
    prompts = prompts_make()
    # Twice: the second pass runs on a warm prefix cache where it is on.
    for _ in range(2):
        outputs = engine.generate(prompts, params)
        assert [o.token_ids for o in outputs] == expected
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
    # The second pass found the full blocks of the 16-, 32- and 45-token prompts cached.
    assert (stats["prefix_cache_hits"] > 0) == (variant != "no_prefix_cache")


def test_sharded_checkpoint_gives_the_same_output(tiny_models, references, tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_models["mistral"], dtype=torch.float32)
    model.save_pretrained(tmp_path, max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    (tmp_path / "consolidated.safetensors").write_bytes(b"not a shard the index names")
    engine = Engine.from_pretrained(tmp_path, num_kv_blocks=64)
    outputs = engine.generate(prompts_make(), SamplingParams(temperature=0, max_tokens=MAX_TOKENS))
    assert [o.token_ids for o in outputs] == references["mistral"][1]
