"""Paged attention in pure torch: write this step's K/V into the pool, then attend.

The batch is packed: T tokens from S sequences laid end to end, each sequence contributing a
prefill chunk or a few decode tokens. Only this file reads `AttentionMetadata`, so a faster
kernel (flash-attention on CUDA) could replace the body without touching the models.

How it reads the pool without a per-token Python loop: a group's block tables [S, max_blocks]
index the pool in one index_select, giving each sequence its context as one padded row; queries are
scattered into a padded [S, max_q] grid; one masked scaled_dot_product_attention call covers
the group. Short queries (decodes) and long ones (prefill chunks) form separate groups, so a
decode is never padded to a prefill chunk's length.

One-token decodes of sequences the runner can identify skip the gather: they read their
context from slots, contiguous copies kept across steps (`decode_slots.py`), and only the new
token's K/V is written there.

On a CPU in fp32 the model calls `forward_fused` instead: the same reads in C
(kernels/cpu_fused.c), over each sequence's real context only, with no padded grid and no mask.
"""

from dataclasses import dataclass
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import nn

from worker.engine.layers.decode_slots import DecodeGroup, DecodeSlots
from worker.engine.layers.kv_dtype import kv_round, pool_gather, pool_write


@dataclass
class AttentionGroup:
    token_start: int  # the group's tokens are packed rows token_start .. token_end - 1
    token_end: int
    block_ids: torch.Tensor  # [S * max_blocks] each sequence's block ids, padded with 0
    # [tokens] each token's slot in the padded [S * max_q] grid; None when all lengths are equal
    query_index: torch.Tensor | None
    num_seqs: int
    max_query_len: int
    key_len: int  # max_blocks * block_size: the gathered context's padded length
    per_kv: int  # query heads per KV head
    # Per sequence (what the fused CPU kernel reads instead of the grid and the mask): the
    # position of its first query, its number of queries, its first row within the group.
    starts: torch.Tensor
    query_lens: torch.Tensor
    offsets: torch.Tensor

    @cached_property
    def mask(self) -> torch.Tensor:
        """[S, 1, per_kv * max_q, key_len]: True where a query may look (query i of sequence s
        sits at position starts[s] + i and sees keys at or before it), repeated for each query
        head sharing a KV head. Built when PyTorch's path first reads it."""
        dev = self.starts.device
        query_pos = self.starts.unsqueeze(1) + torch.arange(self.max_query_len,
                                                            device=dev).unsqueeze(0)
        key_pos = torch.arange(self.key_len, device=dev)
        mask = (key_pos.view(1, 1, -1) <= query_pos.unsqueeze(-1)).unsqueeze(1)
        if self.max_query_len > 1:
            mask = mask.repeat(1, 1, self.per_kv, 1)  # rows (query head in group, position)
        return mask


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] flat pool slot (block_id * block_size + offset) per token
    groups: list[AttentionGroup]
    decode: DecodeGroup | None = None  # packed first, before the groups
    slots: DecodeSlots | None = None


class PagedAttention(nn.Module):
    def __init__(self, *, num_heads: int, num_kv_heads: int, head_dim: int,
                 layer_index: int = 0) -> None:
        super().__init__()
        self.layer_index = layer_index  # which of the decode slots' buffers are this layer's
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
        # Write first: a token attends to itself, and a chunk to its own earlier tokens.
        if k_cache.dtype != k.dtype:
            # A narrower KV cache (kv_cache_dtype): from here on every reader, the decode
            # slots included, sees K/V as the pool stores them.
            k, v = kv_round(k, k_cache.dtype), kv_round(v, v_cache.dtype)
        pool_write(k_cache, meta.slot_mapping, k)
        pool_write(v_cache, meta.slot_mapping, v)
        outs = []
        if meta.decode is not None:
            d = meta.decode
            outs.append(self._decode(q[d.token_start : d.token_end], k[d.token_start : d.token_end],
                                     v[d.token_start : d.token_end], k_cache, v_cache, d,
                                     meta.slots))
        outs += [self._group(q[g.token_start : g.token_end], k_cache, v_cache, g)
                 for g in meta.groups]
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def forward_fused(self, kern, qkv: torch.Tensor, k_cache: torch.Tensor,  # noqa: ANN001
                      v_cache: torch.Tensor, meta: AttentionMetadata, threads: int
                      ) -> torch.Tensor:
        """`forward` for the fused CPU path (kernels/cpu.py), which has already rotated q and k
        in `qkv` [T, (heads + 2 kv_heads) * D] and written K/V into the pool: decodes attend
        in one kernel call over their slots, each other group in one call over the pool."""
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        outs = []
        if meta.decode is not None:
            d = meta.decode
            keys, values = meta.slots.keys[self.layer_index], meta.slots.values[self.layer_index]
            if d.join_slots is not None:
                self._join(keys, values, k_cache, v_cache, d)
            outs.append(kern.decode_attention(
                qkv[d.token_start : d.token_end], num_heads=heads, num_kv_heads=kv_heads,
                head_dim=dim, keys=keys, values=values, rows=d.slots, positions=d.positions,
                scale=self.scale, threads=threads))
        outs += [kern.paged_attention(
            qkv[g.token_start : g.token_end], num_heads=heads, num_kv_heads=kv_heads,
            head_dim=dim, pool_k=k_cache, pool_v=v_cache,
            block_tables=g.block_ids.view(g.num_seqs, -1), offsets=g.offsets,
            query_lens=g.query_lens, starts=g.starts, scale=self.scale, threads=threads)
            for g in meta.groups]
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _join(self, keys: torch.Tensor, values: torch.Tensor, k_cache: torch.Tensor,
              v_cache: torch.Tensor, d: DecodeGroup) -> None:
        """Newcomers' context, this token included, copied from the pool into their slots."""
        kv_heads, dim = self.num_kv_heads, self.head_dim
        n = d.join_blocks * k_cache.shape[1]
        j = len(d.join_block_ids) // d.join_blocks
        taken_k = pool_gather(k_cache, d.join_block_ids, keys.dtype).view(j, n, kv_heads, dim)
        taken_v = pool_gather(v_cache, d.join_block_ids, values.dtype).view(j, n, kv_heads, dim)
        keys[d.join_slots, :, :, :n] = taken_k.permute(0, 2, 3, 1)  # keys are stored transposed
        values[d.join_slots, :, :n] = taken_v.transpose(1, 2)

    def _decode(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, d: DecodeGroup, slots: DecodeSlots) -> torch.Tensor:
        kv_heads, dim = self.num_kv_heads, self.head_dim
        per_kv = self.num_heads // kv_heads
        keys, values = slots.keys[self.layer_index], slots.values[self.layer_index]
        if d.join_slots is not None:
            self._join(keys, values, k_cache, v_cache, d)
        keys[d.slots, :, :, d.positions] = k  # [S, kv_heads, D] at each slot's position
        values[d.slots, :, d.positions] = v
        if d.in_order and d.rows == len(q):
            queries = q
        else:
            queries = q.new_zeros(d.rows, self.num_heads, dim)
            queries[d.slots] = q
        # [rows, kv_heads, per_kv, D]: the query heads sharing a KV head are its query rows.
        out = F.scaled_dot_product_attention(
            queries.view(d.rows, kv_heads, per_kv, dim),
            keys[: d.rows, :, :, : d.kv_len].transpose(2, 3),
            values[: d.rows, :, : d.kv_len],
            attn_mask=d.mask, scale=self.scale,
        ).reshape(d.rows, self.num_heads * dim)
        return out if d.in_order and d.rows == len(q) else out[d.slots]

    def _group(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               g: AttentionGroup) -> torch.Tensor:
        kv_heads, d, s, max_q = self.num_kv_heads, self.head_dim, g.num_seqs, g.max_query_len
        per_kv = self.num_heads // kv_heads
        # One gather per pool: each sequence's blocks, in order, as a contiguous context.
        keys = pool_gather(k_cache, g.block_ids, q.dtype).view(s, -1, kv_heads, d).transpose(1, 2)
        values = pool_gather(v_cache, g.block_ids, q.dtype).view(s, -1, kv_heads, d).transpose(
            1, 2)
        if g.query_index is None:
            queries = q.view(s, max_q, self.num_heads, d)  # every sequence has max_q queries
        else:
            queries = q.new_zeros(s * max_q, self.num_heads, d)
            queries[g.query_index] = q
            queries = queries.view(s, max_q, self.num_heads, d)
        # Grouped-query attention without copying K/V per query head: the query heads that
        # share a KV head become extra query rows, [S, kv_heads, per_kv * max_q, D].
        queries = queries.view(s, max_q, kv_heads, per_kv, d).permute(0, 2, 3, 1, 4)
        out = F.scaled_dot_product_attention(
            queries.reshape(s, kv_heads, per_kv * max_q, d), keys, values, attn_mask=g.mask,
            scale=self.scale,
        )
        out = out.view(s, kv_heads, per_kv, max_q, d).permute(0, 3, 1, 2, 4)
        out = out.reshape(s * max_q, self.num_heads * d)
        return out if g.query_index is None else out[g.query_index]
