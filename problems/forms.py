"""A formula's inputs, declared once: `Input`s with label, unit, limits, help, the calculator's
starting value and the JSON API's default. From one tuple of them come both the calculator's
form (`form_class_build`) and the API endpoint's query parameters (problems/api.py).

    KV_CACHE_INPUTS = (
        model_input(initial="llama-3.1-70b"),
        whole_input("tokens", "Context per user", unit="tokens", initial=32_768,
                    maximum=TOKENS_MAX),
        whole_input("users", "Concurrent users", unit="sequences", initial=100, api=1,
                    maximum=USERS_MAX),
    )

`api` is the API's default when a query leaves the parameter out; `REQUIRED` (the default for
most inputs) makes the API insist on it. The calculator always starts from `initial`.

Every field's error sits in its own element right after the input (see
templates/course/_field_error.html), which htmx replaces out of band as the learner types.
"""

from dataclasses import dataclass, replace

from django import forms

from course.forms import DescribedErrorsMixin
from problems.arithmetic.catalog import DTYPES, GPUS, kv_dtypes, models_all
from problems.arithmetic.memory import MEMORY_FRACTION_DEFAULT, RESERVE_GB_DEFAULT, RESERVE_GB_MAX
from problems.arithmetic.units import number_format
from problems.arithmetic.wording import amount_phrase

# The API requires a parameter declared with this default.
REQUIRED = ...


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


def gpu_field(*, label: str = "GPU", initial: str = "h100-sxm", required: bool = True,
              blank: str = "", help_text: str = "") -> forms.ChoiceField:
    """A GPU from the catalog, by id (`h100-sxm`), shown by name."""
    choices = [(g.id, g.name) for g in GPUS.values()]
    if not required:
        choices = [("", blank or "none")] + choices
    return forms.ChoiceField(label=label, choices=choices, initial=initial, required=required,
                             help_text=help_text,
                             error_messages={"invalid_choice": "Choose a GPU from the list."})


def dtype_field(*, label: str = "Weight format", initial: str = "bf16",
                required: bool = True, kv: bool = False, blank: str = "",
                help_text: str = "") -> forms.ChoiceField:
    """A number format from the catalog, by id (`fp8`), shown by name and bits per value; only
    the formats engines offer for a KV cache when `kv`. Optional ones start with a blank
    choice labelled `blank`."""
    formats = kv_dtypes() if kv else DTYPES
    choices = [(d.id, d.kv_choice_label if kv else f"{d.name} ({number_format(d.bits)} bits)")
               for d in formats.values()]
    if not required:
        choices = [("", blank or "the default")] + choices
    return forms.ChoiceField(label=label, choices=choices, initial=initial, required=required,
                             help_text=help_text,
                             error_messages={"invalid_choice": "Choose a format from the list."})


def _number_widget(*, minimum: float, maximum: float, step: str) -> forms.NumberInput:
    return forms.NumberInput(attrs={"min": minimum, "max": maximum, "step": step,
                                    "inputmode": "decimal", "class": "number"})


def _bounds_messages(text: str, unit: str, minimum: float, maximum: float,
                     whole: bool) -> dict[str, str]:
    kind = "a whole number" if whole else "a number"
    return {
        "required": f"Enter the {text.lower()}.",
        "invalid": f"Enter the {text.lower()} as {kind}{', in ' + unit if unit else ''}.",
        "min_value": f"Enter at least {amount_phrase(minimum, unit, digits=6)}.",
        "max_value": f"Enter at most {amount_phrase(maximum, unit, digits=6)}.",
    }


def whole_field(text: str, *, unit: str = "", initial: int | None, minimum: int = 1,
                maximum: int, help_text: str = "", required: bool = True) -> forms.IntegerField:
    """A whole number from `minimum` to `maximum`; the label reads "text (unit)". Left blank,
    an optional field gives None ("the default")."""
    return forms.IntegerField(
        label=_label(text, unit), initial=initial, min_value=minimum, max_value=maximum,
        help_text=help_text, required=required,
        widget=_number_widget(minimum=minimum, maximum=maximum, step="1"),
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


@dataclass(frozen=True)
class Input:
    """One input of a formula: what its form field and its API query parameter are made from.

    `kind`: "model", "gpu", "dtype" (weight formats), "kv_dtype" (KV-cache formats), "whole",
    "real", "choice" (one of `choices`, (value, label) pairs: a layout, a policy, on or off) or
    "text". `initial` is the calculator's starting value; `api` the API's default
    (`REQUIRED`: the API insists on it). `required` says whether the form may leave it blank
    (a blank choice or number reaches the formula as None). `minimum` and `maximum` bound
    numbers in both places.
    """

    name: str
    kind: str
    label: str
    unit: str = ""
    initial: object = None
    api: object = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""
    required: bool = True
    blank: str = ""
    choices: tuple[tuple[str, str], ...] = ()

    @property
    def python_type(self) -> type:
        return {"whole": int, "real": float}.get(self.kind, str)

    @property
    def optional_choice(self) -> bool:
        return (self.kind in ("model", "gpu", "dtype", "kv_dtype", "choice", "text")
                and not self.required)

    def field(self) -> forms.Field:
        """The Django form field for this input."""
        if self.kind == "model":
            return model_field(label=self.label, initial=self.initial)
        if self.kind == "gpu":
            return gpu_field(label=self.label, initial=self.initial, required=self.required,
                             blank=self.blank, help_text=self.help)
        if self.kind in ("dtype", "kv_dtype"):
            return dtype_field(label=self.label, initial=self.initial, required=self.required,
                               kv=self.kind == "kv_dtype", blank=self.blank, help_text=self.help)
        if self.kind == "choice":
            choices = list(self.choices)
            if not self.required:
                choices = [("", self.blank or "the default"), *choices]
            return forms.ChoiceField(label=self.label, choices=choices, initial=self.initial,
                                     required=self.required, help_text=self.help,
                                     error_messages={"invalid_choice": "Choose from the list."})
        if self.kind == "whole":
            return whole_field(self.label, unit=self.unit, initial=self.initial,
                               minimum=int(self.minimum if self.minimum is not None else 1),
                               maximum=int(self.maximum), help_text=self.help,
                               required=self.required)
        if self.kind == "real":
            return real_field(self.label, unit=self.unit, initial=self.initial,
                              minimum=self.minimum if self.minimum is not None else 0.0,
                              maximum=self.maximum, help_text=self.help,
                              required=self.required)
        return forms.CharField(label=self.label, initial=self.initial, help_text=self.help,
                               required=self.required)

    def bounds_check(self, value: object) -> str | None:
        """Why `value` is outside this input's limits, or None (NaN is left to the formula)."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        low = self.minimum if self.minimum is not None else (1 if self.kind == "whole" else None)
        if low is not None and value < low:
            return f"must be at least {number_format(low)}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {number_format(self.maximum)}"
        return None


def form_class_build(inputs: tuple[Input, ...], *, name: str = "CalculatorForm") -> type:
    """A `CalculatorForm` subclass with one field per input, in order."""
    return type(name, (CalculatorForm,), {i.name: i.field() for i in inputs})


def inputs_normalise(inputs: tuple[Input, ...], data: dict) -> dict:
    """The formula's keyword arguments from cleaned form data or API parameters: a blank
    optional choice ("") becomes None, which the formulas read as "use the default"."""
    kinds = {i.name: i for i in inputs}
    return {name: (None if value == "" and name in kinds and kinds[name].optional_choice
                   else value)
            for name, value in data.items()}


def inputs_initial(inputs: tuple[Input, ...], **initial: object) -> tuple[Input, ...]:
    """The same inputs with other starting values for a calculator (API defaults unchanged)."""
    unknown = set(initial) - {i.name for i in inputs}
    if unknown:
        raise ValueError(f"no such inputs: {', '.join(sorted(unknown))}")
    return tuple(replace(i, initial=initial[i.name]) if i.name in initial else i for i in inputs)


def model_input(*, name: str = "model", label: str = "Model", initial: str = "llama-3-8b",
                api: object = REQUIRED) -> Input:
    return Input(name, "model", label, initial=initial, api=api)


def gpu_input(*, name: str = "gpu", label: str = "GPU", initial: str | None = "h100-sxm",
              api: object = REQUIRED, required: bool = True, blank: str = "",
              help: str = "") -> Input:
    return Input(name, "gpu", label, initial=initial, api=api, required=required, blank=blank,
                 help=help)


def dtype_input(*, name: str = "dtype", label: str = "Weight format", initial: str = "bf16",
                api: object = "bf16", help: str = "") -> Input:
    return Input(name, "dtype", label, initial=initial, api=api, help=help)


KV_HELP = ("Formats engines offer for the cache: BF16 or FP16 (the default, the model's own "
           "precision), FP8 E4M3 or E5M2 (vLLM's --kv-cache-dtype fp8 / fp8_e5m2), INT8 "
           "(TensorRT-LLM). Quantizing the weights does not change it unless you ask.")


def kv_dtype_input(*, name: str = "kv_dtype", label: str = "KV cache format",
                   initial: str = "", api: object = None) -> Input:
    return Input(name, "kv_dtype", label, initial=initial, api=api, required=False,
                 blank="the model's own precision (BF16; FP32 for the course's demo model)",
                 help=KV_HELP)


def embedding_dtype_input() -> Input:
    return Input("embedding_dtype", "dtype", "Embedding and output head format", initial="",
                 api=None, required=False,
                 blank="BF16 when the weights are narrower (as AWQ, GPTQ and FP8 keep them)",
                 help="Quantized checkpoints usually keep the embedding and output head in "
                      "BF16; choose a format to override.")


def choice_input(name: str, label: str, *, choices: tuple[tuple[str, str], ...], initial: str,
                 api: object = REQUIRED, help: str = "", required: bool = True,
                 blank: str = "") -> Input:
    """One of `choices` ((value, label) pairs), shown as a list; always sent by the form, unlike a
    checkbox, so "off" survives an htmx re-render."""
    return Input(name, "choice", label, initial=initial, api=api, help=help, required=required,
                 blank=blank, choices=choices)


ON_OFF = (("on", "on"), ("off", "off"))


def whole_input(name: str, label: str, *, unit: str = "", initial: int, api: object = REQUIRED,
                minimum: int = 1, maximum: int, help: str = "") -> Input:
    return Input(name, "whole", label, unit=unit, initial=initial, api=api, minimum=minimum,
                 maximum=maximum, help=help)


def real_input(name: str, label: str, *, unit: str = "", initial: float | None,
               api: object = REQUIRED, minimum: float = 0.0, maximum: float, help: str = "",
               required: bool = True) -> Input:
    return Input(name, "real", label, unit=unit, initial=initial, api=api, minimum=minimum,
                 maximum=maximum, help=help, required=required)


MFU_HELP = ("Model FLOPs utilisation: the share of the format's dense peak on the GPU's "
            "matrix units (NVIDIA's tensor cores, AMD's Matrix Cores) the matmuls really "
            "reach. FlashAttention-2 reports 50–73% of an A100's peak in its "
            "attention kernel and up to 72% end to end in training; a serving prefill, with "
            "other work sharing the step, is usually planned at 0.4–0.6 (an assumption, not a "
            "measurement). 1 gives a floor.")
BANDWIDTH_HELP = ("Model bandwidth utilisation (MBU, Databricks' term): the share of the "
                  "datasheet's memory bandwidth "
                  "a step achieves. Databricks' worked example (a 7B model in 16 bits at 14 ms "
                  "per token on a 2 TB/s GPU) comes to 50%; tuned kernels reading large weights "
                  "get closer to the peak, never to it. 1 gives the floor.")


def mfu_input(*, initial: float = 0.5, api: object = 1.0) -> Input:
    return real_input("mfu", "Model FLOPs utilisation (MFU)", unit="fraction of peak",
                      initial=initial, api=api, minimum=0.01, maximum=1.0, help=MFU_HELP)


def bandwidth_input(*, initial: float = 1.0, api: object = 1.0) -> Input:
    return real_input("bandwidth_efficiency", "Bandwidth efficiency (MBU)",
                      unit="fraction of peak", initial=initial, api=api, minimum=0.01,
                      maximum=1.0, help=BANDWIDTH_HELP)


def memory_inputs() -> tuple[Input, Input]:
    """The engine's share of GPU memory and the runtime reserve kept inside it."""
    return (
        real_input("memory_fraction", "Share of GPU memory the engine may use",
                   unit="fraction", initial=MEMORY_FRACTION_DEFAULT, api=MEMORY_FRACTION_DEFAULT,
                   minimum=0.01, maximum=1.0,
                   help="Of the total CUDA reports: 79.22 GiB on an H100 80GB, where nvidia-smi "
                        "shows 81,559 MiB. vLLM's gpu_memory_utilization multiplies that total "
                        "and defaults to 0.9."),
        real_input("reserve_gb", "Runtime reserve", unit="GB", initial=RESERVE_GB_DEFAULT,
                   api=RESERVE_GB_DEFAULT, minimum=0.0, maximum=RESERVE_GB_MAX,
                   help="Peak activations, the CUDA context and buffers, kept beside weights "
                        "and KV. vLLM measured 3.05 GiB (3.3 GB) for Llama 3 8B on an H100; "
                        "larger models and tensor parallelism need more."),
    )
