"""Template helpers for problem pages."""

from django import template
from django.conf import settings
from django.http import HttpRequest

from course.render_cache import contexts, whole_query_key
from problems.calculators import refusals_collected
from problems.registry import Problem

register = template.Library()


@register.filter
def problem_context(problem: Problem, request: HttpRequest) -> dict:
    """What problems/content/pNN.py computes for its template (worked arithmetic), or {}.

    Every figure a problem's prose shows comes from here, computed at render time. Inputs a
    calculator refused while the prose was computed come back under "refusals" (the problem
    announces them above its working, which then stays at the defaults).
    """
    module = problem.content_module
    if module is None or not hasattr(module, "context"):
        return {}

    def compute() -> dict:
        with refusals_collected() as refusals:
            context = module.context(request=request)
        return {**context, "refusals": tuple(refusals)}

    # A content module reads nothing of the request but its query, and the same inputs always
    # give the same figures: computed once per process per query (course/render_cache.py).
    inputs = whole_query_key(request.GET)
    if inputs is None or not getattr(settings, "RENDER_CACHE", True):
        return compute()
    return contexts.get_or_compute(("problem-context", problem.number, inputs), compute)
