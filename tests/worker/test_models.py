"""The shipped demo models under worker/models/: files, sizes, configs, tokenizer, loading.

Bare pytest: no Django, no training (that never runs in CI). Loads both models with transformers
offline, as a fresh clone would.
"""

import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "worker" / "models"
TARGET = MODELS / "course-lm"
DRAFT = MODELS / "course-lm-draft"
FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "generation_config.json"]
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    # A hub lookup would mean a path was misread as a repo id: make it fail instead of fetch.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def config_read(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


@pytest.mark.parametrize("path", [TARGET, DRAFT], ids=["course-lm", "course-lm-draft"])
def test_directory_has_every_file(path):
    missing = [name for name in FILES if not (path / name).is_file()]
    assert missing == []


def test_all_model_files_fit_in_60_mb():
    total = sum(f.stat().st_size for f in MODELS.rglob("*") if f.is_file())
    assert total <= 60 * 1000 * 1000


@pytest.mark.parametrize("path", [TARGET, DRAFT], ids=["course-lm", "course-lm-draft"])
def test_config_is_a_llama(path):
    config = config_read(path)
    assert config["model_type"] == "llama"
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["max_position_embeddings"] == 1024
    assert config["rope_theta"] == 10000.0
    assert config["hidden_size"] % config["num_attention_heads"] == 0


def test_target_uses_grouped_query_attention():
    config = config_read(TARGET)
    # The demos show KV heads and attention heads as different numbers.
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    assert config["num_attention_heads"] % config["num_key_value_heads"] == 0


def test_draft_is_smaller_than_target():
    target, draft = config_read(TARGET), config_read(DRAFT)
    assert draft["num_hidden_layers"] < target["num_hidden_layers"]
    assert draft["hidden_size"] < target["hidden_size"]
    sizes = [(path / "model.safetensors").stat().st_size for path in (DRAFT, TARGET)]
    assert sizes[0] < sizes[1]


@pytest.mark.parametrize("name", TOKENIZER_FILES)
def test_draft_shares_the_tokenizer_files(name):
    assert (DRAFT / name).read_bytes() == (TARGET / name).read_bytes()


def test_special_token_ids_agree_across_files():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    for path in (TARGET, DRAFT):
        config = config_read(path)
        generation = json.loads((path / "generation_config.json").read_text())
        assert config["vocab_size"] == len(tokenizer)
        for key, token in (("bos_token_id", tokenizer.bos_token),
                           ("eos_token_id", tokenizer.eos_token),
                           ("pad_token_id", tokenizer.pad_token)):
            assert config[key] == generation[key] == tokenizer.convert_tokens_to_ids(token)


@pytest.mark.parametrize("text", [
    "The KV cache stores keys and values.",
    "  Leading spaces, tabs\tand newlines\nsurvive; so do digits 1,024 and émigré UTF-8.",
    "",
])
def test_tokenizer_round_trip(text):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    ids = tokenizer(text).input_ids
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_chat_template_matches_the_training_format():
    from transformers import AutoTokenizer

    from worker.training.corpus import chat_render

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is the KV cache?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == chat_render(messages=messages, add_generation_prompt=True)
    assert text.endswith("<|assistant|>\n")
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    # Role markers and the turn end are single special tokens, not spelled out in pieces.
    for token in ("<|begin|>", "<|system|>", "<|user|>", "<|end|>", "<|assistant|>"):
        assert tokenizer.convert_tokens_to_ids(token) in ids


def test_both_models_load_and_share_the_vocabulary():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    ids = torch.tensor([tokenizer("The KV cache").input_ids])
    for path in (TARGET, DRAFT):
        model = AutoModelForCausalLM.from_pretrained(path)
        assert model.config.vocab_size == len(tokenizer)
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        assert logits.shape == (1, ids.shape[1], len(tokenizer))
        assert torch.isfinite(logits).all()


def test_target_answers_on_topic():
    """Greedy reply to a chat question uses the course's words: the model learned its corpus."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(TARGET)
    model = AutoModelForCausalLM.from_pretrained(TARGET)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is the KV cache?"}],
                                        add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    with torch.no_grad():
        out = model.generate(input_ids=ids, max_new_tokens=40, do_sample=False)
    reply = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).lower()
    assert any(word in reply for word in ("key", "value", "cache", "token"))

