"""Shared by page 08's content tests: page 07's helpers pointed at page 08."""

import re

from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of
from tests.problems.content.page07 import mistakes_at_least_four  # noqa: F401
from tests.problems.content.page10 import api_get, calculator_query  # noqa: F401

PAGE = "/pages/08/"


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, number: int, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), number), number, slug))


def sections_written(client, number: int) -> None:
    problem = problem_html(page_get(client), number)
    for slug, heading in SECTIONS:
        section = section_html(problem, number, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def hints_hidden(client, number: int) -> None:
    followups = section_html(problem_html(page_get(client), number), number, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def svg_accessible(client, number: int) -> None:
    concepts = section_html(problem_html(page_get(client), number), number, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]+</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)
