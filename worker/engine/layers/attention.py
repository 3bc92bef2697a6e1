"""Paged attention in pure torch: write this step's K/V into the pool, then attend.

The batch is packed: T tokens from S sequences laid end to end, each sequence contributing a
prefill chunk or one decode token. Only this file reads `AttentionMetadata`, so a faster
kernel (flash-attention on CUDA) can replace the body without touching the models.

How it reads the pool without a per-token Python loop: the block tables [S, max_blocks] index
the pool in one gather, giving each sequence its context as one padded row; queries are
scattered into a padded [S, max_q] grid; one masked scaled_dot_product_attention call covers
the whole batch.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] flat pool slot (block_id * block_size + offset) per token
    block_tables: torch.Tensor  # [S, max_blocks] block ids, padded with 0
    query_index: torch.Tensor  # [T] where each packed token sits in the padded [S * max_q] grid
    mask: torch.Tensor  # [S, 1, max_q, max_blocks * block_size] True where a query may look
    num_seqs: int
    max_query_len: int


class PagedAttention(nn.Module):
    def __init__(self, *, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = head_dim**-0.5

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """q [T, heads, D], k/v [T, kv_heads, D], caches [blocks, block_size, kv_heads, D].

        Returns [T, heads * D].
        """
        kv_heads, d = self.num_kv_heads, self.head_dim
        # Write first: a token attends to itself, and a chunk to its own earlier tokens.
        k_cache.view(-1, kv_heads, d).index_copy_(0, meta.slot_mapping, k)
        v_cache.view(-1, kv_heads, d).index_copy_(0, meta.slot_mapping, v)

        s, max_q = meta.num_seqs, meta.max_query_len
        keys = k_cache[meta.block_tables].view(s, -1, kv_heads, d).transpose(1, 2)
        values = v_cache[meta.block_tables].view(s, -1, kv_heads, d).transpose(1, 2)
        if max_q == 1:
            queries = q.view(s, 1, self.num_heads, d)  # pure decode: already one row each
        else:
            queries = q.new_zeros(s * max_q, self.num_heads, d)
            queries[meta.query_index] = q
            queries = queries.view(s, max_q, self.num_heads, d)
        out = F.scaled_dot_product_attention(
            queries.transpose(1, 2),
            keys,
            values,
            attn_mask=meta.mask,
            scale=self.scale,
            enable_gqa=kv_heads != self.num_heads,
        )
        out = out.transpose(1, 2).reshape(s * max_q, self.num_heads * d)
        return out if max_q == 1 else out[meta.query_index]
