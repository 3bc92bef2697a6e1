"""Chunked prefill, prefix caching and disaggregation."""

import pytest

from problems.arithmetic import (
    ArithmeticInputError,
    chunked_prefill,
    kv_transfer,
    prefill,
    prefix_cache,
)


def test_chunks_bound_the_stall() -> None:
    result = chunked_prefill(
        model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000, chunk_tokens=512, mfu=0.5
    )
    assert result["chunks"] == 16
    whole = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000, mfu=0.5)
    assert result["unchunked_stall_seconds"] == pytest.approx(whole["seconds"])
    assert result["max_chunk_stall_seconds"] < result["unchunked_stall_seconds"] / 10
    assert result["first_chunk_stall_seconds"] <= result["max_chunk_stall_seconds"]


def test_prefix_hit_skips_exactly_the_prefix_prefill() -> None:
    result = prefix_cache(
        model="llama-3-8b", gpu="h100-sxm", prompt_tokens=3000, prefix_tokens=2000, hit_rate=1.0
    )
    prefix_alone = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=2000)
    assert result["flops_saved"] == pytest.approx(prefix_alone["flops"])
    half = prefix_cache(
        model="llama-3-8b", gpu="h100-sxm", prompt_tokens=3000, prefix_tokens=2000, hit_rate=0.5
    )
    assert half["flops_saved"] == pytest.approx(result["flops_saved"] / 2)


def test_prefix_longer_than_prompt_is_refused() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        prefix_cache(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=10, prefix_tokens=20)
    assert error.value.field == "prefix_tokens"


def test_kv_transfer_over_nvlink_uses_one_direction() -> None:
    # H100 SXM datasheet: NVLink 900 GB/s total, so 450 GB/s each way.
    result = kv_transfer(model="llama-3-70b", prompt_tokens=4000, gpu="h100-sxm")
    assert result["bytes"] == 4000 * 327_680
    assert result["seconds"] == pytest.approx(4000 * 327_680 / 450e9)


def test_kv_transfer_over_a_given_link() -> None:
    # A 400 Gb/s NIC moves 50 GB/s.
    result = kv_transfer(model="llama-3-8b", prompt_tokens=1000, link_gb_per_second=50)
    assert result["seconds"] == pytest.approx(1000 * 131_072 / 50e9)
