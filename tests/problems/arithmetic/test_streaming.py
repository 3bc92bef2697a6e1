"""Streaming arithmetic: event sizes measured from real SSE events, waiting times, and the KV
blocks an abandoned request holds (bare pytest, no Django)."""

import json
import math

import pytest

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.streaming import (
    SSE_DONE,
    abandoned_blocks_timeline,
    abandoned_request,
    sse_chunk_event,
    stream_cost,
    streaming_for_scale,
)


def test_an_event_is_a_data_line_of_chunk_json_and_a_blank_line() -> None:
    event = sse_chunk_event(content="Hi")
    assert event.startswith("data: ") and event.endswith("\n\n")
    chunk = json.loads(event.removeprefix("data: "))
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["choices"][0]["delta"] == {"content": "Hi"}
    assert SSE_DONE == "data: [DONE]\n\n"


def test_bytes_per_event_are_the_measured_utf8_length() -> None:
    result = stream_cost(output_tokens=10, ttft_seconds=0.1, tpot_seconds=0.01,
                         chars_per_token=4.0)
    assert result["bytes_per_event"] == len(sse_chunk_event(content="xxxx").encode())
    assert result["envelope_bytes"] == result["bytes_per_event"] - 4
    # The opening role event (vLLM's first chunk: role "assistant", empty content), ten events
    # of envelope, forty characters of text, and the closing sentinel.
    role = len(sse_chunk_event(content="", role="assistant").encode())
    assert role == 261
    assert result["stream_bytes"] == role + 10 * result["envelope_bytes"] + 40 + len(SSE_DONE)


def test_packing_tokens_into_events_cuts_bytes_but_never_delays_the_first_token() -> None:
    """vLLM, SGLang and TensorRT-LLM send the first token at once and pack only later ones:
    with 8 tokens per event, 1,000 tokens are 1 + ⌈999 ÷ 8⌉ = 126 events, and the first text
    still leaves at TTFT (50 ms), not 50 + 7 × 10 = 120 ms."""
    one = stream_cost(output_tokens=1000, ttft_seconds=0.05, tpot_seconds=0.01)
    eight = stream_cost(output_tokens=1000, ttft_seconds=0.05, tpot_seconds=0.01,
                        tokens_per_event=8)
    assert one["events"] == 1000
    assert eight["events"] == 1 + 125 == 126
    assert eight["stream_bytes"] < one["stream_bytes"]
    assert one["first_text_seconds"] == eight["first_text_seconds"] == pytest.approx(0.05)
    assert one["full_answer_seconds"] == eight["full_answer_seconds"] == pytest.approx(
        0.05 + 999 * 0.01)


def test_a_reasoning_model_shows_text_long_after_its_first_token() -> None:
    """500 hidden reasoning tokens at 10 ms each: the first token is generated at 50 ms, but
    the first visible text waits until 50 + 500 × 10 = 5,050 ms."""
    result = stream_cost(output_tokens=1000, ttft_seconds=0.05, tpot_seconds=0.01,
                         reasoning_tokens=500)
    assert result["first_text_seconds"] == pytest.approx(0.05)
    assert result["first_visible_seconds"] == pytest.approx(5.05)


def test_streaming_sends_more_bytes_than_one_response() -> None:
    result = stream_cost(output_tokens=300, ttft_seconds=0.03, tpot_seconds=0.005)
    assert result["overhead_ratio"] > 10


@pytest.mark.parametrize(("field", "kwargs"), [
    ("output_tokens", {"output_tokens": 0}),
    ("tokens_per_event", {"tokens_per_event": 0}),
    ("chars_per_token", {"chars_per_token": math.nan}),
    ("tpot_seconds", {"tpot_seconds": -1.0}),
])
def test_stream_cost_names_the_bad_field(field: str, kwargs: dict) -> None:
    inputs = {"output_tokens": 10, "ttft_seconds": 0.1, "tpot_seconds": 0.01, **kwargs}
    with pytest.raises(ArithmeticInputError) as error:
        stream_cost(**inputs)
    assert error.value.field == field


def test_abandoned_request_blocks_and_time_for_llama_3_8b() -> None:
    result = abandoned_request(model="llama-3-8b", prompt_tokens=1000, output_tokens=1000,
                               cut_after_tokens=100, step_seconds=0.005, block_size=16)
    # 32 layers × 2 × 8 KV heads × 128 × 2 bytes = 131,072 B per token (config.json).
    assert result["block_bytes"] == 131_072 * 16
    # At the cut the 100th token is sampled but not yet fed back: 1,000 + 99 = 1,099 tokens.
    assert result["tokens_at_cut"] == 1099
    assert result["blocks_at_cut"] == math.ceil(1099 / 16) == 69
    # The last token is never fed back: 1,999 tokens of KV at the end, ⌈1,999 ÷ 16⌉ = 125.
    assert result["blocks_at_end"] == math.ceil(1999 / 16) == 125
    assert result["bytes_at_cut"] == 69 * 131_072 * 16
    assert result["wasted_tokens"] == 900
    assert result["held_seconds_without_cancel"] == pytest.approx(900 * 0.005)
    assert result["held_seconds_with_cancel"] == 0.005


def test_time_held_is_linear_in_the_step_time() -> None:
    slow = abandoned_request(model="llama-3-8b", prompt_tokens=500, output_tokens=800,
                             cut_after_tokens=10, step_seconds=0.02)
    fast = abandoned_request(model="llama-3-8b", prompt_tokens=500, output_tokens=800,
                             cut_after_tokens=10, step_seconds=0.01)
    assert slow["held_seconds_without_cancel"] == pytest.approx(
        2 * fast["held_seconds_without_cancel"])


def test_a_cut_at_or_after_max_tokens_is_refused() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        abandoned_request(model="llama-3-8b", prompt_tokens=10, output_tokens=100,
                          cut_after_tokens=100, step_seconds=0.01)
    assert error.value.field == "cut_after_tokens"


def test_blocks_timeline_drops_to_zero_after_each_release() -> None:
    times, without, with_cancel = abandoned_blocks_timeline(
        blocks_at_cut=10, blocks_at_end=20, held_seconds_without_cancel=2.0,
        held_seconds_with_cancel=0.01)
    assert without[0] == with_cancel[0] == 10
    before = [b for t, b in zip(times, without, strict=True) if t <= 2.0]
    assert before == sorted(before) and before[-1] == 20
    assert all(b == 0 for t, b in zip(times, without, strict=True) if t > 2.0)
    assert all(b == 0 for t, b in zip(times, with_cancel, strict=True) if t > 0.01)


def test_abandoned_streams_waste_as_a_rate() -> None:
    """10 requests/s × 10% abandoned × 900 tokens left = 900 tokens/s decoded for nobody; by
    Little's law 1 stream/s × 500 block·s × 2.1 MB per block ≈ 1.05 GB of KV held on average."""
    result = streaming_for_scale(requests_per_second=10, abandon_rate=0.1)
    assert result["wasted_tokens_per_second"] == pytest.approx(10 * 0.1 * 900)
    assert result["abandoned_kv_bytes"] == pytest.approx(
        1.0 * result["block_seconds_wasted"] * 131_072 * 16)


def test_streaming_for_scale_composes_the_steps() -> None:
    result = streaming_for_scale()
    labels = [step.label for step in result.steps]
    assert labels[0] == "Time to first token (no queue)"
    assert "Bytes per event" in labels and "Blocks held at the cut" in labels
    assert result["held_seconds_with_cancel"] == result["tpot_seconds"]


def test_an_abandoned_request_counts_the_first_token_as_prefill_not_a_decode_step() -> None:
    """Off by one, both ways. A client that leaves after 17 answer tokens of a 1,008-token
    prompt leaves 1,008 + 16 = 1,024 tokens in the cache (the 17th is sampled, not yet fed
    back): 64 blocks of 16, not the 65 that 1,025 would need; the other 83 of 100 tokens take
    83 decode steps. A client that leaves before the first token (cut 0) of a 1-token answer
    leaves that token to the prefill under way: 1 token generated for nobody, 0 decode steps,
    0 s of decode."""
    edge = abandoned_request(model="llama-3-8b", prompt_tokens=1008, output_tokens=100,
                             cut_after_tokens=17, step_seconds=0.005, block_size=16)
    assert edge["tokens_at_cut"] == 1024 and edge["blocks_at_cut"] == 64
    assert edge["wasted_decode_steps"] == 83
    early = abandoned_request(model="llama-3-8b", prompt_tokens=1000, output_tokens=1,
                              cut_after_tokens=0, step_seconds=0.005)
    assert early["wasted_tokens"] == 1 and early["wasted_decode_steps"] == 0
    assert early["held_seconds_without_cancel"] == 0
    assert early["tokens_at_cut"] == 1000


def test_abandoned_streams_before_the_first_token_take_one_decode_step_fewer_each() -> None:
    """Cut at 0 of max_tokens 1,000: the first token comes from the prefill under way, so each
    abandoned stream takes 999 decode steps, and 1 stream/s × 999 = 999 tokens/s of decode
    spent on nobody, not 1,000. A one-token answer abandoned at 0 takes no decode seat at
    all."""
    early = streaming_for_scale(requests_per_second=10, abandon_rate=0.1, cut_after_tokens=0)
    assert early["wasted_tokens"] == 1000
    assert early["wasted_tokens_per_second"] == pytest.approx(999)
    one = streaming_for_scale(requests_per_second=10, abandon_rate=0.1, cut_after_tokens=0,
                              output_tokens=1)
    assert one["wasted_tokens_per_second"] == 0


def test_every_event_repeats_the_served_name_so_its_length_counts() -> None:
    """A model served as "course-lm" (9 characters) sends events 26 B shorter than one served
    as "meta-llama/Meta-Llama-3-8B-Instruct" (35); the catalog's served name is the repository
    its config.json comes from, or the demo model's directory name."""
    from problems.arithmetic.catalog import model_get

    common = {"output_tokens": 10, "ttft_seconds": 0.1, "tpot_seconds": 0.01}
    long = stream_cost(**common, model_name="meta-llama/Meta-Llama-3-8B-Instruct")
    short = stream_cost(**common, model_name="course-lm")
    assert long["bytes_per_event"] - short["bytes_per_event"] == 26
    assert model_get("llama-3-8b").served_name == "meta-llama/Meta-Llama-3-8B"
    assert model_get("deepseek-v3").served_name == "deepseek-ai/DeepSeek-V3"
    assert model_get("course-lm").served_name == "course-lm"


def test_a_chat_stream_names_the_chat_tuned_checkpoint() -> None:
    """Review: the events named a base repository (meta-llama/Meta-Llama-3-8B), which a chat
    server is not started on (vLLM issue #5924: it has no chat template); the chat checkpoint
    is the family's -Instruct (or Llama 2's -chat) repository, from the same organisation.
    DeepSeek-V3's repository is its chat model; the demo model keeps its directory's name.
    At the defaults an event is 246 B again, 9 B more than with the base name."""
    from problems.arithmetic.catalog import model_get, models_all
    from problems.arithmetic.streaming import CHAT_CHECKPOINTS, chat_served_name

    assert chat_served_name(model_get("llama-3-8b")) == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert chat_served_name(model_get("deepseek-v3")) == "deepseek-ai/DeepSeek-V3"
    assert chat_served_name(model_get("course-lm")) == "course-lm"
    catalog = models_all()
    for model_id, repo in CHAT_CHECKPOINTS.items():
        base = catalog[model_id].repo
        assert repo != base and repo.split("/")[0] == base.split("/")[0]
    assert streaming_for_scale()["bytes_per_event"] == 246
