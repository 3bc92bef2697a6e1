"""The shipped demo model: the engine matches transformers on it, with and without its draft."""

from pathlib import Path

import pytest
import torch

from worker.engine import Engine, SamplingParams

MODELS = Path(__file__).resolve().parents[2] / "worker" / "models"
TARGET, DRAFT = MODELS / "course-lm", MODELS / "course-lm-draft"

pytestmark = pytest.mark.skipif(not (TARGET / "model.safetensors").is_file(),
                                reason="the shipped model is not in this checkout yet")

QUESTIONS = ["What is a KV cache?", "Why is decode memory bound?", "Hi"]
GREEDY = SamplingParams(temperature=0, max_tokens=24)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_pretrained(TARGET, num_kv_blocks=64, max_num_batched_tokens=32)


def test_greedy_chat_matches_transformers(engine):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    model = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    outputs = engine.generate(QUESTIONS, GREEDY, chat=True)
    for question, out in zip(QUESTIONS, outputs, strict=True):
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                             add_generation_prompt=True, tokenize=False)
        prompt = tokenizer.encode(text, add_special_tokens=False)
        assert out.prompt_token_ids == prompt
        ids = torch.tensor([prompt])
        with torch.no_grad():
            expected = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                      max_new_tokens=GREEDY.max_tokens)[0, len(prompt):]
            logits = model(ids).logits[0, -1]
        assert out.token_ids == expected.tolist()
        assert out.text == tokenizer.decode(out.token_ids, skip_special_tokens=True)
        # A fresh pool: writing K/V straight into blocks must not touch the engine's cache.
        fresh = Engine.from_pretrained(TARGET, num_kv_blocks=8)
        got = fresh.runner.execute(_entry(prompt))[0]
        torch.testing.assert_close(got, logits, atol=1e-4, rtol=0)


def _entry(prompt: list[int]):
    from worker.engine.model_runner import BatchEntry

    return [BatchEntry(prompt, 0, list(range(-(-len(prompt) // 16))), 1)]


@pytest.mark.skipif(not (DRAFT / "model.safetensors").is_file(), reason="no draft model yet")
def test_draft_model_keeps_greedy_output(engine):
    plain = engine.generate(QUESTIONS, GREEDY, chat=True)
    spec = Engine.from_pretrained(TARGET, num_kv_blocks=64, speculative_model=DRAFT)
    outputs = spec.generate(QUESTIONS, GREEDY, chat=True)
    assert [o.token_ids for o in outputs] == [o.token_ids for o in plain]
    assert spec.stats()["spec_decode_num_draft_tokens"] > 0
