"""Problem 1 at the inputs its strict review quoted (../shared/reviews/page-01-home.md, F1-F13,
F21) and at the regimes a fresh read found: each test renders the page through Django's test
client at the review's query and checks the sentence it faulted, with the figure worked by hand
in its docstring (Llama 3 8B: 15.01 GB read per decode step, 131,072 B of KV per token; H100
SXM: 3.35 TB/s, 989.5 TFLOP/s dense BF16)."""

import re

import pytest

from problems.content import p01
from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db

PAGE = "/pages/01/"


def section(client, query: str, slug: str) -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return text_of(section_html(problem_html(response.content.decode(), 1), 1, slug))


def one_tokens(text: str) -> list[str]:
    """Every "1 tokens" that is a count of one (not the end of "11 tokens" or "2,001 tokens")."""
    return re.findall(r"(?<![\d,.])1 tokens", text)


def problem(client, query: str) -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return text_of(problem_html(response.content.decode(), 1))


def test_f1_course_lm_at_the_default_lengths_is_refused_with_how_far_to_cut(client) -> None:
    """course-lm's window is 1,024 tokens; the default prompt (1,000) plus output (300) is
    1,300, 276 too many: with this prompt an output of at most 1,024 − 1,000 = 24 fits, with
    this output a prompt of at most 1,024 − 300 = 724. The refusal says so above the working."""
    worked = section(client, "?p1-scale-model=course-lm", "worked")
    assert "Your inputs to" in worked and "were refused" in worked
    assert "276 tokens too many" in worked
    assert "an output of at most 24 tokens fits" in worked
    assert "a prompt of at most 724 tokens fits" in worked


def test_f1_course_lm_at_lengths_that_fit_is_worked_through(client) -> None:
    """At a prompt of 724 and an output of 300 (1,024 tokens, exactly the window) course-lm is
    accepted, and the prose is about it, not about the default Llama 3 8B."""
    worked = section(client, "?p1-scale-model=course-lm&p1-scale-prompt_tokens=724"
                             "&p1-scale-output_tokens=300", "worked")
    assert "were refused" not in worked
    assert "For scale, take course-lm" in worked
    # course-lm keeps its KV cache in FP32: "an FP32 KV cache", with the article that fits.
    assert "an FP32 KV cache" in worked


def test_f1_users_refusal_names_the_context_that_fits_with_the_answer(client) -> None:
    """The hundred-users calculator at course-lm: 1,150 tokens of context exceed the 1,024-token
    window; with its 300-token answer, a context of at most 1,024 − 300 = 724 fits."""
    worked = section(client, "?p1-users-model=course-lm", "worked")
    assert "a context of at most 724 tokens fits" in worked


def test_f1_the_content_module_keeps_no_unread_inputs_valid_flag(rf) -> None:
    """The shared notice above the Worked answer reports refusals; p01 no longer computes an
    `inputs_valid` that no template read."""
    assert "inputs_valid" not in p01.context(request=rf.get(PAGE))


def test_f2_f3_below_full_bandwidth_times_are_estimates_not_floors(client) -> None:
    """At 10% MBU: 16.06 GB ÷ (0.1 × 3.35 TB/s) = 48 ms (the rule of thumb), at 10% of the
    3.35 TB/s, not "at the 3.35 TB/s" (that would be 4.8 ms); 15.01 GB ÷ 0.335 TB/s = 45 ms, an
    estimate whose floor at full bandwidth is 4.5 ms; 299 × 44.8 ms = 13.4 s "at that step
    time", not "at least … at that floor"."""
    query = "?p1-scale-bandwidth_efficiency=0.1"
    worked = section(client, query, "worked")
    assert "16 GB and 48 ms at 10% of the 3.35 TB/s" in worked
    assert "about 45 ms per token at 10% of peak bandwidth, an estimate rather than a floor" \
        in worked
    assert "the floor, at full bandwidth, is 4.5 ms" in worked
    assert "about 13.4 s at that step time" in worked
    assert "a floor of about 45 ms" not in worked and "at that floor" not in worked
    answer = section(client, query, "answer")
    assert "so about 45 ms" in answer and "take about 13.4 s" in answer
    assert "at least 45 ms" not in answer


def test_f4_a_one_token_prompt_is_one_token(client) -> None:
    """A prompt of 1 token: 2 × 8.03×10⁹ × 1 = 1.6×10¹⁰ FLOP; vLLM's default max_tokens is
    8,192 − 1 = 8,191 tokens."""
    text = problem(client, "?p1-scale-prompt_tokens=1")
    assert one_tokens(text) == []
    assert "for a prompt of 1 token on Llama 3 8B" in text
    assert "that is 8,191 tokens the answer may run to" in text
    assert "1 token is about 1.6×10¹⁰ FLOP" in text


def test_f5_decode_share_never_reads_100_percent(client) -> None:
    """Prompt of 1 token: prefill reads the weights once, 4.5 ms; decode 299 steps, 1.343 s;
    1.343 ÷ (1.343 + 0.0045) = 99.67%, "99.7%", not "100%"."""
    text = problem(client, "?p1-scale-prompt_tokens=1")
    assert "Decode is 99.7% of the whole request" in text
    assert "decode is 99.7% of the request" in text
    assert "100%" not in text


def test_f6_a_one_token_answer_has_no_long_answer_tail(client) -> None:
    """Output of 1 token: prefill gives it, so no decode step; the sentence about where a long
    answer's time goes belongs to the other branch."""
    answer = section(client, "?p1-scale-output_tokens=1", "answer")
    # (A second review: "almost all its time" was false after a long prompt; the page now says
    # how many steps match the prefill, 28.7 ms ÷ 4.52 ms → 7.)
    assert "needs no step at all; each token of a longer one adds a step" in answer
    assert "That is where a long answer's time goes" not in answer


def test_f7_the_hundred_users_hint_at_a_batch_of_one(client) -> None:
    """Batch 1 at 1,150 tokens: 0.15 GB of KV beside 15 GB of weights, (15.01 + 0.151) ÷ 3.35
    TB/s = 4.53 ms. No "1 sequences", no "4.5 ms instead of 4.5 ms"."""
    followups = section(client, "?p1-users-batch=1", "followups")
    assert "1 sequences" not in followups and "instead of 4.5 ms" not in followups
    assert "The calculator holds one sequence" in followups
    assert "a step of 4.53 ms" in followups


def test_f8_a_short_context_batch_is_barely_longer_not_1_times(client) -> None:
    """100 × 10 tokens × 131,072 B = 0.13 GB of KV: (15.01 + 0.13) ÷ 3.35 TB/s = 4.52 ms
    against 4.48 ms alone, a ratio of 1.009: "barely longer", never "1 times as long" or "1
    times further apart"."""
    text = problem(client, "?p1-users-context_tokens=10")
    assert "4.52 ms against 4.48 ms for one sequence alone" in text
    assert "barely longer: at this context, batching is almost free" in text
    assert "1 times" not in text


def test_f9_an_moe_batch_slowdown_is_split_between_experts_and_kv(client) -> None:
    """Mixtral on an H100: one sequence reads 2 of 8 experts, ≈25.5 GB of weights, 7.7 ms; 100
    sequences reach all 8, 93.1 GB, plus 15.1 GB of KV: 32 ms. Of the ≈25 ms gained,
    (93.1 − 25.5) GB ÷ 3.35 TB/s ≈ 20 ms is experts and (15.07 − 0.15) GB ÷ 3.35 TB/s ≈ 4.5 ms
    is KV."""
    text = problem(client, "?p1-users-model=mixtral-8x7b")
    assert "the step reads 93 GB of weights where one sequence read 25 GB" in text
    assert "about 20 ms is reading those extra experts and 4.5 ms is the KV" in text
    assert "Most of that growth is not KV" in text
    # The follow-up hint no longer says the KV alone is the cause ("so the step takes …").
    assert "about 20 ms more for the experts and 4.5 ms for the KV" in text


def test_f9_deepseek_batch_growth_is_almost_all_experts(client) -> None:
    """DeepSeek-V3 on a B200 in NVFP4: one sequence reads ≈22 GB (8 of 256 routed experts), a
    batch of 100 reaches ≈96% of them, 360 GB; the KV is 2.23% of the weights. Of the 44 ms
    gained, 43 ms is experts."""
    worked = section(client, "?p1-users-model=deepseek-v3&p1-users-gpu=b200"
                             "&p1-users-dtype=nvfp4", "worked")
    assert "Of the 44 ms the step gained, about 43 ms is reading those extra experts" in worked


def test_f10_a_step_that_turns_compute_bound_says_so(client) -> None:
    """4,000 sequences of 1 token at 5% MFU: the matmuls for 4,000 tokens take ≈1.2 s, the
    reads 16 GB ÷ 3.35 TB/s ≈ 4.7 ms, so the step has turned compute-bound (alone it was
    memory-bound at 4.5 ms)."""
    text = problem(client, "?p1-users-context_tokens=1&p1-users-batch=4000"
                           "&p1-users-output_tokens=1&p1-users-mfu=0.05")
    assert "The step has turned compute-bound: the matrix multiplies for 4,000 tokens at 5% MFU" \
        in text
    assert "stays compute-bound" not in text
    assert one_tokens(text) == []
    assert "hold 1 token each" in text  # a one-token answer never grows them


def test_f11_throughput_of_a_batch_that_does_not_fit_is_conditional(client) -> None:
    """1,000 sequences need 210 GB of 76.56 GB (0.9 × CUDA's 79.22 GiB on an H100); (76.56 −
    16.06 weights − 3.3 reserve) GB ÷ (1,449 × 131,072 B) = ⌊301.1⌋ = 301 fit: (15.01 + 301 ×
    1,150 × 131,072 B = 45.4 GB) ÷ 3.35 TB/s = 18.0 ms a step, 301 ÷ 18.0 ms ≈ 17,000 tokens
    per second."""
    worked = section(client, "?p1-users-batch=1000", "worked")
    assert "Throughput would win if the batch fitted" in worked
    assert "Throughput still wins" not in worked
    assert "memory caps the batch at 301 sequences" in worked
    assert "which make about 17,000 tokens per second" in worked


def test_f12_streams_that_do_not_fit_are_said_not_to(client) -> None:
    """On an L4 the weights (15 GB), the 32 streams' and the prompt's KV and the reserve need
    24.6 GB of the 21.7 GB usable; 2,000 streams of 8,000 tokens need 2.1 TB of 77 GB."""
    assert "None of this fits on one NVIDIA L4" in section(client, "?p1-chunk-gpu=l4", "worked")
    assert "need 25 GB of the 22 GB the engine may use" in section(
        client, "?p1-chunk-gpu=l4", "worked")
    big = section(client, "?p1-chunk-decode_batch=2000&p1-chunk-decode_context_tokens=8000",
                  "worked")
    assert "None of this fits on one NVIDIA H100 SXM" in big
    # Their 630 ms step is memory-bound and hides the whole prompt's compute: chunking gains
    # nothing, and the page says so rather than contrasting 313 µs with 313 µs.
    assert "about as little, 313 µs" in big


def test_f13_long_prompt_edges_agree_with_their_counts(client) -> None:
    """One stream: "1 stream is", "its one decode token". A 8,192-token budget holds the whole
    8,000-token prompt: one step, not "1 chunks", and the hint's chunk is the 8,000-token
    prompt. A 1-token prompt is a 1-token chunk. No streams: no ".." in the hint."""
    one = section(client, "?p1-chunk-decode_batch=1", "worked")
    assert "while 1 stream is decoding" in one and "its one decode token" in one
    assert "1 stream are" not in one
    whole = problem(client, "?p1-chunk-chunk_tokens=8192")
    assert "it is not split at all" in whole and "1 chunks" not in whole
    assert "A chunk of 8,000 tokens" in whole
    tiny = problem(client, "?p1-chunk-prompt_tokens=1")
    assert "a prompt of 1 token while" in tiny and "A chunk of 1 token" in tiny
    assert one_tokens(tiny) == []
    assert ".." not in section(client, "?p1-chunk-decode_batch=0", "followups")


def test_f21_moe_prose_quotes_its_own_crossover_and_expert_reads(client) -> None:
    """DeepSeek-V3 in BF16 on an H100: ridge 989.5 ÷ 3.35 = 295 FLOP/byte, × 2 bytes ÷ 2 ×
    (671 ÷ 37.6 total over active) ≈ 5,278 tokens, not "a few hundred"; one sequence's step
    reads ≈73 GB of weights, a batch of 100 ≈1.3 TB (≈96% of the experts)."""
    query = "?p1-scale-model=deepseek-v3"
    listens = section(client, query, "listens")
    assert "5,278 tokens for DeepSeek-V3" in listens
    assert "above a few hundred tokens" not in listens
    assert "only past about 5,278 tokens of prompt" in section(client, query, "why")
    assert ("DeepSeek-V3 reads 73 GB of weights per step for one sequence and 1.3 TB for 100 "
            "sequences") in section(client, query, "concepts")


# Found by reading the page afresh at regimes the review did not try.

def test_a_tiny_model_is_counted_in_millions_and_megabytes_and_its_floor_flagged(client) -> None:
    """course-lm (5.4 million parameters) at a 700-token prompt and 300-token answer: the
    rule-of-thumb weights are 5.4×10⁶ × 2 B = 11 MB ("11 MB", not "0.011 GB"), a step of
    11 MB ÷ 3.35 TB/s = 3.2 µs, below what fixed per-step costs allow; 100 sequences of 500
    tokens take 95 µs a step, so their 1,100,000 tokens/s is a rate no engine reaches."""
    text = problem(client, "?p1-scale-model=course-lm&p1-scale-prompt_tokens=700"
                           "&p1-scale-output_tokens=300&p1-users-model=course-lm"
                           "&p1-users-context_tokens=500")
    assert "counts all 5.4 million parameters" in text and "0.0054 billion" not in text
    assert "Every parameter once would be 11 MB and 3.2 µs" in text
    assert "0.011 GB" not in text
    assert "A step this short is only its byte count" in text
    assert "rates no engine reaches with steps this short" in text


def test_a_model_that_does_not_fit_gets_no_floor_and_the_answer_says_so(client) -> None:
    """DeepSeek-V3 in BF16 needs 1.3 TB against an H100's 77 GB usable: its 73 GB ÷ 3.35 TB/s
    = 22 ms step is for one GPU that could hold it, not a floor; the model interview answer
    says these are one-GPU figures."""
    query = "?p1-scale-model=deepseek-v3"
    worked = section(client, query, "worked")
    assert "about 22 ms per token at full bandwidth on one GPU that could hold it" in worked
    assert "a floor of about 22 ms" not in worked and "still a floor" not in worked
    answer = section(client, query, "answer")
    assert "These are one-GPU figures for a model that does not fit one: it needs 1.3 TB" \
        in answer
    assert "at least 22 ms" not in answer


def test_a_batch_that_does_not_fit_is_not_called_a_floor(client) -> None:
    """1,000 sequences of 1,150 tokens need 210 GB of 77 GB: their 49 ms step is what the
    arithmetic gives as if they fitted, not a floor."""
    worked = section(client, "?p1-users-batch=1000", "worked")
    assert "(both floors, at full bandwidth)" not in worked


def test_f1_the_worked_answer_links_course_lm_at_lengths_that_fit(client) -> None:
    """At the defaults (1,000 + 300 tokens) course-lm's 1,024-token window is too short; the
    page offers it with this answer's 300 tokens and a prompt of 1,024 − 300 = 724, and that
    link is accepted: no refusal, and the prose is about course-lm."""
    import re

    response = client.get(PAGE)
    worked = section_html(problem_html(response.content.decode(), 1), 1, "worked")
    assert "try it with a prompt of 724 tokens and an answer of" in text_of(worked)
    link = re.search(r'<a href="(\?p1-scale-model=course-lm[^"#]*)', worked).group(1)
    followed = section(client, link.replace("&amp;", "&"), "worked")
    assert "were refused" not in followed and "For scale, take course-lm" in followed
    assert "try it with a prompt" not in followed
