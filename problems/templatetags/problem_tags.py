"""Template helpers for problem pages."""

from django import template
from django.http import HttpRequest

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
    with refusals_collected() as refusals:
        context = module.context(request=request)
    return {**context, "refusals": tuple(refusals)}
