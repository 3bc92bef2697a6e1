"""Problem 2 at the inputs its strict review quoted (../shared/reviews/page-01-home.md, F1,
F15-F18, F22) and at the one-token regime a fresh read found, through Django's test client.
Defaults: Llama 3 8B on an H100 SXM, 1,000-token prompt, max_tokens 1,000, a 32-sequence step of
5.73 ms, TTFT 28.7 ms, 10 requests per second, 10% abandoned after 100 tokens."""

import pytest

from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db

PAGE = "/pages/01/"


def section(client, query: str, slug: str) -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return " ".join(text_of(section_html(problem_html(response.content.decode(), 2), 2,
                                         slug)).split())


def test_f1_course_lm_refusal_says_how_far_to_cut(client) -> None:
    """course-lm's window is 1,024 tokens; prompt 1,000 + max_tokens 1,000 = 2,000, 976 too
    many: with this prompt, an output of at most 24 fits; with this output, a prompt of 24."""
    worked = section(client, "?p2-stream-model=course-lm", "worked")
    assert "were refused" in worked and "976 tokens too many" in worked
    assert "an output of at most 24 tokens fits" in worked


def test_f15_a_fast_stream_is_not_nothing_for_any_network(client) -> None:
    """course-lm, 100-token prompt, 200-token answer: 220 B per event (its events name
    "course-lm") ÷ 9.09 µs per step = 24.2 MB/s = 194 Mbit/s a stream; × 32 streams = 774 MB/s
    = 6.19 Gbit/s. A 9.09 µs step is a byte count no engine reaches, and the page says so."""
    worked = section(client, "?p2-stream-model=course-lm&p2-stream-prompt_tokens=100"
                             "&p2-stream-output_tokens=200", "worked")
    assert "nothing for any network" not in worked
    assert "24.2 MB/s (194 Mbit/s)" in worked and "6.19 Gbit/s" in worked
    assert "Steps this short are only the bytes read" in worked
    # At the defaults, 246 B every 5.73 ms, 42.9 kB/s (343 kbit/s), still is nothing for any
    # network.
    assert "42.9 kB/s (343 kbit/s), nothing for any network" in section(client, "", "worked")


def test_f16_the_model_answer_counts_the_characters_an_event_carries(client) -> None:
    """1,000 tokens per event × 4 characters = 4,000, less the first token sent alone: an
    event of 4,238 B (242 B of envelope naming meta-llama/Meta-Llama-3-8B-Instruct) carries 3,996
    characters, not "a few". At 0.5 characters per token an
    event carries 1 character (rounded up: text is whole characters), not "1 characters"."""
    assert "4,238 B for 3,996 characters of text" in section(
        client, "?p2-stream-tokens_per_event=1000", "answer")
    half = section(client, "?p2-stream-chars_per_token=0.5", "answer")
    assert "for 1 character of text" in half and "1 characters" not in half


def test_f17_abandoned_streams_are_a_share_of_the_traffics_seats_not_of_one_gpu(client) -> None:
    """Batch 1: a request runs 28.7 ms + 999 × 4.52 ms = 4.54 s, so 10 requests/s keep 45.4
    sequences running (Little's law), 46 GPUs' worth at a batch of 1; abandoned ones decode
    1/s × 900 × 4.52 ms = 4.07 at once: 4.07 ÷ 45.4 = 8.95% of the seats, not "407% … more than
    one GPU busy"."""
    worked = section(client, "?p2-stream-batch=1", "worked")
    assert "407%" not in worked and "more than one GPU busy" not in worked
    assert "about 4 streams are decoding for nobody at any moment" in worked
    assert "out of about 45 sequences this traffic keeps running" in worked
    assert "8.95% of the decode seats it needs" in worked
    assert "which at a batch of 1 sequence fill 46 GPUs" in worked
    assert "each decode step shared by 1 sequence," in worked


def test_f18_edge_wording_of_the_abandoned_request(client) -> None:
    """A reader gone at 0 tokens left "before the first token"; blocks of 1 token; a reasoning
    budget of 2,000 inside max_tokens 1,000 is refused in the form's own words (max_tokens)."""
    assert "leaves before the first token" in section(
        client, "?p2-stream-cut_after_tokens=0", "worked")
    assert "after 0 tokens" not in section(client, "?p2-stream-cut_after_tokens=0", "worked")
    assert "1,099 blocks of 1 token," in section(client, "?p2-stream-block_size=1", "worked")
    refused = section(client, "?p2-stream-reasoning_tokens=2000", "worked")
    assert "max_tokens, 1,000 here" in refused
    assert "counts the hidden reasoning as well as the visible answer" in refused


def test_f22_hidden_reasoning_moves_what_streaming_buys(client) -> None:
    """500 hidden reasoning tokens: the first visible text at 28.7 ms + 500 × 5.73 ms = 2.9 s,
    against 5.76 s sent whole; the first token at 28.7 ms is thinking, not text."""
    query = "?p2-stream-reasoning_tokens=500"
    worked = section(client, query, "worked")
    assert "the first visible text waits until 2.9 s" in worked
    assert "the first text (and, near enough" not in worked
    answer = section(client, query, "answer")
    assert "the first visible text after 2.9 s" in answer
    assert "the first text after 28.7 ms" not in answer


def test_a_one_token_answer_buys_nothing_and_wastes_no_decode(client) -> None:
    """max_tokens 1, reader gone before it: the answer is whole at 28.7 ms streamed or not, and
    no decode step is left to waste, so no "28.7 ms instead of nothing for 28.7 ms", no
    "0 tokens a second", no "63 growing to 63 blocks … for 0 s"."""
    query = "?p2-stream-output_tokens=1&p2-stream-cut_after_tokens=0"
    worked = section(client, query, "worked")
    assert "Nothing here: an answer of one token is whole at its first token" in worked
    assert "0 tokens a second" not in worked
    answer = section(client, query, "answer")
    assert "instead of nothing for 28.7 ms" not in answer
    assert "busy for 0 s" not in answer and "costs 0 tokens a second" not in answer


# Inputs at which `manage.py proofread --problems 1,2` (seed 20261207) flagged a sentence before
# this change, each with the sentence it printed.
PROOFREAD_FOUND = {
    # "a prompt of 1 tokens", "prefill of 1 tokens"
    "?p2-stream-prompt_tokens=1": 2,
    # "1 characters of text (1 token × 1 characters)"
    "?p2-stream-chars_per_token=1.0": 2,
    # "with 1 tokens of reasoning first"
    "?p2-stream-reasoning_tokens=1": 2,
    # "At 1 requests per second", "at 0.1 streams abandoned a second"
    "?p2-stream-requests_per_second=1.0": 2,
    # "1 blocks of 4,096 tokens", "⌈1,099 ÷ 4096⌉ 1 blocks"
    "?p2-stream-block_size=4096": 2,
    # "one decode step shared by 1 sequences"; "5.16 ÷ 57.6 sequences" (a mean, unsaid)
    "?p2-stream-batch=1": 2,
    # "half of 591 × 1 tokens"
    "?p1-scale-dtype=fp8": 1,
    # "(the first of 1 tokens came from prefill)"
    "?p1-scale-output_tokens=1": 1,
    # "Largest batch that fits … 0 sequences"
    "?p1-users-model=llama-3-70b": 1,
    # "32 decoders at 1 tokens"
    "?p1-chunk-decode_context_tokens=1": 1,
    # "the sum of 1 steps' times"
    "?p1-chunk-prompt_tokens=1": 1,
}


@pytest.mark.parametrize("query", sorted(PROOFREAD_FOUND))
def test_the_proofread_finds_nothing_where_it_found_sentences(client, query) -> None:
    """The problem's whole visible text (prose and calculator working) at each input passes
    every rule of the proofreading sweep."""
    from problems.proofread import text_flags, visible_text

    number = PROOFREAD_FOUND[query]
    response = client.get(PAGE + query)
    assert response.status_code == 200
    assert text_flags(visible_text(problem_html(response.content.decode(), number))) == []


def test_a_batch_that_does_not_fit_has_no_floor_and_seats_no_traffic(client) -> None:
    """4,096 sequences of 1,000-token prompts need 1.1 TB against 77 GB: the 165 ms step is
    "as if they fitted" (the warning says so), so the opening no longer calls it a floor, and
    the traffic's ≈1,646 sequences are not said to sit "within one GPU's batch"."""
    worked = section(client, "?p2-stream-batch=4096", "worked")
    assert "a floor of 165 ms" not in worked and "about 28.7 ms to the first token" in worked
    assert "within one GPU's batch" not in worked
    assert "fewer than the batch of 4,096 sequences, which does not fit one GPU" in worked


def test_a_model_that_does_not_fit_has_no_ttft_floor_and_one_step_is_one(client) -> None:
    """DeepSeek-V3 in NVFP4 on a B200 needs 390 GB of 170 GB usable: the 47.3 ms prefill is "as
    if it fitted", not a floor. A reader leaving after 999 of 1,000 tokens leaves one token,
    made in one decode step, not "one decode step each"."""
    worked = section(client, "?p2-stream-model=deepseek-v3&p2-stream-gpu=b200"
                             "&p2-stream-dtype=nvfp4", "worked")
    assert "about 47.3 ms to the first token (no queue)" in worked
    assert "a floor, at full efficiency" not in worked
    late = section(client, "?p2-stream-cut_after_tokens=999", "worked")
    assert "generates 1 token more for nobody, in one decode step" in late


def test_the_model_answer_sizes_a_fast_stream_too(client) -> None:
    """course-lm at 100 + 200 tokens: 220 B every 9.09 µs is 194 Mbit/s a stream, so the model
    answer no longer calls the bytes "tiny per stream"; at the defaults (343 kbit/s) it does."""
    answer = section(client, "?p2-stream-model=course-lm&p2-stream-prompt_tokens=100"
                             "&p2-stream-output_tokens=200", "answer")
    assert "tiny per stream" not in answer
    assert "which at these step times is 194 Mbit/s per stream, worth sizing" in answer
    assert "but that is tiny per stream" in section(client, "", "answer")
    assert "with 1 stream a second abandoned and left running" in section(client, "", "answer")
