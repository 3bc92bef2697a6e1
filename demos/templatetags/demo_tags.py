"""`{% demo "lifecycle" %}`: a live demo's partial, with its defaults, for any page to include."""

from django import template

from demos.params import demo_known

register = template.Library()


@register.inclusion_tag("demos/_demo.html", takes_context=True)
def demo(context, slug: str) -> dict:
    """The demo `slug` (a registered live demo) with its form defaults and examples."""
    from demos.views import demo_context

    if not demo_known(slug):
        raise template.TemplateSyntaxError(f"no demo named {slug!r}")
    return {**demo_context(slug), "request": context.get("request")}
