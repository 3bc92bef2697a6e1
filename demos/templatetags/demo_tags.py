"""`{% demo "lifecycle" %}`: a live demo's partial, with its defaults, for any page to include."""

from django import template

import demos.runners  # noqa: F401  (the runners declare their demos' parameters)
from demos.params import demo_slugs

register = template.Library()


@register.inclusion_tag("demos/_demo.html", takes_context=True)
def demo(context, slug: str) -> dict:
    """The live demo `slug` with its form defaults (and, for the chat-like ones, examples)."""
    from demos.views import demo_context

    if slug not in demo_slugs():
        raise template.TemplateSyntaxError(f"no demo named {slug!r}")
    return {**demo_context(slug), "request": context.get("request")}
