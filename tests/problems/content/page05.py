"""Shared by page 05's content tests: the page, a problem's sections, the JSON API, a
calculator's whole query from its defaults."""

import re

from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of
from tests.problems.content.page10 import api_get, calculator_query  # noqa: F401

PAGE = "/pages/05/"


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, number: int, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), number), number, slug))


def page_checks(client, number: int, template: str) -> None:
    """Every section written; hints hidden; an accessible SVG; at least four mistakes and
    four points listened for."""
    problem = problem_html(page_get(client), number)
    for slug, heading in SECTIONS:
        section = section_html(problem, number, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug
    followups = section_html(problem, number, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)
    concepts = section_html(problem, number, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]+</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)
    mistakes = template[template.index("{% block mistakes %}"):template.index("{% block demo %}")]
    assert mistakes.count("<li>") >= 4
    listens = template[template.index("{% block listens %}"):template.index("{% block followups")]
    assert listens.count("<li>") >= 4
