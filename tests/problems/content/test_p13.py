"""Problem 13 on page 07, through Django's test client: every section written, the worked
answer's figures equal to the JSON API's, inputs that move them, bad input named beside its
field, hints hidden, an accessible SVG, the profile demo embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_short, percent_format, seconds_format
from problems.content import p13
from tests.problems.content.helpers import problem_html, section_html, typed_figures
from tests.problems.content.page07 import (
    api_get,
    calculator_query,
    hints_hidden,
    mistakes_at_least_four,
    page_get,
    section_text,
    sections_written,
    svg_accessible,
)

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p13.__file__).with_suffix(".html")


def test_all_nine_sections_are_written(client) -> None:
    sections_written(client, 13)


def test_the_worked_answer_equals_the_api(client) -> None:
    """Llama 3 8B, H100, BF16, 64 × 1,000 tokens: 23.4 GB read, a 6.98 ms floor, MLP 48.2%,
    KV 35.9% (test_utilization.py works it by hand)."""
    worked = section_text(client, 13, "worked")
    r = api_get(client, "decode-step-breakdown", model="llama-3-8b", gpu="h100-sxm")
    assert f"{seconds_format(r['step_seconds'])} for {bytes_short(r['step_bytes'])} read" in worked
    assert f"MLP {percent_format(r['mlp_share'])}" in worked
    assert f"KV-cache attention {percent_format(r['kv_share'])}" in worked
    assert f"{bytes_short(r['mlp_bytes'])} per step" in worked
    assert "about 323" in worked and "6.98 ms" in worked and "23.4 GB" in worked
    assert "every time below is a floor" in worked


def test_changing_inputs_changes_the_figures(client) -> None:
    query = calculator_query(p13.CALCULATOR, p13.PREFIX, batch=256, context_tokens=4000,
                             bandwidth_efficiency=0.5)
    worked = section_text(client, 13, "worked", query)
    r = api_get(client, "decode-step-breakdown", model="llama-3-8b", gpu="h100-sxm", batch=256,
                context_tokens=4000, bandwidth_efficiency=0.5)
    assert f"{seconds_format(r['step_seconds'])} for {bytes_short(r['step_bytes'])}" in worked
    assert "256 sequences in the step and 4,000 tokens" in worked
    assert "every time below is a floor" not in worked
    assert "do not fit" in worked  # 256 × 4,000 × 131,072 B = 134 GB of KV on one H100


def test_a_context_past_the_window_is_an_error_beside_its_field(client) -> None:
    content = page_get(client, calculator_query(p13.CALCULATOR, p13.PREFIX,
                                                context_tokens=9000))
    error = re.search(r'id="id_p13-breakdown-context_tokens_error"[^>]*>(.*?)<', content, re.S)
    assert error and "context window" in error.group(1)
    # The prose keeps its defaults.
    assert "64 sequences in the step" in section_text(
        client, 13, "worked", calculator_query(p13.CALCULATOR, p13.PREFIX, context_tokens=9000))


def test_hints_svg_mistakes_and_no_typed_figures(client) -> None:
    hints_hidden(client, 13)
    svg_accessible(client, 13)
    source = TEMPLATE.read_text()
    mistakes_at_least_four(source)
    assert typed_figures(source) == []


def test_the_profile_demo_is_embedded(client) -> None:
    demo = section_html(problem_html(page_get(client), 13), 13, "demo")
    assert 'data-demo="profile"' in demo and 'name="profile_steps"' in demo
    assert "js/demos/profile.js" in demo


def test_sources_are_titled_links() -> None:
    assert len(p13.SOURCES) >= 8
    for title, url in p13.SOURCES:
        assert title and url.startswith("https://")


def test_one_sequence_and_one_token_read_in_the_singular(client) -> None:
    """At batch 1 and a context of 1 token the worked answer and the model answer say "1
    sequence", "1 token", "1 row", never "1 sequences" or "1 tokens"."""
    query = calculator_query(p13.CALCULATOR, p13.PREFIX, batch=1, context_tokens=1)
    worked = section_text(client, 13, "worked", query)
    answer = section_text(client, 13, "answer", query)
    assert "with 1 sequence in the step and 1 token of context each" in worked
    assert "a gather of 1 row," in worked
    assert "1 sequence × 1 token × " in worked
    assert "at batch 1 and 1 token of context" in answer
    for text in (worked, answer):
        assert not re.search(r"\b1 (sequences|tokens|rows)\b", text)
    # Plurals stay plural at the defaults.
    assert "with 64 sequences in the step and 1,000 tokens of context each" in section_text(
        client, 13, "worked")


def test_a_weight_only_format_names_the_rate_it_runs_at(client) -> None:
    """INT4 weights on an L4 are multiplied in BF16: the page names the BF16 peak as what
    they run at, never an INT4 peak."""
    query = calculator_query(p13.CALCULATOR, p13.PREFIX, model="llama-3-8b", gpu="l4",
                             dtype="int4")
    worked = section_text(client, 13, "worked", query)
    assert "dense peak for INT4" not in worked
    assert "dense BF16 peak: INT4 (group 128) weights are dequantized and multiplied in BF16" \
        in worked


def test_the_kv_reads_are_placed_against_the_ridge_as_computed(client) -> None:
    """In FP32 an A100's ridge (CUDA cores) is about 9.6 FLOP/B, under the 16 FLOP per KV byte
    of Llama 3.1 405B (16 query heads per KV head): there the KV group is compute-bound, and
    the page must not put it "far under the ridge point"."""
    query = calculator_query(p13.CALCULATOR, p13.PREFIX, model="llama-3.1-405b",
                             gpu="a100-80gb-sxm", dtype="fp32")
    worked = section_text(client, 13, "worked", query)
    assert "compute-bound. That is 16 FLOP per byte against a ridge of 9.56 FLOP/B" in worked
    assert "so it sits above the ridge" in worked
    assert "under the ridge point" not in worked
    assert "while the KV group does not" not in worked
    default = section_text(client, 13, "worked")
    assert "That is 4 FLOP per byte against a ridge of 295 FLOP/B" in default
    assert "so it sits under the ridge" in default
    assert "the KV group never turns" in default


def test_mla_attention_reads_as_compute_bound_in_the_absorbed_form(client) -> None:
    """Review P0607-13's input: DeepSeek-V3, H100, FP8 weights and KV. The page printed "671 µs,
    memory-bound ... 142 FLOP per byte, under the ridge point"; absorbed, it is 483.5 FLOP per
    byte against BF16's 295 and 1.1 ms (test_utilization.py works it by hand)."""
    query = calculator_query(p13.CALCULATOR, p13.PREFIX, model="deepseek-v3", gpu="h100-sxm",
                             dtype="fp8", kv_dtype="fp8")
    worked = section_text(client, 13, "worked", query)
    assert "1.1 ms, compute-bound. That is 484 FLOP per byte against a ridge of 295 FLOP/B" \
        in worked
    assert "above the ridge" in worked and "absorbed form" in worked
    assert "142 FLOP" not in worked and "671 µs, memory-bound" not in worked
