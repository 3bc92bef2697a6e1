"""The model's shape, read from a Hugging Face config.json into one plain dataclass.

Both spellings of RoPE settings are accepted: transformers 4.x writes `rope_theta` and
`rope_scaling`, transformers 5.x writes one `rope_parameters` dict holding both.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "mistral")


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    rope: dict = field(default_factory=dict)  # rope_type, rope_theta and the type's own keys
    eos_token_ids: tuple[int, ...] = ()
    sliding_window: int | None = None


def model_config_load(path: str | Path) -> ModelConfig:
    """Read `path/config.json` (and `generation_config.json` for EOS ids) into a ModelConfig."""
    path = Path(path)
    config_file = path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"no config.json in {path}")
    raw = json.loads(config_file.read_text())
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"unsupported model_type {model_type!r}; "
            f"this engine runs {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"unsupported hidden_act {raw['hidden_act']!r}; only silu (SwiGLU)")
    num_heads = raw["num_attention_heads"]
    head_dim = raw.get("head_dim") or raw["hidden_size"] // num_heads
    rope = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
    rope.setdefault("rope_theta", raw.get("rope_theta", 10000.0))
    rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
    # Qwen2 configs carry a sliding window that is off unless use_sliding_window is set.
    sliding = raw.get("sliding_window")
    if model_type == "qwen2" and not raw.get("use_sliding_window", False):
        sliding = None
    return ModelConfig(
        model_type=model_type,
        vocab_size=raw["vocab_size"],
        hidden_size=raw["hidden_size"],
        intermediate_size=raw["intermediate_size"],
        num_layers=raw["num_hidden_layers"],
        num_heads=num_heads,
        num_kv_heads=raw.get("num_key_value_heads") or num_heads,
        head_dim=head_dim,
        rms_norm_eps=raw.get("rms_norm_eps", 1e-6),
        max_position_embeddings=raw.get("max_position_embeddings", 2048),
        tie_word_embeddings=raw.get("tie_word_embeddings", False),
        attention_bias=raw.get("attention_bias", model_type == "qwen2"),
        rope=rope,
        eos_token_ids=_eos_token_ids(path, raw),
        sliding_window=sliding,
    )


def _eos_token_ids(path: Path, raw: dict) -> tuple[int, ...]:
    """EOS ids as `generate` would use them: generation_config.json first, then config.json."""
    found = None
    generation_file = path / "generation_config.json"
    if generation_file.is_file():
        found = json.loads(generation_file.read_text()).get("eos_token_id")
    if found is None:
        found = raw.get("eos_token_id")
    if found is None:
        return ()
    return tuple(found) if isinstance(found, list) else (found,)
