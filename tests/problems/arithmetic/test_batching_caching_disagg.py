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
    assert result["max_chunk_stall_seconds"] < result["unchunked_stall_seconds"] / 10
    assert result["first_chunk_stall_seconds"] <= result["max_chunk_stall_seconds"]


def test_a_chunk_stalls_decoders_by_the_steps_growth_not_its_compute_on_top() -> None:
    """32 decoders at 1,000 tokens: 15.01 GB weights + 4.19 GB KV = 19.2 GB → 5.73 ms at
    3.35 TB/s, compute only 1 ms. A 64-token chunk adds 2 × 6.98×10⁹ × 64 = 8.9×10¹¹ FLOP
    (1.8 ms at 50% MFU) but the step stays memory-bound (1 + 1.8 < 5.73 ms): it costs the
    decoders only its few extra bytes, microseconds. A 2,048-token chunk makes the step
    compute-bound, ~61 ms, a ~55 ms stall: max(M, C_decode + C_chunk) − max(M, C_decode)."""
    small = chunked_prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000,
                            chunk_tokens=64, mfu=0.5)
    assert small["decode_step_seconds"] == pytest.approx(5.73e-3, abs=0.01e-3)
    assert small["first_chunk_stall_seconds"] < 0.01e-3
    assert small["chunk_compute_seconds"] > 1e-3
    big = chunked_prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000,
                          chunk_tokens=2048, mfu=0.5)
    assert big["largest_step_bound"] == "compute"
    assert big["first_chunk_stall_seconds"] == pytest.approx(0.0553, abs=0.001)


def test_with_no_decoders_the_unchunked_stall_is_the_prefill() -> None:
    result = chunked_prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000,
                             chunk_tokens=512, mfu=0.5, decode_batch=0)
    whole = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=8000, mfu=0.5)
    assert result["unchunked_stall_seconds"] == pytest.approx(whole["seconds"], rel=0.001)


def test_a_prefix_hit_cannot_beat_the_weight_reads() -> None:
    """A 1,000-token prompt whose first 999 tokens are cached still reads 15.01 GB of weights
    for the last one: the hit's prefill is 4.5 ms, not the 0.03 ms its FLOPs alone would take."""
    result = prefix_cache(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000,
                          prefix_tokens=999, mfu=0.5)
    assert result["hit_prefill_seconds"] == pytest.approx(15_009_849_344 / 3.35e12, rel=0.01)


def test_prefix_hit_skips_exactly_the_prefix_prefill() -> None:
    """Llama 3 8B, 2,000 of 3,000 tokens cached. A hit skips the prefix's linear layers,
    2 × 6,979,588,096 × 2,000 = 27,918,352,384,000 FLOP, and the attention among its own
    tokens, 524,288 × 2,000 × 2,001 ÷ 2 = 1,049,100,288,000 FLOP: 28,967,452,672,000 FLOP in
    all. Not the prefix's own prefill (which adds the output head at position 2,000,
    2 × 128,256 × 4,096 = 1,050,673,152 FLOP, that the whole prompt never computes there)."""
    result = prefix_cache(
        model="llama-3-8b", gpu="h100-sxm", prompt_tokens=3000, prefix_tokens=2000, hit_rate=1.0
    )
    assert result["flops_saved"] == 28_967_452_672_000
    prefix_alone = prefill(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=2000)
    assert prefix_alone["flops"] - result["flops_saved"] == 1_050_673_152
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


def test_prefix_cache_skipped_step_names_the_suffix_once() -> None:
    """Fresh read of problem 8's prefix-cache calculator at its defaults (Llama 3 8B, 3,000
    tokens, 2,000 cached): the step read '… for the 1,000 suffix tokens suffix tokens (their
    linear layers …)'. Skipped = 4.4×10¹³ − 1.5×10¹³ = 2.9×10¹³ FLOP (2 × 7.5×10⁹ × 2,000
    and the prefix's attention)."""
    from problems.arithmetic.caching import prefix_cache
    r = prefix_cache(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=3_000,
                     prefix_tokens=2_000, hit_rate=0.8)
    step = next(s for s in r.steps if s.label == "Skipped on a hit")
    assert "for the 1,000 suffix tokens (their linear layers" in step.expression
    assert "suffix tokens suffix tokens" not in step.expression


def test_prefix_as_long_as_the_prompt_leaves_one_suffix_token_in_the_singular() -> None:
    """A 3,000-token prefix on a 3,000-token prompt: the last token is always recomputed, so a
    hit computes 1 token (2 × 7.5×10⁹ + its attention to 2,999 ≈ 1.7×10¹⁰ FLOP); the step read
    'the 1 suffix token (their linear layers …)'."""
    from problems.arithmetic.caching import prefix_cache
    r = prefix_cache(model="llama-3-8b", gpu="h100-sxm", prompt_tokens=3_000,
                     prefix_tokens=3_000, hit_rate=0.8)
    step = next(s for s in r.steps if s.label == "Skipped on a hit")
    assert "for the 1 suffix token (its linear layers, its attention" in step.expression
