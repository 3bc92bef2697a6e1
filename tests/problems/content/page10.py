"""Shared by page 10's content tests: fetching the page, a problem's sections, the JSON API, and a
calculator's whole query from its defaults."""

from problems.calculators import Calculator

PAGE = "/pages/10/"


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def api_get(client, path: str, **params) -> dict:
    response = client.get(f"/api/calc/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def calculator_query(calculator: Calculator, prefix: str, **changes: object) -> str:
    """A whole query for `calculator` under `prefix`: its defaults with `changes` on top."""
    fields = {**calculator.form_class().defaults(), **changes}
    fields = {name: "" if value is None else value for name, value in fields.items()}
    return "?" + "&".join(f"{prefix}-{name}={value}" for name, value in fields.items())
