"""Tiny random checkpoints saved with transformers' save_pretrained, shared by the engine tests.

A large initializer_range spreads the logits of a random model apart, so greedy decoding has
no near-ties that rounding could flip between two correct implementations.
"""

from pathlib import Path

import pytest
import torch

TINY = dict(
    vocab_size=320,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    initializer_range=0.3,
    bos_token_id=1,
    eos_token_id=2,
)


def tiny_config(family: str):
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    if family == "llama":  # Llama 3 RoPE scaling, untied head
        return LlamaConfig(**TINY, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
        }, rope_theta=500000.0, tie_word_embeddings=False)
    if family == "llama_tied":
        return LlamaConfig(**TINY, tie_word_embeddings=True)
    if family == "qwen2":  # q/k/v biases, tied head
        return Qwen2Config(**TINY, tie_word_embeddings=True)
    if family == "mistral":  # head_dim 24, not hidden/heads = 16
        return MistralConfig(**TINY, head_dim=24, sliding_window=None, tie_word_embeddings=False)
    raise ValueError(family)


def tiny_model_save(family: str, directory: Path, *, seed: int = 0, **overrides) -> Path:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = tiny_config(family)
    for key, value in overrides.items():
        setattr(config, key, value)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if family == "qwen2":
        # Random init leaves biases at zero; give them values so the test sees them used.
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                torch.nn.init.normal_(proj.bias, std=0.3)
    model.save_pretrained(directory)
    return directory


FAMILIES = ("llama", "llama_tied", "qwen2", "mistral")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """family -> directory of a saved tiny random checkpoint."""
    root = tmp_path_factory.mktemp("tiny-models")
    return {f: tiny_model_save(f, root / f) for f in FAMILIES}


@pytest.fixture(scope="session")
def tiny_draft(tmp_path_factory) -> Path:
    """A smaller llama (1 layer) with the same vocabulary, as a draft model."""
    root = tmp_path_factory.mktemp("tiny-draft")
    return tiny_model_save("llama_tied", root / "draft", seed=1, num_hidden_layers=1)


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
_CORPUS = [
    "The KV cache stores keys and values for every token already seen.",
    "Continuous batching admits new requests at every step. Prefill is compute bound; "
    "decode is memory bound. Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber "
    "\u6f22\u5b57 \U0001f680.",
] * 20


def tiny_tokenizer_save(directory: Path) -> Path:
    """A byte-level BPE tokenizer of 320 ids (0 <unk>, 1 <s>, 2 </s>) with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_text_model(tmp_path_factory) -> Path:
    """A tiny llama with a real byte-level BPE tokenizer and chat template beside it."""
    root = tmp_path_factory.mktemp("tiny-text")
    directory = tiny_model_save("llama_tied", root / "model", seed=2)
    return tiny_tokenizer_save(directory)
