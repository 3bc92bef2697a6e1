"""Runs one model over one packed batch: owns the weights and the paged KV pool.

A step's work arrives as `BatchEntry`s (a sequence, which of its tokens to compute, and which of
them need logits). The runner lays the tokens end to end, builds the attention metadata once,
runs the forward pass and returns logits only for the rows that sample.
"""

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from worker.engine.config import ModelConfig
from worker.engine.layers.attention import AttentionMetadata
from worker.engine.layers.rotary import RotaryEmbedding
from worker.engine.models import model_class_for


@dataclass
class BatchEntry:
    token_ids: list[int]  # the tokens to compute, at positions start .. start + len - 1
    start: int
    block_table: list[int]
    num_logits: int  # logits for this many of the entry's last tokens (0: none)


def model_load(
    path: str | Path, config: ModelConfig, *, max_positions: int, device: str, dtype: torch.dtype
) -> torch.nn.Module:
    """Build the model for `config` and fill it from the directory's *.safetensors files."""
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
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
    return model


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
    ) -> None:
        self.model = model
        self.config = config
        self.block_size = block_size
        self.device = torch.device(device)
        shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
        self.kv_caches = [
            (torch.zeros(shape, dtype=dtype, device=device),
             torch.zeros(shape, dtype=dtype, device=device))
            for _ in range(config.num_layers)
        ]

    @staticmethod
    def kv_block_bytes(config: ModelConfig, *, block_size: int, dtype: torch.dtype) -> int:
        """Bytes of K and V for one block across all layers:
        2 x layers x block_size x kv_heads x head_dim x bytes per element."""
        itemsize = torch.tensor([], dtype=dtype).element_size()
        return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * itemsize

    @torch.inference_mode()
    def execute(self, entries: list[BatchEntry]) -> torch.Tensor:
        """Logits [sum of num_logits, vocab] in fp32, in entry order."""
        input_ids, positions, meta, logits_indices = self._prepare(entries)
        return self.model(input_ids, positions, self.kv_caches, meta, logits_indices)

    def _prepare(self, entries: list[BatchEntry]):
        dev, bs = self.device, self.block_size
        q_lens = [len(e.token_ids) for e in entries]
        starts = [e.start for e in entries]
        num_seqs, max_q = len(entries), max(q_lens)
        max_blocks = max(-(-(e.start + len(e.token_ids)) // bs) for e in entries)
        flat_ids: list[int] = []
        tables: list[list[int]] = []
        logits_indices: list[int] = []
        offset = 0
        for e, n in zip(entries, q_lens, strict=True):
            flat_ids.extend(e.token_ids)
            table = e.block_table[:max_blocks]
            tables.append(table + [0] * (max_blocks - len(table)))
            logits_indices.extend(range(offset + n - e.num_logits, offset + n))
            offset += n

        q_lens_t = torch.tensor(q_lens, device=dev)
        starts_t = torch.tensor(starts, device=dev)
        block_tables = torch.tensor(tables, dtype=torch.long, device=dev)
        seq_of_token = torch.repeat_interleave(torch.arange(num_seqs, device=dev), q_lens_t)
        first_token = torch.cumsum(q_lens_t, 0) - q_lens_t
        local = torch.arange(offset, device=dev) - first_token[seq_of_token]
        positions = starts_t[seq_of_token] + local
        slot_mapping = block_tables[seq_of_token, positions // bs] * bs + positions % bs
        # Query i of sequence s sits at position starts[s] + i and sees keys at or before it.
        query_pos = starts_t.unsqueeze(1) + torch.arange(max_q, device=dev).unsqueeze(0)
        key_pos = torch.arange(max_blocks * bs, device=dev)
        mask = (key_pos.view(1, 1, -1) <= query_pos.unsqueeze(-1)).unsqueeze(1)
        meta = AttentionMetadata(
            slot_mapping=slot_mapping,
            block_tables=block_tables,
            query_index=seq_of_token * max_q + local,
            mask=mask,
            num_seqs=num_seqs,
            max_query_len=max_q,
        )
        input_ids = torch.tensor(flat_ids, dtype=torch.long, device=dev)
        return input_ids, positions, meta, torch.tensor(logits_indices, dtype=torch.long, device=dev)
