"""Sizing the KV pool from a byte budget."""

import pytest

from worker.engine.loader import kv_pool_size

SIZING = dict(block_bytes=1000, block_size=16, context=1024, max_num_seqs=4)


def test_budget_divides_into_blocks_capped_by_what_sequences_can_use():
    assert kv_pool_size(budget_bytes=20_500, num_kv_blocks=None, max_model_len=None,
                        **SIZING) == (20, 320)
    # 4 sequences x 1024 tokens / 16 = 256 blocks at most, however large the budget.
    assert kv_pool_size(budget_bytes=10**9, num_kv_blocks=None, max_model_len=None,
                        **SIZING) == (256, 1024)


def test_explicit_blocks_win_and_must_hold_max_model_len():
    assert kv_pool_size(budget_bytes=1, num_kv_blocks=8, max_model_len=128, **SIZING) == (8, 128)
    with pytest.raises(ValueError, match="too small"):
        kv_pool_size(budget_bytes=1, num_kv_blocks=8, max_model_len=129, **SIZING)
    with pytest.raises(ValueError, match="no block"):
        kv_pool_size(budget_bytes=999, num_kv_blocks=None, max_model_len=None, **SIZING)
