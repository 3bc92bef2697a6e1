"""Problem 2 on page 01, through Django's test client: every section written, the streaming
figures equal to the arithmetic and the JSON API's for the same inputs, inputs that change
them, hints hidden, a titled SVG."""

import json
import re
from pathlib import Path

import pytest

from problems.arithmetic.catalog import model_get
from problems.arithmetic.streaming import abandoned_request, chat_served_name, stream_cost
from problems.arithmetic.units import seconds_format
from problems.content import p02
from problems.registry import SECTIONS
from tests.problems.content.helpers import (
    problem_html,
    section_html,
    text_of,
    typed_figures,
)

pytestmark = pytest.mark.django_db

PAGE = "/pages/01/"
TEMPLATE = Path(p02.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def api_get(client, path: str, **params) -> dict:
    response = client.get(f"/api/calc/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def stream_query(**changes: object) -> str:
    """A whole p2-stream query: the calculator's defaults with `changes` on top."""
    fields = {**p02.CALCULATOR.form_class().defaults(), **changes}
    fields = {name: "" if value is None else value for name, value in fields.items()}
    return "?" + "&".join(f"p2-stream-{name}={value}" for name, value in fields.items())


def worked_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 2), 2, "worked"))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 2)
    for slug, heading in SECTIONS:
        section = section_html(problem, 2, slug)
        assert heading in section
        assert "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_figures_equal_the_api_and_the_arithmetic(client) -> None:
    worked = worked_text(client)
    pre = api_get(client, "prefill", model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000,
                  dtype="bf16", mfu=0.5)
    dec = api_get(client, "decode", model="llama-3-8b", gpu="h100-sxm", batch=32,
                  context_tokens=1000, output_tokens=1, dtype="bf16")
    ttft, tpot = pre["seconds"], dec["step_seconds"]
    cost = stream_cost(output_tokens=1000, ttft_seconds=ttft, tpot_seconds=tpot,
                       prompt_tokens=1000, chars_per_token=4.0, tokens_per_event=1,
                       model_name=chat_served_name(model_get("llama-3-8b")))
    held = abandoned_request(model="llama-3-8b", prompt_tokens=1000, output_tokens=1000,
                             cut_after_tokens=100, step_seconds=tpot, block_size=16)
    assert f"about {seconds_format(ttft)} to the first token" in worked
    assert f"{seconds_format(tpot)} per token" in worked
    assert f"is {cost['bytes_per_event']:,} B when it carries 4 characters" in worked
    assert f"appears after {seconds_format(cost['first_text_seconds'])}" in worked
    assert f"nothing for {seconds_format(cost['full_answer_seconds'])}" in worked
    assert f"holds {held['blocks_at_cut']:,} blocks of 16 tokens" in worked
    assert f"grow to {held['blocks_at_end']:,}" in worked
    assert f"over {seconds_format(held['held_seconds_without_cancel'])}" in worked
    # The arithmetic by hand: ⌈(1,000 + 100) ÷ 16⌉ and ⌈(1,000 + 1,000) ÷ 16⌉ blocks.
    assert (held["blocks_at_cut"], held["blocks_at_end"]) == (69, 125)


def test_the_sample_event_on_the_page_is_valid_sse(client) -> None:
    concepts = section_html(problem_html(page_get(client), 2), 2, "concepts")
    sample = re.search(r'<pre class="sse-sample"><code>(.*?)</code></pre>', concepts, re.S)
    text = sample.group(1).replace("&quot;", '"')
    events = [e for e in text.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    first = json.loads(events[0].removeprefix("data: "))
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["content"] == "Hello"


def test_a_stream_interval_never_delays_the_first_text(client) -> None:
    """With 8 tokens per event the first token still leaves at TTFT: the first text appears at
    the same time as with 1 token per event."""
    one = worked_text(client, stream_query(tokens_per_event=1))
    eight = worked_text(client, stream_query(tokens_per_event=8))
    first = re.search(r"appears after ([\d.,]+ \w+)", one).group(1)
    assert f"appears after {first}" in eight


def test_the_new_staff_points_are_on_the_page(client) -> None:
    problem = text_of(problem_html(page_get(client), 2))
    for point in ("in-band", "obfuscation", "six connections", "Drain", "send_timeout",
                  "uvicorn has no timeout", "reasoning", "Little's law",
                  "do not: vLLM and SGLang write nothing"):
        assert point in problem, point


def test_waste_is_a_rate_equal_to_the_api(client) -> None:
    """10 requests/s × 10% abandoned × 900 tokens left = 900 tokens/s for nobody."""
    body = api_get(client, "streaming")
    assert body["wasted_tokens_per_second"] == pytest.approx(900)
    assert "900 tokens a second decoded for nobody" in worked_text(client)


def test_changing_inputs_changes_the_figures(client) -> None:
    worked = worked_text(client, stream_query(cut_after_tokens=500, tokens_per_event=4))
    assert "holds 94 blocks of 16 tokens" in worked  # ⌈1,500 ÷ 16⌉
    four = stream_cost(output_tokens=1000, ttft_seconds=0.03, tpot_seconds=0.006,
                       tokens_per_event=4, model_name=chat_served_name(model_get("llama-3-8b")))
    assert f"is {four['bytes_per_event']:,} B when it carries 16 characters" in worked
    assert "holds 69 blocks" not in worked


def test_a_cut_after_max_tokens_is_a_field_error_beside_that_field(client) -> None:
    content = page_get(client, stream_query(cut_after_tokens=2000, output_tokens=1000))
    worked = section_html(problem_html(content, 2), 2, "worked")
    error = re.search(r'id="id_p2-stream-cut_after_tokens_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "fewer than output_tokens" in error.group(1)
    # The prose keeps the defaults meanwhile.
    assert "holds 69 blocks" in text_of(worked)


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 2), 2, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 3
    assert len(hints) == len(questions)


def test_the_cut_stream_diagram_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 2), 2, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]*free pool[^<]*</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)


def test_the_live_demo_is_embedded(client) -> None:
    demo = section_html(problem_html(page_get(client), 2), 2, "demo")
    assert 'data-demo="streaming"' in demo


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p02.SOURCES) >= 5
    for title, url in p02.SOURCES:
        assert title and url.startswith("https://")


def test_hidden_reasoning_moves_the_first_visible_text_in_the_prose(client) -> None:
    """400 reasoning tokens at 5.73 ms per step after a 28.7 ms prefill: the first visible text
    at 28.7 ms + 400 × 5.73 ms = 2.32 s. The sentence was never shown before (it read a value
    the result does not have)."""
    worked = text_of(section_html(problem_html(
        client.get(PAGE + "?p2-stream-reasoning_tokens=400").content.decode(), 2), 2, "worked"))
    assert "with 400 tokens of reasoning first, the first visible text waits until 2.32 s" \
        in worked


def test_a_one_token_answer_is_not_called_alarming_and_owes_no_decode_step(client) -> None:
    """max_tokens 1: the 261-byte opening role event, one 246-byte event and [DONE] (521 B)
    are 1.6× the 328-byte plain body, 193 B more: not a ratio to call alarming, and not smaller
    either (vLLM opens every stream with a role chunk). A client gone before that token leaves
    it to the prefill."""
    worked = text_of(section_html(problem_html(client.get(
        PAGE + "?p2-stream-output_tokens=1&p2-stream-cut_after_tokens=0").content.decode(), 2),
        2, "worked"))
    assert "1.6×" in worked and "sounds alarming" not in worked
    assert "differ by only 193 B" in worked
    assert "smaller streamed" not in worked
    assert "the prefill under way still yields its one token for nobody" in worked
    assert "no decode step is left to waste" in worked


def test_the_keylogging_attack_is_quoted_by_its_published_figures(client) -> None:
    concepts = text_of(section_html(problem_html(client.get(PAGE).content.decode(), 2), 2,
                                    "concepts"))
    assert "reconstructed about 29% of an assistant's responses" in concepts
    assert "word for word" not in concepts


def test_the_streaming_plot_flags_a_batch_that_does_not_fit_without_calling_it_a_floor() -> None:
    """Llama 3 70B in BF16: 141 GB of weights exceed one H100's 77 GB usable, so the plot says
    it does not fit; split over GPUs the steps would be shorter, so the times are no floor."""
    from problems.content import p02

    inputs = {**p02.CALCULATOR.defaults(), "model": "llama-3-70b", "gpu": "h100-sxm"}
    result = p02.CALCULATOR.compute(**inputs)
    assert result["fits"] is False
    title = p02.streaming_cost_plot(inputs=inputs, result=result).title
    assert "does not fit in memory" in title and "floor" not in title


def test_the_warning_for_a_batch_that_does_not_fit_gives_no_floor(client) -> None:
    """4,000 sequences of Llama 3 8B at 2,000 tokens need far more than the H100's 77 GB: the
    engine would run fewer per step (shorter steps) or split the model, so the one-GPU times
    bound nothing and the warning does not call them a floor."""
    problem = problem_html(client.get(PAGE + "?p2-stream-batch=4000").content.decode(), 2)
    worked = " ".join(text_of(section_html(problem, 2, "worked")).split())
    assert "The times are as if they fitted, not a floor" in worked
    assert "read the times as a floor" not in worked


def test_waste_beyond_one_gpu_is_not_called_a_share_of_it(client) -> None:
    """At 50% abandoned after 500 of 1,000 tokens on Llama 3 70B (H200, FP8), 2,500 tokens/s go
    to nobody against the GPU's 1,895: the page said "132% of what this GPU's step produces" as
    if it were a part of it. Now the waste is a share of the decode seats the traffic needs (by
    Little's law, never over 100%), and the GPUs those seats fill at this batch are counted."""
    over = worked_text(client, stream_query(model="llama-3-70b", gpu="h200", dtype="fp8",
                                            cut_after_tokens=500, abandon_rate=0.5))
    assert "of what this GPU's step produces" not in over
    assert "of the decode seats it needs, which at a batch of 32 sequences fill" in over
    default = worked_text(client)
    assert "8.96% of the decode seats it needs" in default


def test_an_event_never_holds_more_tokens_than_the_answer_has(client) -> None:
    """A stream interval of 5,000 on a two-token answer: the page sized its one later event at
    20,000 characters (20,242 B) and the stream at 706 B/s, for an answer of 8 characters; one
    token, 4 characters, makes the 246 B event of the sample above."""
    worked = worked_text(client, stream_query(output_tokens=2, cut_after_tokens=1,
                                              tokens_per_event=5000))
    assert "20,242 B" not in worked and "20242 B" not in worked
    assert "An event like the one above is 246 B when it carries 4 characters" in worked


def sample_model(client, query: str = "") -> tuple[str, str]:
    """The sample event's `model` field and the concepts' text around it."""
    concepts = section_html(problem_html(page_get(client, query), 2), 2, "concepts")
    sample = re.search(r'<pre class="sse-sample"><code>(.*?)</code></pre>', concepts, re.S)
    first = sample.group(1).replace("&quot;", '"').split("\n\n")[0]
    return json.loads(first.removeprefix("data: "))["model"], text_of(concepts)


def test_the_sample_event_names_the_model_the_page_works(client) -> None:
    """The sample names the picked model as a chat server started on its checkpoint does
    (vLLM's --served-model-name defaults to --model), and for the course's demo model the name
    this course's own /v1 answers with (settings.ENGINE_MODEL's directory). Review: a chat
    stream is served from the chat-tuned repository, not the base one the catalog reads its
    config.json from (vLLM issue #5924: meta-llama/Meta-Llama-3-8B has no chat template), so
    Llama 3 8B's event names meta-llama/Meta-Llama-3-8B-Instruct again, 246 B; DeepSeek-V3's
    repository is its chat model, "deepseek-ai/DeepSeek-V3" (23 characters to 35), 234 B."""
    from course.openai_api import model_id

    name, concepts = sample_model(client)
    assert name == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert ("here meta-llama/Meta-Llama-3-8B-Instruct for Llama 3 8B, the name vLLM answers with "
            "when started on that chat-tuned repository") in concepts
    assert "not the base repository the architecture is read from, meta-llama/Meta-Llama-3-8B" in (
        concepts)
    assert "An event like the one above is 246 B" in worked_text(client)
    qwen = stream_query(model="qwen2.5-72b")
    assert sample_model(client, qwen)[0] == "Qwen/Qwen2.5-72B-Instruct"
    query = stream_query(model="deepseek-v3")
    name, concepts = sample_model(client, query)
    assert name == "deepseek-ai/DeepSeek-V3" and "chat-tuned" not in concepts
    assert "An event like the one above is 234 B" in worked_text(client, query)
    demo = stream_query(model="course-lm", prompt_tokens=100, output_tokens=200)
    name, concepts = sample_model(client, demo)
    assert name == model_id() == "course-lm"
    assert "the name this course's own /v1 answers with" in concepts
    assert any("served-model-name" in title for title, _ in p02.SOURCES)
    assert any("issues/5924" in url for _, url in p02.SOURCES)
