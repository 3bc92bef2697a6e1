"""One file per model family; `model_class_for` maps config.json's model_type to its class."""

from worker.engine.models.llama import LlamaForCausalLM
from worker.engine.models.mistral import MistralForCausalLM
from worker.engine.models.qwen2 import Qwen2ForCausalLM

MODEL_CLASSES = {
    "llama": LlamaForCausalLM,
    "qwen2": Qwen2ForCausalLM,
    "mistral": MistralForCausalLM,
}


def model_class_for(model_type: str) -> type[LlamaForCausalLM]:
    try:
        return MODEL_CLASSES[model_type]
    except KeyError:
        raise ValueError(f"unsupported model_type {model_type!r}") from None
