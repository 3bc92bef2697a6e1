"""Problem 14 on page 07, through Django's test client: every section written, the figures
equal to the JSON API's, inputs that move them, hints hidden, an accessible SVG, the
utilization demo embedded."""

from pathlib import Path

import pytest

from problems.arithmetic.units import percent_format, seconds_format
from problems.content import p14
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

TEMPLATE = Path(p14.__file__).with_suffix(".html")


def test_all_nine_sections_are_written(client) -> None:
    sections_written(client, 14)


def test_the_worked_answer_equals_the_api(client) -> None:
    """Batch 1 and 64 with 3 ms of host time not overlapped: 60.1% and 70% utilisation, MFU
    0.347% and 14.4% while busy, 10.5 ms of host time for 30% at batch 1."""
    worked = section_text(client, 14, "worked")
    r = api_get(client, "gpu-utilization", model="llama-3-8b", gpu="h100-sxm")
    small, large = r["small"], r["large"]
    assert (f"nvidia-smi now reads {percent_format(small['utilization'])} and "
            f"{percent_format(large['utilization'])}") in worked
    assert (f"MFU is {percent_format(small['mfu_busy'])} at batch 1 and "
            f"{percent_format(large['mfu_busy'])} at batch 64") in worked
    assert seconds_format(small["host_for_target_seconds"]) in worked
    assert ("60.1%", "70%", "0.347%", "14.4%", "10.5 ms") == (
        percent_format(small["utilization"]), percent_format(large["utilization"]),
        percent_format(small["mfu_busy"]), percent_format(large["mfu_busy"]),
        seconds_format(small["host_for_target_seconds"]))


def test_overlapping_the_host_changes_the_words_and_the_figures(client) -> None:
    query = calculator_query(p14.CALCULATOR, p14.PREFIX, overlap="on", host_ms=10)
    worked = section_text(client, 14, "worked", query)
    r = api_get(client, "gpu-utilization", model="llama-3-8b", gpu="h100-sxm", overlap="on",
                host_ms=10)
    assert "Overlapped, a step takes the longer of the two" in worked
    assert f"nvidia-smi now reads {percent_format(r['small']['utilization'])}" in worked


def test_hints_svg_mistakes_and_no_typed_figures(client) -> None:
    hints_hidden(client, 14)
    svg_accessible(client, 14)
    source = TEMPLATE.read_text()
    mistakes_at_least_four(source)
    assert typed_figures(source) == []


def test_the_utilization_demo_is_embedded(client) -> None:
    demo = section_html(problem_html(page_get(client), 14), 14, "demo")
    assert 'data-demo="utilization"' in demo and 'name="lean_host"' in demo


def test_sources_are_titled_links() -> None:
    assert len(p14.SOURCES) >= 8
    for title, url in p14.SOURCES:
        assert title and url.startswith("https://")


def test_the_spinning_collective_names_its_source(client) -> None:
    """A collective waiting for a slower peer reads as busy: NVML counts time a kernel ran, and
    NCCL's collectives are kernels that wait on the GPU; both named in the Sources."""
    concepts = section_text(client, 14, "concepts")
    assert "spins while it waits for a slower peer counts as busy" in concepts
    urls = [url for _, url in p14.SOURCES]
    assert "https://github.com/NVIDIA/nccl/issues/146" in urls
    assert "https://docs.nvidia.com/deploy/nvml-api/structnvmlUtilization__t.html" in urls


def test_the_demo_says_how_each_host_grows_with_the_batch(client) -> None:
    """The usual host's per-sequence work (top-p, a seeded draw over the vocabulary, text; see
    tests/engine/test_profiling.py) grows about as fast as the batch, not more slowly; only the
    lean host's grows more slowly."""
    demo = section_text(client, 14, "demo")
    assert "so host time grows about as fast as the batch" in demo
    assert "so its host time grows with the batch, more slowly than the batch itself" not in demo


def test_the_model_answer_counts_the_kv_cache_in_the_batch_one_step(client) -> None:
    """At batch 1 the step's floor reads the weights and the sequence's KV cache; at 100,000
    tokens of Llama 3.1 8B's context that cache (13.1 GB) rivals the weights, so the answer must
    not call the step pure weight reading."""
    query = calculator_query(p14.CALCULATOR, p14.PREFIX, model="llama-3.1-8b",
                             context_tokens=100_000)
    answer = section_text(client, 14, "answer", query)
    r = api_get(client, "gpu-utilization", model="llama-3.1-8b", gpu="h100-sxm",
                context_tokens=100_000)
    assert f"a decode step is {seconds_format(r['small']['gpu_seconds'])} of reading" in answer
    assert "pure weight reading" not in answer


def test_a_second_batch_no_larger_than_the_first_is_not_said_to_raise_mfu(client) -> None:
    """The two batches are the learner's: when the second is not larger, the answer must not
    say MFU "rises" to it, nor the worked answer call it "the bigger batch"."""
    for small, large in ((64, 1), (8, 8)):
        query = calculator_query(p14.CALCULATOR, p14.PREFIX, batch_small=small,
                                 batch_large=large)
        answer = section_text(client, 14, "answer", query)
        worked = section_text(client, 14, "worked", query)
        assert "MFU rises" not in answer
        assert "What the bigger batch buys" not in worked
    default = section_text(client, 14, "answer")
    assert "At batch 64, MFU rises to" in default
    assert "What the bigger batch buys" in section_text(client, 14, "worked")


def test_the_fit_step_counts_one_sequence_in_the_singular(client) -> None:
    r = api_get(client, "gpu-utilization", model="llama-3-8b", gpu="h100-sxm")
    fit = next(s for s in r["steps"] if s["label"].startswith("Fits one") and "batch 1:" in
               s["label"])
    assert "1 sequences" not in fit["expression"] and "1 sequence's KV" in fit["expression"]


def test_no_host_time_is_not_said_to_lower_mfu(client) -> None:
    """With no host time (or host work overlapped and shorter than the GPU's), the wall time is
    the GPU time: MFU over wall time does not fall."""
    for changes in ({"host_ms": 0}, {"overlap": "on"}):
        query = calculator_query(p14.CALCULATOR, p14.PREFIX, **changes)
        worked = section_text(client, 14, "worked", query)
        assert "MFU over wall time falls" not in worked
        assert "MFU over wall time comes to" in worked
    assert "MFU over wall time falls to" in section_text(client, 14, "worked")


def test_a_full_reading_to_explain_asks_for_no_host_time(client) -> None:
    """At a target of 100% the host time that explains it is zero: the step that compares it
    with an engine's host time ("if it is far less...") is left out."""
    query = calculator_query(p14.CALCULATOR, p14.PREFIX, target_utilization=1.0)
    worked = section_text(client, 14, "worked", query)
    assert "would take." not in worked and "If it is far less" not in worked
    assert "What 30% would take." in section_text(client, 14, "worked")


def test_a_first_batch_past_the_ridge_is_not_called_weight_reading(client) -> None:
    """At a first batch of 512 the H100's weight matmuls are compute-bound (the ridge is 295
    FLOP/B in BF16): the answer gives the step's bound instead of calling it reading, and does
    not call that step memory-bound."""
    query = calculator_query(p14.CALCULATOR, p14.PREFIX, batch_small=512, batch_large=512)
    answer = section_text(client, 14, "answer", query)
    r = api_get(client, "gpu-utilization", model="llama-3-8b", gpu="h100-sxm", batch_small=512,
                batch_large=512)
    assert r["small"]["bound"] != "memory"
    assert f"a decode step takes {seconds_format(r['small']['gpu_seconds'])} " \
           f"({r['small']['bound']}-bound)" in answer
    assert "of reading the weights" not in answer and "That is normal" not in answer
    assert "That is normal: decode is memory-bound" in section_text(client, 14, "answer")


def test_host_time_that_grows_with_the_batch_is_shown(client) -> None:
    """Review P0607-16: the worked answer held host time at 3 ms at batch 1 and 64. At an
    illustrative 50 µs a sequence, batch 64's host is 3 + 64 × 0.05 = 6.2 ms; its GPU floor is
    6.98 ms (problem 13's), so nvidia-smi reads 6.98 ÷ (6.98 + 6.2) = 53% instead of 6.98 ÷ 9.98
    = 70%, and batch 1 (host 3.05 ms) gains less from the batch. A learner's own per-sequence
    cost replaces the example."""
    worked = section_text(client, 14, "worked")
    assert "batch 64's host time is 6.2 ms, not 3 ms: nvidia-smi reads 53% instead of 70%" \
        in worked
    concepts = section_text(client, 14, "concepts")
    assert "which barely depends on the batch" not in concepts
    assert "part grows with the running batch" in concepts
    given = section_text(client, 14, "worked", "?p14-util-host_per_sequence_us=50")
    assert "You set 50 µs of host work per sequence" in given
    assert "would read 70% (not 53%)" in given


def test_pipeline_bubbles_are_a_cause_of_low_utilisation(client) -> None:
    """Review P0607-17: 4 stages, one batch in flight: (4 − 1) ÷ (1 + 4 − 1) = 75% idle, 25%
    busy; 4 micro-batches through 4 stages: 3 ÷ 7 = 42.9% idle while filling and draining."""
    concepts = section_text(client, 14, "concepts")
    assert "idle 75% of the time" in concepts and "busy 25%" in concepts
    assert "still idles 42.9%" in concepts
