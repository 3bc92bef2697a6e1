"""Problem 4 on page 02, through Django's test client: every section written, the figures equal
to the JSON API's, an edited workload that changes them, a refused workload beside its field, no
typed figures, the live demo embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import count_format, number_format, rate_format
from problems.content import p04
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/02/"
TEMPLATE = Path(p04.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 4), 4, slug))


def api(client, **params) -> dict:
    response = client.get("/api/calc/paging", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 4)
    for slug, heading in SECTIONS:
        section = section_html(problem, 4, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_worked_figures_equal_the_api(client) -> None:
    worked = section_text(client, "worked")
    body = api(client)
    for p in body["policies"]:
        assert count_format(p["batch"], "sequence") in worked
        assert rate_format(p["tokens_per_second"], "tokens/s") in worked
    assert f"{number_format(body['paged_over_max'])}×" in worked
    # The paper's figures, quoted from the catalog.
    assert "20.4%" in section_text(client, "concepts") and "96.3%" in section_text(
        client, "concepts")


def test_an_edited_workload_changes_the_working(client) -> None:
    mix = "100:100:50"
    worked = section_text(client, "worked", f"?p04-paging-mix={mix}")
    body = api(client, mix=mix)
    assert "100 prompt tokens, 50 output tokens" in worked
    assert f"{number_format(body['paged_over_max'])}×" in worked


def test_a_refused_workload_shows_beside_its_field(client) -> None:
    content = page_get(client, "?p04-paging-mix=banana")
    worked = section_html(problem_html(content, 4), 4, "worked")
    error = re.search(r'id="id_p04-paging-mix_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "share:prompt:output" in error.group(1)
    response = client.get("/api/calc/paging", {"mix": "banana"})
    assert response.status_code in (400, 422) and "mix" in response.content.decode()


def test_hints_are_hidden_and_the_demo_is_embedded(client) -> None:
    problem = problem_html(page_get(client), 4)
    assert section_html(problem, 4, "followups").count("<details>") >= 4
    assert section_html(problem, 4, "mistakes").count("<li>") >= 4
    assert 'id="demo-paged-blocks"' in section_html(problem, 4, "demo")


def test_no_figure_is_typed_into_the_template() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p04.SOURCES) >= 5
    for title, url in p04.SOURCES:
        assert title and url.startswith("https://")


def test_the_papers_sharing_savings_name_their_trace(client) -> None:
    """The vLLM paper's 6.1-9.8% (parallel sampling) and 37.6-55.2% (beam search) are the Alpaca
    trace's; ShareGPT's longer prompts saved 16.2-30.5% and 44.3-66.3% (§6.3)."""
    text = section_text(client, "concepts")
    for figure in ("6.1%", "9.8%", "37.6%", "55.2%", "16.2%", "30.5%", "44.3%", "66.3%"):
        assert figure in text, figure
    assert "Alpaca" in text and "ShareGPT" in text


def test_short_chats_cap_the_batch_and_say_why_throughput_stops(client) -> None:
    """The strict review's M4, at 100% of requests 200 + 100 tokens on Llama 3 8B and an H100.
    By hand: 250 tokens in use, 258 held with blocks of 16 (33.8 MB); (0.9 × CUDA's 79.22 GiB −
    16.06 GB − 3.3 GB) = 57.2 GB ÷ 33.8 MB = ⌊1,691.3⌋ = 1,691 sequences, but vLLM runs at
    most 1,024 on an H100 (max_num_seqs). At 1,024 the step's
    FLOPs (1,024 × about 2 × 8 B params) take 15.7 ms at the peak, longer than its reads: the
    step is compute-bound, so throughput rises 6.17×, not the 19.3× of the batch, and not
    because of cache reads."""
    from problems.arithmetic.paging import paging, vllm_max_num_seqs

    assert vllm_max_num_seqs("h100-sxm") == 1_024 and vllm_max_num_seqs("l4") == 256
    assert vllm_max_num_seqs("a100-80gb-sxm") == 256
    r = paging(mix="100:200:100")
    paged = next(p for p in r["policies"] if p["id"] == "paged-16")
    assert paged["fits_batch"] == 1_691 and paged["batch"] == 1_024 and paged["capped"]
    assert paged["bound"] == "compute"
    worked = section_text(client, "worked", "?p04-paging-mix=100:200:100")
    assert "the memory would hold 1,691 sequences, but the scheduler runs at most 1,024" in worked
    assert "the step is compute-bound" in worked
    assert "bring their cache reads with them" not in worked.split("Throughput.")[1][:600]
    # At the defaults the batch is under the cap and memory-bound: the cache-reads reason stays.
    default = section_text(client, "worked")
    assert "scheduler runs at most" not in default and "bring their cache reads" in default
    # A lower MFU moves the compute floor: at 0.5 the step at 1,024 doubles its compute time.
    half = paging(mix="100:200:100", mfu=0.5)
    assert next(p for p in half["policies"]
                if p["id"] == "paged-16")["step_seconds"] == pytest.approx(
        2 * paged["step_seconds"], rel=1e-6)


def test_a_longer_maximum_is_offered_only_with_a_longer_window(client) -> None:
    """The strict review's M5: Llama 3 8B's window is 8,192 tokens, the default maximum, so
    'try a longer maximum length' led to a refusal. The page now names a model first."""
    worked = section_text(client, "worked")
    assert "window ends at 8,192 tokens" in worked and "Llama 3.1 8B has 131,072" in worked
    longer = section_text(client, "worked", "?p04-paging-model=llama-3.1-8b")
    assert "Try a longer maximum length" in longer


def test_a_model_that_does_not_fit_says_by_how_much() -> None:
    """The calculator review's dead end: Llama 3.1 70B on an L4 showed no working. By hand:
    141 GB of BF16 weights + 3.3 GB reserve = 144 GB against 0.9 × 24.1 GB = 21.7 GB usable,
    123 GB short; split 8 ways, 17.6 GB + 3.3 GB = 20.9 GB fits under 21.7 GB (4 ways would be
    35 GB, too much)."""
    from problems.arithmetic.errors import ArithmeticInputError
    from problems.arithmetic.paging import paging

    with pytest.raises(ArithmeticInputError) as e:
        paging(model="llama-3.1-70b", gpu="l4", max_len=8_192)
    assert e.value.field == "model"
    assert "123 GB more than the 21.7 GB one NVIDIA L4 lets the engine use" in e.value.message
    assert "at least 8 of them" in e.value.message
    # Llama 3.1 8B on an L4 reserving its whole window: 131,072 × 131,072 B = 17.2 GB per
    # sequence against 2.38 GB free; 2.38 GB ÷ 131,072 B = 18,135 tokens at most.
    with pytest.raises(ArithmeticInputError) as e:
        paging(model="llama-3.1-8b", gpu="l4", max_len=131_072)
    assert e.value.field == "max_len"
    assert "17.2 GB per sequence, more than the 2.38 GB" in e.value.message
    assert "at most 18,135 tokens fit" in e.value.message


def test_the_page_says_how_vllm_shares_today_and_names_the_alternatives(client) -> None:
    """The strict review's X3 and X4: vAttention and per-token pools beside PagedAttention;
    vLLM V1 fans n > 1 out into child requests sharing full blocks, with no copy-on-write and
    recompute-only preemption."""
    concepts = section_text(client, "concepts")
    assert "vAttention" in concepts and "SGLang" in concepts
    assert "fans out into n child requests" in concepts and "nothing is copied on write" in concepts
    answer = section_text(client, "answer")
    assert "today's vLLM (V1) fans n samples out" in answer
    followups = section_text(client, "followups")
    assert "(V1) only recomputes" in followups


def test_a_cap_that_binds_for_every_policy_is_not_called_a_gain(client) -> None:
    """Found on the fresh review: with max_num_seqs 1 (short chats, 100:200:100) every policy
    runs 1 sequence, yet the page said paged blocks "seat 1× the sequences ... and throughput
    rises about as much, 1×: ... more sequences share the same weight reads". By hand the
    memory would hold 57.2 GB (0.9 × CUDA's 79.22 GiB − 16.06 − 3.3) ÷ (258 tokens × 131,072 B)
    = 1,691 sequences; the cap holds both policies to 1, so paging adds no sequence and no
    throughput."""
    query = "?p04-paging-mix=100:200:100&p04-paging-max_num_seqs=1"
    worked = section_text(client, "worked", query)
    assert "more sequences share the same weight reads" not in worked
    assert "seat 1×" not in worked
    assert "run the same 1 sequence as reserving 8,192 tokens" in worked
    assert "memory would hold 1,691 sequences" in worked
    answer = section_text(client, "answer", query)
    assert "1× the batch" not in answer and "binds before memory does" in answer


def test_the_cache_format_takes_its_article(client) -> None:
    """Found on the fresh review: "with a FP8 (E4M3) cache" and "with a FP32 (the course's CPU
    demo model only) cache"."""
    fp8 = section_text(client, "worked", "?p04-paging-kv_dtype=fp8")
    assert "with an FP8 (E4M3) cache" in fp8 and "a FP8" not in fp8
    course = section_text(client, "worked", "?p04-paging-model=course-lm&p04-paging-max_len=256"
                          "&p04-paging-mix=100:40:40")
    assert "with an FP32 cache" in course


def test_a_mix_near_the_maximum_is_not_explained_by_the_weights(client) -> None:
    """Found on the fresh review: with 8,000-token prompts and 100-token answers under an
    8,192-token maximum, paging seats 54 sequences against 53 (1.02×), and the page said
    throughput rises "about as much, 1×: the weights dominate each step", though the step is
    21.5 ms of which the weights' read is 15 GB ÷ 3.35 TB/s ≈ 4.5 ms. The reason is that the
    requests nearly reach the maximum: 8,050 held on average of 8,192 reserved."""
    query = "?p04-paging-mix=100:8000:100"
    worked = section_text(client, "worked", query)
    assert "the weights dominate each step" not in worked
    assert "seat about as many sequences as reserving 8,192 tokens (1.02×)" in worked
    assert "nearly reach the maximum" in section_text(client, "answer", query)


def test_a_throughput_that_does_not_rise_is_not_said_to_rise(client) -> None:
    """Found on the fresh review: at 1% MFU every policy's step is compute-bound and each runs
    617 tokens/s (53 sequences ÷ 85.9 ms; 222 ÷ 360 ms), yet the page said throughput "rises
    only 1×"."""
    worked = section_text(client, "worked", "?p04-paging-mfu=0.01")
    assert "rises only 1×" not in worked and "throughput does not rise at all (1×)" in worked


def test_the_model_answer_follows_the_throughput_regime(client) -> None:
    """Found on the strict re-review: the worked answer said "does not rise at all (1×)" at 5%
    MFU and "rises about as much, 4.97×" where the weights dominate (Llama 3.1 70B in FP8 on an
    H100, 330-token requests under a 1,024 maximum), but the model answer still said
    "throughput rises less, about 1× here" and "rises less, about 4.97× here, because each
    added sequence brings cache reads to every step"."""
    flat = section_text(client, "answer", "?p04-paging-mfu=0.05")
    assert "rises less, about 1× here" not in flat
    assert "throughput does not rise at all (1×)" in flat
    query = ("?p04-paging-model=llama-3.1-70b&p04-paging-dtype=fp8"
             "&p04-paging-mix=100:300:30&p04-paging-max_len=1024")
    keeps_up = section_text(client, "answer", query)
    assert "rises less" not in keeps_up and "brings cache reads" not in keeps_up
    assert "throughput rises about as much, 4.97× here" in keeps_up
    assert "rises about as much, 4.97×" in section_text(client, "worked", query)


def test_the_course_model_takes_a_plain_possessive(client) -> None:
    """Found on the strict re-review: "course-lm (this course's demo model)'s window ends at
    1,024 tokens"."""
    worked = section_text(client, "worked", "?p04-paging-model=course-lm"
                          "&p04-paging-mix=100:100:100&p04-paging-max_len=1024")
    assert "model)'s" not in worked and "course-lm's window ends at 1,024 tokens" in worked
