"""Template helpers for problem pages."""

import functools

from django import template
from django.conf import settings
from django.http import HttpRequest
from django.template import Context
from django.template.library import SimpleNode
from django.template.loader import get_template

from course.render_cache import contexts, whole_query_key
from problems.calculators import calculator_evaluate, calculator_get, refusals_collected
from problems.calculators.registry import query_names_prefix
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
            # A calculator the page embeds but the prose does not read is checked too, so the
            # notice covers every input on the problem, not only those the prose quotes.
            for slug, prefix, initial in _embedded_calculators(problem, context):
                found = calculator_get(slug)
                if (found is not None and prefix not in refusals.evaluated
                        and query_names_prefix(request.GET, found.form_class(prefix=prefix))):
                    calculator_evaluate(found, query=request.GET, prefix=prefix,
                                        initial=initial)
        return {**context, "refusals": tuple(refusals)}

    # A content module reads nothing of the request but its query, and the same inputs always
    # give the same figures: computed once per process per query (course/render_cache.py).
    inputs = whole_query_key(request.GET)
    if inputs is None or not getattr(settings, "RENDER_CACHE", True):
        return compute()
    return contexts.get_or_compute(("problem-context", problem.number, inputs), compute)


@functools.cache
def _calculator_nodes(template_name: str) -> tuple[SimpleNode, ...]:
    """The `{% calculator %}` tags in a problem's template (read once per process)."""
    from problems.templatetags.calculator_tags import calculator as calculator_tag

    nodes = get_template(template_name).template.nodelist.get_nodes_by_type(SimpleNode)
    return tuple(n for n in nodes if n.func is calculator_tag)


def _embedded_calculators(problem: Problem, context: dict) -> list[tuple[str, str, dict]]:
    """(slug, prefix, initial) of each calculator the problem's template embeds, resolved
    against the problem's context as the template will resolve them."""
    if not problem.template_name:
        return []
    scope = Context({"c": context, "problem": problem})
    embedded = []
    for node in _calculator_nodes(problem.template_name):
        slug = node.args[0].resolve(scope)
        kwargs = {name: value.resolve(scope) for name, value in node.kwargs.items()}
        prefix = kwargs.pop("prefix", None) or slug
        kwargs.pop("heading", None)
        embedded.append((slug, prefix, kwargs))
    return embedded
