"""The calculator registry, its evaluation from a query, and the plot helper (no HTTP)."""

import json
import math

import pytest
from django.http import QueryDict

from problems.arithmetic import memory
from problems.arithmetic.steps import Result, Step
from problems.calculators import (
    calculator_evaluate,
    calculator_get,
    calculators_all,
    result_compose,
)
from problems.plots import Mark, Plot, Series, plot_figure, plot_table, sweep_whole

# Every formula of issue 4 §2 has a calculator.
EXPECTED_SLUGS = {
    "params", "weights", "kv-cache", "batch-max", "prefill", "decode", "roofline", "speculative",
    "queue", "chunked-prefill", "prefix-cache", "kv-transfer", "quantization", "moe-memory",
    "moe-all-to-all", "cost", "capacity",
}


def _finite_numbers(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite_numbers(v) for v in value)
    return True


def test_registry_holds_every_expected_calculator():
    slugs = {c.slug for c in calculators_all()}
    assert EXPECTED_SLUGS <= slugs


@pytest.mark.parametrize("calculator", calculators_all(), ids=lambda c: c.slug)
def test_each_calculator_computes_from_its_defaults(calculator):
    state = calculator_evaluate(calculator)
    assert state.form.is_valid(), state.form.errors
    assert state.result is not None and state.result.steps
    if calculator.plot is not None:
        # The figure survives strict JSON (no NaN or Infinity) and every line has points.
        figure = json.loads(state.figure_json)
        assert _finite_numbers(figure)
        assert figure["data"] and all(trace["x"] for trace in figure["data"])
        assert len(state.table["rows"]) >= 2


def test_query_overrides_initial_and_initial_overrides_defaults():
    kv = calculator_get("kv-cache")
    from_initial = calculator_evaluate(kv, initial={"tokens": 1000, "users": 3})
    assert from_initial.result["total_bytes"] == memory.kv_cache(
        model="llama-3.1-70b", tokens=1000, users=3)["total_bytes"]
    query = QueryDict("kv-cache-model=llama-3-8b&kv-cache-tokens=1300&kv-cache-users=1"
                      "&kv-cache-dtype=bf16&kv-cache-tp=1")
    from_query = calculator_evaluate(kv, query=query, initial={"tokens": 1000, "users": 3})
    assert from_query.result["total_bytes"] == memory.kv_cache(
        model="llama-3-8b", tokens=1300, users=1)["total_bytes"]


def test_a_query_for_another_prefix_leaves_this_calculator_on_its_defaults():
    kv = calculator_get("kv-cache")
    state = calculator_evaluate(kv, query=QueryDict("other-tokens=5"), prefix="p3-kv")
    assert state.form["tokens"].value() == "32768"
    assert state.result is not None


def test_out_of_range_input_is_a_field_error_and_keeps_what_was_typed():
    kv = calculator_get("kv-cache")
    query = QueryDict("kv-cache-model=llama-3.1-70b&kv-cache-tokens=-5&kv-cache-users=1"
                      "&kv-cache-dtype=bf16&kv-cache-tp=1")
    state = calculator_evaluate(kv, query=query)
    assert state.result is None
    assert "tokens" in state.form.errors
    assert state.form["tokens"].value() == "-5"


def test_the_formulas_own_refusal_lands_on_its_field():
    # 8 KV heads cannot split evenly over 3 GPUs: the arithmetic says so, naming tp.
    kv = calculator_get("kv-cache")
    state = calculator_evaluate(kv, initial={"tp": 3})
    assert state.result is None
    assert "tp" in state.form.errors


@pytest.mark.parametrize("text", ["nan", "inf", "1e400", "twelve", ""])
def test_unusable_numbers_are_field_errors(text):
    kv = calculator_get("kv-cache")
    query = QueryDict(f"kv-cache-model=llama-3-70b&kv-cache-tokens={text}&kv-cache-users=1"
                      "&kv-cache-dtype=bf16&kv-cache-tp=1")
    state = calculator_evaluate(kv, query=query)
    assert state.result is None and "tokens" in state.form.errors


def test_unknown_choice_is_a_field_error():
    weights = calculator_get("weights")
    state = calculator_evaluate(weights, query=QueryDict("weights-model=gpt-9&weights-dtype=bf16"))
    assert "model" in state.form.errors


def test_bad_prefix_is_refused():
    with pytest.raises(ValueError):
        calculator_evaluate(calculator_get("weights"), prefix="<script>")


def test_result_compose_concatenates_steps_and_merges_values():
    a = Result(values={"x": 1.0, "shared": 1}, steps=(Step("A", "a", 1.0, "s", "1 s"),))
    b = Result(values={"y": 2.0, "shared": 2}, steps=(Step("B", "b", 2.0, "s", "2 s"),))
    combined = result_compose(a, b, values={"z": 3})
    assert [s.label for s in combined.steps] == ["A", "B"]
    assert combined.values == {"x": 1.0, "y": 2.0, "shared": 2, "z": 3}


def test_plot_figure_drops_points_that_are_not_finite_or_not_on_a_log_axis():
    plot = Plot(title="t", x_title="x (s)", y_title="y (s)", x_log=True,
                series=(Series("a", (0.0, 1.0, 2.0, 3.0), (1.0, math.inf, math.nan, 4.0)),),
                marks=(Mark(2.0, "here"), Mark(math.nan, "nowhere")))
    figure = plot_figure(plot)
    assert figure["data"][0]["x"] == [3.0] and figure["data"][0]["y"] == [4.0]
    # On a log axis plotly wants a shape at the value but an annotation at its log10.
    assert [s["x0"] for s in figure["layout"]["shapes"]] == [2.0]
    assert [n["x"] for n in figure["layout"]["annotations"]] == [math.log10(2.0)]
    json.dumps(figure, allow_nan=False)


def test_plot_table_lines_up_series_by_x():
    plot = Plot(title="t", x_title="Batch (sequences)", y_title="y",
                series=(Series("a", (1, 2), (10.0, 20.0)), Series("b", (2, 4), (5.0, 7.5))))
    table = plot_table(plot)
    assert table["headers"] == ["Batch (sequences)", "a", "b"]
    assert table["rows"] == [["1", "10", ""], ["2", "20", "5"], ["4", "", "7.5"]]
    assert table["unit"] == "y"  # the cells' unit, which no header carries


def test_sweep_whole_is_sorted_distinct_and_keeps_both_ends():
    values = sweep_whole(1, 1000, count=10)
    assert values[0] == 1 and values[-1] == 1000
    assert values == sorted(set(values))


HOSTILE_VALUES = ["-1", "0", "1e308", "nan", "", "99999999999999999999", "0.5"]


@pytest.mark.parametrize("calculator", calculators_all(), ids=lambda c: c.slug)
def test_no_input_breaks_a_calculator(calculator):
    # Each field in turn gets each hostile value, the others their defaults: the outcome is
    # either a result with finite numbers or an error message, never an exception.
    defaults = calculator_evaluate(calculator).form
    for name in defaults.fields:
        for text in HOSTILE_VALUES:
            query = QueryDict(mutable=True)
            for other, field in defaults.fields.items():
                query[defaults.add_prefix(other)] = "" if field.initial is None else str(
                    field.initial)
            query[defaults.add_prefix(name)] = text
            state = calculator_evaluate(calculator, query=query)
            if state.result is None:
                assert state.form.errors, (name, text)
            else:
                assert _finite_numbers(json.loads(state.figure_json or "null")), (name, text)


def test_a_plot_that_cannot_be_drawn_leaves_the_steps():
    from problems.arithmetic.errors import ArithmeticInputError
    from problems.calculators import Calculator, calculator_get

    def plot_refused(*, inputs: dict, result: Result) -> Plot:
        raise ArithmeticInputError(field="model", message="no plot for this one")

    weights = calculator_get("weights")
    calculator = Calculator(slug="weights-unplotted", title="t", explanation="e",
                            inputs=weights.inputs, compute=weights.compute, plot=plot_refused)
    state = calculator_evaluate(calculator)
    assert state.result is not None and state.figure is None and not state.form.errors


def test_kv_cache_formats_are_named_as_kv_formats_not_weight_formats():
    """The KV-format choices are the ones engines offer; INT8 there is TensorRT-LLM's INT8 KV
    cache, not the weights-and-activations W8A8 format, and FP32 is the CPU demo's only."""
    from problems.forms import kv_dtype_input

    labels = [label for _, label in kv_dtype_input().field().choices]
    assert not any("W8A8" in label for label in labels)
    # One bracket each: the name, then bits and the note together.
    assert "INT8 (8 bits; TensorRT-LLM's KV cache format)" in labels
    assert "FP32 (32 bits; a cache only the course's CPU demo model keeps)" in labels
    step = memory.kv_cache(model="llama-3-8b", tokens=1, dtype="int8").steps[0]
    assert "1 B per INT8 value (TensorRT-LLM's KV cache format)" in step.expression


@pytest.mark.parametrize("kv_dtype", ["fp32", "int8", "fp8", "fp8-e5m2", "bf16"])
def test_the_kv_cache_steps_never_nest_a_format_name_in_brackets(kv_dtype):
    """The shared KV-cache calculator once printed "(FP32 (the course's CPU demo model only))"
    and "(FP8 (E4M3))": a format's name, bracketed inside the step's own bracket. No bracket
    of memory.py's KV steps opens inside another, for every KV format."""
    def nested(text: str) -> bool:
        depth = 0
        for char in text:
            if char == "(":
                depth += 1
                if depth > 1:
                    return True
            elif char == ")":
                depth -= 1
        return False

    kv = memory.kv_cache(model="llama-3-8b", tokens=100, dtype=kv_dtype)
    fit = memory.batch_max(model="llama-3-8b", gpu="h100-sxm", context_tokens=100,
                           kv_dtype=kv_dtype)
    for step in (*kv.steps, *fit.steps):
        assert not nested(step.label), step.label
        assert not nested(step.expression), step.expression


def test_the_prompt_throughput_example_is_computed_at_the_mfu_it_names():
    """Llama 3 8B, 1,000 tokens on an H100 at 50% MFU: 1.43×10¹³ FLOP ÷ 494.8 TFLOP/s =
    28.7 ms, so about 35,000 tokens/s; the MFU in the sentence is the one the figure used."""
    from problems.calculators import fleet

    help_text = next(i.help for i in calculator_get("capacity").inputs
                     if i.name == "input_tokens_per_second_per_gpu")
    assert fleet.EXAMPLE_PREFILL_RATE == pytest.approx(1_000 / 0.0287, rel=0.01)
    assert "at 50% MFU prefills 1,000-token prompts at about 35,000 tokens/s" in help_text
