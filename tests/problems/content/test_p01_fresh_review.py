"""Page 01 (problems 1 and 2) and the home page at the inputs a second, fresh strict review
found wrong after issue 36's fixes, through Django's test client. Each test renders the input
that showed the fault and checks the corrected sentence, with the figure worked by hand in its
docstring. Shared figures: Llama 3 8B reads 15.01 GB per decode step and caches 131,072 B of
KV per token; an H100 SXM has 3.35 TB/s, 989.5 TFLOP/s dense BF16 and 76.97 GB usable (81,559
MiB × 0.9); the runtime reserve is 3.3 GB."""

import pytest

from problems.arithmetic.reaction import distance_text
from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db

PAGE = "/pages/01/"


def section(client, query: str, number: int, slug: str) -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return " ".join(text_of(section_html(problem_html(response.content.decode(), number),
                                         number, slug)).split())


# Problem 1


def test_a_one_token_prompt_and_answer_hold_1_token_not_1_tokens(client) -> None:
    """Prompt 1, answer 1: the KV cache holds the prompt's 1 token and no fed-back answer token
    (the only answer token is the last, never fed back): "1 token", 131,072 B ≈ 0.13 MB."""
    worked = section(client, "?p1-scale-prompt_tokens=1&p1-scale-output_tokens=1", 1, "worked")
    assert "the KV cache holds 1 token (the prompt" in worked
    assert "holds 1 tokens" not in worked
    assert "about 0.13 MB" in worked


def test_a_batch_whose_step_rounds_to_one_sequences_says_how_much_longer(client) -> None:
    """100 sequences of 1 token: their KV is 100 × 131,072 B = 13.1 MB, 99 × 131,072 B =
    13.0 MB more than one sequence reads, 13.0 MB ÷ 3.35 TB/s = 3.9 µs on a 4.48 ms step. Three
    figures print "4.48 ms against 4.48 ms"; the page gives the 3.9 µs instead."""
    query = "?p1-users-context_tokens=1"
    worked = section(client, query, 1, "worked")
    assert "4.48 ms against 4.48 ms" not in worked
    assert "The step takes 4.48 ms, only 3.9 µs more than for one sequence alone" in worked
    assert "so at this context, batching is almost free" in worked
    hint = section(client, query, 1, "followups")
    assert "the step takes 4.48 ms, only 3.9 µs more than for one sequence" in hint
    # At 10 tokens the three figures differ (4.52 against 4.48 ms) and are both given.
    assert "4.52 ms against 4.48 ms for one sequence alone" in section(
        client, "?p1-users-context_tokens=10", 1, "worked")


def test_a_model_whose_weights_overflow_the_gpu_is_not_fixed_by_a_smaller_batch(client) -> None:
    """Mixtral 8x7B in BF16 stores 93.4 GB of weights; with the 3.3 GB reserve that is 96.7 GB,
    over the 77 GB an H100 engine may use before any KV: no smaller batch or prompt fits it.
    Llama 3 8B's 16.1 GB + 3.3 GB fit, so 2,000 streams of 8,000 tokens (2.1 TB of KV) are
    fixed by a smaller batch."""
    mixtral = section(client, "?p1-chunk-model=mixtral-8x7b", 1, "worked")
    assert "no smaller batch or prompt would do" in mixtral
    assert "or the batch made smaller" not in mixtral
    llama = section(client, "?p1-chunk-decode_batch=2000&p1-chunk-decode_context_tokens=8000",
                    1, "worked")
    assert "need 2.1 TB of the 77 GB the engine may use, so the batch or the prompt would be " \
           "made smaller, or the model split over GPUs" in llama


def test_a_model_no_format_fits_is_not_told_to_shrink_and_gets_a_gpu_count(client) -> None:
    """Llama 3.1 405B on an L4: 811.7 GB of BF16 weights (embedding and head included) + 0.67 GB
    of KV, over 21.74 GB usable less the 3.3 GB reserve = 18.44 GB a GPU: 812.4 ÷ 18.44 = 44.06,
    so at least 45 GPUs. In INT4 (4.16 bits) the body alone is about 209 GB: no 4-bit copy fits
    one L4. Mixtral 8x7B on an H100: (93.4 + 0.17) ÷ (76.97 − 3.3) = 1.27, so at least 2; in FP8
    its 46.7 GB + 0.17 GB + 3.3 GB = 50 GB fit one."""
    big = section(client, "?p1-scale-model=llama-3.1-405b&p1-scale-gpu=l4", 1, "worked")
    assert "split over several GPUs (at least 45 GPUs, sharing out the weights and KV" in big
    assert "even a 4-bit copy would not fit one" in big
    assert "smaller format" not in big
    moe = section(client, "?p1-scale-model=mixtral-8x7b", 1, "worked")
    assert "(at least 2 GPUs," in moe
    assert "or stored in FP8 (E4M3), which would fit one" in moe


def test_prefill_memory_time_names_the_kv_it_writes(client) -> None:
    """course-lm, prompt 724: its weights are 10.8 MB (3.2 µs at 3.35 TB/s, the decode step's
    figure), but prefill also writes 724 × 6,144 B = 4.45 MB of FP32 KV, so its memory side
    is about 15.3 MB ÷ 3.35 TB/s ≈ 4.6 µs (4.7 µs with the embedding rows). The page must not
    call 4.7 µs "reading the weights once" two lines above "11 MB and 3.2 µs"."""
    worked = section(client, "?p1-scale-model=course-lm&p1-scale-prompt_tokens=724"
                             "&p1-scale-output_tokens=300", 1, "worked")
    assert "Reading the weights once and writing the prompt's KV cache takes 4.7 µs" in worked
    assert "would be 11 MB and 3.2 µs" in worked


def test_rule_and_refined_count_differ_by_attention_too(client) -> None:
    """course-lm, prompt 724: the rule gives 2 × 5.4 M × 724 = 7.8×10⁹ FLOP while the refined
    count is 7.9×10⁹, larger, because causal attention (which the rule leaves out) outweighs
    the embedding and head it removes; the page says both differences."""
    worked = section(client, "?p1-scale-model=course-lm&p1-scale-prompt_tokens=724"
                             "&p1-scale-output_tokens=300", 1, "worked")
    assert "7.8×10⁹ FLOP" in worked and "7.9×10⁹ FLOP" in worked
    assert "and by attention, which the rule leaves out" in worked


def test_the_long_prompt_hint_agrees_with_one_stream(client) -> None:
    """One running stream: the 2,048-token chunk step takes 69 ms against 5 ms alone (64 ms
    late); the whole 8,000-token prompt would add 255 ms. One stream is "it", not "them"."""
    hint = section(client, "?p1-chunk-decode_batch=1", 1, "followups")
    assert "delays the stream's next token by about 64 ms" in hint
    assert "would stall it by 255 ms" in hint
    assert "stall them" not in hint and "every stream's" not in hint


def test_the_long_prompt_hint_does_not_sell_chunking_where_it_buys_nothing(client) -> None:
    """2,000 streams of 8,000 tokens read 15 GB + 2.1 TB = 2.11 TB a step (630 ms); the whole
    8,000-token prompt's 1.3×10¹⁴ FLOP take 261 ms at 494.8 TFLOP/s, hidden under the reads, so
    chunked or not the stall is the same 313 µs of extra KV and weights reads."""
    hint = section(client, "?p1-chunk-decode_batch=2000&p1-chunk-decode_context_tokens=8000",
                   1, "followups")
    assert "would stall them about as little, 313 µs, so here chunking buys almost nothing" \
        in hint
    assert "Where a chunk does stall the streams, smaller chunks" in hint
    # A one-token prompt is not split at all.
    single = section(client, "?p1-chunk-prompt_tokens=1", 1, "followups")
    assert "Its prefill fits in one step's budget, so it shares a single step" in single


# Problem 2


def test_reasoning_that_fills_max_tokens_leaves_streaming_nothing_to_buy(client) -> None:
    """max_tokens 1,000 with 999 hidden reasoning tokens: the one visible token is token 1,000,
    at 28.7 ms + 999 × 5.73 ms ≈ 5.76 s, the same moment as the whole answer, so streaming buys
    nothing visible. With 950: first visible at 28.7 ms + 950 × 5.73 ms = 5.47 s against 5.76 s,
    about 0.28 s sooner (under 10% of the answer's time), next to nothing."""
    worked = section(client, "?p2-stream-reasoning_tokens=999", 2, "worked")
    assert "That one visible token is the last one generated" in worked
    assert "Streaming still saves the wait after the thinking" not in worked
    answer = section(client, "?p2-stream-reasoning_tokens=999", 2, "answer")
    assert "streaming buys next to nothing" in answer
    assert "the same moment as the whole answer" in answer
    assert "instead of nothing for 5.76 s" not in answer
    late = section(client, "?p2-stream-reasoning_tokens=950", 2, "worked")
    assert "the first visible text waits until 5.47 s" in late
    assert "the answer lands at 5.76 s, only 281 ms later" in late
    # 500 tokens of thinking still leave 2.9 s against 5.76 s: streaming saves half.
    assert "Streaming still saves the wait after the thinking" in section(
        client, "?p2-stream-reasoning_tokens=500", 2, "worked")


def test_an_overloaded_service_is_said_in_rounded_averages_and_petabytes(client) -> None:
    """1,000,000 requests/s, all abandoned after 100 tokens, a 4,096-sequence step of 165 ms:
    900 tokens × 165 ms = 148 s left running each, so by Little's law about 1.48×10⁸ streams,
    an average said to three figures ("about 148,000,000"), holding 30.2 PB of KV, not
    "30,161 TB"."""
    worked = section(client, "?p2-stream-batch=4096&p2-stream-requests_per_second=1000000"
                             "&p2-stream-abandon_rate=1", 2, "worked")
    assert "about 148,000,000 streams are decoding for nobody" in worked
    assert "30.2 PB of KV cache" in worked
    assert "TB of KV cache" not in worked


# The home page


def test_a_long_reaction_distance_reads_in_kilometres(client) -> None:
    """1,000 km/h for 60,000 ms: 277.8 m/s × 60 s = 16,667 m, said as 16.7 km."""
    response = client.get("/?speed_kmh=1000&latency_ms=60000")
    text = " ".join(text_of(response.content.decode()).split())
    assert "it travels 16.7 km before it can begin to react" in text
    assert "16,667 m" not in text
    assert distance_text(999) == "999 m" and distance_text(1000) == "1 km"


def test_an_abandoned_request_whose_blocks_already_hold_the_answer_does_not_grow(client) -> None:
    """4,096-token blocks: at the cut the request has fed back 1,000 + 99 = 1,099 tokens, one
    block (4,096 × 131,072 B = 537 MB); at max_tokens 1,999, still one block. Nothing "grows to
    1"; the one block stays held for the 900 wasted steps (900 × 5.73 ms = 5.16 s). With 16-token
    blocks the request grows from ⌈1,099 ÷ 16⌉ = 69 to ⌈1,999 ÷ 16⌉ = 125."""
    query = "?p2-stream-block_size=4096"
    worked = section(client, query, 2, "worked")
    assert "grow to 1 " not in worked
    assert "the 1 block it holds already has room for every one of them, so it stays held" \
        in worked
    answer = section(client, query, 2, "answer")
    assert "1 growing to 1" not in answer
    assert "keeps its 1 block of KV cache busy for 5.16 s" in answer
    assert "keeps 69 growing to 125 KV blocks busy for 5.16 s" in section(client, "", 2, "answer")


def test_a_reader_who_leaves_one_token_early_wastes_1_token_a_second(client) -> None:
    """Cut after 999 of 1,000 tokens: 1 token is left; 10 requests/s × 10% abandoned × 1 token =
    1 token a second wasted, "1 token", not "1 tokens", in the worked answer, the model answer
    and the follow-up. Its 125 blocks (⌈1,999 ÷ 16⌉) already have room for that one token."""
    query = "?p2-stream-cut_after_tokens=999"
    worked = section(client, query, 2, "worked")
    assert "that is 1 token a second decoded for nobody" in worked
    assert "the 125 blocks it holds already have room for it" in worked
    assert "costs 1 token a second" in section(client, query, 2, "answer")
    assert "1 token a second of decode spent on nobody" in section(client, query, 2, "followups")
    # At the defaults: 10 × 10% × 900 = 900 tokens a second.
    assert "that is 900 tokens a second decoded for nobody" in section(client, "", 2, "worked")


def test_a_cut_at_max_tokens_is_refused_with_the_budget(client) -> None:
    """Cut after 1,000 of a 1,000-token budget is no early exit: refused, naming the budget."""
    worked = section(client, "?p2-stream-cut_after_tokens=1000", 2, "worked")
    assert "were refused" in worked
    assert "fewer than output_tokens (max_tokens, 1,000 here)" in worked


def test_a_reader_who_leaves_during_hidden_thinking_is_said_to_have_seen_nothing(client) -> None:
    """500 hidden reasoning tokens, reader leaves after 100: every token so far was thinking
    (the first visible one is token 501, at 28.7 ms + 500 × 5.73 ms ≈ 2.9 s), so they saw no
    answer at all. Leaving after 600 is past the thinking, and nothing is said."""
    worked = section(client, "?p2-stream-reasoning_tokens=500&p2-stream-cut_after_tokens=100",
                     2, "worked")
    assert "after 100 tokens, still inside the 500 tokens of hidden thinking: they leave " \
           "having seen no answer at all." in worked
    later = section(client, "?p2-stream-reasoning_tokens=500&p2-stream-cut_after_tokens=600",
                    2, "worked")
    assert "having seen no answer" not in later


def test_a_microsecond_prefill_is_flagged_as_a_count_no_engine_reaches(client) -> None:
    """course-lm, prompt 724: 7.9×10⁹ FLOP ÷ 494.8 TFLOP/s = 16 µs, under the 100 µs below which
    fixed per-pass costs outweigh the work; the decode step (3.2 µs) was flagged, the prefill
    was not. Llama 3 8B's 29 ms prefill is not flagged."""
    worked = section(client, "?p1-scale-model=course-lm&p1-scale-prompt_tokens=724"
                             "&p1-scale-output_tokens=300", 1, "worked")
    assert "this prefill takes about 16 µs" in worked
    assert "A pass this short is only its FLOP and byte count" in worked
    assert "A pass this short" not in section(client, "", 1, "worked")


def test_the_glossary_does_not_call_every_decode_step_memory_bound(client) -> None:
    """Llama 3 8B on an H100, 1,000 sequences of 100 tokens: the matmuls are 1,000 × 2 × 6.98×10⁹
    = 1.4×10¹³ FLOP, 14 ms at the full 989.5 TFLOP/s, while the reads are 15 GB of weights +
    1,000 × 100 × 131,072 B = 13.1 GB of KV = 28 GB, 8.4 ms at 3.35 TB/s: compute-bound, as page
    01 says. The home page's glossary must not say decode is always limited by memory."""
    page = " ".join(text_of(client.get("/").content.decode()).split())
    assert "Usually limited by how fast memory can be read" in page
    assert "only a large batch of short sequences makes the matrix multiplies the limit" in page
    users = section(client, "?p1-users-batch=1000&p1-users-context_tokens=100"
                            "&p1-users-output_tokens=1", 1, "worked")
    assert "The step has turned compute-bound" in users


def test_a_weight_only_format_is_not_set_beside_a_few_hundred_for_a_dense_model(client) -> None:
    """FP8 on an A100 runs weight-only: 312 TFLOP/s ÷ 2.04 TB/s = 153 FLOP/byte, × 1 byte ÷ 2 =
    77 tokens, far below "a few hundred", for Llama 3 8B, itself a dense model. On an H100 FP8
    runs natively: 1,979 ÷ 3.35 = 591 × 1 ÷ 2 = 295 tokens, and "a few hundred" stands."""
    listens = section(client, "?p1-scale-gpu=a100-80gb-sxm&p1-scale-dtype=fp8", 1, "listens")
    assert "77 tokens for Llama 3 8B in FP8 (E4M3)" in listens
    assert "a few hundred for a dense model" not in listens
    assert "the multiplies still run at the BF16 rate" in listens
    native = section(client, "?p1-scale-dtype=fp8", 1, "listens")
    assert "295 tokens for Llama 3 8B in FP8 (E4M3)" in native
    assert "a few hundred for a dense model on current GPUs" in native


def test_a_model_one_gpu_cannot_hold_is_not_counted_in_single_gpus(client) -> None:
    """DeepSeek-V3 in BF16 stores about 1.34 TB of weights, over the 77 GB an H100 engine may use
    before any KV: a smaller batch cannot help, and its 10 requests/s × 4.33 min ≈ 2,600 running
    sequences at 32 a step are ⌈2,600 ÷ 32⌉ = 82 batches, each on the several GPUs one copy
    needs, not "82 GPUs". Llama 3 8B at a batch of 4,096 (weights fit, the batch's KV does not)
    keeps the advice to run fewer sequences per step."""
    worked = section(client, "?p2-stream-model=deepseek-v3", 2, "worked")
    assert "fill 82 GPUs" not in worked
    assert "at 32 sequences a step make 82 batches, each served by the several GPUs" in worked
    assert "the weights and reserve alone overflow one GPU, so no smaller batch would fit" \
        in worked
    assert "the engine would run fewer sequences per step" in section(
        client, "?p2-stream-batch=4096", 2, "worked")


def test_a_short_answer_after_a_long_prompt_is_not_called_almost_all_decode(client) -> None:
    """Prompt 7,000, answer 100 (Llama 3 8B, H100): prefill 2 × 6.98×10⁹ × 7,000 + attention
    524,288 × 7,000 × 7,001 ÷ 2 ≈ 1.1×10¹⁴ FLOP ÷ 494.8 TFLOP/s ≈ 223 ms; 99 steps of about
    4.76 ms take 471 ms, so decode is 471 ÷ 694 = 68%, not "almost all", and 223 ÷ 4.76 ≈ 47
    (48 by the exact times) decode steps match the prefill. A one-token answer at the defaults:
    28.7 ms ÷ 4.52 ms = 6.35, so 7 steps would match its prefill ("almost all its time" was
    said regardless of the prompt)."""
    hint = section(client, "?p1-scale-prompt_tokens=7000&p1-scale-output_tokens=100", 1,
                   "followups")
    assert "decode is 68% of the request: after a prompt of 7,000 tokens this answer is not " \
           "long, and prefill still counts; 48 decode steps take as long as the prefill" in hint
    assert "this answer is not long" not in section(client, "", 1, "followups")
    answer = section(client, "?p1-scale-output_tokens=1", 1, "answer")
    assert "each token of a longer one adds a step, and 7 decode steps would already take as " \
           "long as this prefill" in answer
    assert "almost all its time" not in answer


def test_a_batch_so_large_that_one_token_each_outweighs_the_weights(client) -> None:
    """1,000,000 sequences: even 1 token of context each is 1,000,000 × 131,072 B = 131 GB of
    KV, over the 15 GB of weights; the break-even 15.01 GB ÷ 131 GB = 0.11 tokens printed as
    "about 0 tokens each". At the defaults it is 15.01 GB ÷ (100 × 131,072 B) = 1,145 tokens."""
    worked = section(client, "?p1-users-batch=1000000&p1-users-context_tokens=1000", 1, "worked")
    assert "0 tokens each" not in worked
    assert "for this batch even one token of context each would read more KV than weights" \
        in worked
    assert "the two are equal at about 1,145 tokens each" in section(client, "", 1, "worked")


def test_a_rate_of_one_token_a_second_is_singular(client) -> None:
    """Llama 3 70B on an L4 at 47% of 300 GB/s: one sequence reads 139.4 GB a step, 139.4 GB ÷
    141 GB/s = 0.989 s, so 1.01 tokens a second, said "1 token per second", not "1 tokens"."""
    worked = section(client, "?p1-users-model=llama-3-70b&p1-users-gpu=l4&p1-users-batch=1"
                             "&p1-users-bandwidth_efficiency=0.47", 1, "worked")
    assert "makes about 1 token per second" in worked
    assert "at most 11,000 tokens per second in aggregate" in section(client, "", 1, "worked")


def test_a_two_token_answer_has_one_decode_step_said_as_one(client) -> None:
    """An answer of 2 tokens: prefill gives the first, 1 decode step gives the second, 15.01 GB ÷
    3.35 TB/s = 4.48 ms. Not "the other 1 take one step each" or "the other 1 tokens take"."""
    query = "?p1-scale-output_tokens=2"
    worked = section(client, query, 1, "worked")
    assert "Prefill gave the first token, so the second takes one step: at least 4.48 ms" \
        in worked
    answer = section(client, query, 1, "answer")
    assert "the second token takes at least 4.48 ms" in answer
    assert "other 1 " not in worked + answer


def test_the_streaming_working_holds_1_token_at_a_cut_before_the_first(client) -> None:
    """A 1-token prompt and a reader who leaves before the first token: the cache holds the
    prompt's 1 token at the cut, ⌈1 ÷ 16⌉ = 1 block: "1 token", not "1 tokens"."""
    response = client.get(PAGE + "?p2-stream-prompt_tokens=1&p2-stream-cut_after_tokens=0")
    text = " ".join(text_of(problem_html(response.content.decode(), 2)).split())
    assert "1 prompt (the client left before the first token) 1 token " in text
    assert "1 tokens" not in text


def test_the_streaming_waste_working_says_1_request_and_1_token_a_second(client) -> None:
    """1 request/s, all abandoned after 999 of 1,000 tokens: 1 stream a second × 1 decode step
    left = 1 token/s; the working says "1 request/s" and "1 token/s", not "1 requests/s"."""
    response = client.get(PAGE + "?p2-stream-requests_per_second=1&p2-stream-abandon_rate=1"
                                 "&p2-stream-cut_after_tokens=999")
    text = " ".join(text_of(problem_html(response.content.decode(), 2)).split())
    assert "1 request/s × 100% abandoned" in text
    assert "1 token/s" in text
    assert "1 requests/s" not in text and "1 tokens/s" not in text


def test_a_microsecond_long_prompt_step_is_flagged(client) -> None:
    """course-lm, 32 streams of 200 tokens and a 500-token prompt in chunks of 128: the streams
    read about 11 MB of weights + 32 × 200 × 6,144 B = 39 MB of FP32 KV ≈ 50 MB, 15 µs at
    3.35 TB/s, and the chunk's step 16 µs: under the 100 µs below which fixed per-step costs
    dominate. The default (5.7 ms, 70 ms) is not flagged."""
    worked = section(client, "?p1-chunk-model=course-lm&p1-chunk-prompt_tokens=500"
                             "&p1-chunk-decode_context_tokens=200&p1-chunk-chunk_tokens=128",
                     1, "worked")
    assert "Their step alone takes 15 µs" in worked
    assert "Steps of microseconds are only byte and FLOP counts" in worked
    assert "Steps of microseconds" not in section(client, "", 1, "worked")


def test_a_one_token_moe_prefill_reads_only_its_routed_experts(client) -> None:
    """Mixtral 8x7B, prompt 1: the token is routed to 2 of 8 experts, so the pass reads about
    25 GB (25.5 GB ÷ 3.35 TB/s = 7.6 ms), not all 93 GB: "every weight the prompt is routed
    to", not "every weight"."""
    answer = section(client, "?p1-scale-model=mixtral-8x7b&p1-scale-prompt_tokens=1", 1,
                     "answer")
    assert "every weight the prompt is routed to must still be read once, so about 7.6 ms" \
        in answer
