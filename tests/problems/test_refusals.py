"""A refused input is announced above the working of its problem, never hidden behind the
defaults (COURSE.md, "Correct at every input")."""

import re

import pytest

from problems.registry import PROBLEMS


def test_refused_prompt_is_announced(client):
    html = client.get("/pages/01/?p1-scale-prompt_tokens=0").content.decode()
    worked = html[html.index('id="problem-1-worked"'):]
    notice = worked[:worked.index("</div>")]
    assert "refused" in notice and "One request, for scale" in notice
    assert "Enter at least 1 token" in notice and "1 tokens" not in notice
    assert "stays at that calculator" in notice


def test_defaults_announce_nothing(client):
    assert "refused-inputs" not in client.get("/pages/01/").content.decode()


@pytest.mark.parametrize("problem", [p for p in PROBLEMS.values() if p.template_name],
                         ids=lambda p: f"p{p.number}")
def test_every_problem_template_has_the_notice(problem):
    # The notice lives in the shared template every problem extends.
    from django.template.loader import get_template
    source = get_template(problem.template_name).template.source
    assert re.search(r'{% extends "problems/_problem.html" %}', source)
