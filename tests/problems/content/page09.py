"""Shared by page 09's content tests: fetching the page and the JSON API."""

from tests.problems.content.page10 import api_get, calculator_query  # noqa: F401 (shared)

PAGE = "/pages/09/"


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()
