"""One request for scale (COURSE.md's problem-1 example) composed from prefill, decode and the
KV cache, with the headline figures rounded as the prose states them (bare pytest)."""

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.request import (
    request_for_scale,
    request_split,
    request_timeline,
    seconds_rounded,
)


def test_the_course_example_rounds_to_the_stated_figures() -> None:
    """Rule of thumb: 2 × 8.03×10⁹ × 1,000 = 1.6×10¹³ FLOP, 32 ms at 494.75 TFLOP/s; 16 GB
    and 4.8 ms per step; 299 × 4.79 ms = 1.4 s. Refined: 1.4×10¹³ FLOP, 29 ms; 15 GB and
    4.5 ms per step; 299 × 4.48 ms = 1.34 s (three figures, beside the 1.35 s the decode loop
    takes once the growing KV is read too). KV at the end: 1,299 tokens × 131,072 B =
    0.17 GB."""
    result = request_for_scale()
    assert result["prefill_flops_rule_text"] == "1.6×10¹³ FLOP"
    assert result["prefill_rule_text"] == "32 ms"
    assert result["prefill_flops_text"] == "1.4×10¹³ FLOP"
    assert result["prefill_text"] == "29 ms"
    assert result["weights_rule_text"] == "16 GB"
    assert result["weights_text"] == "15 GB"
    assert result["step_floor_rule_text"] == "4.8 ms"
    assert result["step_floor_text"] == "4.5 ms"
    assert result["answer_rule_text"] == "1.4 s"
    assert result["answer_text"] == "1.34 s"
    assert result["decode_text"] == "1.35 s"
    assert result["kv_tokens"] == 1299
    assert result["kv_text"] == "0.17 GB"
    assert result["fits"] is True
    assert result["decode_share"] > 0.9


def test_a_one_token_answer_pays_no_decode_step() -> None:
    """n = 1: the prefill yields the only token, so the request takes exactly the prefill."""
    result = request_for_scale(output_tokens=1)
    assert result["decode_steps"] == 0
    assert result["e2e_seconds"] == result["ttft_seconds"]


def test_a_20_token_prompt_is_bound_by_the_weight_reads() -> None:
    """20 tokens at 50% MFU compute in 0.57 ms, but reading 15.01 GB takes 4.48 ms: TTFT is
    the memory floor, not a figure below it."""
    result = request_for_scale(prompt_tokens=20)
    assert result["prefill_bound"] == "memory"
    assert result["ttft_seconds"] >= result["decode_weights_floor_seconds"]


def test_seventy_billion_in_bf16_does_not_fit_one_h100() -> None:
    """70.55×10⁹ × 2 B = 141.1 GB of weights against 76.97 GB usable."""
    result = request_for_scale(model="llama-3-70b", gpu="h100-sxm")
    assert result["fits"] is False
    assert any(step.label.endswith("does not fit") for step in result.steps)


def test_mixtral_fit_counts_every_expert_not_the_ones_a_step_reads() -> None:
    """A batch-1 step reads ~25.5 GB, but all 93.4 GB of experts must be held: no fit."""
    result = request_for_scale(model="mixtral-8x7b", gpu="h100-sxm")
    assert result["weight_bytes"] < 30e9
    assert result["fits"] is False


def test_a_faster_gpu_shortens_every_stage() -> None:
    h100 = request_for_scale(gpu="h100-sxm")
    b200 = request_for_scale(gpu="b200")
    assert b200["prefill_seconds"] < h100["prefill_seconds"]
    assert b200["decode_step_seconds"] < h100["decode_step_seconds"]


def test_bad_lengths_name_their_field() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        request_for_scale(output_tokens=0)
    assert error.value.field == "output_tokens"


@pytest.mark.parametrize(("seconds", "text"), [
    (0.03246, "32 ms"), (0.004794, "4.8 ms"), (1.438, "1.4 s"), (0.0000123, "12 µs"),
    (75.0, "75 s"),
])
def test_seconds_rounded(seconds: float, text: str) -> None:
    assert seconds_rounded(seconds) == text


def test_timeline_starts_at_ttft_and_adds_one_step_per_token() -> None:
    tokens, seconds, floor = request_timeline(ttft_seconds=0.1, step_seconds=0.01,
                                              floor_step_seconds=0.005, output_tokens=5)
    assert tokens == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert seconds == pytest.approx((0.1, 0.11, 0.12, 0.13, 0.14))
    assert floor[-1] == pytest.approx(0.12)


def test_split_keeps_prefill_flat_while_the_loop_grows() -> None:
    lengths, prefill, decode = request_split(ttft_seconds=0.03, step_seconds=0.005,
                                             output_tokens=300)
    assert 300.0 in lengths and lengths[-1] == 600.0
    assert set(prefill) == {0.03}
    assert decode[lengths.index(300.0)] == pytest.approx(299 * 0.005)
    assert list(decode) == sorted(decode)


def test_prompt_plus_output_beyond_the_context_window_is_refused() -> None:
    # Llama 3 8B's config.json: max_position_embeddings 8,192.
    request_for_scale(prompt_tokens=8000, output_tokens=192)
    with pytest.raises(ArithmeticInputError) as error:
        request_for_scale(prompt_tokens=8000, output_tokens=193)
    assert error.value.field == "output_tokens"
    assert "8,192" in error.value.message
    with pytest.raises(ArithmeticInputError) as error:
        request_for_scale(prompt_tokens=9000, output_tokens=1)
    assert error.value.field == "prompt_tokens"
