"""One decode step, tokens/s and a whole answer."""

import pytest

from problems.arithmetic import decode
from problems.arithmetic.catalog import MODELS
from problems.arithmetic.decode import experts_touched


def test_step_reads_weights_plus_every_sequences_kv() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=8, context_tokens=2000)
    assert result["kv_bytes_per_step"] == 8 * 2000 * 131_072
    assert result["bytes_per_step"] == 8_030_261_248 * 2 + 8 * 2000 * 131_072
    assert result["memory_seconds"] == pytest.approx(result["bytes_per_step"] / 3.35e12)


def test_aggregate_tokens_per_second_is_batch_over_step_time() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=16, context_tokens=100)
    assert result["tokens_per_second"] == pytest.approx(16 / result["step_seconds"])
    assert result["tokens_per_second_per_sequence"] == pytest.approx(1 / result["step_seconds"])


def test_kv_dtype_defaults_to_dtype_and_can_differ() -> None:
    same = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, dtype="fp8")
    mixed = decode(
        model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, dtype="fp8", kv_dtype="bf16"
    )
    assert mixed["kv_bytes_per_step"] == 2 * same["kv_bytes_per_step"]


def test_moe_batch_one_reads_the_active_experts_and_large_batches_read_them_all() -> None:
    mixtral = MODELS["mixtral-8x7b"]
    assert experts_touched(model=mixtral, batch=1) == pytest.approx(2)
    assert experts_touched(model=mixtral, batch=64) == pytest.approx(8, rel=1e-6)
    one = decode(model="mixtral-8x7b", gpu="h100-sxm", batch=1)
    # Mixtral paper: 12.9B active parameters, so about 25.8 GB per step in BF16.
    assert one["weight_bytes_per_step"] == pytest.approx(2 * 12.9e9, rel=0.01)


def test_huge_batches_become_compute_bound() -> None:
    result = decode(model="llama-3-8b", gpu="h100-sxm", batch=4096, context_tokens=1)
    assert result["bound"] == "compute"
    assert result["step_seconds"] == result["compute_seconds"]


def test_whole_answer_accounts_for_the_growing_kv() -> None:
    flat = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=1)
    long = decode(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000, output_tokens=1001)
    # The mean step of the long answer sees 1,500 tokens of KV, not 1,000.
    mean_step = (8_030_261_248 * 2 + 1500 * 131_072) / 3.35e12
    assert long["total_seconds"] == pytest.approx(1001 * mean_step)
    assert flat["total_seconds"] == pytest.approx(flat["step_seconds"])


def test_fits_in_memory_counts_all_weights_and_the_final_kv() -> None:
    assert decode(model="llama-3-8b", gpu="h100-sxm", batch=1, context_tokens=1000)[
        "fits_in_memory"
    ]
    # Llama 3.1 405B in BF16 is ~812 GB: no single GPU holds it.
    assert not decode(model="llama-3.1-405b", gpu="b200")["fits_in_memory"]
    # Mixtral in BF16 (93.4 GB, every expert) does not fit an 80 GB H100 even though a
    # batch-1 step reads only ~26 GB.
    assert not decode(model="mixtral-8x7b", gpu="h100-sxm")["fits_in_memory"]
