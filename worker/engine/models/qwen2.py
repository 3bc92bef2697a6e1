"""Qwen2: the Llama decoder with biases on the q, k and v projections (set in config.py)."""

from worker.engine.models.llama import LlamaForCausalLM


class Qwen2ForCausalLM(LlamaForCausalLM):
    """Same modules as Llama; `attention_bias` is True for qwen2, so qkv_proj carries a bias."""
