"""Form fields for calculators: catalog choices by id with readable names, and numbers with
their unit in the label, bounds checked beside the field.

A calculator's form subclasses `CalculatorForm` and declares its fields with these builders:

    class KvCacheForm(CalculatorForm):
        model = model_field()
        tokens = whole_field("Context length", unit="tokens", initial=32_768, maximum=TOKENS_MAX)

Every field's error sits in its own element right after the input (see
templates/course/_field_error.html), which htmx replaces out of band as the learner types.
"""

from django import forms

from course.forms import DescribedErrorsMixin
from problems.arithmetic.catalog import DTYPES, GPUS, models_all
from problems.arithmetic.units import number_format


class CalculatorForm(DescribedErrorsMixin, forms.Form):
    """Base of every calculator's form; fields carry their own initial (default) values."""

    def defaults(self) -> dict[str, object]:
        """Each field's initial value, by field name (unprefixed)."""
        return {name: field.initial for name, field in self.fields.items()}


def _label(text: str, unit: str) -> str:
    return f"{text} ({unit})" if unit else text


def model_field(*, label: str = "Model", initial: str = "llama-3-8b") -> forms.ChoiceField:
    """A model from the catalog, by id (`llama-3-70b`), shown by name."""
    choices = [(m.id, m.name) for m in models_all().values()]
    return forms.ChoiceField(label=label, choices=choices, initial=initial,
                             error_messages={"invalid_choice": "Choose a model from the list."})


def gpu_field(*, label: str = "GPU", initial: str = "h100-sxm") -> forms.ChoiceField:
    """A GPU from the catalog, by id (`h100-sxm`), shown by name."""
    return forms.ChoiceField(label=label, choices=[(g.id, g.name) for g in GPUS.values()],
                             initial=initial,
                             error_messages={"invalid_choice": "Choose a GPU from the list."})


def dtype_field(*, label: str = "Weight format", initial: str = "bf16",
                required: bool = True) -> forms.ChoiceField:
    """A number format from the catalog, by id (`fp8`), shown by name and bits per value."""
    choices = [(d.id, f"{d.name} ({number_format(d.bits)} bits)") for d in DTYPES.values()]
    if not required:
        choices = [("", "same as the weights")] + choices
    return forms.ChoiceField(label=label, choices=choices, initial=initial, required=required,
                             error_messages={"invalid_choice": "Choose a format from the list."})


def _number_widget(*, minimum: float, maximum: float, step: str) -> forms.NumberInput:
    return forms.NumberInput(attrs={"min": minimum, "max": maximum, "step": step,
                                    "inputmode": "decimal", "class": "number"})


def _bounds_messages(text: str, unit: str, minimum: float, maximum: float,
                     whole: bool) -> dict[str, str]:
    suffix = f" {unit}" if unit else ""
    kind = "a whole number" if whole else "a number"
    return {
        "required": f"Enter the {text.lower()}.",
        "invalid": f"Enter the {text.lower()} as {kind}{', in ' + unit if unit else ''}.",
        "min_value": f"Enter at least {number_format(minimum)}{suffix}.",
        "max_value": f"Enter at most {number_format(maximum)}{suffix}.",
    }


def whole_field(text: str, *, unit: str = "", initial: int, minimum: int = 1,
                maximum: int, help_text: str = "") -> forms.IntegerField:
    """A whole number from `minimum` to `maximum`; the label reads "text (unit)"."""
    return forms.IntegerField(
        label=_label(text, unit), initial=initial, min_value=minimum, max_value=maximum,
        help_text=help_text, widget=_number_widget(minimum=minimum, maximum=maximum, step="1"),
        error_messages=_bounds_messages(text, unit, minimum, maximum, whole=True))


def real_field(text: str, *, unit: str = "", initial: float | None, minimum: float = 0.0,
               maximum: float, help_text: str = "", required: bool = True) -> forms.FloatField:
    """A real number from `minimum` to `maximum` (the formula may refuse an endpoint, and then
    its message shows beside this field); the label reads "text (unit)". Left blank, an optional
    field gives None, which the formula reads as "use the catalog's figure"."""
    return forms.FloatField(
        label=_label(text, unit), initial=initial, min_value=minimum, max_value=maximum,
        required=required,
        help_text=help_text, widget=_number_widget(minimum=minimum, maximum=maximum, step="any"),
        error_messages=_bounds_messages(text, unit, minimum, maximum, whole=False))
