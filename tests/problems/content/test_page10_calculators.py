"""Page 10's calculators and simulators never break on hostile input: each field in turn gets
each hostile value, the others their defaults, and the outcome is a finite result with its
plots or a message, never an exception. Their figures survive strict JSON."""

import json
import math

import pytest
from django.http import QueryDict

from problems.calculators import calculator_evaluate, calculator_get

SLUGS = ("moe-parallelism", "moe-routing", "cost-waterfall", "cost-replica", "capstone",
         "capstone-day")
HOSTILE = ["-1", "nan", "", "1e308"]


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


@pytest.mark.parametrize("slug", SLUGS)
def test_defaults_draw_every_plot(slug):
    state = calculator_evaluate(calculator_get(slug))
    assert state.result is not None and state.result.steps, state.form.errors
    assert len(state.drawn) >= 2
    for drawn in state.drawn:
        figure = json.loads(drawn.figure_json)
        assert _finite(figure) and figure["data"]
        assert drawn.table["rows"]


@pytest.mark.slow
@pytest.mark.parametrize("slug", SLUGS)
def test_no_input_breaks_it(slug):
    calculator = calculator_get(slug)
    defaults = calculator_evaluate(calculator).form
    for name in defaults.fields:
        for text in HOSTILE:
            query = QueryDict(mutable=True)
            for other, field in defaults.fields.items():
                query[defaults.add_prefix(other)] = ("" if field.initial is None
                                                     else str(field.initial))
            query[defaults.add_prefix(name)] = text
            state = calculator_evaluate(calculator, query=query)
            if state.result is None:
                assert state.form.errors, (name, text)
            else:
                for drawn in state.drawn:
                    assert _finite(json.loads(drawn.figure_json)), (name, text)
