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
