"""`make loadtest` measures the site, not its own mistakes: every URL it asks for answers 200
(it re-rendered calculators that have no page, counting their 404s as the site's errors)."""

import random

import pytest

from course.management.commands.loadtest import _pages, _rerenders
from problems.calculators import calculators_all


@pytest.mark.django_db
def test_every_rerender_url_the_loadtest_asks_for_answers_200(client):
    count = len(calculators_all(listed_only=False))
    statuses = {url.split("?")[0]: client.get(url, HTTP_HX_REQUEST="true").status_code
                for url in _rerenders(random.Random(1), count)}
    assert {url: status for url, status in statuses.items() if status != 200} == {}


def test_the_pages_it_asks_for_are_pages_with_calculators():
    assert all(not p.startswith("/calculators/") or p == "/calculators/" or
               p.rstrip("/").rsplit("/", 1)[1] in {c.slug for c in calculators_all()}
               for p in _pages())
