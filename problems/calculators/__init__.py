"""Calculators: a real form whose inputs feed `problems/arithmetic`, the worked steps it returns,
and optionally a plot. The same component sits on /calculators/, on /calculators/<slug>/ and
inside problem pages.

Embed one in any template:

    {% load calculator_tags %}
    {% calculator "kv-cache" model="llama-3-70b" tokens=32768 users=100 %}
    {% calculator "decode" prefix="p1-decode" model="llama-3-8b" batch=1 %}

Keyword arguments other than `prefix` and `heading` are initial values of the form's fields (by
field name); a request whose query names this calculator's fields (`?kv-cache-tokens=8192`)
overrides them. `prefix` (default: the slug; lower-case letters, digits, hyphens) prefixes the
field names, so several calculators, even two of the same kind, can sit on one page. `heading`
(default 3) is the level of the calculator's title. The element ids are `calc-<prefix>` (the
section, a link target), `calc-<prefix>-output` (steps and plot) and `id_<prefix>-<field>`.
Without JavaScript the form submits to the page it is on, which re-renders with the inputs kept;
with htmx each change re-renders only the steps and the plot (GET
/calculators/<slug>/?prefix=...&<fields>, HX-Request: true). The tag also loads plotly.js and
static/js/plots.js once per page.

Register a problem's own calculator (several formulas composed) from its content module:

    from problems.calculators import Calculator, calculator_register, result_compose
    from problems.forms import CalculatorForm, model_field, gpu_field, whole_field

    class RequestForm(CalculatorForm):
        model = model_field(initial="llama-3-8b")
        gpu = gpu_field()
        prompt_tokens = whole_field("Prompt", unit="tokens", initial=1000, maximum=10**6)

    def request_compute(*, model, gpu, prompt_tokens) -> Result:
        return result_compose(prefill_time(...), decode_time(...))

    calculator_register(Calculator(
        slug="p01-request", title="...", explanation="...", form_class=RequestForm,
        compute=request_compute, plot=None, listed=False))

`compute` receives the form's cleaned_data as keywords and returns a `Result`; an
`ArithmeticInputError(field=...)` it raises shows beside that field. `plot(inputs=..., result=...)`
returns a `problems.plots.Plot`.
"""

from problems.calculators.registry import (
    Calculator,
    CalculatorState,
    calculator_evaluate,
    calculator_get,
    calculator_inputs_result,
    calculator_register,
    calculators_all,
    refusals_collected,
    result_compose,
)

__all__ = [
    "Calculator", "CalculatorState", "calculator_evaluate", "calculator_get",
    "calculator_inputs_result", "calculator_register", "calculators_all", "refusals_collected",
    "result_compose",
]
