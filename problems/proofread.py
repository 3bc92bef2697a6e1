"""Proofreading every problem over its inputs (COURSE.md, "Correct at every input").

A learner changes a problem's inputs; every sentence must stay true. This module renders each
problem over a grid of inputs and checks the rendered text of its nine sections against the
rules a checker can see:

- no "nan", "inf", "None", "∞", an empty "()" or "[]", a doubled full stop, or template syntax;
- no count of whole things (requests, GPUs, replicas, sequences, users, nodes, …) that is
  fractional, and no "0 <plural>" or "1 <plural>" ("no replicas", "1 replica");
- no ratio under one with a comparative ("0.816× less"), nor "1× more";
- no "rises from A to B" with B below A (nor "falls" the other way);
- no answer but 200, and no refused input that the problem does not announce above its
  working.

The grid is read off the page itself: each calculator's form on the problem (its selects'
options, its number fields' bounds), so a new input is swept the day it is added. The small
grid (the test suite) takes every option of every select and each number field at its bounds,
at 0 and 1 where allowed, and one refused value per calculator; the full grid (`make
proofread`) adds draws from each calculator's inputs together (Hypothesis, seeded). Each page
is fetched through Django's test client, as a learner's browser would ask for it.
"""

import html as html_lib
import math
import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlencode

from problems.registry import PROBLEMS, Problem

# Whole things: a count of these is never fractional, "0 x" reads "no x", "1 xs" is wrong.
WHOLE_NOUNS = ("requests", "GPUs", "replicas", "sequences", "users", "nodes", "streams",
               "servers", "machines", "chunks", "instances", "tenants", "workers", "pods",
               "conversations", "prompts", "answers", "sessions", "clients", "keys",
               "prefixes", "applications")
# Nouns that read wrong as "1 <plural>" (the whole things and the units counted in prose).
ONE_NOUNS = WHOLE_NOUNS + (
    "tokens", "times", "steps", "blocks", "layers", "heads", "bytes", "seconds", "minutes",
    "hours", "days", "characters", "words", "events", "experts", "kernels", "queries",
    "batches", "passes", "copies", "rounds", "threads", "cores", "calls", "guesses", "pages",
    "rows", "columns", "values", "samples", "draws", "launches", "microbatches", "links",
    "ranks", "shards", "misses", "hits", "tiles", "dimensions", "positions", "attempts")
COMPARATIVES = ("more", "less", "faster", "slower", "larger", "smaller", "higher", "lower",
                "longer", "shorter", "cheaper", "dearer", "fewer", "bigger", "greater", "worse",
                "better", "wider", "narrower", "heavier", "lighter")
RISE_VERBS = ("rises", "grows", "increases", "climbs", "goes up", "rise", "grow", "increase")
FALL_VERBS = ("falls", "drops", "shrinks", "decreases", "goes down", "fall", "drop", "shrink",
              "decrease")

_NUMBER = r"(?<![\w.,−-])(\d[\d,]*(?:\.\d+)?)"
_RATE_AFTER = re.compile(r"^\s*(?:per\b|/|a second|a minute|an hour|a day|each second|"
                         r"on average|in flight on average|at once on average)")
_MEAN_BEFORE = re.compile(r"(?:average|mean|expected|typical|about|≈)\W*(?:\w+\W+){0,3}$",
                          re.IGNORECASE)


@dataclass(frozen=True)
class Flag:
    """One sentence that breaks a rule, and the address that shows it."""

    problem: int
    rule: str
    url: str
    sentence: str


@dataclass(frozen=True)
class FormField:
    """One input of a calculator on a problem, as its form declares it."""

    name: str
    kind: str  # "select" | "number" | "text"
    default: str
    options: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    whole: bool = False

    @property
    def prefix(self) -> str:
        return self.name.rsplit("-", 1)[0]


@dataclass
class ProblemReport:
    problem: int
    tried: int = 0
    flags: list[Flag] = field(default_factory=list)


# ---- reading a page ------------------------------------------------------------------------

_PROBLEM_START = re.compile(r'<section class="problem" id="problem-(\d+)"')


def problem_html(page_html: str, number: int) -> str:
    """The HTML of problem `number`'s section on its page."""
    starts = [(m.start(), int(m.group(1))) for m in _PROBLEM_START.finditer(page_html)]
    for index, (start, found) in enumerate(starts):
        if found == number:
            end = starts[index + 1][0] if index + 1 < len(starts) else len(page_html)
            # The page's Sources and progress panel follow the last problem: not its text.
            tail = re.search(r'<(?:section|aside|div)[^>]*id="(?:sources|progress)"',
                             page_html[start:end])
            return page_html[start:start + tail.start()] if tail else page_html[start:end]
    raise LookupError(f"problem {number} is not on this page")


def visible_text(fragment: str) -> str:
    """What a reader sees of `fragment`: tags, scripts and styles gone, entities decoded,
    whitespace collapsed."""
    # A <pre> block is a source listing (problem 5 shows its demo's kernel, float("-inf") and
    # all): code, not prose, so the prose rules do not read it.
    text = re.sub(r"<(script|style|template|pre)\b.*?</\1>", " ", fragment,
                  flags=re.S | re.I)
    # Inline elements join the text around them ("<code>id</code>," reads "id,"); the rest
    # (paragraphs, cells, list items) part it.
    text = re.sub(r"</?(?:code|em|strong|a|span|abbr|q|sub|sup|b|i|var|kbd|samp|small|mark|"
                  r"time|dfn|cite)\b[^>]*>", "", text, flags=re.I)
    text = re.sub(r"<[^>]+>", " ", text)
    text = html_lib.unescape(text)
    return re.sub(r"\s+", " ", text).strip()


class _FormReader(HTMLParser):
    """The GET forms' fields (calculators), with their defaults, options and bounds."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: list[FormField] = []
        self._in_get_form = False
        self._select: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "form":
            self._in_get_form = a.get("method", "get").lower() == "get" and "calculator-form" in (
                a.get("class", ""))
        elif not self._in_get_form:
            return
        elif tag == "select" and a.get("name"):
            self._select = {"name": a["name"], "options": [], "default": None}
        elif tag == "option" and self._select is not None:
            self._select["options"].append(a.get("value", ""))
            if "selected" in a or self._select["default"] is None:
                if "selected" in a or not self._select["options"][:-1]:
                    self._select["default"] = a.get("value", "")
        elif tag == "input" and a.get("name") and a.get("type", "text") not in (
                "hidden", "submit", "button", "checkbox", "radio"):
            if a.get("type") == "number":
                step = a.get("step", "any")
                self.fields.append(FormField(
                    name=a["name"], kind="number", default=a.get("value", ""),
                    minimum=_float(a.get("min")), maximum=_float(a.get("max")),
                    whole=step not in ("any", "") and float(step) == int(float(step))))
            else:
                self.fields.append(FormField(name=a["name"], kind="text",
                                             default=a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_get_form = False
        elif tag == "select" and self._select is not None:
            s = self._select
            self.fields.append(FormField(name=s["name"], kind="select",
                                         default=s["default"] or "",
                                         options=tuple(o for o in s["options"])))
            self._select = None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def form_fields(fragment: str) -> list[FormField]:
    """Every calculator input inside `fragment` (a problem's HTML)."""
    reader = _FormReader()
    reader.feed(fragment)
    return reader.fields


# ---- the grid ------------------------------------------------------------------------------

def _number_text(value: float, whole: bool) -> str:
    return str(int(value)) if whole else repr(float(value))


def _bound_values(f: FormField) -> list[str]:
    """A number field's edges: its bounds, 0 and 1 where allowed."""
    values: list[float] = []
    for v in (f.minimum, f.maximum, 0.0, 1.0):
        if v is None:
            continue
        if (f.minimum is None or v >= f.minimum) and (f.maximum is None or v <= f.maximum):
            values.append(v)
    return list(dict.fromkeys(_number_text(v, f.whole) for v in values))


def _refused_value(f: FormField) -> str | None:
    if f.maximum is not None:
        return _number_text(f.maximum * 10 + 1, f.whole)
    if f.minimum is not None:
        return _number_text(f.minimum - 1, f.whole)
    return None


def small_grid(fields: list[FormField]) -> list[tuple[dict[str, str], bool]]:
    """Queries (one field changed each) and whether each is meant to be refused."""
    grid: list[tuple[dict[str, str], bool]] = []
    probed: set[str] = set()
    for f in fields:
        if f.kind == "select":
            grid.extend(({f.name: o}, False) for o in f.options if o != f.default)
        elif f.kind == "number":
            grid.extend(({f.name: v}, False) for v in _bound_values(f) if v != f.default)
            refused = _refused_value(f)
            if refused is not None and f.prefix not in probed:
                probed.add(f.prefix)
                grid.append(({f.name: refused}, True))
    return grid


def _draw(f: FormField, rng: random.Random) -> str:
    if f.kind == "select":
        return rng.choice(f.options) if f.options else f.default
    if f.kind != "number":
        return f.default
    low = f.minimum if f.minimum is not None else 0.0
    high = f.maximum if f.maximum is not None else max(low + 1.0, 1e6)
    # Half the draws spread over orders of magnitude, so small values are tried as often as
    # large ones.
    if low > 0 and high / low > 100 and rng.random() < 0.5:
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        value = rng.uniform(low, high)
    if f.whole:
        value = min(max(round(value), math.ceil(low)), math.floor(high))
    return _number_text(value, f.whole)


def random_grid(fields: list[FormField], *, draws: int, seed: int) -> list[dict[str, str]]:
    """`draws` queries per calculator, each changing every input of that calculator at once
    (a small model on a big GPU, a short prompt at a huge load: the corners where regimes
    change), seeded."""
    rng = random.Random(seed)
    by_prefix: dict[str, list[FormField]] = {}
    for f in fields:
        if f.kind in ("select", "number"):
            by_prefix.setdefault(f.prefix, []).append(f)
    grid = []
    for group in by_prefix.values():
        for _ in range(draws):
            grid.append({f.name: _draw(f, rng) for f in group})
    return grid


# ---- the checks ----------------------------------------------------------------------------

def _sentence_around(text: str, start: int, end: int) -> str:
    left = max(text.rfind(". ", 0, start) + 2, start - 160, 0)
    right = text.find(". ", end)
    right = min(right + 1 if right != -1 else len(text), end + 160)
    return text[left:right].strip()


def _whole_noun_pattern(nouns: Iterable[str]) -> str:
    return "(" + "|".join(re.escape(n) for n in nouns) + r")\b"


_LITERALS = [
    ("not a number", re.compile(r"\bnan\b", re.I)),
    # AMD's interconnect is named "Infinity Fabric", and the MI300X's last-level cache
    # "Infinity Cache": names, not values.
    ("infinite", re.compile(r"\binf\b|∞|\binfinity\b(?!\s+(?:Fabric|Cache))", re.I)),
    # "None" printed by Python, not the word that starts "None of them …".
    ("None printed", re.compile(r"(?<=[\w,:=(] )None\b|\(None\)|=None\b")),
    # A call's parentheses right after a name (".item()", "LLM.int8()", "prof.step()") are code,
    # not a value a template failed to fill: those follow a space or open a sentence.
    ("empty brackets", re.compile(r"(?<![\w.])\(\s*\)|\[\s*\]")),
    ("template syntax", re.compile(r"\{\{|\}\}|\{%|%\}")),
    ("doubled full stop", re.compile(r"(?<!\.)\.\.(?!\.)")),
    ("space before a comma or stop", re.compile(r"\w \,|\w \.(?=\s|$)")),
]
_FRACTIONAL = re.compile(r"(?<![\w.,−-])(\d[\d,]*\.\d+)\s+" + _whole_noun_pattern(WHOLE_NOUNS))
_ZERO = re.compile(r"(?<![\w.,−-])0\s+" + _whole_noun_pattern(WHOLE_NOUNS))
_ONE = re.compile(r"(?<![\w.,−-])1\s+" + _whole_noun_pattern(ONE_NOUNS))
_RATIO_UNDER_ONE = re.compile(
    r"(?<![\w.,])(0(?:\.\d+)?)\s*(?:×|times)\s*" + _whole_noun_pattern(COMPARATIVES))
_RATIO_ONE = re.compile(r"(?<![\w.,])(1(?:\.0+)?)\s*×\s*" + _whole_noun_pattern(COMPARATIVES))
_CHANGE = re.compile(
    r"\b(" + "|".join(RISE_VERBS + FALL_VERBS) + r")\s+from\s+"
    r"(?:about\s+)?([\d,]+(?:\.\d+)?)\s*([^\s\d,.;]*)\s+to\s+(?:about\s+)?([\d,]+(?:\.\d+)?)"
    r"\s*([^\s\d,.;]*)")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def text_flags(text: str) -> list[tuple[str, str]]:
    """(rule, sentence) for each place in `text` that breaks a rule a checker can see."""
    found: list[tuple[str, str]] = []

    def add(rule: str, match: re.Match) -> None:
        found.append((rule, _sentence_around(text, match.start(), match.end())))

    for rule, pattern in _LITERALS:
        for m in pattern.finditer(text):
            add(rule, m)
    for m in _FRACTIONAL.finditer(text):
        after = text[m.end():m.end() + 30]
        before = text[max(0, m.start() - 40):m.start()]
        if _RATE_AFTER.match(after) or after.startswith("'") or _MEAN_BEFORE.search(before):
            continue
        add("fractional count of whole things", m)
    for m in _ZERO.finditer(text):
        if _RATE_AFTER.match(text[m.end():m.end() + 30]):
            continue
        add("zero count with a number (say 'no …')", m)
    for m in _ONE.finditer(text):
        if text[max(0, m.start() - 2):m.start()] in ("+ ", "− ", "- "):
            continue  # "γ + 1 positions" is a formula for a count above one, not "1 positions"
        if _RATE_AFTER.match(text[m.end():m.end() + 30]) and m.group(1) in (
                "tokens", "requests", "bytes"):
            # "1 tokens per second" is still wrong, but "1 tokens/s" is a unit: only the
            # word form is flagged below.
            if text[m.end():m.end() + 2].startswith("/"):
                continue
        add("one with a plural noun", m)
    for m in _RATIO_UNDER_ONE.finditer(text):
        add("ratio under one with a comparative", m)
    for m in _RATIO_ONE.finditer(text):
        add("ratio of one with a comparative", m)
    for m in _CHANGE.finditer(text):
        verb, before, unit_before, after, unit_after = m.groups()
        if unit_before and unit_after and unit_before != unit_after:
            continue
        rising = verb in RISE_VERBS
        if (rising and _num(after) < _num(before)) or (not rising and _num(after) > _num(before)):
            add("direction verb against the sign of the change", m)
    return found


_ERROR_ELEMENT = re.compile(
    r'<p class="(?:field-error|form-error)"[^>]*>\s*([^<\s][^<]*)</p>')


def refusal_unannounced(fragment: str) -> bool:
    """Whether a calculator on the problem shows an error but the problem does not say, above
    its working, that the working stays at the defaults."""
    return bool(_ERROR_ELEMENT.search(fragment)) and "refused-inputs" not in fragment


# ---- the sweep -----------------------------------------------------------------------------

Fetch = Callable[[str], tuple[int, str]]


def problem_proofread(problem: Problem, fetch: Fetch, *, full: bool, seed: int,
                      draws: int = 12) -> ProblemReport:
    """Render `problem` over its grid with `fetch(url) -> (status, html)` and check each."""
    report = ProblemReport(problem=problem.number)
    path = f"/pages/{problem.page:02d}/"
    status, page = fetch(path)
    queries: list[tuple[dict[str, str], bool]] = [({}, False)]
    if status == 200:
        fields = form_fields(problem_html(page, problem.number))
        queries += small_grid(fields)
        if full:
            queries += [(q, False) for q in random_grid(fields, draws=draws, seed=seed)]
    seen: set[tuple[str, str]] = set()
    for query, meant_refused in queries:
        url = path + ("?" + urlencode(query) if query else "") + f"#problem-{problem.number}"
        status, page = fetch(url.split("#")[0]) if query else (status, page)
        report.tried += 1

        def flag(rule: str, sentence: str, url: str = url) -> None:
            # The same sentence broken the same way at many inputs is one finding.
            if (rule, sentence) not in seen:
                seen.add((rule, sentence))
                report.flags.append(Flag(problem.number, rule, url, sentence))

        if status != 200:
            flag(f"HTTP {status}", "")
            continue
        fragment = problem_html(page, problem.number)
        if refusal_unannounced(fragment):
            flag("refused input not announced", visible_text(
                _ERROR_ELEMENT.search(fragment).group(0)))
        elif meant_refused and "refused-inputs" not in fragment:
            flag("out-of-range input accepted without a word", "")
        for rule, sentence in text_flags(visible_text(fragment)):
            flag(rule, sentence)
    return report


def client_fetch() -> Fetch:
    """A fetch through Django's test client, as a browser would ask for the page."""
    import logging

    from django.test import Client

    # A page that fails is a flag in the report, not a traceback on the terminal.
    client = Client(raise_request_exception=False)
    logging.getLogger("django.request").setLevel(logging.CRITICAL)

    def fetch(url: str) -> tuple[int, str]:
        response = client.get(url)
        return response.status_code, response.content.decode()

    return fetch


def proofread(numbers: Iterable[int] | None = None, *, full: bool, seed: int,
              draws: int = 12, fetch: Fetch | None = None) -> tuple[list[ProblemReport], float]:
    """Every problem (or those named) over its grid; the reports and the seconds it took."""
    fetch = fetch or client_fetch()
    started = time.perf_counter()
    chosen = [PROBLEMS[n] for n in (numbers or PROBLEMS)]
    reports = [problem_proofread(p, fetch, full=full, seed=seed, draws=draws)
               for p in chosen if p.template_name]
    return reports, time.perf_counter() - started


def report_text(reports: list[ProblemReport], seconds: float) -> str:
    """The table of problems × inputs tried × sentences flagged, then each flag."""
    lines = ["problem  inputs tried  flagged"]
    lines += [f"{r.problem:>7}  {r.tried:>12}  {len(r.flags):>7}" for r in reports]
    tried = sum(r.tried for r in reports)
    flagged = sum(len(r.flags) for r in reports)
    lines.append(f"{'all':>7}  {tried:>12}  {flagged:>7}")
    for r in reports:
        for f in r.flags:
            lines.append("")
            lines.append(f"problem {f.problem}: {f.rule}")
            lines.append(f"  {f.url}")
            if f.sentence:
                lines.append(f"  “{f.sentence}”")
    lines.append("")
    lines.append(f"proofread: {len(reports)} problems, {tried:,} inputs rendered, "
                 f"{flagged:,} sentences flagged, in {seconds:.0f} s")
    return "\n".join(lines)
