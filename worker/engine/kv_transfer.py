"""Handing a request's KV cache from one engine to another (disaggregated prefill and decode).

A prefill engine runs the prompt, samples the first token and exports K/V of the prompt's
tokens; a decode engine imports them into its own blocks and carries on from the first token
without recomputing the prompt. What travels is the tokens plus, per layer, K and V for the
computed tokens: 2 x layers x tokens x kv_heads x head_dim values.
"""

from dataclasses import dataclass

import torch

from worker.engine.layers.kv_dtype import pool_gather, pool_write
from worker.engine.model_runner import ModelRunner


@dataclass
class KVHandoff:
    token_ids: list[int]  # prompt plus the tokens sampled so far
    num_computed_tokens: int  # tokens whose K/V travel (all but the newest)
    keys: list[torch.Tensor]  # per layer [num_computed_tokens, kv_heads, head_dim], on CPU
    values: list[torch.Tensor]

    @property
    def nbytes(self) -> int:
        """Bytes of K/V carried."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


def _slots(block_table: list[int], num_tokens: int, block_size: int) -> torch.Tensor:
    positions = torch.arange(num_tokens)
    table = torch.tensor(block_table, dtype=torch.long)
    return table[positions // block_size] * block_size + positions % block_size


def kv_read(runner: ModelRunner, *, token_ids: list[int], block_table: list[int],
            num_tokens: int) -> KVHandoff:
    """Copy the first `num_tokens` tokens' K/V out of the pool."""
    slots = _slots(block_table, num_tokens, runner.block_size).to(runner.device)
    c = runner.config
    keys = [pool_gather(k.view(-1, 1, c.num_kv_heads, c.head_dim), slots, k.dtype)
            .view(-1, c.num_kv_heads, c.head_dim).cpu() for k, _ in runner.kv_caches]
    values = [pool_gather(v.view(-1, 1, c.num_kv_heads, c.head_dim), slots, v.dtype)
              .view(-1, c.num_kv_heads, c.head_dim).cpu() for _, v in runner.kv_caches]
    return KVHandoff(list(token_ids), num_tokens, keys, values)


def kv_check(runner: ModelRunner, handoff: KVHandoff) -> None:
    """Raise ValueError unless the handoff fits this engine's model."""
    c = runner.config
    shape = (handoff.num_computed_tokens, c.num_kv_heads, c.head_dim)
    if len(handoff.keys) != c.num_layers or len(handoff.values) != c.num_layers:
        raise ValueError(
            f"KV handoff has {len(handoff.keys)} layers; this model has {c.num_layers}")
    if any(tuple(t.shape) != shape for t in handoff.keys + handoff.values):
        raise ValueError(f"KV handoff tensors must be {shape} per layer")
    if not 0 < handoff.num_computed_tokens < len(handoff.token_ids):
        raise ValueError("KV handoff must leave the newest token to compute")


def kv_write(runner: ModelRunner, handoff: KVHandoff, block_table: list[int]) -> None:
    """Copy imported K/V into the blocks of `block_table`."""
    slots = _slots(block_table, handoff.num_computed_tokens, runner.block_size).to(runner.device)
    for (k_cache, v_cache), k, v in zip(runner.kv_caches, handoff.keys, handoff.values,
                                        strict=True):
        pool_write(k_cache, slots, k.to(runner.device))
        pool_write(v_cache, slots, v.to(runner.device))
