"""Problem 1 on page 01, through Django's test client: every section written, COURSE.md's
figures shown and equal to the JSON API's, inputs that change them, hints hidden, a titled SVG."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.request import seconds_rounded
from problems.arithmetic.units import bytes_in, scientific_format
from problems.content import p01
from problems.registry import SECTIONS
from tests.problems.content.helpers import (
    problem_html,
    section_html,
    text_of,
    typed_figures,
)

pytestmark = pytest.mark.django_db

PAGE = "/pages/01/"
TEMPLATE = Path(p01.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def api_get(client, path: str, **params) -> dict:
    response = client.get(f"/api/calc/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 1)
    for slug, heading in SECTIONS:
        section = section_html(problem, 1, slug)
        assert heading in section
        assert "being-written" not in section
        # Written means real prose, not a heading alone.
        assert len(text_of(section)) > len(heading) + 200, slug


def test_course_figures_appear_and_equal_the_api(client) -> None:
    """COURSE.md's example two ways. Rule of thumb: 2 × 8.03×10⁹ × 1,000 = 1.6×10¹³ FLOP, 32 ms
    at 50% of 989.5 TFLOP/s; 16 GB and 4.8 ms per step; 299 steps × 4.79 ms = 1.4 s. Refined:
    1.4×10¹³ FLOP, 29 ms; 15 GB and 4.5 ms per step; 299 × 4.48 ms = 1.34 s. KV for 1,299
    tokens: 0.17 GB."""
    worked = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    pre = api_get(client, "prefill", model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000,
                  dtype="bf16", mfu=0.5)
    dec = api_get(client, "decode", model="llama-3-8b", gpu="h100-sxm", batch=1,
                  context_tokens=1000, output_tokens=300, dtype="bf16")
    kv = api_get(client, "kv-cache", model="llama-3-8b", tokens=1299, users=1, dtype="bf16")
    expected = {
        "1.6×10¹³ FLOP": scientific_format(pre["rule_of_thumb_flops"], digits=2, unit="FLOP"),
        "32 ms": seconds_rounded(pre["rule_of_thumb_seconds"]),
        "1.4×10¹³ FLOP": scientific_format(pre["flops"], digits=2, unit="FLOP"),
        "29 ms": seconds_rounded(pre["seconds"]),
        "16 GB": bytes_in(dec["rule_of_thumb_weight_bytes"], "GB", digits=2),
        "4.8 ms": seconds_rounded(dec["rule_of_thumb_floor_seconds"]),
        "15 GB": bytes_in(dec["weight_bytes_per_step"], "GB", digits=2),
        "4.5 ms": seconds_rounded(dec["weights_floor_seconds"]),
        "1.4 s": seconds_rounded(299 * dec["rule_of_thumb_floor_seconds"]),
        "1.34 s": seconds_rounded(299 * dec["weights_floor_seconds"], digits=3),
        "0.17 GB": bytes_in(kv["total_bytes"], "GB", digits=2),
    }
    for course_figure, from_api in expected.items():
        assert from_api == course_figure
        assert course_figure in worked
    assert "compute-bound" in worked and "1,299 tokens" in worked


def test_changing_inputs_changes_the_figures(client) -> None:
    query = ("?p1-scale-model=llama-3-70b&p1-scale-gpu=h200&p1-scale-dtype=fp8"
             "&p1-scale-prompt_tokens=4000&p1-scale-output_tokens=500&p1-scale-mfu=0.4")
    worked = text_of(section_html(problem_html(page_get(client, query), 1), 1, "worked"))
    pre = api_get(client, "prefill", model="llama-3-70b", gpu="h200", prompt_tokens=4000,
                  dtype="fp8", mfu=0.4)
    dec = api_get(client, "decode", model="llama-3-70b", gpu="h200", batch=1,
                  context_tokens=4000, output_tokens=500, dtype="fp8")
    assert "Llama 3 70B with FP8 (E4M3) weights and a BF16 KV cache on one NVIDIA H200 SXM" in (
        worked)
    assert scientific_format(pre["flops"], digits=2, unit="FLOP") in worked
    assert seconds_rounded(dec["weights_floor_seconds"]) in worked
    assert "1.6×10¹³" not in worked
    assert "4,000 tokens" in worked


def test_a_hundred_users_are_computed_not_asserted(client) -> None:
    """100 sequences × 1,150 tokens × 131,072 B = 15 GB of KV per step, as large as the 15 GB of
    weights: the step doubles from 4.5 ms to 9 ms, the figures the API gives."""
    worked = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    many = api_get(client, "decode", model="llama-3-8b", gpu="h100-sxm", batch=100,
                   context_tokens=1150, output_tokens=300)
    one = api_get(client, "decode", model="llama-3-8b", gpu="h100-sxm", batch=1,
                  context_tokens=1150, output_tokens=300)
    assert seconds_rounded(many["step_seconds"]) == "9 ms"
    assert seconds_rounded(one["step_seconds"]) == "4.5 ms"
    assert "takes 9 ms against 4.5 ms for one sequence alone" in worked
    assert bytes_in(many["kv_bytes_per_step"], "GB", digits=2) == "15 GB"
    assert "TPOT rises slowly" not in page_get(client)


def test_one_long_chunk_stalls_every_stream_by_the_computed_figure(client) -> None:
    """8,000-token prompt in 2,048-token chunks beside 32 decoders at 1,000 tokens on an H100 at
    50% MFU: the decode-only step is 5.7 ms; with the largest chunk it turns compute-bound and
    every stream's next token is late by the step's growth, which the API computes."""
    worked = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    chunk = api_get(client, "chunked-prefill", model="llama-3-8b", gpu="h100-sxm",
                    prompt_tokens=8000, chunk_tokens=2048, decode_batch=32,
                    decode_context_tokens=1000, mfu=0.5)
    stall = seconds_rounded(chunk["max_chunk_stall_seconds"])
    assert f"every stream's next token is late by {stall}" in worked
    assert seconds_rounded(chunk["decode_step_seconds"]) == "5.7 ms"


def test_max_tokens_left_unset_is_the_rest_of_the_window(client) -> None:
    """Llama 3 8B's window is 8,192 tokens: a 1,000-token prompt leaves 7,192."""
    concepts = text_of(section_html(problem_html(page_get(client), 1), 1, "concepts"))
    assert "that is 7,192 tokens" in concepts


def test_the_staff_level_points_are_on_the_page(client) -> None:
    problem = text_of(problem_html(page_get(client), 1))
    for point in ("max_num_batched_tokens", "batch-invariant kernels", "structured output",
                  "beginning-of-sequence", "recomput", "prefix caching", "logprobs",
                  "no separate prefill phase"):
        assert point in problem, point


def test_bad_input_shows_a_field_error_and_keeps_the_defaults_in_the_prose(client) -> None:
    content = page_get(client, "?p1-scale-prompt_tokens=-5&p1-scale-model=llama-3-8b")
    worked = section_html(problem_html(content, 1), 1, "worked")
    assert "Enter at least 1 token." in worked
    assert "1.6×10¹³ FLOP" in text_of(worked)


def test_unknown_model_in_the_query_is_a_field_error_not_a_500(client) -> None:
    content = page_get(client, "?p1-scale-model=gpt-9")
    assert "Choose a model from the list." in section_html(problem_html(content, 1), 1, "worked")


def test_htmx_re_render_of_the_calculator_returns_new_steps(client) -> None:
    response = client.get("/calculators/request-for-scale/",
                          {"prefix": "p1-scale", "p1-scale-model": "llama-3-8b",
                           "p1-scale-gpu": "h100-sxm", "p1-scale-dtype": "bf16",
                           "p1-scale-prompt_tokens": "2000", "p1-scale-output_tokens": "300",
                           "p1-scale-mfu": "0.5"},
                          HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body
    assert "2,000 tokens" in body


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 1), 1, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 3
    assert len(hints) == len(questions)
    # Nothing of a hint's answer sits outside its <details>.
    outside = re.sub(r"<details>.*?</details>", "", followups, flags=re.S)
    assert "AsyncLLM" not in outside and "AsyncLLM" in followups


def test_the_request_path_diagram_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 1), 1, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]*request[^<]*</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)
    for stage in ("API server", "Scheduler", "Prefill", "Decode loop", "KV cache"):
        assert stage in svg


def test_the_live_demo_is_embedded(client) -> None:
    demo = section_html(problem_html(page_get(client), 1), 1, "demo")
    assert 'data-demo="lifecycle"' in demo


def test_the_template_types_no_figures() -> None:
    # The check itself catches a typed figure.
    assert typed_figures("<p>about 32 ms, then 0.17 GB</p>") == ["32 ms", "0.17 GB"]
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p01.SOURCES) >= 5
    for title, url in p01.SOURCES:
        assert title and url.startswith("https://")


def test_the_page_lists_both_problems_sources_once_each(client) -> None:
    from problems.content import p02

    content = page_get(client)
    sources = content[content.index('id="sources"'):]
    urls = re.findall(r'<li><a href="([^"]+)"', sources)
    expected = list(dict.fromkeys(url for _, url in p01.SOURCES + p02.SOURCES))
    assert urls == expected
    assert len(urls) < len(p01.SOURCES) + len(p02.SOURCES)  # shared ones listed once


def test_a_short_prompt_is_called_memory_bound_everywhere_and_a_one_token_answer_has_no_step(
        client) -> None:
    """20 tokens of Llama 3 8B on an H100: 2.8×10¹¹ FLOP take 567 µs at 50% MFU, but reading
    15.01 GB of weights takes 4.5 ms, so prefill is memory-bound (a floor at full bandwidth),
    and compute would bind only from 159 tokens. A one-token answer comes from prefill alone:
    no decode step."""
    problem = problem_html(page_get(client, "?p1-scale-prompt_tokens=20"
                                            "&p1-scale-output_tokens=1"), 1)
    worked = text_of(section_html(problem, 1, "worked"))
    answer = text_of(section_html(problem, 1, "answer"))
    assert "an answer of 1 token," in worked
    assert "567 µs of compute" in worked and "memory-bound, and that is a floor" in worked
    assert "From about 159 tokens of prompt the compute would bind instead" in worked
    assert "below about" not in worked.lower()
    assert "there is no decode step at all" in worked
    assert "That is compute-bound" not in answer
    assert "a prompt this short is bound by memory, not compute" in answer
    assert "needs no step at all" in answer


def test_an_moe_model_is_counted_by_its_active_parameters(client) -> None:
    """Mixtral 8x7B: a token passes through 12.9B of its 46.7B parameters (12.6B of them
    non-embedding), so the rule of thumb and the refined count use those, and a long pass turns
    compute-bound only near 295 × 2 ÷ 2 × 46.7 ÷ 12.9 ≈ 1,071 tokens: every expert is read but
    each token multiplies two."""
    worked = text_of(section_html(problem_html(page_get(
        client, "?p1-scale-model=mixtral-8x7b"), 1), 1, "worked"))
    concepts = text_of(section_html(problem_html(page_get(
        client, "?p1-scale-model=mixtral-8x7b"), 1), 1, "concepts"))
    assert "12.9 billion active parameters" in worked
    assert "12.6 billion non-embedding active weights" in worked
    assert "46.7 billion parameters in all" in worked
    assert "Every active parameter once" in worked
    assert "roughly 1,071 tokens" in concepts


def test_the_crossover_scales_with_the_bytes_per_weight(client) -> None:
    """FP8 on an H100: ridge 1,979 ÷ 3.35 = 591 FLOP per byte, one byte per weight, so about
    591 × 1 ÷ 2 ≈ 295 tokens, not 591."""
    concepts = text_of(section_html(problem_html(page_get(client, "?p1-scale-dtype=fp8"), 1), 1,
                                    "concepts"))
    assert "591 FLOP per byte" in concepts and "costs 1 byte to read" in concepts
    assert "roughly 295 tokens" in concepts


def test_the_hundred_users_prose_compares_and_flags_what_does_not_fit(client) -> None:
    """KV reads at 100 tokens each are 1.31 GB against 15.01 GB of weights (8.73%), not "as
    large"; 400 sequences need 95 GB of the H100's 77 GB usable; Llama 3 70B's 141 GB of
    weights fit no batch at all on one H100."""
    def worked(query: str) -> str:
        return text_of(section_html(problem_html(page_get(client, query), 1), 1, "worked"))
    assert "8.73% of the 15 GB of weights" in worked("?p1-users-context_tokens=100")
    assert "But these 400 sequences do not fit" in worked("?p1-users-batch=400")
    assert "no batch fits at all" in worked("?p1-users-model=llama-3-70b")
    assert "Memory caps the batch at 0" not in worked("?p1-users-model=llama-3-70b")


def test_a_small_chunk_is_called_memory_bound_in_the_follow_up(client) -> None:
    followups = text_of(section_html(problem_html(page_get(
        client, "?p1-chunk-chunk_tokens=64"), 1), 1, "followups"))
    assert "A chunk of 64 tokens leaves the step memory-bound" in followups
    assert "makes the step compute-bound" not in followups


def test_the_long_prompt_plot_says_when_its_inputs_do_not_fit() -> None:
    """32 streams of Llama 3 70B in BF16 on one H100: 141 GB of weights alone exceed the
    77 GB usable, so the plot's title carries the flag, as every plot on the page does."""
    inputs = {**p01.CHUNK_CALCULATOR.defaults(), "model": "llama-3-70b"}
    result = p01.a.chunked_prefill(**inputs)
    assert result["fits"] is False
    assert "do not fit in memory" in p01.long_prompt_plot(inputs=inputs, result=result).title
    default = p01.CHUNK_CALCULATOR.defaults()
    assert "do not fit" not in p01.long_prompt_plot(
        inputs=default, result=p01.a.chunked_prefill(**default)).title


def test_a_model_that_does_not_fit_one_gpu_is_not_given_a_floor(client) -> None:
    """Mixtral 8x7B in BF16 needs 97 GB with its KV and reserve against the H100's 77 GB
    usable; Llama 3 70B's 141 GB of weights fit no batch. Split over several GPUs each reads
    only its share of the weights, so the one-GPU times are not a floor for what would really
    run, and neither the prose nor the plots call them one."""
    worked = text_of(section_html(problem_html(page_get(
        client, "?p1-scale-model=mixtral-8x7b"), 1), 1, "worked"))
    assert "do not fit in one NVIDIA H100 SXM" in worked
    assert "not a floor for the real deployment" in worked
    assert "read them as a floor" not in worked
    users = text_of(section_html(problem_html(page_get(
        client, "?p1-users-model=llama-3-70b"), 1), 1, "worked"))
    assert "no batch fits at all" in users and "only floors" not in users
    for calculator, plot in ((p01.CALCULATOR, p01.request_for_scale_plot),
                             (p01.CHUNK_CALCULATOR, p01.long_prompt_plot)):
        inputs = {**calculator.defaults(), "model": "llama-3-70b"}
        result = calculator.compute(**inputs)
        assert result["fits"] is False
        title = plot(inputs=inputs, result=result).title
        assert "fit" in title and "floor" not in title, title


def test_the_help_texts_sources_are_in_the_page_sources(client) -> None:
    """The MFU and bandwidth helps on this page's calculators quote FlashAttention-2's 50–73%
    and Databricks' 50% MBU example; both are in the page's Sources list."""
    from problems.forms import BANDWIDTH_HELP, MFU_HELP

    page = page_get(client)
    assert "FlashAttention-2 reports" in page and "Databricks" in page
    urls = [url for _, url in p01.SOURCES]
    assert "FlashAttention-2" in MFU_HELP and "https://arxiv.org/abs/2307.08691" in urls
    assert "Databricks" in BANDWIDTH_HELP and (
        "https://www.databricks.com/blog/llm-inference-performance-engineering-best-practices"
        in urls)
    assert 'href="https://arxiv.org/abs/2307.08691"' in page


def test_a_crossover_past_the_context_window_is_not_quoted_as_a_prompt_length(client) -> None:
    """At 1% of the H100's bandwidth, reading Llama 3 8B's 15 GB of weights takes 448 ms, and
    compute at the full 989.5 TFLOP/s overtakes it only near 26,431 tokens: past the 8,192-token
    window, so no prompt makes this prefill compute-bound and the prose says so."""
    problem = problem_html(page_get(client, "?p1-scale-bandwidth_efficiency=0.01"
                                            "&p1-scale-mfu=1"), 1)
    worked = text_of(section_html(problem, 1, "worked"))
    followups = text_of(section_html(problem, 1, "followups"))
    assert "No prompt within the window would make it compute-bound" in worked
    assert "From about 26,431" not in worked and "26,431 tokens at the" not in followups
    assert "past Llama 3 8B's 8,192-token context window" in worked  # the working's step


def test_the_fit_check_in_the_prose_states_its_reserve(client) -> None:
    """Weights 16.06 GB + KV 1,299 × 131,072 B (0.17 GB) + the 3.3 GB reserve = 19.5 GB, against
    81,559 MiB × 0.9 = 77 GB usable: the prose names all three parts, the reserve by size."""
    worked = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    assert "a runtime reserve of 3.3 GB for activations and buffers the request needs 20 GB" in (
        " ".join(worked.split()))
    changed = text_of(section_html(problem_html(page_get(
        client, "?p1-scale-reserve_gb=10"), 1), 1, "worked"))
    assert "a runtime reserve of 10 GB" in " ".join(changed.split())


def test_chunks_with_no_streams_are_of_up_to_the_budget(client) -> None:
    """8,000 tokens in a 2,048-token budget: ⌈8,000 ÷ 2,048⌉ = 4 chunks, three of 2,048 and a
    last of 1,856, so the prose says "of up to", not four of 2,048."""
    worked = " ".join(text_of(section_html(problem_html(page_get(
        client, "?p1-chunk-decode_batch=0"), 1), 1, "worked")).split())
    assert "split into 4 chunks of up to 2,048 tokens" in worked


def test_long_answer_hint_does_not_quote_zero_percent_decode_for_one_token(client) -> None:
    """With a one-token answer there is no decode step; the hint used to say "decode is 0% of
    the request" right after "almost all of it in the decode loop"."""
    one = text_of(section_html(problem_html(
        page_get(client, "?p1-scale-output_tokens=1"), 1), 1, "followups"))
    assert "decode is 0%" not in one
    assert "asks for a single token, so it has no decode step" in one
    default = text_of(section_html(problem_html(page_get(client), 1), 1, "followups"))
    assert "an answer of 300 tokens, decode is 98% of the request" in default


def test_a_batch_of_one_is_not_compared_with_itself(client) -> None:
    """With the users calculator at one sequence the prose read "Give each of 1 sequences",
    "1 times as long" and "Throughput still wins: at most 190 ... against 190"."""
    query = "?p1-users-batch=1"
    worked = text_of(section_html(problem_html(page_get(client, query), 1), 1, "worked"))
    assert "1 times" not in worked and "each of 1 sequences" not in worked
    assert "a batch of one shows nothing of it" in worked
    default = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    assert "Give each of 100 sequences" in default


def test_an_even_context_past_the_window_is_called_unreachable(client) -> None:
    """Mixtral 8x7B, two sequences on an H200: the KV reads would match the weights only at
    about 161,778 tokens each, five times Mixtral's 32,768-token window."""
    query = "?p1-users-model=mixtral-8x7b&p1-users-gpu=h200&p1-users-batch=2"
    worked = text_of(section_html(problem_html(page_get(client, query), 1), 1, "worked"))
    assert "past the model's 32,768-token window, so in practice never" in worked
    default = text_of(section_html(problem_html(page_get(client), 1), 1, "worked"))
    assert "at about 1,145 tokens each)." in default
