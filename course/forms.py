"""The site's forms: the stopping-distance calculator and the account forms.

Every field's error sits in its own element (id `<field id>_error`) right after the input, and
the input points at it with aria-describedby, so a screen reader hears the error with the field
and an htmx response can replace just that element.
"""

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm

from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.reaction import (
    LATENCY_MS_MAX,
    LATENCY_MS_MIN,
    SPEED_KMH_MAX,
    SPEED_KMH_MIN,
    reaction_distance,
)
from problems.arithmetic.steps import Result
from problems.arithmetic.units import number_format


class DescribedErrorsMixin:
    """Point each input at its error element (and its help text, as Django already does)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            bound = self[name]
            ids = [f"{bound.auto_id}_error"]
            if field.help_text:
                ids.append(f"{bound.auto_id}_helptext")
            field.widget.attrs["aria-describedby"] = " ".join(ids)


def _number_input(*, low: float, high: float) -> forms.NumberInput:
    return forms.NumberInput(attrs={"min": low, "max": high, "step": "any",
                                    "inputmode": "decimal", "class": "number"})


class ReactionForm(DescribedErrorsMixin, forms.Form):
    """Speed and inference latency in, distance travelled before reacting out."""

    speed_kmh = forms.FloatField(
        label="Speed", min_value=SPEED_KMH_MIN, max_value=SPEED_KMH_MAX,
        widget=_number_input(low=SPEED_KMH_MIN, high=SPEED_KMH_MAX),
        error_messages={
            "required": "Enter the speed in km/h.",
            "invalid": "Enter the speed as a number of km/h, such as 50.",
            "min_value": "Speed cannot be negative.",
            "max_value": (f"That is faster than any car or robot here: enter at most "
                          f"{number_format(SPEED_KMH_MAX)} km/h."),
        },
    )
    latency_ms = forms.FloatField(
        label="Inference latency", min_value=LATENCY_MS_MIN, max_value=LATENCY_MS_MAX,
        widget=_number_input(low=LATENCY_MS_MIN, high=LATENCY_MS_MAX),
        error_messages={
            "required": "Enter the latency in milliseconds.",
            "invalid": "Enter the latency as a number of milliseconds, such as 200.",
            "min_value": "Latency cannot be negative.",
            "max_value": (f"Enter at most {number_format(LATENCY_MS_MAX)} ms: a decision that "
                          f"takes longer than a minute is not steering anything."),
        },
    )

    units = {"speed_kmh": "km/h", "latency_ms": "ms"}
    defaults = {"speed_kmh": 100, "latency_ms": 300}

    def clean(self) -> dict:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            self.result = reaction_distance(speed_kmh=cleaned["speed_kmh"],
                                            latency_ms=cleaned["latency_ms"])
        except ArithmeticInputError as error:  # the formula's own bounds have the last word
            self.add_error(error.field, f"{self.fields[error.field].label} {error.message}.")
        return cleaned

    @classmethod
    def from_query(cls, query) -> "ReactionForm":
        """Bound to the query when it names either field, else bound to the defaults."""
        if any(name in query for name in cls.base_fields):
            return cls(query)
        return cls({name: str(value) for name, value in cls.defaults.items()})

    def result_or_none(self) -> Result | None:
        return getattr(self, "result", None) if self.is_valid() else None


class SignupForm(DescribedErrorsMixin, UserCreationForm):
    pass


class LoginForm(DescribedErrorsMixin, AuthenticationForm):
    pass
