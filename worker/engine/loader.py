"""Building an engine from a model directory: check the arguments, load the weights, size the
KV pool, and put the scheduler, block manager and runners together."""

import logging
from pathlib import Path

import torch

from worker.engine.block_manager import BlockManager
from worker.engine.config import model_config_load
from worker.engine.layers.kv_dtype import kv_cache_dtype_resolve
from worker.engine.model_runner import ModelRunner, model_load
from worker.engine.scheduler import Scheduler
from worker.engine.speculative import SpeculativeDecoder

logger = logging.getLogger(__name__)

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
DEFAULT_CPU_KV_BYTES = 256 * 2**20
DEFAULT_CUDA_KV_FRACTION = 0.5  # of the memory free once the weights are loaded


def kv_pool_size(
    *,
    block_bytes: int,
    block_size: int,
    context: int,
    max_num_seqs: int,
    num_kv_blocks: int | None,
    budget_bytes: int,
    max_model_len: int | None,
) -> tuple[int, int]:
    """(number of KV blocks, max_model_len in tokens) for a pool of `budget_bytes` bytes.

    An explicit `num_kv_blocks` wins over the budget. The pool never gets more blocks than
    `max_num_seqs` full-length sequences could use.
    """
    if num_kv_blocks is None:
        most_useful = max_num_seqs * -(-(max_model_len or context) // block_size)
        num_kv_blocks = min(budget_bytes // block_bytes, most_useful)
        logger.info("KV cache: %d blocks of %d tokens (%d bytes each) from a %d-byte budget",
                    num_kv_blocks, block_size, block_bytes, budget_bytes)
    if num_kv_blocks < 1:
        raise ValueError(f"KV cache budget holds no block: one block needs {block_bytes} bytes")
    capacity = num_kv_blocks * block_size
    if max_model_len is None:
        return num_kv_blocks, min(context, capacity)
    if max_model_len > capacity:
        raise ValueError(
            f"KV cache of {num_kv_blocks} blocks x {block_size} tokens = {capacity} tokens "
            f"is too small for one sequence of max_model_len={max_model_len}")
    return num_kv_blocks, max_model_len


def engine_parts_load(
    path: str | Path,
    *,
    device: str,
    dtype: torch.dtype,
    block_size: int,
    num_kv_blocks: int | None,
    kv_cache_memory_bytes: int | None,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    max_model_len: int | None,
    enable_prefix_caching: bool,
    scheduling: str,
    speculative_model: str | Path | None,
    num_speculative_tokens: int,
    policy: str,
    kv_cache_dtype: str | torch.dtype | None = None,
    max_queued: int | None = None,
    max_queued_per_tenant: int | None = None,
    speculative_method: str | None = None,
) -> dict:
    """Everything `Engine.__init__` takes, built from a local Hugging Face directory."""
    _engine_args_check(
        block_size=block_size, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, scheduling=scheduling, policy=policy,
        num_speculative_tokens=num_speculative_tokens, num_kv_blocks=num_kv_blocks,
        kv_cache_memory_bytes=kv_cache_memory_bytes, max_model_len=max_model_len,
        max_queued=max_queued, max_queued_per_tenant=max_queued_per_tenant,
    )
    method = speculative_method or ("draft" if speculative_model else None)
    if method not in (None, "draft", "ngram"):
        raise ValueError("speculative_method must be 'draft' or 'ngram'")
    if (method == "draft") != bool(speculative_model):
        raise ValueError("speculative_method 'draft' needs speculative_model, and 'ngram' "
                         "takes none")
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory {path} does not exist")
    config = model_config_load(path)
    draft_config = model_config_load(speculative_model) if speculative_model else None
    if draft_config is not None and draft_config.vocab_size != config.vocab_size:
        raise ValueError("the draft model must share the target's vocabulary")

    context = config.max_position_embeddings
    if config.sliding_window:
        context = min(context, config.sliding_window)  # see models/mistral.py
    if max_model_len is not None and max_model_len > context:
        raise ValueError(f"max_model_len {max_model_len} exceeds the model's context {context}")

    kv_dtype = kv_cache_dtype_resolve(kv_cache_dtype, model_dtype=dtype)
    block_bytes = ModelRunner.kv_block_bytes(config, block_size=block_size, dtype=kv_dtype)
    pool_block_bytes = block_bytes  # the draft's K/V lives in the same blocks' twin pool
    if draft_config is not None:
        pool_block_bytes += ModelRunner.kv_block_bytes(draft_config, block_size=block_size,
                                                       dtype=kv_dtype)
    sizing = dict(block_bytes=pool_block_bytes, block_size=block_size, context=context,
                  max_num_seqs=max_num_seqs, num_kv_blocks=num_kv_blocks,
                  max_model_len=max_model_len)
    on_cuda = str(device).startswith("cuda")
    if not on_cuda or num_kv_blocks is not None or kv_cache_memory_bytes is not None:
        # Fail on a pool too small before spending time on the weights.
        kv_pool_size(budget_bytes=kv_cache_memory_bytes or DEFAULT_CPU_KV_BYTES, **sizing)

    max_positions = max_model_len or context
    model = model_load(path, config, max_positions=max_positions, device=device, dtype=dtype)
    draft = None
    if draft_config is not None:
        draft = model_load(speculative_model, draft_config, max_positions=max_positions,
                           device=device, dtype=dtype)
    budget = kv_cache_memory_bytes or (
        int(torch.cuda.mem_get_info(torch.device(device))[0] * DEFAULT_CUDA_KV_FRACTION)
        if on_cuda else DEFAULT_CPU_KV_BYTES)
    num_kv_blocks, max_model_len = kv_pool_size(budget_bytes=budget, **sizing)

    runner = ModelRunner(model, config, num_blocks=num_kv_blocks, block_size=block_size,
                         device=device, dtype=dtype, kv_cache_dtype=kv_dtype)
    speculative = None
    if draft is not None:
        draft_runner = ModelRunner(draft, draft_config, num_blocks=num_kv_blocks,
                                   block_size=block_size, device=device, dtype=dtype,
                                   kv_cache_dtype=kv_dtype)
        speculative = SpeculativeDecoder(draft_runner=draft_runner,
                                         num_speculative_tokens=num_speculative_tokens)
    elif method == "ngram":
        speculative = SpeculativeDecoder(draft_runner=None, method="ngram",
                                         num_speculative_tokens=num_speculative_tokens)
    block_manager = BlockManager(num_blocks=num_kv_blocks, block_size=block_size,
                                 enable_prefix_caching=enable_prefix_caching)
    scheduler = Scheduler(
        block_manager=block_manager, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
        scheduling=scheduling, policy=policy,
        num_lookahead_tokens=num_speculative_tokens if speculative else 0,
        max_queued=max_queued, max_queued_per_tenant=max_queued_per_tenant,
    )
    tokenizer = None
    if any((path / name).is_file() for name in _TOKENIZER_FILES):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path))
    return dict(config=config, runner=runner, tokenizer=tokenizer, block_manager=block_manager,
                scheduler=scheduler, max_model_len=max_model_len, kv_block_bytes=block_bytes,
                speculative=speculative)


def _engine_args_check(**kw) -> None:  # noqa: ANN003
    if kw["block_size"] < 1:
        raise ValueError("block_size must be >= 1")
    if kw["max_num_seqs"] < 1:
        raise ValueError("max_num_seqs must be >= 1")
    if kw["max_num_batched_tokens"] < 1:
        raise ValueError("max_num_batched_tokens must be >= 1")
    if kw["scheduling"] not in ("continuous", "static"):
        raise ValueError("scheduling must be 'continuous' or 'static'")
    if kw["policy"] not in ("fcfs", "fair"):
        raise ValueError("policy must be 'fcfs' or 'fair'")
    if kw["num_speculative_tokens"] < 1:
        raise ValueError("num_speculative_tokens must be >= 1")
    if kw["num_kv_blocks"] is not None and kw["num_kv_blocks"] < 1:
        raise ValueError("num_kv_blocks must be >= 1")
    if kw["kv_cache_memory_bytes"] is not None and kw["kv_cache_memory_bytes"] < 1:
        raise ValueError("kv_cache_memory_bytes must be >= 1")
    if kw["max_model_len"] is not None and kw["max_model_len"] < 2:
        raise ValueError("max_model_len must be >= 2")
    for name in ("max_queued", "max_queued_per_tenant"):
        if kw[name] is not None and kw[name] < 1:
            raise ValueError(f"{name} must be >= 1 (or None for no bound)")
