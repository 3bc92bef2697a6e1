"""Reading one problem's rendered HTML: its section, a subsection, and their text."""

import html
import re

from problems.registry import SECTIONS


def problem_html(content: str, number: int) -> str:
    """The <section id="problem-N"> of a rendered page, up to the next problem."""
    start = content.index(f'id="problem-{number}"')
    following = content.find('<section class="problem" id="problem-', start + 1)
    return content[start:following if following != -1 else len(content)]


def section_html(problem: str, number: int, slug: str) -> str:
    """One of the nine sections of a problem's HTML."""
    start = problem.index(f'id="problem-{number}-{slug}"')
    slugs = [s for s, _ in SECTIONS]
    index = slugs.index(slug)
    if index + 1 < len(slugs):
        end = problem.index(f'id="problem-{number}-{slugs[index + 1]}"')
    else:
        end = len(problem)
    return problem[start:end]


def text_of(fragment: str) -> str:
    """Visible text: tags, scripts and SVG dropped, entities decoded, whitespace collapsed."""
    fragment = re.sub(r"<(script|svg|select)\b.*?</\1>", " ", fragment, flags=re.S)
    fragment = re.sub(r"<[^>]+>", " ", fragment)
    return re.sub(r"\s+", " ", html.unescape(fragment)).strip()


# A figure typed by hand: digits followed by a unit. Templates must take figures from `c`.
TYPED_FIGURE = re.compile(
    r"\d[\d,.]*\s*(?:ms|µs|s|GB|GiB|MB|MiB|kB|KiB|B|FLOPs?|TFLOP/s|TB/s|GB/s|tokens?|%|×)"
    r"(?![\w-])")


def typed_figures(template_source: str) -> list[str]:
    """Hand-typed figures in a template's prose (SVG coordinates and comments excluded)."""
    prose = re.sub(r"<svg\b.*?</svg>", " ", template_source, flags=re.S)
    prose = re.sub(r"\{#.*?#\}", " ", prose, flags=re.S)
    prose = re.sub(r"\{[{%].*?[%}]\}", " ", prose, flags=re.S)
    return [m.group(0) for m in TYPED_FIGURE.finditer(prose)]
