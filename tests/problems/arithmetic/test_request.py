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
    result = request_for_scale()
    assert result["prefill_flops_text"] == "1.6×10¹³ FLOP"
    assert result["prefill_linear_text"] == "32 ms"
    assert result["step_floor_text"] == "4.8 ms"
    assert result["answer_text"] == "1.4 s"
    assert result["kv_text"] == "0.17 GB"
    assert result["fits"] is True
    assert result["decode_share"] > 0.9


def test_seventy_billion_in_bf16_does_not_fit_one_h100() -> None:
    result = request_for_scale(model="llama-3-70b", gpu="h100-sxm")
    assert result["fits"] is False
    assert any("does not fit" in step.expression for step in result.steps)


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
