"""Runs one model over one packed batch: owns the weights and the paged KV pool.

A step's work arrives as `BatchEntry`s (a sequence, which of its tokens to compute, and which of
them need logits). The runner lays the tokens end to end, builds the attention metadata once,
runs the forward pass and returns logits only for the rows that sample. One-token decodes of
named sequences read their context from decode slots (layers/decode_slots.py) instead of
gathering it from the pool every step.
"""

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from worker.engine.config import ModelConfig
from worker.engine.layers.attention import AttentionGroup, AttentionMetadata
from worker.engine.layers.decode_slots import DecodeSlots
from worker.engine.layers.kv_dtype import kv_raw
from worker.engine.layers.rotary import RotaryEmbedding
from worker.engine.models import model_class_for
from worker.engine.profiling import phase

# Queries up to this many tokens (a decode, a speculative check) go in the short group.
_SHORT_QUERY = 8
# The most the decode slots may hold (all layers, K and V) before decodes gather instead.
DECODE_SLOTS_MAX_BYTES = 256 * 2**20


@dataclass
class BatchEntry:
    token_ids: list[int]  # the tokens to compute, at positions start .. start + len - 1
    start: int
    block_table: list[int]
    num_logits: int  # logits for this many of the entry's last tokens (0: none)
    seq_id: str | None = None  # names the sequence across steps (decode slots need it)


def model_load(
    path: str | Path, config: ModelConfig, *, max_positions: int, device: str, dtype: torch.dtype
) -> torch.nn.Module:
    """Build the model for `config` and fill it from the directory's *.safetensors files."""
    files = _weight_files(Path(path))
    with torch.device("meta"):
        model = model_class_for(config.model_type)(config, max_positions=max_positions)
    # Built on the meta device, so no time goes into random init of weights about to be loaded.
    model = model.to_empty(device=device)
    model.tie_weights()  # to_empty gives each module fresh tensors, which would untie them
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            module.tables_build()

    def tensors():
        for file in files:
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():
                    yield name, f.get_tensor(name)

    model.load_weights(tensors())
    model = model.to(dtype).eval()
    model.tie_weights()
    if torch.device(device).type == "cpu":
        model.column_major_weights()
    return model


def _weight_files(path: Path) -> list[Path]:
    """The checkpoint's safetensors shards: those its index names, else model*.safetensors
    (some repositories also ship the same weights under another layout, e.g. consolidated)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [path / name for name in names]
    files = sorted(path.glob("model*.safetensors")) or sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    return files


def _padding_split(contexts: list[int]) -> int:
    """Where to cut a list of ascending context lengths (blocks) into two attention groups:
    the cut that gathers the fewest padded blocks, or 0 (no cut) when it saves under 30%."""
    n = len(contexts)
    if n < 2:
        return 0
    whole = n * contexts[-1]
    best, cut = whole, 0
    for k in range(1, n):
        cost = k * contexts[k - 1] + (n - k) * contexts[-1]
        if cost < best:
            best, cut = cost, k
    return cut if best <= 0.7 * whole else 0


class ModelRunner:
    def __init__(
        self,
        model: torch.nn.Module,
        config: ModelConfig,
        *,
        num_blocks: int,
        block_size: int,
        device: str,
        dtype: torch.dtype,
        decode_slots_max_bytes: int = DECODE_SLOTS_MAX_BYTES,
        kv_cache_dtype: torch.dtype | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.block_size = block_size
        self.device = torch.device(device)
        self._per_kv = config.num_heads // config.num_kv_heads
        self.seconds = 0.0  # time in forward passes since the engine last reset it
        shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
        # The pool's own format (layers/kv_dtype.py); attention converts on write and read.
        self.kv_cache_dtype = kv_cache_dtype or dtype
        self.kv_caches = [
            (torch.zeros(shape, dtype=self.kv_cache_dtype, device=device),
             torch.zeros(shape, dtype=self.kv_cache_dtype, device=device))
            for _ in range(config.num_layers)
        ]
        self.decode_slots = DecodeSlots(
            num_layers=config.num_layers, num_kv_heads=config.num_kv_heads,
            head_dim=config.head_dim, block_size=block_size, dtype=dtype, device=self.device,
            max_bytes=decode_slots_max_bytes)

    def sequences_forget(self, seq_ids: list[str]) -> None:
        """These sequences left (finished, aborted, preempted): drop their decode slots."""
        self.decode_slots.forget(seq_ids)

    @torch.inference_mode()
    def blocks_copy(self, pairs: list[tuple[int, int]]) -> None:
        """Copy whole KV blocks (source, destination) in every layer: copy-on-write."""
        if not pairs:
            return
        src = torch.tensor([a for a, _ in pairs], dtype=torch.long, device=self.device)
        dst = torch.tensor([b for _, b in pairs], dtype=torch.long, device=self.device)
        for cache in (c for pair in self.kv_caches for c in pair):
            raw = kv_raw(cache)  # FP8 pools are indexed as bytes
            raw.index_copy_(0, dst, raw.index_select(0, src))

    @staticmethod
    def kv_block_bytes(config: ModelConfig, *, block_size: int, dtype: torch.dtype) -> int:
        """Bytes of K and V for one block across all layers:
        2 x layers x block_size x kv_heads x head_dim x bytes per element (of the KV cache's
        dtype, which may be narrower than the model's)."""
        itemsize = torch.tensor([], dtype=dtype).element_size()
        return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * itemsize

    @torch.inference_mode()
    def execute(self, entries: list[BatchEntry]) -> torch.Tensor:
        """Logits [sum of num_logits, vocab] in fp32, in entry order."""
        with phase("prepare_inputs"):
            input_ids, positions, meta, logits_indices = self._prepare(entries)
        t0 = time.perf_counter()
        with phase("forward"):
            logits = self.model(input_ids, positions, self.kv_caches, meta, logits_indices)
            if logits.is_cuda:
                torch.cuda.synchronize(logits.device)  # kernels run asynchronously
        self.seconds += time.perf_counter() - t0
        return logits

    def _prepare(self, entries: list[BatchEntry]):
        dev, bs = self.device, self.block_size
        # One-token decodes of named sequences go first and read their decode slots; a named
        # sequence scheduled any other way loses its slot (its writes are not mirrored there).
        slots = self.decode_slots
        is_slot = [len(e.token_ids) == 1 and e.seq_id is not None for e in entries]
        slots.forget(e.seq_id for e, d in zip(entries, is_slot, strict=True)
                     if not d and e.seq_id is not None)
        decode = None
        if any(is_slot):
            decoders = [e for e, d in zip(entries, is_slot, strict=True) if d]
            # Plan in slot order (newcomers last, in entry order), as the tokens are packed.
            decoders.sort(key=lambda e: slots.slot_of.get(e.seq_id, len(slots.slot_of)))
            decode = slots.plan(seq_ids=[e.seq_id for e in decoders],
                                starts=[e.start for e in decoders],
                                block_tables=[e.block_table for e in decoders], token_start=0)
        if decode is None:
            is_slot = [False] * len(entries)
        # Then short queries (decodes, speculative checks) first and long ones after, so each
        # kind gets its own attention group with its own padding; short ones by context length,
        # so they can split where the padding would cost more than an extra group.
        def context(e: BatchEntry) -> int:
            return -(-(e.start + len(e.token_ids)) // bs)

        rest = sorted((i for i in range(len(entries)) if not is_slot[i]),
                      key=lambda i: (len(entries[i].token_ids) > _SHORT_QUERY,
                                     context(entries[i])))
        # Decodes in slot order, so their queries line up with the slots' rows.
        order = sorted((i for i in range(len(entries)) if is_slot[i]),
                       key=lambda i: slots.slot_of[entries[i].seq_id]) + rest
        flat_ids: list[int] = []
        offsets = [0] * len(entries)
        for i in order:
            offsets[i] = len(flat_ids)
            flat_ids.extend(entries[i].token_ids)
        logits_indices = [j for e, off in zip(entries, offsets, strict=True)
                          for j in range(off + len(e.token_ids) - e.num_logits,
                                         off + len(e.token_ids))]
        groups, positions, pool_slots = [], [], []
        start = 0
        decode_pool: list[int] = []
        if decode is not None:
            # In slot order, as plan() put them: its positions are theirs.
            decode_pool = [e.block_table[e.start // bs] * bs + e.start % bs
                           for e in (entries[i] for i in order if is_slot[i])]
            start = decode.token_end
        short = [entries[i] for i in rest if len(entries[i].token_ids) <= _SHORT_QUERY]
        long = [entries[i] for i in rest if len(entries[i].token_ids) > _SHORT_QUERY]
        cut = _padding_split([context(e) for e in short])
        for members in (short[:cut], short[cut:], long):
            if members:
                group, pos, slot = self._group(members, start, dev, bs, self._per_kv)
                groups.append(group)
                positions.append(pos)
                pool_slots.append(slot)
                start = group.token_end
        # The token ids, the logits' rows and the decodes' pool slots in one tensor, taken
        # apart as views: at batch 1 each small tensor operation costs microseconds a step.
        n_ids, n_logits = len(flat_ids), len(logits_indices)
        packed = torch.tensor(flat_ids + logits_indices + decode_pool, dtype=torch.long,
                              device=dev)
        input_ids = packed[:n_ids]
        logits_t = packed[n_ids : n_ids + n_logits]
        if decode is not None:
            positions.insert(0, decode.positions)
            pool_slots.insert(0, packed[n_ids + n_logits :])
        meta = AttentionMetadata(
            slot_mapping=pool_slots[0] if len(pool_slots) == 1 else torch.cat(pool_slots),
            groups=groups, decode=decode, slots=slots)
        return input_ids, positions[0] if len(positions) == 1 else torch.cat(positions), meta, \
            logits_t

    @staticmethod
    def _group(entries: list[BatchEntry], token_start: int, dev: torch.device, bs: int,
               per_kv: int):
        """One attention group's metadata, with its tokens' positions and pool slots."""
        q_lens = [len(e.token_ids) for e in entries]
        num_seqs, max_q, total = len(entries), max(q_lens), sum(q_lens)
        max_blocks = max(-(-(e.start + len(e.token_ids)) // bs) for e in entries)
        tables = [e.block_table[:max_blocks] + [0] * (max_blocks - len(e.block_table[:max_blocks]))
                  for e in entries]
        block_tables = torch.tensor(tables, dtype=torch.long, device=dev)
        starts_t = torch.tensor([e.start for e in entries], device=dev)
        q_lens_t = torch.tensor(q_lens, device=dev)
        offsets = torch.cumsum(q_lens_t, 0) - q_lens_t  # each sequence's first packed row
        if max_q == min(q_lens):
            # Equal lengths (all decodes, say): the packed rows already form the grid.
            seq_of_token = torch.arange(num_seqs, device=dev).repeat_interleave(max_q)
            local = torch.arange(max_q, device=dev).repeat(num_seqs)
            query_index = None
        else:
            seq_of_token = torch.repeat_interleave(torch.arange(num_seqs, device=dev), q_lens_t)
            local = torch.arange(total, device=dev) - offsets[seq_of_token]
            query_index = seq_of_token * max_q + local
        positions = starts_t[seq_of_token] + local
        slot_mapping = block_tables[seq_of_token, positions // bs] * bs + positions % bs
        group = AttentionGroup(
            token_start=token_start, token_end=token_start + total,
            block_ids=block_tables.view(-1), query_index=query_index, num_seqs=num_seqs,
            max_query_len=max_q, key_len=max_blocks * bs, per_kv=per_kv,
            starts=starts_t, query_lens=q_lens_t, offsets=offsets,
        )
        return group, positions, slot_mapping
