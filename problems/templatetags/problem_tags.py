"""Template helpers for problem pages."""

from django import template
from django.http import HttpRequest

from problems.registry import Problem

register = template.Library()


@register.filter
def problem_context(problem: Problem, request: HttpRequest) -> dict:
    """What problems/content/pNN.py computes for its template (worked arithmetic), or {}.

    Every figure a problem's prose shows comes from here, computed at render time.
    """
    module = problem.content_module
    if module is None or not hasattr(module, "context"):
        return {}
    return module.context(request=request)
