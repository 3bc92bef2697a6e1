"""Model architectures from each model's config.json, with the parameter counts their model
cards publish. The shipped demo model is read from its own config.json when it is present."""

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

DEMO_MODEL_ID = "course-lm"
DEMO_MODEL_IDS = (DEMO_MODEL_ID, "course-lm-draft")
DEMO_DIR = Path(__file__).resolve().parents[3] / "worker" / "models"


@dataclass(frozen=True)
class Model:
    """One decoder-only transformer.

    `intermediate` is the dense FFN width; `moe_intermediate` the width of one expert.
    `dense_layers` counts leading layers that keep a dense FFN in an MoE model (DeepSeek-V3's
    first 3). MLA fields (`kv_lora_rank`, `qk_rope_head_dim`, ...) are set only when
    `attention == "MLA"`. `params_published` and `active_params_published` are the model
    card's figures (parameters), kept to check the architecture arithmetic against.
    """

    id: str
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    context: int
    attention: str
    dtype: str = "bf16"
    # The weight format the checkpoint is published in when it is not `dtype` (DeepSeek-V3's
    # FP8): the baseline a deployment starts from, not a quantization of it. "" when it is.
    checkpoint_dtype: str = ""
    tied_embeddings: bool = False
    qkv_bias: bool = False
    experts_routed: int = 0
    experts_shared: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    params_published: float | None = None
    active_params_published: float | None = None
    source: str = ""
    # The Hugging Face repository its config.json is read from (`source` links it).
    repo: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts_routed > 0

    @property
    def served_name(self) -> str:
        """The name an OpenAI-compatible server answers with in each response's `model` field
        when started on this checkpoint with no other name given: vLLM's --served-model-name
        defaults to its --model argument, the repository ("meta-llama/Meta-Llama-3-8B"); this
        course's /v1 serves its demo model under its directory's name ("course-lm")."""
        return self.repo or self.id


def _hf(repo: str, card_note: str) -> str:
    url = f"https://huggingface.co/{repo}/blob/main/config.json"
    return f"huggingface.co/{repo} config.json ({url}); {card_note}"


_MODELS: tuple[Model, ...] = (
    Model(
        id="llama-2-7b",
        name="Llama 2 7B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=32,
        head_dim=128,
        intermediate=11008,
        vocab=32000,
        context=4096,
        attention="MHA",
        params_published=6.74e9,
        repo="meta-llama/Llama-2-7b-hf",
        source=_hf(
            "meta-llama/Llama-2-7b-hf",
            "6.74B parameters: Touvron et al., 'Llama 2' "
            "(https://arxiv.org/abs/2307.09288) and the model card",
        ),
    ),
    Model(
        id="llama-2-70b",
        name="Llama 2 70B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        intermediate=28672,
        vocab=32000,
        context=4096,
        attention="GQA",
        params_published=68.98e9,
        repo="meta-llama/Llama-2-70b-hf",
        source=_hf(
            "meta-llama/Llama-2-70b-hf",
            "68.98B parameters: the safetensors metadata of the Hugging Face repo",
        ),
    ),
    Model(
        id="llama-3-8b",
        name="Llama 3 8B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=128256,
        context=8192,
        attention="GQA",
        params_published=8.03e9,
        repo="meta-llama/Meta-Llama-3-8B",
        source=_hf(
            "meta-llama/Meta-Llama-3-8B",
            "8.03B parameters: the Hugging Face repo's "
            "safetensors metadata; model card (https://huggingface.co/meta-llama/Meta-Llama-3-8B)",
        ),
    ),
    Model(
        id="llama-3-70b",
        name="Llama 3 70B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        intermediate=28672,
        vocab=128256,
        context=8192,
        attention="GQA",
        params_published=70.6e9,
        repo="meta-llama/Meta-Llama-3-70B",
        source=_hf(
            "meta-llama/Meta-Llama-3-70B",
            "70.6B parameters: the Hugging Face repo's safetensors metadata",
        ),
    ),
    Model(
        id="llama-3.1-8b",
        name="Llama 3.1 8B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=128256,
        context=131072,
        attention="GQA",
        params_published=8.03e9,
        repo="meta-llama/Llama-3.1-8B",
        source=_hf(
            "meta-llama/Llama-3.1-8B",
            "Llama 3 8B's architecture with max_position_embeddings 131,072 (RoPE scaling "
            "'llama3', factor 8 from an original 8,192); 8.03B parameters: the model card "
            "(https://huggingface.co/meta-llama/Llama-3.1-8B)",
        ),
    ),
    Model(
        id="llama-3.1-70b",
        name="Llama 3.1 70B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        intermediate=28672,
        vocab=128256,
        context=131072,
        attention="GQA",
        params_published=70.6e9,
        repo="meta-llama/Llama-3.1-70B",
        source=_hf(
            "meta-llama/Llama-3.1-70B",
            "Llama 3 70B's architecture with max_position_embeddings 131,072 (RoPE scaling "
            "'llama3', factor 8 from an original 8,192); 70.6B parameters: the model card "
            "(https://huggingface.co/meta-llama/Llama-3.1-70B)",
        ),
    ),
    Model(
        id="llama-3.1-405b",
        name="Llama 3.1 405B",
        layers=126,
        hidden=16384,
        heads=128,
        kv_heads=8,
        head_dim=128,
        intermediate=53248,
        vocab=128256,
        context=131072,
        attention="GQA",
        params_published=405.9e9,
        repo="meta-llama/Llama-3.1-405B",
        source=_hf(
            "meta-llama/Llama-3.1-405B",
            "405B parameters, 128K context: Llama Team, "
            "'The Llama 3 Herd of Models' (https://arxiv.org/abs/2407.21783), Table 3",
        ),
    ),
    Model(
        id="mistral-7b",
        name="Mistral 7B v0.3",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=32768,
        context=32768,
        attention="GQA",
        params_published=7.25e9,
        repo="mistralai/Mistral-7B-v0.3",
        source=_hf(
            "mistralai/Mistral-7B-v0.3",
            "7.25B parameters: the Hugging Face repo's "
            "safetensors metadata; v0.3 has no sliding window (v0.1 had 4,096)",
        ),
    ),
    Model(
        id="mixtral-8x7b",
        name="Mixtral 8x7B",
        layers=32,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=32000,
        context=32768,
        attention="GQA",
        experts_routed=8,
        experts_per_token=2,
        moe_intermediate=14336,
        params_published=46.7e9,
        active_params_published=12.9e9,
        repo="mistralai/Mixtral-8x7B-v0.1",
        source=_hf(
            "mistralai/Mixtral-8x7B-v0.1",
            "46.7B total, 12.9B active parameters: "
            "Jiang et al., 'Mixtral of Experts' (https://arxiv.org/abs/2401.04088)",
        ),
    ),
    Model(
        id="qwen2.5-7b",
        name="Qwen2.5 7B",
        layers=28,
        hidden=3584,
        heads=28,
        kv_heads=4,
        head_dim=128,
        intermediate=18944,
        vocab=152064,
        context=131072,
        attention="GQA",
        qkv_bias=True,
        params_published=7.61e9,
        repo="Qwen/Qwen2.5-7B",
        source=_hf(
            "Qwen/Qwen2.5-7B",
            "7.61B parameters, 131,072-token context: the model "
            "card (https://huggingface.co/Qwen/Qwen2.5-7B)",
        ),
    ),
    Model(
        id="qwen2.5-72b",
        name="Qwen2.5 72B",
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        intermediate=29568,
        vocab=152064,
        context=131072,
        attention="GQA",
        qkv_bias=True,
        params_published=72.7e9,
        repo="Qwen/Qwen2.5-72B",
        source=_hf(
            "Qwen/Qwen2.5-72B",
            "72.7B parameters, 131,072-token context: the model "
            "card (https://huggingface.co/Qwen/Qwen2.5-72B)",
        ),
    ),
    Model(
        # num_key_value_heads is 128 in the config, but MLA caches one shared latent per
        # token instead of per-head K and V; kv_heads is kept only for completeness.
        id="deepseek-v3",
        name="DeepSeek-V3",
        layers=61,
        hidden=7168,
        heads=128,
        kv_heads=128,
        head_dim=192,
        intermediate=18432,
        vocab=129280,
        context=131072,
        attention="MLA",
        experts_routed=256,
        experts_shared=1,
        experts_per_token=8,
        moe_intermediate=2048,
        dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        params_published=671e9,
        active_params_published=37e9,
        checkpoint_dtype="fp8",
        repo="deepseek-ai/DeepSeek-V3",
        source=_hf(
            "deepseek-ai/DeepSeek-V3",
            "671B total, 37B active parameters per token "
            "and 128K context (the 685B on the card adds the 14B multi-token-prediction "
            "module); weights published in FP8 with BF16 activations (config.json's "
            "quantization_config: fp8, e4m3, weight_block_size [128, 128]): DeepSeek-AI, "
            "'DeepSeek-V3 Technical Report' (https://arxiv.org/abs/2412.19437)",
        ),
    ),
)


# config.json's dtype names → this catalog's ids.
_CONFIG_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def safetensors_params(directory: Path) -> int | None:
    """Parameters stored in `directory`'s *.safetensors files, read from their headers only.

    A safetensors file starts with an 8-byte little-endian header length and a JSON header
    giving every tensor's shape, so the count needs neither torch nor the weights themselves.
    """
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    try:
        for file in files:
            with file.open("rb") as handle:
                length = int.from_bytes(handle.read(8), "little")
                header = json.loads(handle.read(length))
            for name, tensor in header.items():
                if name != "__metadata__":
                    total += math.prod(tensor["shape"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return total


def demo_model_load(path: Path, *, model_id: str = DEMO_MODEL_ID) -> Model | None:
    """A shipped demo model from its Hugging Face-style config.json, or None if absent.

    Its published parameter count is what its safetensors files hold.
    """
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        stored = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
        attention = "MHA" if kv_heads == heads else ("MQA" if kv_heads == 1 else "GQA")
        return Model(
            id=model_id,
            name="course-lm (this course's demo model)"
            if model_id == DEMO_MODEL_ID
            else "course-lm-draft (this course's draft model)",
            layers=int(config["num_hidden_layers"]),
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=int(config["intermediate_size"]),
            vocab=int(config["vocab_size"]),
            context=int(config.get("max_position_embeddings") or 0),
            attention=attention,
            dtype=_CONFIG_DTYPES.get(stored, "bf16"),
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=bool(config.get("attention_bias", False)),
            params_published=safetensors_params(path.parent),
            source=f"worker/models/{model_id}/config.json and model.safetensors "
            "(shipped with this course)",
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


@functools.lru_cache(maxsize=8)
def _demo_models_cached(stamps: tuple[tuple[str, float], ...]) -> tuple[Model, ...]:
    loaded = (
        demo_model_load(DEMO_DIR / model_id / "config.json", model_id=model_id)
        for model_id, _ in stamps
    )
    return tuple(model for model in loaded if model is not None)


def models_all() -> dict[str, Model]:
    """Every catalog model keyed by id, plus the shipped demo and draft models when present.

    The demo models are re-read only when their config.json changes (keyed on its mtime).
    """
    models = {m.id: m for m in _MODELS}
    stamps = []
    for model_id in DEMO_MODEL_IDS:
        try:
            stamps.append((model_id, (DEMO_DIR / model_id / "config.json").stat().st_mtime))
        except OSError:
            continue
    for model in _demo_models_cached(tuple(stamps)):
        models[model.id] = model
    return models


MODELS: dict[str, Model] = {m.id: m for m in _MODELS}
