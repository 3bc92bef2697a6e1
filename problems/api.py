"""The JSON API over problems.arithmetic: one GET endpoint per registered formula and one per
catalog.

Endpoints are not written by hand: each comes from a calculator's declaration (its `inputs`,
`compute` and `api_path` in problems/calculators/ or a problem's content module), so the
calculators and the API cannot drift apart. Every answer holds its result fields and `steps`.
Bad input never reaches a 500: unknown ids and out-of-range values come back as 400
`{"detail": ..., "field": ...}`, and malformed or missing parameters as 422 in the same shape
(plus ninja's `errors` list).
"""

import dataclasses
import inspect
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Router
from ninja.errors import ValidationError
from ninja.openapi.docs import Swagger
from ninja.parser import Parser
from pydantic import BaseModel, ConfigDict

from problems import arithmetic as a
from problems.arithmetic.memory import params_count_model
from problems.calculators import Calculator, calculators_all
from problems.forms import REQUIRED, Input, inputs_normalise


class _StrictParser(Parser):
    """JSON bodies read by course/json_input.py: invalid Unicode (a lone surrogate), numbers
    past 30 digits and nesting past 32 levels are refused at parse time (ninja answers 400,
    "Cannot parse request body"), never passed on as text."""

    def parse_body(self, request: HttpRequest) -> dict:
        from course.json_input import json_strict_loads

        return json_strict_loads(request.body)


api = NinjaAPI(
    parser=_StrictParser(),
    title="Inference arithmetic",
    version="1",
    description="The calculators of the LLM inference course: every formula returns its "
    "results and the worked steps (label, expression with inputs and units, value, unit, "
    "display). Units: bytes, seconds, FLOP, FLOP/s, bytes/s, tokens/s, USD. GPU memory is the "
    "driver's reported total; times are roofline bounds (the larger of compute and memory "
    "time); results at 100% efficiency are floors.",
    urls_namespace="api",
    # Deep links put a link inside each operation's toggle button: a control inside a control,
    # which a screen reader cannot use (axe-core's nested-interactive).
    docs=Swagger(settings={"deepLinking": False}),
)
calc = Router(tags=["calculators"])
catalog = Router(tags=["catalogs"])
drills_router = Router(tags=["drills"])

Answer = dict[str, object]


class StepOut(BaseModel):
    """One line of working: the expression has its inputs and units filled in."""

    label: str
    expression: str
    value: float
    unit: str
    display: str


class CalcOut(BaseModel):
    """A formula's result fields (named per endpoint, in SI-style units) plus its steps."""

    model_config = ConfigDict(extra="allow")
    steps: list[StepOut]


@api.exception_handler(a.ArithmeticInputError)
def arithmetic_input_error(request: HttpRequest, exc: a.ArithmeticInputError) -> HttpResponse:
    return api.create_response(
        request, {"detail": f"{exc.field}: {exc.message}", "field": exc.field}, status=400
    )


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    location = [str(part) for part in first.get("loc", ())]
    field = location[-1] if location else ""
    message = first.get("msg", "invalid input")
    return api.create_response(
        request,
        {"detail": f"{field}: {message}", "field": field, "errors": exc.errors},
        status=422,
    )


def _answer(formula: Callable[..., a.Result], **inputs: object) -> Answer:
    """Run a formula; a result that is not finite is refused as bad input, never sent."""
    try:
        return formula(**inputs).to_dict()
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        if isinstance(exc, a.ArithmeticInputError):
            raise
        # Which input pushed the result out of range is not knowable here: name the first
        # numeric one and list them all.
        numeric = [k for k, v in inputs.items() if isinstance(v, int | float)]
        field = numeric[0] if numeric else next(iter(inputs), "")
        raise a.ArithmeticInputError(
            field=field,
            message=f"the result is too large to compute; reduce one of {', '.join(numeric)}",
        ) from exc


def _describe(item: Input) -> str:
    unit = f" ({item.unit})" if item.unit else ""
    limits = []
    if item.minimum is not None:
        limits.append(f"at least {item.minimum:g}")
    if item.maximum is not None:
        limits.append(f"at most {item.maximum:g}")
    text = f"{item.label}{unit}"
    if limits:
        text += ": " + ", ".join(limits)
    return f"{text}. {item.help}".strip() if item.help else text


def _parameter(item: Input) -> inspect.Parameter:
    kind = item.python_type
    annotation = kind if item.api is REQUIRED or item.api is not None else kind | None
    default = Query(item.api if item.api is not REQUIRED else ..., description=_describe(item))
    return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


def endpoint_build(calculator: Calculator) -> Callable[..., Answer]:
    """The view for `calculator`'s API path: its inputs as query parameters, their declared
    limits checked (400 naming the field), then its formula."""

    def endpoint(request: HttpRequest, **given: object) -> Answer:
        for item in calculator.inputs:
            problem = item.bounds_check(given.get(item.name))
            if problem:
                raise a.ArithmeticInputError(field=item.name, message=problem)
        return _answer(calculator.compute, **inputs_normalise(calculator.inputs, given))

    request = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=HttpRequest)
    endpoint.__signature__ = inspect.Signature(
        [request, *(_parameter(item) for item in calculator.inputs)])
    endpoint.__name__ = calculator.slug.replace("-", "_")
    endpoint.__doc__ = calculator.explanation
    return endpoint


for _calculator in calculators_all(listed_only=False):
    if _calculator.api_path:
        calc.get(_calculator.api_path, response=CalcOut,
                 summary=_calculator.api_summary or _calculator.title,
                 operation_id=_calculator.slug.replace("-", "_"))(endpoint_build(_calculator))


def _entry(entry: object, **extra: object) -> dict[str, object]:
    return {**dataclasses.asdict(entry), **extra}


@catalog.get("/models", response=list[dict], summary="Models, from their config.json files")
def catalog_models(request: HttpRequest) -> list[dict[str, object]]:
    entries = []
    for model in a.models_all().values():
        counts = params_count_model(model)
        entries.append(_entry(model, params=counts["total"], active_params=counts["active"],
                              non_embedding_params=counts["non_embedding"]))
    return entries


@catalog.get("/gpus", response=list[dict], summary="GPUs, from the vendors' datasheets")
def catalog_gpus(request: HttpRequest) -> list[dict[str, object]]:
    return [
        _entry(g, interconnect_one_way_bytes_per_second=g.interconnect_one_way_bytes_per_second,
               peer_one_way_bytes_per_second=g.peer_one_way_bytes_per_second,
               memory_total_bytes=g.memory_total_bytes)
        for g in a.GPUS.values()
    ]


@catalog.get("/dtypes", response=list[dict], summary="Number formats, bits per value")
def catalog_dtypes(request: HttpRequest) -> list[dict[str, object]]:
    return [_entry(d, bits=d.bits, bytes=d.bytes) for d in a.DTYPES.values()]


class DrillGradeIn(BaseModel):
    """An answer to a drawn drill: the question's kind and seed, and the answer as typed
    ("16 GB", "4.8 ms", "1.3e11")."""

    kind: str
    seed: int
    answer: str


def _drill_question(kind: str, seed: int):  # noqa: ANN202
    from problems.drills import kind_get, question_draw

    found = kind_get(kind)
    if found is None:
        raise a.ArithmeticInputError(field="kind", message=f"no drill kind {kind!r}")
    if not 0 < seed < 2**31:
        raise a.ArithmeticInputError(field="seed", message="must be from 1 to 2,147,483,647")
    return question_draw(found, seed)


@drills_router.get("/kinds", summary="Every drill kind: its topic, problem, level, title")
def drill_kinds(request: HttpRequest) -> list[dict[str, object]]:
    from problems.drills import DIMENSIONS, KINDS

    return [{"kind": k.slug, "topic": k.topic, "problem": k.problem, "level": k.level,
             "title": k.title, "answer_unit_hint": DIMENSIONS[k.dimension]} for k in KINDS]


@drills_router.get("/draw", summary="Draw a question (by topic or kind; a seed repeats one)")
def drill_draw(request: HttpRequest, topic: str | None = None, kind: str | None = None,
               seed: int | None = None) -> dict[str, object]:
    import random

    from problems.drills import TOPICS, kinds_for, question_json

    if kind is None:
        if topic is not None and topic not in TOPICS:
            raise a.ArithmeticInputError(field="topic", message=f"no drill topic {topic!r}; "
                                         f"choose from {', '.join(TOPICS)}")
        kind = random.choice(kinds_for(topic=topic)).slug
    return question_json(_drill_question(kind, seed or random.randrange(1, 2**31)))


@drills_router.post("/grade", summary="Grade an answer: verdict, the mistake named, the working")
def drill_grade(request: HttpRequest, body: DrillGradeIn) -> dict[str, object]:
    from problems.drills import AnswerError, answer_grade, grade_json

    question = _drill_question(body.kind, body.seed)
    try:
        grade = answer_grade(question, body.answer)
    except AnswerError as error:
        raise a.ArithmeticInputError(field="answer", message=str(error)) from error
    return grade_json(question, grade)


api.add_router("/calc", calc)
api.add_router("/drills", drills_router)
api.add_router("/catalog", catalog)
