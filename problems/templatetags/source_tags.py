"""`{{ page|page_sources }}`: the sources every problem on a page cites, each once, in order."""

from django import template

from problems.registry import Page

register = template.Library()


@register.filter
def page_sources(page: Page) -> list[tuple[str, str]]:
    """(title, url) of each source cited by the page's problems, first mention first, no repeats
    (two problems citing the same URL list it once)."""
    seen: set[str] = set()
    sources = []
    for problem in page.problems:
        for title, url in problem.sources:
            if url not in seen:
                seen.add(url)
                sources.append((title, url))
    return sources
