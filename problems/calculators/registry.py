"""The calculator registry and the one function that turns a request's inputs into a filled-in
calculator (bound form, `Result`, plot), whatever the inputs were.

Kept free of templates and views so the template tag, the views and the tests share it.
"""

import contextlib
import contextvars
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.steps import Result, Step
from problems.forms import CalculatorForm, Input, form_class_build, inputs_normalise
from problems.plots import BarPlot, Plot, plot_figure, plot_table

PREFIX_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")

Compute = Callable[..., Result]
PlotBuild = Callable[..., Plot | BarPlot]
PlotsBuild = Callable[..., tuple[Plot | BarPlot, ...]]
NoteBuild = Callable[..., str]


@dataclass(frozen=True, kw_only=True)
class Calculator:
    """One formula as a calculator and as a JSON API endpoint, declared once.

    `inputs` declare every parameter (label, unit, limits, help, the calculator's starting
    value, the API's default); the form class is built from them. `compute(**inputs) -> Result`
    calls `problems/arithmetic`; `plot(inputs=..., result=...) -> Plot` is optional, and so is
    `plots(inputs=..., result=...)`, several plots drawn in order after it (a simulator's run,
    ending with its measured-against-predicted plot). `note(inputs=..., result=...) -> str` is a
    sentence shown under the plots, such as why what was measured differs from the prediction.
    `api_path` ("/kv-cache") serves the same formula at /api/calc/<path>. `listed=False` keeps
    a problem's own calculator off the /calculators/ index (it still has its own URL, which
    the htmx re-render uses); `page=False` makes it an API endpoint only.
    """

    slug: str
    title: str
    explanation: str
    compute: Compute
    inputs: tuple[Input, ...] = ()
    form_class: type[CalculatorForm] | None = None
    plot: PlotBuild | None = None
    plots: PlotsBuild | None = None
    note: NoteBuild | None = None
    listed: bool = True
    order: int = 100
    api_path: str | None = None
    api_summary: str = ""
    page: bool = True

    def __post_init__(self) -> None:
        if self.form_class is None:
            name = "".join(part.title() for part in self.slug.split("-")) + "Form"
            object.__setattr__(self, "form_class", form_class_build(self.inputs, name=name))

    def defaults(self) -> dict[str, object]:
        """The formula's arguments at the calculator's starting values."""
        return inputs_normalise(self.inputs, self.form_class().defaults())


@dataclass(frozen=True)
class Drawn:
    """One plot as drawn: its plotly figure and the table of the same numbers."""

    figure: dict
    table: dict

    @property
    def figure_json(self) -> str:
        """The plotly figure as JSON; allow_nan=False makes a non-finite number an error here."""
        return json.dumps(self.figure, allow_nan=False, separators=(",", ":"))

    @property
    def figure_title(self) -> str:
        return self.figure["layout"]["title"]["text"]


def fit_verdict(values: Mapping[str, object]) -> dict | None:
    """What a result's fit values say, for the line above its working: None when the result
    says nothing about fitting or it fits; otherwise {"headline", "detail"} naming by how much
    it does not fit when the result carries the bytes needed and usable (or free)."""
    from problems.arithmetic.units import bytes_short
    from problems.arithmetic.wording import times_phrase

    fits = values.get("fits", values.get("fits_in_memory"))
    if fits is None or bool(fits):
        return None
    needed = values.get("memory_needed_bytes")
    usable = values.get("memory_usable_bytes", values.get("usable_bytes"))
    free = values.get("free_bytes")
    detail = ""
    if isinstance(needed, int | float) and isinstance(usable, int | float) and usable > 0:
        short = float(needed) - float(usable)
        if short > 0:
            detail = (f"It needs {bytes_short(needed)} where {bytes_short(usable)} is usable: "
                      f"{bytes_short(short)} short, {times_phrase(float(needed), float(usable))} "
                      "the memory there is.")
    elif isinstance(free, int | float) and free < 0:
        detail = f"It is {bytes_short(-float(free))} short of memory."
    return {"headline": "Does not fit.",
            "detail": (detail + " The times below are what it would take if it did fit: a "
                       "plan needs more or larger GPUs, fewer bytes per weight, or less "
                       "context.").strip()}


@dataclass(frozen=True)
class CalculatorState:
    """A calculator filled in from one request: what the templates render."""

    calculator: Calculator
    prefix: str
    form: CalculatorForm
    result: Result | None
    drawn: tuple[Drawn, ...] = ()
    note: str = ""

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.result.steps if self.result else ()

    @property
    def dom_id(self) -> str:
        return f"calc-{self.prefix}"

    @property
    def verdict(self) -> dict | None:
        """"Does not fit", and by how much, when the result says so (see fit_verdict)."""
        return fit_verdict(self.result.values) if self.result else None

    @property
    def figure(self) -> dict | None:
        """The first plot's figure (most calculators have one), or None."""
        return self.drawn[0].figure if self.drawn else None

    @property
    def table(self) -> dict | None:
        return self.drawn[0].table if self.drawn else None

    @property
    def figure_json(self) -> str:
        return json.dumps(self.figure, allow_nan=False, separators=(",", ":"))

    @property
    def figure_title(self) -> str:
        return self.drawn[0].figure_title if self.drawn else ""


@dataclass(frozen=True)
class Refusal:
    """A learner's input that a calculator refused: the prose around it stays at the defaults,
    and the problem says so above its working."""

    calculator: str
    prefix: str
    fields: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        """"GPU count: Enter a whole number of at least 1; Prompt: …" (labels, not field
        names)."""
        return "; ".join(f"{label}: {message.rstrip('.')}" if label else message.rstrip(".")
                         for label, message in self.fields)


class Refusals(list):
    """The refusals met while one problem's prose is computed, and the prefixes evaluated."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluated: set[str] = set()


_REFUSALS: contextvars.ContextVar[Refusals | None] = contextvars.ContextVar(
    "calculator_refusals", default=None)


@contextlib.contextmanager
def refusals_collected() -> Iterator[Refusals]:
    """Collect, into the list it yields, every refused input met inside the block (each
    calculator and prefix once); its `evaluated` says which prefixes were filled in."""
    found = Refusals()
    token = _REFUSALS.set(found)
    try:
        yield found
    finally:
        _REFUSALS.reset(token)


def _evaluated_note(prefix: str) -> None:
    found = _REFUSALS.get()
    if found is not None:
        found.evaluated.add(prefix)


def _refusal_record(calculator: "Calculator", prefix: str, form: CalculatorForm) -> None:
    found = _REFUSALS.get()
    if found is None or any(r.prefix == prefix for r in found):
        return
    fields: list[tuple[str, str]] = []
    for name, errors in form.errors.items():
        label = "" if name == "__all__" else str(form.fields[name].label or name)
        # Labels carry their unit in brackets ("Prompt (tokens)"): the name alone reads better.
        label = re.sub(r"\s*\([^)]*\)$", "", label)
        fields.extend((label, str(error)) for error in errors)
    found.append(Refusal(calculator=calculator.title, prefix=prefix, fields=tuple(fields)))


_CALCULATORS: dict[str, Calculator] = {}


def calculator_register(calculator: Calculator) -> Calculator:
    """Add `calculator` to the registry (re-registering the same slug replaces it, so a module
    that is imported twice does no harm)."""
    if not PREFIX_PATTERN.match(calculator.slug):
        raise ValueError(f"calculator slug {calculator.slug!r} must be lower-case letters, "
                         "digits and hyphens")
    clash = next((c for c in _CALCULATORS.values() if calculator.api_path
                  and c.api_path == calculator.api_path and c.slug != calculator.slug), None)
    if clash is not None:
        raise ValueError(f"{calculator.slug!r} and {clash.slug!r} both claim the API path "
                         f"{calculator.api_path!r}")
    _CALCULATORS[calculator.slug] = calculator
    return calculator


def _builtins_load() -> None:
    # Importing the modules registers their calculators; problem content modules register
    # theirs too, so load them, or a problem's htmx re-render could miss its calculator.
    from problems.calculators import builtin  # noqa: F401
    from problems.registry import PROBLEMS

    for problem in PROBLEMS.values():
        problem.content_module  # noqa: B018 (imported for its registrations)


def calculators_all(*, listed_only: bool = True) -> list[Calculator]:
    """Every registered calculator in page order (only those for the index when `listed_only`)."""
    _builtins_load()
    found = [c for c in _CALCULATORS.values() if (c.listed and c.page) or not listed_only]
    return sorted(found, key=lambda c: c.order)


def calculator_get(slug: str) -> Calculator | None:
    """The calculator registered as `slug`, or None."""
    if slug not in _CALCULATORS:
        _builtins_load()
    return _CALCULATORS.get(slug)


def result_compose(*results: Result,
                   values: Mapping[str, float | int | str | bool] | None = None) -> Result:
    """Several formulas' results as one: steps concatenated in order, values merged (later
    results win on a clash; `values` adds or overrides named values)."""
    merged: dict[str, float | int | str | bool] = {}
    steps: list[Step] = []
    for result in results:
        merged.update(result.values)
        steps.extend(result.steps)
    merged.update(values or {})
    return Result(values=merged, steps=tuple(steps))


def _default_data(form: CalculatorForm, *, initial: Mapping[str, object]) -> dict[str, str]:
    # The form's defaults with the embedding page's overrides on top, as a query would carry
    # them, so the form binds (and validates) exactly as if the learner had typed them.
    data = {}
    for name, value in {**form.defaults(), **initial}.items():
        if name in form.fields and value is not None:
            data[form.add_prefix(name)] = str(value)
    return data


def query_names_prefix(query: Mapping[str, object], form: CalculatorForm) -> bool:
    """Whether the query carries any of `form`'s (prefixed) fields: then it binds the form."""
    return any(form.add_prefix(name) in query for name in form.fields)


def _result_compute(calculator: Calculator, form: CalculatorForm) -> Result | None:
    """The formula's result for a valid form, or None with the refusal added to the form."""
    try:
        result = calculator.compute(**inputs_normalise(calculator.inputs, form.cleaned_data))
    except ArithmeticInputError as error:
        # The arithmetic's messages start lower-case (they follow "field: " in the API).
        message = error.message[:1].upper() + error.message[1:]
        form.add_error(error.field if error.field in form.fields else None, message)
        return None
    except (ArithmeticError, ValueError) as error:
        # A formula that overflows or divides by zero on some corner of its inputs must not
        # take the page down: say so beside the form instead.
        form.add_error(None, f"These inputs cannot be computed ({error}). Try other values.")
        return None
    if not _finite(result):
        form.add_error(None, "These inputs give a result too large to show. Try smaller values.")
        return None
    return result


def _plots_build(calculator: Calculator, inputs: dict, result: Result) -> tuple[Drawn, ...]:
    """Each plot's figure and table; a plot that cannot be drawn for these inputs is left out
    (the steps still stand on their own)."""
    plots: list[Plot | BarPlot] = []
    for build, many in ((calculator.plot, False), (calculator.plots, True)):
        if build is None:
            continue
        try:
            built = build(inputs=inputs, result=result)
        except (ArithmeticError, ValueError):
            continue
        plots.extend(built if many else (built,))
    return tuple(Drawn(figure=plot_figure(p), table=plot_table(p)) for p in plots)


def _note_build(calculator: Calculator, inputs: dict, result: Result) -> str:
    if calculator.note is None:
        return ""
    try:
        return calculator.note(inputs=inputs, result=result)
    except (ArithmeticError, ValueError, KeyError):
        return ""


def calculator_evaluate(calculator: Calculator, *, query: Mapping[str, object] | None = None,
                        prefix: str | None = None,
                        initial: Mapping[str, object] | None = None) -> CalculatorState:
    """Fill `calculator` in from `query` (request.GET) when it names this prefix's fields, else
    from its defaults with `initial` on top. Never raises for bad input: an input the form or
    the formula refuses becomes an error on that field (or on the form)."""
    prefix = prefix or calculator.slug
    if not PREFIX_PATTERN.match(prefix):
        raise ValueError(f"prefix {prefix!r} must be lower-case letters, digits and hyphens")
    unbound = calculator.form_class(prefix=prefix)
    query = query or {}
    if query_names_prefix(query, unbound):
        # Fields the query leaves out keep their defaults, so a link made before an input
        # existed still works; a field it names, even blank, is taken as given.
        data = _default_data(unbound, initial=initial or {})
        for name in unbound.fields:
            key = unbound.add_prefix(name)
            if key in query:
                data[key] = query[key]
        form = calculator.form_class(data, prefix=prefix)
    else:
        form = calculator.form_class(_default_data(unbound, initial=initial or {}), prefix=prefix)
    result = _result_compute(calculator, form) if form.is_valid() else None
    _evaluated_note(prefix)
    if result is None and form.is_bound and query_names_prefix(query, unbound):
        _refusal_record(calculator, prefix, form)
    inputs = inputs_normalise(calculator.inputs, dict(form.cleaned_data)) if result else {}
    drawn = _plots_build(calculator, inputs, result) if result else ()
    note = _note_build(calculator, inputs, result) if result else ""
    return CalculatorState(calculator=calculator, prefix=prefix, form=form, result=result,
                           drawn=drawn, note=note)



def calculator_inputs_result(calculator: Calculator, *, query: Mapping[str, object] | None,
                             prefix: str) -> tuple[dict, object, bool]:
    """What a problem's prose is computed from: the learner's inputs and their result, and True;
    or, when there are none or they are refused (the form shows the error beside the field),
    the calculator's defaults and their result, and False."""
    state = calculator_evaluate(calculator, query=query, prefix=prefix)
    if state.result is not None:
        return (inputs_normalise(calculator.inputs, dict(state.form.cleaned_data)),
                state.result, True)
    inputs = calculator.defaults()
    return inputs, calculator.compute(**inputs), False

def _finite(result: Result) -> bool:
    return all(math.isfinite(v) for v in result.values.values()
               if isinstance(v, float)) and all(math.isfinite(s.value) for s in result.steps)
