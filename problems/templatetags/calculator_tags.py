"""`{% calculator "slug" prefix="..." field=value ... %}`: embed a calculator anywhere.

See problems/calculators/__init__.py for the whole interface.
"""

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from course.render_cache import query_key, render_cached
from problems.calculators import calculator_evaluate, calculator_get

register = template.Library()

# Set on the request once the page has the calculator's scripts and styles.
ASSETS_FLAG = "_calculator_assets_included"


@register.simple_tag(takes_context=True)
def calculator(context: template.Context, slug: str, prefix: str | None = None,
               heading: int = 3, **initial: object) -> SafeString:
    """The calculator `slug` rendered with its form, steps and plot.

    `heading` is the level of its title (h3 by default). Bound to the request's query when it
    names this calculator's (prefixed) fields, otherwise to its defaults with `initial` on top.
    The first calculator on a page also brings plotly.js, static/js/plots.js and the styles.
    """
    found = calculator_get(slug)
    if found is None or not found.page:
        raise template.TemplateSyntaxError(f"no calculator is registered as {slug!r}")
    if heading not in (1, 2, 3, 4, 5, 6):
        raise template.TemplateSyntaxError("heading must be a level from 1 to 6")
    request = context.get("request")
    query = request.GET if request else None
    include_assets = request is not None and not getattr(request, ASSETS_FLAG, False)
    if request is not None:
        setattr(request, ASSETS_FLAG, True)
    action = request.path if request else ""

    def render() -> str:
        state = calculator_evaluate(found, query=query, prefix=prefix, initial=initial)
        # No request here: the component needs no context processors, and skipping them keeps
        # an embedded calculator as cheap as the page around it.
        return render_to_string("problems/_calculator.html",
                                {"state": state, "include_assets": include_assets,
                                 "heading": heading, "action": action})

    # The same inputs always render the same HTML: remember it (course/render_cache.py).
    inputs = query_key(query, prefix=prefix or found.slug)
    key = None if inputs is None else (
        "calculator", found.slug, prefix, heading, include_assets, action,
        tuple(sorted((name, repr(value)) for name, value in initial.items())), inputs)
    return render_cached(key, render)
