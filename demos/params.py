"""The parameters a visitor may send to start a demo run, checked before anything is queued.

No Django: the view turns `ParamError` into a 422 naming the field.

The prompt is also measured in tokens, as the engine will see it (the model's chat template
applied, then its tokenizer), so a prompt that fits the character limit but not the model's
context is refused here instead of taking a queue slot: 2,000 emoji are 8,000 byte-level tokens.
That uses the light `tokenizers` package and jinja2, never torch or transformers.
"""

import json
import logging
import math
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from demos.schema import ParamError, SchemaParams

logger = logging.getLogger(__name__)

PROMPT_MAX_CHARS = 2000
MAX_TOKENS_LIMIT = 512
DEMO_SLUGS = ("lifecycle", "streaming")

# Sensible defaults per demo: the streaming demo runs longer so there is time to cut a stream.
_DEFAULTS = {
    "lifecycle": {"prompt": "What happens during prefill?", "max_tokens": 64,
                  "temperature": 0.7, "top_p": 0.95},
    "streaming": {"prompt": "Why does the KV cache grow with every token?", "max_tokens": 160,
                  "temperature": 0.8, "top_p": 0.95},
}


# Whole numbers longer than this are no parameter of ours: JSON parsing keeps them as text, so
# a 5,000-digit integer becomes "too large" beside its field, not a ValueError from int().
_INT_DIGITS_MAX = 30


class _TooLarge:
    """A JSON integer too long to be any parameter's value, kept unconverted."""

    def __init__(self, text: str) -> None:
        self.digits = len(text)


def _int_parse(text: str) -> int | _TooLarge:
    return _TooLarge(text) if len(text.lstrip("-")) > _INT_DIGITS_MAX else int(text)


def json_object_parse(body: bytes) -> dict:
    """A request body as a JSON object, or ParamError("body"), also for invalid Unicode and
    deep nesting (course/json_input.py). Enormous integers stay text."""
    from course.json_input import JsonInputError, json_strict_loads

    try:
        raw = json_strict_loads(body or b"{}", parse_int=_int_parse)
    except JsonInputError as exc:  # not JSON, too deep, or a lone surrogate in a string
        raise ParamError("body", f"must be a JSON object: {exc.message}") from None
    if not isinstance(raw, dict):
        raise ParamError("body", "must be a JSON object")
    return raw


def whole_number_parse(value: object, *, field: str) -> int:
    """A whole number from JSON or a form: 7 or "7" (ASCII digits only; "²".isdigit() is True
    but int("²") fails). ParamError naming `field` otherwise."""
    if isinstance(value, _TooLarge):
        raise ParamError(field, "is far too large")
    if isinstance(value, str):
        text = value.strip()
        digits = text.lstrip("-")
        if not (digits.isascii() and digits.isdigit()) or len(digits) > _INT_DIGITS_MAX:
            raise ParamError(field, "must be a whole number")
        return int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(field, "must be a whole number")
    return value


@dataclass(frozen=True)
class RunParams:
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _PromptTokenizer:
    tokenizer: object  # tokenizers.Tokenizer
    template: object | None  # a compiled jinja2 chat template
    special: dict  # bos_token, eos_token, ... as the template reads them
    context: int  # the model's context window (tokens)


@cache
def _prompt_tokenizer(model_dir: str) -> _PromptTokenizer | None:
    """The model's tokenizer.json, chat template and context, loaded once per process; None
    when the web machine has no copy of the model (a GPU worker's local checkpoint)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from tokenizers import Tokenizer

    directory = Path(model_dir)
    try:
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        config = json.loads((directory / "tokenizer_config.json").read_text())
        model_config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError, Exception):  # tokenizers raises its own Exception type
        logger.warning("no tokenizer for %s in the web process: prompts are limited by "
                       "characters only", model_dir, exc_info=True)
        return None
    source = config.get("chat_template")
    # The same environment transformers renders chat templates in.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    special = {k: v if isinstance(v, str) else (v or {}).get("content", "")
               for k, v in config.items() if k.endswith("_token")}
    context = int(model_config.get("max_position_embeddings")
                  or config.get("model_max_length") or 0)
    return _PromptTokenizer(tokenizer=tokenizer,
                            template=env.from_string(source) if isinstance(source, str) else None,
                            special=special, context=context)


def prompt_context_tokens(model_dir: str) -> int | None:
    """The model's context window in tokens, or None when the web side cannot read it."""
    loaded = _prompt_tokenizer(str(model_dir))
    return loaded.context if loaded and loaded.context else None


def prompt_tokens_count(prompt: str, *, model_dir: str) -> int | None:
    """Tokens of `prompt` as the engine encodes a chat prompt (template applied, generation
    prompt added, no extra special tokens), or None when the tokenizer is not at hand."""
    loaded = _prompt_tokenizer(str(model_dir))
    if loaded is None:
        return None
    if loaded.template is None:
        return len(loaded.tokenizer.encode(prompt).ids)
    text = loaded.template.render(messages=[{"role": "user", "content": prompt}],
                                  add_generation_prompt=True, **loaded.special)
    return len(loaded.tokenizer.encode(text, add_special_tokens=False).ids)


def prompt_fit_check(params: "RunParams | SchemaParams", *, model_dir: str) -> int:
    """The prompt's tokens; ParamError when prompt + max_tokens pass the model's context.
    A demo without a prompt has none to count (0)."""
    if isinstance(params, SchemaParams):
        return 0
    tokens = prompt_tokens_count(params.prompt, model_dir=model_dir)
    context = prompt_context_tokens(model_dir)
    if tokens is None or context is None:
        return len(params.prompt.encode())  # an upper bound for a byte-level tokenizer
    if tokens >= context:
        raise ParamError("prompt", f"is {tokens:,} tokens long, more than the model's context "
                         f"of {context:,} tokens; shorten it")
    if tokens + params.max_tokens > context:
        raise ParamError("max_tokens", f"must be at most {context - tokens:,} for this prompt "
                         f"({tokens:,} tokens; the model's context is {context:,} tokens)")
    return tokens


def run_params_defaults(demo: str) -> dict:
    if demo not in _DEFAULTS:  # a demo with a schema of its own, beside its runner
        from demos.runners import runner_get

        return runner_get(demo).params.defaults()
    return dict(_DEFAULTS[demo])


def demo_known(demo: str) -> bool:
    """Whether `demo` is a live demo: a prompt demo here, or a registered runner with a
    parameter schema."""
    from demos.runners import RUNNERS

    return demo in DEMO_SLUGS or (demo in RUNNERS and RUNNERS[demo].params is not None)


def _number(raw: dict, field: str, default: float, *, integer: bool) -> float:
    value = raw.get(field, default)
    if isinstance(value, _TooLarge):
        raise ParamError(field, "is far too large")
    # JSON true/false are ints to Python; a form may send numbers as strings.
    if isinstance(value, bool):
        raise ParamError(field, "must be a number")
    if isinstance(value, str):
        if len(value) > 64:  # no parameter needs more; int() of thousands of digits is slow
            raise ParamError(field, "must be a number")
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            raise ParamError(field, "must be a number") from None
    if isinstance(value, int) and abs(value) > 10**_INT_DIGITS_MAX:
        raise ParamError(field, "is far too large")
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise ParamError(field, "must be a finite number")
    if integer and value != int(value):
        raise ParamError(field, "must be a whole number")
    return int(value) if integer else float(value)


def run_params_parse(*, demo: str, body: bytes) -> "RunParams | SchemaParams":
    """Check a JSON request body against the demo's limits; raise ParamError naming the field.
    A demo with a schema of its own (declared beside its runner) is checked against that."""
    if not demo_known(demo):
        raise ParamError("demo", f"no demo named {demo!r}")
    raw = json_object_parse(body)
    if demo not in DEMO_SLUGS:
        from demos.runners import runner_get

        return runner_get(demo).params.parse(raw)
    unknown = sorted(set(raw) - {"prompt", "max_tokens", "temperature", "top_p"})
    if unknown:
        raise ParamError(unknown[0], "is not a parameter of this demo")
    defaults = _DEFAULTS[demo]

    prompt = raw.get("prompt", defaults["prompt"])
    if not isinstance(prompt, str):
        raise ParamError("prompt", "must be text")
    prompt = prompt.strip()
    if not prompt:
        raise ParamError("prompt", "must not be empty")
    if any(ord(c) < 32 and c not in "\n\r\t" for c in prompt):
        # NUL in particular: PostgreSQL's text cannot hold it.
        raise ParamError("prompt", "must not contain control characters")
    if len(prompt) > PROMPT_MAX_CHARS:
        raise ParamError("prompt", f"must be at most {PROMPT_MAX_CHARS} characters "
                                   f"(got {len(prompt)})")

    max_tokens = _number(raw, "max_tokens", defaults["max_tokens"], integer=True)
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise ParamError("max_tokens", f"must be between 1 and {MAX_TOKENS_LIMIT}")
    temperature = _number(raw, "temperature", defaults["temperature"], integer=False)
    if not 0.0 <= temperature <= 2.0:
        raise ParamError("temperature", "must be between 0 (greedy) and 2")
    top_p = _number(raw, "top_p", defaults["top_p"], integer=False)
    if not 0.0 < top_p <= 1.0:
        raise ParamError("top_p", "must be greater than 0 and at most 1")
    return RunParams(prompt=prompt, max_tokens=int(max_tokens), temperature=temperature,
                     top_p=top_p)
