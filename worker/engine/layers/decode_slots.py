"""Contiguous copies of the decoding sequences' contexts, kept from step to step.

Paged attention in pure torch has to gather a sequence's blocks into one contiguous run before
`scaled_dot_product_attention` can read them. Done naively, every decode step copies every
sequence's whole context out of the pool, once per layer: as many bytes as the weights
themselves at batch 16 on the demo model. Here each decoding sequence gets a slot, a row of a
per-layer pair of buffers, filled from the pool once when the sequence starts decoding. Later
steps only write the new token's K/V into the pool and into the slot, and attention reads the
slots as they are.

A slot stays valid while every write to its sequence's blocks is mirrored into it, which holds
while the sequence is only ever scheduled as a one-token decode. The runner drops a slot when
its sequence is scheduled any other way (a prefill chunk, a speculative check) and when the
engine says it finished, was aborted or was preempted. The pool stays the truth: prefix
caching, preemption and KV transfer never look at slots.

Layout, per layer: values `[rows, kv_heads, capacity, head_dim]` (what attention reads as
V), keys `[rows, kv_heads, head_dim, capacity]`, transposed, so that scoring a query against a
head's keys runs along contiguous positions: the fused CPU kernel (kernels/cpu_fused.c)
accumulates each channel's contribution to every position's score with vector instructions and
no horizontal sums. PyTorch's path reads the same keys through a transposed view.
"""

from dataclasses import dataclass
from functools import cached_property

import torch

# Extra positions given to a slot buffer when it grows, so it does not grow every block.
_CAPACITY_HEADROOM = 128
# Capacities are a multiple of this, so the fused CPU kernel can score whole 32-position tiles.
_CAPACITY_MULTIPLE = 32


@dataclass
class DecodeGroup:
    """Attention metadata for the one-token decodes that read their context from slots."""

    token_start: int  # the group's tokens are packed rows token_start .. token_end - 1
    token_end: int
    slots: torch.Tensor  # [S] each sequence's slot (its row in the buffers)
    positions: torch.Tensor  # [S] each new token's position
    in_order: bool  # slots == 0 .. S-1: queries and outputs need no scatter
    rows: int  # attention runs over slots 0 .. rows - 1
    kv_len: int  # and over positions 0 .. kv_len - 1
    query_pos: torch.Tensor  # [rows] each slot's query position (holes: 0)
    dtype: torch.dtype  # the buffers'
    # Sequences that got their slot this step (a slice of slots, or their indices): their
    # blocks are copied in, once.
    join_slots: slice | torch.Tensor | None
    join_block_ids: torch.Tensor | None  # [J * join_blocks], padded with block 0
    join_blocks: int

    @cached_property
    def mask(self) -> torch.Tensor:
        """[rows, 1, 1, kv_len]: 0 where a slot's query may look, -inf elsewhere; additive, in
        the buffers' dtype (SDPA would convert a boolean mask in every layer). Built once a
        step, when PyTorch's path first reads it: the fused CPU kernel reads positions."""
        dev = self.query_pos.device
        allowed = torch.arange(self.kv_len, device=dev).view(1, -1) <= self.query_pos.view(-1, 1)
        mask = torch.zeros(allowed.shape, dtype=self.dtype, device=dev)
        return mask.masked_fill_(~allowed, float("-inf")).view(self.rows, 1, 1, self.kv_len)


class DecodeSlots:
    def __init__(self, *, num_layers: int, num_kv_heads: int, head_dim: int, block_size: int,
                 dtype: torch.dtype, device: torch.device, max_bytes: int) -> None:
        self.num_layers, self.num_kv_heads, self.head_dim = num_layers, num_kv_heads, head_dim
        self.block_size, self.dtype, self.device = block_size, dtype, device
        self.max_bytes = max_bytes
        self.slot_of: dict[str, int] = {}
        self.rows = 0  # allocated
        self.capacity = 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def forget(self, seq_ids) -> None:  # noqa: ANN001 (any iterable of ids)
        """Drop these sequences' slots, moving the last slots' rows into the holes so the
        slots in use stay 0 .. n-1 (then attention reads them with no scatter or gather)."""
        for seq_id in seq_ids:
            slot = self.slot_of.pop(seq_id, None)
            if slot is None:
                continue
            last = len(self.slot_of)  # the highest slot still held, once compact
            holder = next((s for s, i in self.slot_of.items() if i == last), None)
            if holder is not None and last != slot:
                with torch.inference_mode():  # the buffers were made in the forward pass
                    for keys, values in zip(self.keys, self.values, strict=True):
                        keys[slot].copy_(keys[last])
                        values[slot].copy_(values[last])
                self.slot_of[holder] = slot

    def _bytes(self, rows: int, capacity: int) -> int:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return (2 * self.num_layers * rows * capacity * self.num_kv_heads * self.head_dim
                * itemsize)

    def plan(self, *, seq_ids: list[str], starts: list[int], block_tables: list[list[int]],
             token_start: int) -> DecodeGroup | None:
        """Slots for this step's decodes (seq ids, positions, block tables), growing the
        buffers when needed; None when they would pass `max_bytes` (then gather as before)."""
        bs = self.block_size
        joiners = [i for i, s in enumerate(seq_ids) if s not in self.slot_of]
        for i in joiners:  # slots stay compact: a newcomer takes the next one
            self.slot_of[seq_ids[i]] = len(self.slot_of)
        slots = [self.slot_of[s] for s in seq_ids]
        rows = max(slots) + 1  # above len(slots) only while some holder sits this step out
        join_blocks = max((-(-(starts[i] + 1) // bs) for i in joiners), default=0)
        kv_len = -(-(max(starts) + 1) // bs) * bs
        need_capacity = max(kv_len, join_blocks * bs)
        if rows > self.rows or need_capacity > self.capacity:
            new_rows = max(rows, self.rows)
            new_capacity = max(self.capacity, need_capacity + _CAPACITY_HEADROOM)
            new_capacity = -(-new_capacity // _CAPACITY_MULTIPLE) * _CAPACITY_MULTIPLE
            if self._bytes(new_rows, new_capacity) > self.max_bytes:
                self.slot_of.clear()
                return None
            self._grow(new_rows, new_capacity)
        dev = self.device
        # Each slot's query position; unused slots (holes) look at position 0 only.
        query_pos = [0] * rows
        for slot, start in zip(slots, starts, strict=True):
            query_pos[slot] = start
        # One tensor, three views: at batch 1 a step's small tensor operations cost more than
        # its attention, each one a few microseconds.
        n = len(slots)
        packed = torch.tensor(slots + starts + query_pos, dtype=torch.long, device=dev)
        slots_t, starts_t, query_pos = packed[:n], packed[n : 2 * n], packed[2 * n :]
        join_slots = join_ids = None
        if joiners:
            first = slots[joiners[0]]
            consecutive = [slots[i] for i in joiners] == list(range(first, first + len(joiners)))
            # Newcomers hold the last slots: a slice, not a scatter, when they are in order.
            join_slots = (slice(first, first + len(joiners)) if consecutive
                          else slots_t[joiners])
            join_ids = torch.tensor(
                [(block_tables[i][:join_blocks] + [0] * join_blocks)[:join_blocks]
                 for i in joiners], dtype=torch.long, device=dev).view(-1)
        return DecodeGroup(
            token_start=token_start, token_end=token_start + len(seq_ids), slots=slots_t,
            positions=starts_t,
            in_order=slots == list(range(len(slots))),
            rows=rows, kv_len=kv_len, query_pos=query_pos, dtype=self.dtype,
            join_slots=join_slots, join_block_ids=join_ids,
            join_blocks=join_blocks,
        )

    def _grow(self, rows: int, capacity: int) -> None:
        heads, dim = self.num_kv_heads, self.head_dim
        grown_k, grown_v = [], []
        for layer in range(self.num_layers):
            k = torch.zeros((rows, heads, dim, capacity), dtype=self.dtype, device=self.device)
            v = torch.zeros((rows, heads, capacity, dim), dtype=self.dtype, device=self.device)
            if self.keys:
                k[: self.rows, :, :, : self.capacity] = self.keys[layer]
                v[: self.rows, :, : self.capacity] = self.values[layer]
            grown_k.append(k)
            grown_v.append(v)
        self.keys, self.values = grown_k, grown_v
        self.rows, self.capacity = rows, capacity
