"""The calculators: every one on /calculators/, one on /calculators/<slug>/, and the htmx
partial (the same URL with HX-Request) that re-renders a calculator's working in place."""

import functools
import re

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.cache import patch_vary_headers
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from course.render_cache import query_key, render_cached, whole_query_key
from problems.calculators import calculator_evaluate, calculator_get, calculators_all
from problems.calculators.registry import PREFIX_PATTERN
from problems.registry import CONTENT_DIR, PAGES


def _vary_on_htmx(response: HttpResponse) -> HttpResponse:
    # The same URL answers with a whole page or a fragment: caches must tell them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response


@functools.cache
def _calculator_problems() -> dict[str, int]:
    """Each calculator's slug → the first problem whose page embeds it (read from the prose)."""
    found: dict[str, int] = {}
    for path in sorted(CONTENT_DIR.glob("p[0-9][0-9].html")):
        for slug in re.findall(r'{%\s*calculator\s+"([a-z0-9-]+)"', path.read_text()):
            found.setdefault(slug, int(path.stem[1:]))
    return found


def calculators_grouped() -> tuple[list[dict], list]:
    """The index's calculators by page and problem, in course order, and the ones no page
    embeds (the formulas the worked answers use throughout)."""
    where = _calculator_problems()
    calculators = calculators_all()
    groups = []
    for page in PAGES:
        problems = [{"problem": problem,
                     "calculators": [c for c in calculators if where.get(c.slug) == problem.number]}
                    for problem in page.problems]
        problems = [p for p in problems if p["calculators"]]
        if problems:
            groups.append({"page": page, "problems": problems})
    return groups, [c for c in calculators if c.slug not in where]


@require_GET
def calculators_index(request: HttpRequest) -> HttpResponse:
    """Every calculator, grouped by the page and problem that embed them. The listing (hundreds
    of KB of HTML) depends only on the query, so it is rendered once per query and kept."""
    groups, formulas = calculators_grouped()
    # Submitted without JavaScript: the calculator the query names opens where it was.
    asked = {c.slug for c in calculators_all()
             if any(key.startswith(f"{c.slug}-") for key in request.GET)}

    def listing() -> str:
        # Only the request's query and path are read (by the calculator tag): no context
        # processors, nothing of the visitor.
        return render_to_string("problems/_calculators_listing.html", {
            "groups": groups, "formulas": formulas, "asked": asked, "request": request})

    inputs = whole_query_key(request.GET)
    key = None if inputs is None else ("calculators-index", inputs)
    return render(request, "problems/calculators.html",
                  {"listing": mark_safe(render_cached(key, listing))})  # noqa: S308


@require_GET
def calculator_detail(request: HttpRequest, slug: str) -> HttpResponse:
    calculator = calculator_get(slug)
    if calculator is None or not calculator.page:
        raise Http404("No such calculator")
    prefix = request.GET.get("prefix") or calculator.slug
    if not PREFIX_PATTERN.match(prefix):
        return HttpResponseBadRequest("prefix: use lower-case letters, digits and hyphens",
                                      content_type="text/plain")
    if request.htmx:
        def fragment() -> str:
            state = calculator_evaluate(calculator, query=request.GET, prefix=prefix)
            return render_to_string("problems/_calculator_output.html",
                                    {"state": state, "oob": True})

        # The same inputs always render the same fragment (course/render_cache.py).
        inputs = query_key(request.GET, prefix=prefix)
        key = None if inputs is None else ("calculator-output", calculator.slug, prefix, inputs)
        return _vary_on_htmx(HttpResponse(render_cached(key, fragment)))
    return _vary_on_htmx(render(request, "problems/calculator_detail.html",
                                {"calculator": calculator, "prefix": prefix}))
