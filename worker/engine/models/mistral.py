"""Mistral: the Llama decoder; its configs often set head_dim apart from hidden/heads.

Sliding-window attention is not implemented: the engine caps max_model_len at the window, so
every sequence it runs sees the full attention the window would allow anyway.
"""

from worker.engine.models.llama import LlamaForCausalLM


class MistralForCausalLM(LlamaForCausalLM):
    """Same modules as Llama, with head_dim read from the config."""
