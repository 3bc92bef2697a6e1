"""Drills: back-of-the-envelope questions drawn from the course's own calculators, graded, with
the mistake named.

A drill kind is a small declaration: which calculator answers it, how to draw its inputs (from
the catalogs and realistic ranges), which result value is the answer and in what unit, the
question in words, and the common mistakes as other numbers the same inputs give. A question is
its kind and a seed, so the same question can be drawn again, graded later and linked to.

Grading: within 10% of the answer is right; within a factor of two, "right order of magnitude"
(an interviewer accepts it with the reasoning); else wrong. An answer in the wrong unit is not
graded: the learner is told what kind of quantity is asked for. When a wrong answer matches a
known mistake within 10%, the mistake is named.
"""

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bytes_format,
    money_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase
from problems.calculators import calculator_get

RIGHT_WITHIN = 0.10
ORDER_FACTOR = 2.0
SECONDS_PER_QUESTION = 120
ROUND_SIZE = 10

# ---- units ---------------------------------------------------------------------------------

# What a quantity is, and the words that name it in a wrong-unit message.
DIMENSIONS = {
    "bytes": "a size in bytes (B, MB, GB, GiB, TB)",
    "seconds": "a time (µs, ms, s, min)",
    "count": "a plain count",
    "tokens_per_second": "a rate in tokens per second",
    "requests_per_second": "a rate in requests per second",
    "dollars": "an amount of money ($)",
    "percent": "a percentage (%)",
    "ratio": "a ratio (a plain number, or with ×)",
    "flop_per_byte": "FLOP per byte",
    "flops": "a count of FLOPs",
}

_UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _scale in (
    (("b", "byte", "bytes"), "bytes", 1),
    (("kb", "kilobyte", "kilobytes"), "bytes", 1e3),
    (("mb", "megabyte", "megabytes"), "bytes", 1e6),
    (("gb", "gigabyte", "gigabytes"), "bytes", 1e9),
    (("tb", "terabyte", "terabytes"), "bytes", 1e12),
    (("pb",), "bytes", 1e15),
    (("kib",), "bytes", 2**10),
    (("mib",), "bytes", 2**20),
    (("gib",), "bytes", 2**30),
    (("tib",), "bytes", 2**40),
    (("ns", "nanosecond", "nanoseconds"), "seconds", 1e-9),
    (("µs", "us", "μs", "microsecond", "microseconds"), "seconds", 1e-6),
    (("ms", "millisecond", "milliseconds", "msec"), "seconds", 1e-3),
    (("s", "sec", "secs", "second", "seconds"), "seconds", 1),
    (("min", "mins", "minute", "minutes"), "seconds", 60),
    (("h", "hr", "hrs", "hour", "hours"), "seconds", 3600),
    (("day", "days"), "seconds", 86400),
    (("tokens/s", "tok/s", "tokens per second", "tokens/sec", "token/s", "tps"),
     "tokens_per_second", 1),
    (("requests/s", "req/s", "rps", "requests per second", "qps", "request/s"),
     "requests_per_second", 1),
    (("$", "usd", "dollar", "dollars"), "dollars", 1),
    (("%", "percent", "per cent"), "percent", 0.01),
    (("×", "x", "times"), "ratio", 1),
    (("flop/byte", "flop/b", "flops/byte", "flop per byte", "flops per byte"),
     "flop_per_byte", 1),
    (("flop", "flops"), "flops", 1),
    (("tflop", "tflops"), "flops", 1e12),
    (("pflop", "pflops"), "flops", 1e15),
):
    for _name in _names:
        _UNITS[_name] = (_dim, _scale)

# Nouns of counted things: "64 sequences" is a count.
_COUNT_NOUNS = ("gpu", "gpus", "sequence", "sequences", "user", "users", "request", "requests",
                "replica", "replicas", "token", "tokens", "chunk", "chunks", "step", "steps",
                "node", "nodes", "seq", "seqs", "block", "blocks")
for _name in _COUNT_NOUNS:
    _UNITS[_name] = ("count", 1)

_WORD_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6,
                "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "t": 1e12}

_NUMBER = re.compile(r"^[+]?(\d[\d,]*(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?")
_TIMES_TEN = re.compile(r"^\s*[×x*]\s*10\s*(?:\^|\*\*)\s*([+-]?\d+)")


class AnswerError(ValueError):
    """An answer that cannot be read as a number with a unit; the message says why."""


@dataclass(frozen=True)
class Parsed:
    value: float  # in the dimension's base unit (bytes, seconds, fractions for %)
    dimension: str | None  # None: a bare number, read in the question's own unit


def answer_parse(text: str) -> Parsed:
    """Read a learner's answer: "16 GB", "1.3e11", "130 billion", "1,300", "$2.50", "48 ms",
    "2.5×10^13 FLOP", "70%". Raises AnswerError with a message for a learner."""
    raw = (text or "").strip()
    if not raw:
        raise AnswerError("Type a number, with its unit if it has one (for example 16 GB).")
    if len(raw) > 80:
        raise AnswerError("That answer is too long: type a number and a unit.")
    s = raw.replace("\u00a0", " ").replace("−", "-").strip()
    dollars = s.startswith("$")
    if dollars:
        s = s[1:].strip()
    if s.startswith("-"):
        raise AnswerError("Every answer here is positive: drop the minus sign.")
    match = _NUMBER.match(s)
    if not match:
        raise AnswerError(f"“{raw}” does not start with a number. Type digits, such as 16 GB "
                          "or 1.3e11.")
    mantissa, exponent = match.group(1), match.group(2)
    if "," in mantissa and not re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d*)?", mantissa):
        raise AnswerError(f"“{mantissa}” has its commas in odd places: write 1,300 or 1300.")
    value = float(mantissa.replace(",", ""))
    if exponent:
        value *= 10.0 ** int(exponent)
    rest = s[match.end():].strip()
    power = _TIMES_TEN.match(rest)
    if power:
        value *= 10.0 ** int(power.group(1))
        rest = rest[power.end():].strip()
    words = rest.lower().split(" ", 1)
    # "130 billion", "3 bn", "2k tokens"; a lone "B" is bytes, and "M"/"T" alone are too
    # ambiguous to read as scales.
    single = words[0] in ("b", "m", "t")
    if words[0] in _WORD_SCALES and (not single or (len(words) > 1
                                                    and words[1].split(" ")[0] in _UNITS)):
        value *= _WORD_SCALES[words[0]]
        rest = words[1] if len(words) > 1 else ""
    unit = rest.strip().rstrip(".").strip().lower()
    if dollars:
        if unit and unit not in ("usd", "dollars"):
            raise AnswerError(f"“{raw}”: a dollar amount takes no other unit.")
        unit = "$"
    if not math.isfinite(value):
        raise AnswerError("That number is too large to read.")
    if not unit:
        return Parsed(value, None)
    # "GB/s" and friends: the course asks for none of these, but say so clearly.
    if unit not in _UNITS:
        raise AnswerError(f"“{rest.strip()}” is not a unit these drills know. Try one of: GB, "
                          "GiB, ms, s, tokens/s, $, %, or no unit for a count.")
    dimension, scale = _UNITS[unit]
    return Parsed(value * scale, dimension)


# ---- kinds ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mistake:
    """A common mistake: its name, and the number it gives at these inputs (None when it does
    not apply to them)."""

    name: str
    explain: str
    value: Callable[["Question"], float | None]


@dataclass(frozen=True)
class DrillKind:
    slug: str
    problem: int
    topic: str
    title: str
    calculator: str
    answer: str  # the result value that is the answer
    dimension: str
    draw: Callable[[random.Random], dict]
    ask: Callable[["Question"], str]
    mistakes: tuple[Mistake, ...] = ()
    rounding: str = ""  # "ceil" or "floor" when the answer is a count of whole things
    level: str = "senior"


@dataclass
class Question:
    kind: DrillKind
    seed: int
    inputs: dict
    result: Result
    extra: dict = field(default_factory=dict)

    @property
    def answer(self) -> float:
        value = float(self.result.values[self.kind.answer])
        if self.kind.rounding == "ceil":
            return float(math.ceil(value - 1e-9))
        if self.kind.rounding == "floor":
            return float(math.floor(value + 1e-9))
        return value

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.result.steps

    @property
    def text(self) -> str:
        return self.kind.ask(self)

    @property
    def key(self) -> str:
        return f"{self.kind.slug}:{self.seed}"

    def recompute(self, **changes) -> Result:
        """The calculator's result with some inputs changed (how a mistake is worked)."""
        calculator = calculator_get(self.kind.calculator)
        return calculator.compute(**{**self.inputs, **changes})

    @property
    def model(self):
        return model_get(self.inputs["model"])

    @property
    def gpu(self):
        return gpu_get(self.inputs["gpu"])


_FORMATS: dict[str, Callable[[float], str]] = {
    "bytes": bytes_format,
    "seconds": seconds_format,
    "dollars": lambda v: money_format(v, significant=3),
    "percent": percent_format,
    "tokens_per_second": lambda v: f"{number_format(v)} tokens/s",
    "requests_per_second": lambda v: f"{number_format(v)} requests/s",
    "ratio": lambda v: f"{number_format(v)}×",
    "flop_per_byte": lambda v: f"{number_format(v)} FLOP/byte",
    "flops": lambda v: f"{number_format(v)} FLOP",
}


def answer_format(value: float, dimension: str) -> str:
    """A value as the question's unit reads it ("327,680 B = 320 KiB", "4.8 ms", "$1.39")."""
    return _FORMATS.get(dimension, number_format)(value)


# Catalog choices the drills draw from (dense models a learner meets in interviews, and MoEs
# for the MoE drills).
DENSE = ("llama-3-8b", "llama-3.1-70b", "llama-2-70b", "llama-3.1-405b", "qwen2.5-72b",
         "mistral-7b", "llama-2-7b")
MOE = ("mixtral-8x7b", "deepseek-v3")
GPUS = ("h100-sxm", "h200", "b200", "a100-80gb-sxm", "l40s", "mi300x")
CONTEXTS = (2_048, 4_096, 8_192, 16_384, 32_768)
WEIGHT_FORMATS = ("bf16", "fp8", "int4")


def _pick(rng: random.Random, options: tuple) -> object:
    return rng.choice(options)


def _available(ids: tuple[str, ...]) -> tuple[str, ...]:
    from problems.arithmetic.catalog import models_all
    known = models_all()
    return tuple(i for i in ids if i in known)


def _name(q: Question, key: str = "model") -> str:
    return model_get(q.inputs[key]).name


def _gpu(q: Question) -> str:
    return gpu_get(q.inputs["gpu"]).name


def _fmt(q: Question, key: str) -> str:
    return dtype_get(q.inputs[key]).name if q.inputs.get(key) else "the model's own format"


def _n(value: float) -> str:
    return number_format(value)


# Mistakes shared by several kinds.
def _kv_not_doubled(q: Question) -> float:
    return q.answer / 2


def _query_heads(q: Question) -> float | None:
    m = q.model
    if m.attention == "MLA" or m.kv_heads == m.heads:
        return None
    return q.answer * m.heads / m.kv_heads


def _bits_for_bytes(q: Question) -> float:
    return q.answer * 8


def _ms_for_s(q: Question) -> float:
    return q.answer * 1000


def _peak_not_mfu(q: Question) -> float | None:
    mfu = q.inputs.get("mfu", 1.0)
    if mfu >= 1:
        return None
    return float(q.recompute(mfu=1.0).values[q.kind.answer])


def _datasheet_memory(q: Question) -> float | None:
    return float(q.recompute(memory_fraction=1.0, reserve_gb=0.0).values[q.kind.answer])


KV_MISTAKES = (
    Mistake("K and V not doubled", "Each layer caches a key and a value for every KV head: "
            "count both (× 2).", _kv_not_doubled),
    Mistake("query heads used instead of KV heads",
            "With grouped-query attention only the KV heads are cached, not the query heads.",
            _query_heads),
    Mistake("bits counted as bytes", "A BF16 value is 2 bytes (16 bits): the answer is in "
            "bytes.", _bits_for_bytes),
)


def _kv_draw(rng: random.Random) -> dict:
    return {"model": _pick(rng, _available(DENSE + ("mixtral-8x7b",))),
            "tokens": _pick(rng, CONTEXTS), "users": _pick(rng, (1, 8, 32, 64, 100, 256)),
            "dtype": "", "tp": 1}


KINDS: tuple[DrillKind, ...] = (
    # ---- page 01 ------------------------------------------------------------------------
    DrillKind(
        slug="decode-floor", problem=1, topic="decode", level="junior",
        title="One decode step's floor", calculator="decode", answer="step_seconds",
        dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(DENSE)), "gpu": _pick(r, GPUS),
                        "dtype": _pick(r, WEIGHT_FORMATS), "batch": 1,
                        "context_tokens": _pick(r, (512, 1_000, 2_000)), "output_tokens": 300},
        ask=lambda q: (f"{_name(q)} with {_fmt(q, 'dtype')} weights on one {_gpu(q)}, batch 1, "
                       f"{_n(q.inputs['context_tokens'])} tokens of context, at full memory "
                       "bandwidth: how long does one decode step take at least?"),
        mistakes=(Mistake("the weights read once per token forgotten",
                          "A decode step reads every weight once: the time is bytes ÷ "
                          "bandwidth, not FLOPs ÷ peak.",
                          lambda q: float(q.result.values["compute_seconds"])),
                  Mistake("seconds taken for milliseconds", "Check the unit: bytes ÷ (bytes/s) "
                          "gives seconds.", _ms_for_s)),
    ),
    DrillKind(
        slug="prefill-time", problem=1, topic="prefill", level="junior",
        title="Prefill time of a prompt", calculator="prefill", answer="seconds",
        dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(DENSE)), "gpu": _pick(r, GPUS),
                        "dtype": "bf16", "prompt_tokens": _pick(r, (1_000, 2_000, 4_000, 8_000)),
                        "mfu": _pick(r, (0.4, 0.5, 0.6)), "bandwidth_efficiency": 1.0},
        ask=lambda q: (f"{_name(q)} in BF16 on one {_gpu(q)}: a {_n(q.inputs['prompt_tokens'])}"
                       f"-token prompt at {percent_format(q.inputs['mfu'])} MFU. How long is "
                       "prefill (the time to first token, no queue)?"),
        mistakes=(Mistake("peak used instead of MFU", "Matmuls reach a share of the peak "
                          "(MFU): divide by peak × MFU.", _peak_not_mfu),
                  Mistake("seconds taken for milliseconds", "Check the unit.", _ms_for_s)),
    ),
    DrillKind(
        slug="sse-bandwidth", problem=2, topic="streaming", level="junior",
        title="Bytes a token stream sends per second", calculator="streaming-cost",
        answer="bytes_per_second_per_stream", dimension="bytes",
        draw=lambda r: {"model": "llama-3-8b", "gpu": "h100-sxm", "dtype": "bf16",
                        "prompt_tokens": 1_000, "output_tokens": 1_000, "cut_after_tokens": 100,
                        "batch": _pick(r, (1, 8, 32, 64)), "block_size": 16,
                        "chars_per_token": 4, "tokens_per_event": _pick(r, (1, 4)),
                        "reasoning_tokens": 0, "requests_per_second": 1.0,
                        "abandon_rate": 0.1, "mfu": 0.5, "bandwidth_efficiency": 1.0,
                        "kv_dtype": "", "memory_fraction": 0.9, "reserve_gb": 3.3},
        ask=lambda q: ("Llama 3 8B on one H100 SXM streams an OpenAI-style SSE answer, "
                       f"{count_phrase(q.inputs['tokens_per_event'], 'token')} per event, "
                       f"each decode step shared by {q.inputs['batch']} sequences. How many "
                       "bytes per second does one stream send (envelope included)?"),
        mistakes=(Mistake("the JSON envelope forgotten", "Each event repeats the id, model name "
                          "and field names: a few hundred bytes around a few characters.",
                          lambda q: q.answer * float(q.result.values["event_chars"])
                          / float(q.result.values["bytes_per_event"])),),
    ),
    # ---- page 02 ------------------------------------------------------------------------
    DrillKind(
        slug="kv-per-token", problem=3, topic="kv-cache", level="junior",
        title="KV bytes per token", calculator="kv-cache", answer="bytes_per_token",
        dimension="bytes", draw=_kv_draw,
        ask=lambda q: (f"{_name(q)} with a BF16 KV cache: how many bytes of KV cache does one "
                       "token take (all layers)?"),
        mistakes=KV_MISTAKES,
    ),
    DrillKind(
        slug="kv-for-users", problem=3, topic="kv-cache", level="senior",
        title="KV cache for N users", calculator="kv-cache", answer="total_bytes",
        dimension="bytes", draw=_kv_draw,
        ask=lambda q: (f"{_name(q)}, BF16 KV cache, {_n(q.inputs['users'])} users each holding "
                       f"{_n(q.inputs['tokens'])} tokens of context: how large is the KV cache "
                       "in all?"),
        mistakes=KV_MISTAKES,
    ),
    DrillKind(
        slug="largest-batch", problem=4, topic="memory", level="senior",
        title="Largest batch that fits", calculator="batch-max", answer="batch",
        dimension="count", rounding="floor",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-8b", "mistral-7b",
                                                       "llama-3.1-70b"))),
                        "gpu": _pick(r, ("h100-sxm", "h200", "b200", "mi300x")),
                        "context_tokens": _pick(r, (4_096, 8_192, 16_384)),
                        "dtype": _pick(r, ("bf16", "fp8")), "kv_dtype": "", "tp": 1,
                        "memory_fraction": 0.9, "reserve_gb": 3.3, "embedding_dtype": ""},
        ask=lambda q: (f"{_name(q)} with {_fmt(q, 'dtype')} weights and a BF16 KV cache on one "
                       f"{_gpu(q)}; the engine may use 90% of the memory and keeps 3.3 GB for "
                       f"activations and the runtime. How many sequences of "
                       f"{_n(q.inputs['context_tokens'])} tokens fit at once?"),
        mistakes=(Mistake("the datasheet memory used instead of the usable budget",
                          "The engine takes a fraction of the memory (gpu_memory_utilization) "
                          "and the runtime keeps a reserve.", _datasheet_memory),
                  Mistake("K and V not doubled", "Each sequence caches keys and values: twice "
                          "what you counted.", lambda q: math.floor(q.answer * 2))),
    ),
    DrillKind(
        slug="attention-scores", problem=5, topic="attention", level="senior",
        title="The N × N scores a standard attention kernel writes",
        calculator="attention-io", answer="scores_bytes", dimension="bytes",
        # Llama 3.1 8B (Llama 3 8B's layout with a 131,072-token window): Llama 3 8B's 8,192
        # tokens would refuse the 16,384-token draw.
        draw=lambda r: {"model": "llama-3.1-8b", "gpu": "h100-sxm",
                        "tokens": _pick(r, (2_048, 4_096, 8_192, 16_384)),
                        "batch": _pick(r, (1, 4)), "dtype": "bf16", "tile_rows": 128,
                        "mfu": 0.5},
        ask=lambda q: (f"Prefill of {_n(q.inputs['tokens'])} tokens, batch {q.inputs['batch']}, "
                       "one layer of Llama 3.1 8B (32 query heads), in BF16: how many bytes is "
                       "the N × N score matrix a standard (unfused) kernel writes to HBM?"),
        mistakes=(Mistake("one head counted, not all of them", "Every query head has its own "
                          "score matrix.", lambda q: q.answer / 32),
                  Mistake("bits counted as bytes", "BF16 is 2 bytes per value.",
                          _bits_for_bytes)),
    ),
    # ---- page 03 ------------------------------------------------------------------------
    DrillKind(
        slug="static-waste", problem=6, topic="batching", level="senior",
        title="Continuous over static batching", calculator="static-vs-continuous",
        answer="throughput_ratio", dimension="ratio",
        draw=lambda r: {"batch": _pick(r, (8, 16, 32, 64)), "distribution": "uniform",
                        "output_min": _pick(r, (1, 16, 64)),
                        "output_max": _pick(r, (512, 1_024, 2_048)), "output_mean": 256},
        ask=lambda q: (f"A static batch of {q.inputs['batch']} requests whose answer lengths "
                       f"are uniform between {q.inputs['output_min']} and "
                       f"{_n(q.inputs['output_max'])} tokens: every slot waits for the longest. "
                       "How many times the throughput does continuous batching give (same "
                       "slots, steps of equal cost)?"),
        mistakes=(Mistake("the longest answer taken as the maximum, not the batch's expected "
                          "longest", "A batch waits for its own longest draw, a little below "
                          "the maximum.",
                          lambda q: q.inputs["output_max"] / float(
                              q.result.values["mean_output_tokens"])),),
    ),
    DrillKind(
        slug="chunk-count", problem=7, topic="chunked-prefill", level="junior",
        title="Chunks of a long prompt", calculator="chunked-prefill", answer="chunks",
        dimension="count",
        draw=lambda r: {"model": "llama-3.1-8b", "gpu": "h100-sxm",
                        "prompt_tokens": _pick(r, (10_000, 30_000, 100_000)),
                        "chunk_tokens": _pick(r, (512, 2_048, 8_192)),
                        "decode_batch": 32, "decode_context_tokens": 1_000},
        ask=lambda q: (f"A {_n(q.inputs['prompt_tokens'])}-token prompt is prefilled in chunks "
                       f"of {_n(q.inputs['chunk_tokens'])} tokens. How many chunks (steps)?"),
        mistakes=(Mistake("rounded down", "The last, partial chunk is a step too: round up.",
                          lambda q: math.floor(q.inputs["prompt_tokens"]
                                               / q.inputs["chunk_tokens"])),),
    ),
    DrillKind(
        slug="chunk-stall", problem=7, topic="chunked-prefill", level="senior",
        title="The stall one chunk causes", calculator="chunked-prefill",
        answer="max_chunk_stall_seconds", dimension="seconds",
        draw=lambda r: {"model": "llama-3.1-8b", "gpu": "h100-sxm", "prompt_tokens": 100_000,
                        "chunk_tokens": _pick(r, (512, 2_048, 8_192)),
                        "decode_batch": _pick(r, (16, 32, 64)), "decode_context_tokens": 1_000,
                        "mfu": 0.5, "bandwidth_efficiency": 1.0},
        ask=lambda q: (f"Llama 3.1 8B in BF16 on an H100 SXM: {q.inputs['decode_batch']} streams "
                       f"decode while a 100,000-token prompt arrives in chunks of "
                       f"{_n(q.inputs['chunk_tokens'])} tokens (50% MFU). How much longer is the "
                       "worst step with a chunk in it than a decode step alone?"),
        mistakes=(Mistake("the whole prompt's stall", "Chunking splits the stall: one chunk "
                          "per step.", lambda q: float(
                              q.result.values["unchunked_stall_seconds"])),),
    ),
    DrillKind(
        slug="tenant-utilisation", problem=21, topic="fairness", level="senior",
        title="Load on a shared replica", calculator="tenant-fairness",
        answer="utilization", dimension="percent",
        draw=lambda r: {"capacity_tokens_per_s": _pick(r, (5_000, 10_000, 20_000)),
                        "tokens_per_request": _pick(r, (250, 500, 1_000)),
                        "heavy_rate": _pick(r, (5.0, 10.0, 15.0)),
                        "light_rate": _pick(r, (0.5, 1.0, 2.0)),
                        "light_tenants": _pick(r, (2, 5, 10)), "queue_bound": 32,
                        "burst_seconds": 10.0, "overload_seconds": 60.0},
        ask=lambda q: (f"A replica serves {_n(q.inputs['capacity_tokens_per_s'])} tokens/s. One "
                       f"heavy tenant sends {_n(q.inputs['heavy_rate'])} requests/s and "
                       f"{q.inputs['light_tenants']} light tenants "
                       f"{_n(q.inputs['light_rate'])} requests/s each, every request "
                       f"{_n(q.inputs['tokens_per_request'])} tokens. What is the replica's "
                       "utilisation?"),
        mistakes=(Mistake("the light tenants counted once", "Every light tenant adds its own "
                          "rate.", lambda q: (q.inputs["heavy_rate"] + q.inputs["light_rate"])
                          * q.inputs["tokens_per_request"] / q.inputs["capacity_tokens_per_s"]),),
    ),
    # ---- page 04 ------------------------------------------------------------------------
    DrillKind(
        slug="prefix-saving", problem=8, topic="prefix-cache", level="senior",
        title="Prefill time a prefix hit saves", calculator="prefix-cache",
        answer="seconds_saved", dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-8b", "llama-3.1-70b"))),
                        "gpu": _pick(r, ("h100-sxm", "h200")),
                        "prompt_tokens": _pick(r, (4_000, 8_000, 16_000)),
                        "prefix_tokens": _pick(r, (1_000, 2_000, 3_000)), "hit_rate": 1.0,
                        "dtype": "bf16", "mfu": 0.5, "bandwidth_efficiency": 1.0},
        ask=lambda q: (f"{_name(q)} in BF16 on one {_gpu(q)} at 50% MFU: a "
                       f"{_n(q.inputs['prompt_tokens'])}-token prompt whose first "
                       f"{_n(q.inputs['prefix_tokens'])} tokens are already cached. How much "
                       "prefill time does the hit save?"),
        mistakes=(Mistake("the saving taken as the whole prefill", "Only the cached prefix is "
                          "skipped; the rest is still prefilled.",
                          lambda q: float(q.result.values["prefill_seconds"])),),
    ),
    DrillKind(
        slug="kv-transfer", problem=22, topic="disaggregation", level="senior",
        title="Moving a prompt's KV cache", calculator="kv-transfer", answer="seconds",
        dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-70b", "llama-3-8b",
                                                       "llama-3.1-70b"))),
                        "prompt_tokens": _pick(r, (2_000, 8_000, 32_000)), "dtype": "",
                        "gpu": "h100-sxm", "link_gb_per_second": _pick(r, (25.0, 50.0, 400.0)),
                        "link_efficiency": 0.8},
        ask=lambda q: (f"{_name(q)}, BF16 KV cache: a {_n(q.inputs['prompt_tokens'])}-token "
                       f"prompt's KV moves from a prefill GPU to a decode GPU over a link of "
                       f"{_n(q.inputs['link_gb_per_second'])} GB/s at 80% efficiency. How long "
                       "does the transfer take?"),
        mistakes=(Mistake("bits counted as bytes", "Link speeds here are in bytes per second.",
                          lambda q: q.answer / 8),
                  Mistake("K and V not doubled", "The cache holds keys and values.",
                          _kv_not_doubled)),
    ),
    DrillKind(
        slug="kv-transfer-bytes", problem=22, topic="disaggregation", level="junior",
        title="A prompt's KV bytes to move", calculator="kv-transfer", answer="bytes",
        dimension="bytes",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-70b", "llama-3-8b"))),
                        "prompt_tokens": _pick(r, (2_000, 8_000, 32_000)), "dtype": "",
                        "gpu": "h100-sxm", "link_gb_per_second": 50.0, "link_efficiency": 0.8},
        ask=lambda q: (f"{_name(q)}, BF16 KV cache: how many bytes of KV cache does a "
                       f"{_n(q.inputs['prompt_tokens'])}-token prompt hand from prefill to "
                       "decode?"),
        mistakes=KV_MISTAKES,
    ),
    # ---- page 05 ------------------------------------------------------------------------
    DrillKind(
        slug="tpot-at-batch", problem=9, topic="decode", level="senior",
        title="Time per output token at a batch", calculator="decode",
        answer="step_seconds", dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-8b", "llama-3.1-70b"))),
                        "gpu": _pick(r, ("h100-sxm", "h200", "b200")), "dtype": "fp8",
                        "batch": _pick(r, (16, 32, 64)),
                        "context_tokens": _pick(r, (2_000, 4_000, 8_000)), "output_tokens": 300,
                        "kv_dtype": "", "bandwidth_efficiency": 1.0, "mfu": 0.5},
        ask=lambda q: (f"{_name(q)} in FP8 (BF16 KV cache) on one {_gpu(q)}, "
                       f"{q.inputs['batch']} sequences of {_n(q.inputs['context_tokens'])} "
                       "tokens each, full bandwidth: how long is one decode step (each user's "
                       "time per output token)?"),
        mistakes=(Mistake("every sequence's KV reads forgotten", "The step reads the weights "
                          "once plus every sequence's own KV cache.",
                          lambda q: float(q.result.values["weights_floor_seconds"])),
                  Mistake("weights read once per sequence", "One step reads the weights once "
                          "for the whole batch.",
                          lambda q: float(q.result.values["weights_floor_seconds"])
                          * q.inputs["batch"] + float(q.result.values["memory_seconds"])
                          - float(q.result.values["weights_floor_seconds"]))),
    ),
    DrillKind(
        slug="speculative-tokens", problem=10, topic="speculative", level="senior",
        title="Tokens per speculative step", calculator="speculative",
        answer="expected_tokens_per_step", dimension="count",
        draw=lambda r: {"acceptance": _pick(r, (0.5, 0.6, 0.7, 0.8, 0.9)),
                        "draft_tokens": _pick(r, (2, 3, 4, 5, 8)), "draft_cost": 0.05,
                        "model": "llama-3-8b", "gpu": "h100-sxm", "batch": 1,
                        "context_tokens": 1_000},
        ask=lambda q: (f"A drafter proposes γ = {q.inputs['draft_tokens']} tokens; each is "
                       f"accepted with probability α = {_n(q.inputs['acceptance'])}, "
                       "independently, until the first rejection. How many tokens does one "
                       "verification step yield on average (the bonus token included)?"),
        mistakes=(Mistake("the bonus token forgotten", "The target always adds one token of "
                          "its own: the correction or the bonus.", lambda q: q.answer - 1),
                  Mistake("α × γ", "Acceptance stops at the first rejection: the expectation is "
                          "(1 − α^(γ+1)) ÷ (1 − α), not α × γ.",
                          lambda q: q.inputs["acceptance"] * q.inputs["draft_tokens"])),
    ),
    DrillKind(
        slug="speculative-speedup", problem=10, topic="speculative", level="staff",
        title="Speculative speed-up", calculator="speculative", answer="speedup",
        dimension="ratio",
        draw=lambda r: {"acceptance": _pick(r, (0.6, 0.7, 0.8)),
                        "draft_tokens": _pick(r, (3, 4, 5)),
                        "draft_cost": _pick(r, (0.02, 0.05, 0.1)), "model": "llama-3-8b",
                        "gpu": "h100-sxm", "batch": 1, "context_tokens": 1_000},
        ask=lambda q: (f"Llama 3 8B on an H100, batch 1: α = {_n(q.inputs['acceptance'])}, "
                       f"γ = {q.inputs['draft_tokens']}, each draft token costs "
                       f"{percent_format(q.inputs['draft_cost'])} of a target step, and "
                       "verifying γ + 1 tokens costs about one step (memory-bound). What is "
                       "the speed-up over plain decoding?"),
        mistakes=(Mistake("the drafter's cost forgotten", "The drafter runs γ times per step.",
                          lambda q: float(q.result.values["expected_tokens_per_step"])
                          / float(q.result.values["verify_ratio"])),),
    ),
    DrillKind(
        slug="mm1-wait", problem=17, topic="queueing", level="senior",
        title="Mean wait in an M/M/1 queue", calculator="queue", answer="mean_wait_seconds",
        dimension="seconds",
        draw=lambda r: {"arrival_rate": _pick(r, (5.0, 8.0, 9.0, 9.5)), "service_rate": 10.0,
                        "servers": 1},
        ask=lambda q: (f"Requests arrive at {_n(q.inputs['arrival_rate'])} per second (Poisson) "
                       "at one server that completes 10 per second on average (exponential). "
                       "What is the mean time a request waits in the queue before service?"),
        mistakes=(Mistake("the response time given, not the wait", "The response time adds the "
                          "service itself (1 ÷ μ).",
                          lambda q: float(q.result.values["mean_response_seconds"])),
                  Mistake("1 ÷ (μ − λ) read as the wait", "That is the mean response time; the "
                          "wait is ρ ÷ (μ − λ).",
                          lambda q: 1 / (q.inputs["service_rate"] - q.inputs["arrival_rate"]))),
    ),
    DrillKind(
        slug="mmc-wait", problem=17, topic="queueing", level="staff",
        title="Mean wait with several servers (M/M/c)", calculator="queue",
        answer="mean_wait_seconds", dimension="seconds",
        draw=lambda r: {"arrival_rate": _pick(r, (30.0, 35.0, 38.0)), "service_rate": 10.0,
                        "servers": 4},
        ask=lambda q: (f"Requests arrive at {_n(q.inputs['arrival_rate'])} per second (Poisson) "
                       "at 4 replicas, each completing 10 per second (exponential), one shared "
                       "queue. What is the mean wait before service?"),
        mistakes=(Mistake("one big M/M/1 server", "Four servers of rate μ are not one of 4μ: "
                          "a request is served at μ once it starts.",
                          lambda q: float(q.recompute(servers=1, service_rate=40.0)
                                          .values["mean_wait_seconds"])),
                  Mistake("four separate queues", "Split traffic queues separately and waits "
                          "longer than a shared queue.",
                          lambda q: float(q.recompute(
                              servers=1, arrival_rate=q.inputs["arrival_rate"] / 4)
                              .values["mean_wait_seconds"]))),
    ),
    # ---- page 06 ------------------------------------------------------------------------
    DrillKind(
        slug="weights-in-format", problem=11, topic="quantization", level="junior",
        title="Weights in a format", calculator="weights", answer="bytes", dimension="bytes",
        draw=lambda r: {"model": _pick(r, _available(DENSE + MOE)),
                        "dtype": _pick(r, ("bf16", "fp8", "int4")), "embedding_dtype": ""},
        ask=lambda q: (f"How many bytes do {_name(q)}'s weights take in {_fmt(q, 'dtype')} "
                       "(the embedding and output head kept in BF16 where the format is "
                       "lower)?"),
        mistakes=(Mistake("bits counted as bytes", "A format's bits ÷ 8 is its bytes per "
                          "parameter.", _bits_for_bytes),
                  Mistake("every parameter in BF16", "The format sets the bytes per parameter.",
                          lambda q: None if q.inputs["dtype"] == "bf16" else float(
                              q.recompute(dtype="bf16").values["bytes"]))),
    ),
    DrillKind(
        slug="quant-speedup", problem=11, topic="quantization", level="senior",
        title="Decode floor speed-up from smaller weights", calculator="quantization",
        answer="floor_speedup", dimension="ratio",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-8b", "llama-3.1-70b"))),
                        "gpu": "h100-sxm", "from_dtype": "bf16",
                        "to_dtype": _pick(r, ("fp8", "int4")), "kv_dtype": "",
                        "batch": _pick(r, (1, 32)), "context_tokens": _pick(r, (1_000, 8_000)),
                        "embedding_dtype": ""},
        ask=lambda q: (f"{_name(q)} decoding at batch {q.inputs['batch']} with "
                       f"{_n(q.inputs['context_tokens'])} tokens of context each (BF16 KV "
                       f"cache): by how much does the memory-bound step floor fall when the "
                       f"weights go from BF16 to {dtype_get(q.inputs['to_dtype']).name}?"),
        mistakes=(Mistake("the KV reads forgotten", "The step also reads every sequence's KV "
                          "cache, which the weight format does not shrink.",
                          lambda q: float(q.result.values["weights_bytes_before"])
                          / float(q.result.values["weights_bytes_after"])),),
    ),
    DrillKind(
        slug="ridge-point", problem=12, topic="gpus", level="junior",
        title="A GPU's ridge point", calculator="roofline-ridge",
        answer="ridge_flops_per_byte", dimension="flop_per_byte",
        draw=lambda r: {"gpu": _pick(r, GPUS), "dtype": _pick(r, ("bf16", "fp8"))},
        ask=lambda q: (f"The {_gpu(q)} in {_fmt(q, 'dtype')} (dense peak, HBM bandwidth): at "
                       "how many FLOPs per byte does a kernel stop waiting on memory?"),
        mistakes=(Mistake("the sparse peak used", "Datasheets quote 2:4 sparse rates at twice "
                          "the dense: use the dense peak.", lambda q: q.answer * 2),),
    ),
    DrillKind(
        slug="gpus-for-weights", problem=12, topic="gpus", level="senior",
        title="GPUs to hold the weights", calculator="weights", answer="bytes",
        dimension="bytes",
        draw=lambda r: {"model": _pick(r, _available(("llama-3.1-405b", "llama-3.1-70b",
                                                       "deepseek-v3", "qwen2.5-72b"))),
                        "dtype": _pick(r, ("bf16", "fp8")), "embedding_dtype": ""},
        ask=lambda q: (f"Before counting GPUs: how many bytes of weights does {_name(q)} need "
                       f"in {_fmt(q, 'dtype')}?"),
        mistakes=(Mistake("bits counted as bytes", "Bits ÷ 8.", _bits_for_bytes),),
    ),
    # ---- page 07 ------------------------------------------------------------------------
    DrillKind(
        slug="mlp-share", problem=13, topic="profiling", level="senior",
        title="The MLP's share of a decode step", calculator="decode-step-breakdown",
        answer="mlp_share", dimension="percent",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-8b", "llama-3.1-70b",
                                                       "mistral-7b"))),
                        "gpu": "h100-sxm", "dtype": "bf16", "kv_dtype": "",
                        "batch": _pick(r, (1, 8)), "context_tokens": 1_000,
                        "bandwidth_efficiency": 1.0, "mfu": 0.5},
        ask=lambda q: (f"{_name(q)} in BF16 on an H100, batch {q.inputs['batch']}, 1,000 tokens "
                       "of context: what share of a decode step's time would a profile put in "
                       "the MLP (gate, up and down projections)?"),
        mistakes=(Mistake("the attention projections' share", "The MLP holds most of a "
                          "dense layer's weights; the attention projections far fewer.",
                          lambda q: float(q.result.values["attn_proj_share"])),),
    ),
    DrillKind(
        slug="batch-throughput-gain", problem=14, topic="utilisation", level="senior",
        title="Throughput gained by a bigger batch", calculator="gpu-utilization",
        answer="throughput_gain", dimension="ratio",
        draw=lambda r: {"model": "llama-3-8b", "gpu": "h100-sxm", "dtype": "bf16",
                        "kv_dtype": "", "context_tokens": _pick(r, (1_000, 4_000)),
                        "batch_small": _pick(r, (1, 4)), "batch_large": _pick(r, (32, 64)),
                        "bandwidth_efficiency": 1.0, "host_ms": _pick(r, (0.0, 2.0)),
                        "overlap": "off"},
        ask=lambda q: (f"Llama 3 8B in BF16 on an H100: decoding at batch "
                       f"{q.inputs['batch_small']} against {q.inputs['batch_large']}, "
                       f"{_n(q.inputs['context_tokens'])} tokens of context each, "
                       f"{_n(q.inputs['host_ms'])} ms of host time per step not overlapped. "
                       "How many times the tokens per second does the larger batch give?"),
        mistakes=(Mistake("the batch ratio", "Tokens per second grow with the batch only while "
                          "the step time stays flat; KV reads lengthen it.",
                          lambda q: q.inputs["batch_large"] / q.inputs["batch_small"]),),
    ),
    DrillKind(
        slug="rmsnorm-bytes", problem=15, topic="kernels", level="senior",
        title="Bytes a fused RMSNorm moves", calculator="rmsnorm-fusion",
        answer="norm_fused_bytes", dimension="bytes",
        draw=lambda r: {"hidden_size": _pick(r, (4_096, 8_192)),
                        "tokens": _pick(r, (1, 64, 4_096)), "dtype": "bf16",
                        "gpu": "h100-sxm", "layers": 32, "bandwidth_efficiency": 1.0},
        ask=lambda q: (f"A fused RMSNorm over {_n(q.inputs['tokens'])} tokens of hidden size "
                       f"{_n(q.inputs['hidden_size'])} in BF16: how many bytes does it move "
                       "through HBM (read the input and the weight once, write the output)?"),
        mistakes=(Mistake("the unfused count", "Unfused, each elementwise kernel reads and "
                          "writes the whole tensor again.",
                          lambda q: float(q.result.values["norm_eager_bytes"])),),
    ),
    # ---- page 08 ------------------------------------------------------------------------
    DrillKind(
        slug="cost-per-million", problem=16, topic="cost", level="junior",
        title="Cost per million output tokens", calculator="cost",
        answer="dollars_per_million_tokens", dimension="dollars",
        draw=lambda r: {"gpu": _pick(r, ("h100-sxm", "h200", "b200")),
                        "tokens_per_second": _pick(r, (500, 1_000, 2_500, 5_000)),
                        "price_per_hour": _pick(r, (2.0, 2.5, 3.5, 6.0)),
                        "input_tokens_per_second": None},
        ask=lambda q: (f"A GPU at {money_format(q.inputs['price_per_hour'])} an hour produces "
                       f"{_n(q.inputs['tokens_per_second'])} tokens per second, all day. What "
                       "does a million tokens cost?"),
        mistakes=(Mistake("per minute taken for per hour", "An hour is 3,600 seconds.",
                          lambda q: q.answer * 60),),
    ),
    DrillKind(
        slug="p99-sample", problem=18, topic="benchmarking", level="senior",
        title="Requests needed to see a p99", calculator="benchmark-plan",
        answer="requests_needed", dimension="count", rounding="ceil",
        draw=lambda r: {"request_rate": 4.0, "duration_s": 300.0,
                        "percentile_q": _pick(r, (0.95, 0.99, 0.999)),
                        "e2e_latency_s": 8.0, "client_concurrency": 16, "output_tokens": 256},
        ask=lambda q: (f"How many requests must a benchmark run before the number beyond the "
                       f"true p{_n(q.inputs['percentile_q'] * 100)} is clear of zero at 95% "
                       "(expected count minus 1.96 standard deviations above zero)?"),
        mistakes=(Mistake("1 ÷ (1 − q)", "That many requests expect one beyond the percentile: "
                          "far too few to pin it down.",
                          lambda q: math.ceil(1 / (1 - q.inputs["percentile_q"]))),),
    ),
    DrillKind(
        slug="littles-law", problem=18, topic="benchmarking", level="junior",
        title="Requests in flight (Little's law)", calculator="benchmark-plan",
        answer="in_flight", dimension="count",
        draw=lambda r: {"request_rate": _pick(r, (2.0, 4.0, 10.0, 25.0)), "duration_s": 300.0,
                        "percentile_q": 0.99, "e2e_latency_s": _pick(r, (2.0, 8.0, 20.0)),
                        "client_concurrency": 1_000, "output_tokens": 256},
        ask=lambda q: (f"A load generator sends {_n(q.inputs['request_rate'])} requests per "
                       f"second and each takes {_n(q.inputs['e2e_latency_s'])} s end to end. How "
                       "many requests are in flight on average?"),
        mistakes=(Mistake("rate ÷ latency", "Little's law multiplies: L = λ × W.",
                          lambda q: q.inputs["request_rate"] / q.inputs["e2e_latency_s"]),),
    ),
    # ---- page 09 ------------------------------------------------------------------------
    DrillKind(
        slug="canary-requests", problem=19, topic="rollout", level="staff",
        title="Canary requests to catch an error regression", calculator="canary",
        answer="requests_errors", dimension="count", rounding="ceil",
        draw=lambda r: {"request_rate": 20.0, "canary_share": 0.05,
                        "error_rate": _pick(r, (0.005, 0.01)),
                        "error_rate_regressed": _pick(r, (0.02, 0.03)), "p50_ms": 300.0,
                        "p99_ms": 1500.0, "p99_regression": 1.25, "confidence": 0.95,
                        "power": 0.8, "replicas": 20, "gpus_per_replica": 2,
                        "price_per_hour": 2.5},
        ask=lambda q: (f"A canary must tell an error rate of "
                       f"{percent_format(q.inputs['error_rate_regressed'])} from the baseline's "
                       f"{percent_format(q.inputs['error_rate'])} at 95% confidence (one-sided) "
                       "and 80% power. About how many canary requests does that take (normal "
                       "approximation)?"),
        mistakes=(Mistake("the rule of three", "3 ÷ p bounds a rate seen at zero; it says "
                          "nothing about telling two rates apart.",
                          lambda q: math.ceil(3 / q.inputs["error_rate"])),),
    ),
    DrillKind(
        slug="cold-start", problem=20, topic="autoscaling", level="senior",
        title="A replica's cold start", calculator="cold-start",
        answer="cold_start_seconds", dimension="seconds",
        draw=lambda r: {"model": _pick(r, _available(("llama-3-70b", "llama-3-8b"))),
                        "dtype": "bf16", "gpus_per_replica": 4,
                        "node_minutes": _pick(r, (0.0, 2.0, 4.0)), "image_gb": 10.0,
                        "image_gbps": 0.5, "load_gbps": _pick(r, (1.0, 2.0, 5.0)),
                        "warmup_seconds": 60.0, "react_seconds": 60.0},
        ask=lambda q: (f"A new replica of {_name(q)} in BF16: "
                       f"{_n(q.inputs['node_minutes'])} min for a node, a 10 GB image at "
                       f"0.5 GB/s, weights loaded at {_n(q.inputs['load_gbps'])} GB/s, 60 s of "
                       "warm-up (compile, graphs), and 60 s before the autoscaler reacts. How "
                       "long from the load rising to the replica serving?"),
        mistakes=(Mistake("the weights load only", "Node, image, warm-up and the reaction time "
                          "add up in series.",
                          lambda q: float(q.result.values["weights_seconds"])),),
    ),
    DrillKind(
        slug="replicas-for-load", problem=20, topic="autoscaling", level="junior",
        title="Replicas for a load", calculator="cold-start", answer="replicas",
        dimension="count", rounding="ceil",
        draw=lambda r: {"model": "llama-3-70b", "dtype": "bf16", "gpus_per_replica": 4,
                        "load_rps": _pick(r, (10.0, 40.0, 75.0)),
                        "replica_rps": _pick(r, (1.5, 2.0, 3.0)),
                        "utilisation": _pick(r, (0.6, 0.7, 0.8))},
        ask=lambda q: (f"{_n(q.inputs['load_rps'])} requests/s arrive; one replica serves "
                       f"{_n(q.inputs['replica_rps'])} requests/s and you run replicas at "
                       f"{percent_format(q.inputs['utilisation'])} at most. How many replicas?"),
        mistakes=(Mistake("no utilisation cap", "A replica run at 100% has no room for bursts.",
                          lambda q: math.ceil(q.inputs["load_rps"] / q.inputs["replica_rps"])),),
    ),
    # ---- page 10 ------------------------------------------------------------------------
    DrillKind(
        slug="moe-all-to-all", problem=23, topic="moe", level="staff",
        title="All-to-all bytes per MoE layer", calculator="moe-all-to-all",
        answer="total_bytes", dimension="bytes",
        draw=lambda r: {"model": "deepseek-v3", "ep": _pick(r, (8, 16, 32)),
                        "tokens": _pick(r, (128, 256, 1_024)), "dtype": "bf16",
                        "dispatch_dtype": "fp8"},
        ask=lambda q: (f"DeepSeek-V3 (8 routed experts per token, hidden 7,168) with expert "
                       f"parallelism over {q.inputs['ep']} GPUs: {_n(q.inputs['tokens'])} tokens "
                       "in a step, dispatched in FP8 and combined in BF16. How many bytes cross "
                       "between GPUs in one MoE layer (dispatch and combine, remote copies "
                       "only)?"),
        mistakes=(Mistake("local experts counted as remote", "A token's experts on its own GPU "
                          "need no transfer.",
                          lambda q: q.answer / float(q.result.values["remote_fraction"])),),
    ),
    DrillKind(
        slug="moe-ep-memory", problem=23, topic="moe", level="senior",
        title="Weights per GPU under expert parallelism", calculator="moe-memory",
        answer="ep_bytes_per_gpu", dimension="bytes",
        draw=lambda r: {"model": _pick(r, _available(MOE)), "gpus": _pick(r, (8, 16)),
                        "dtype": _pick(r, ("bf16", "fp8")), "gpu": "h200"},
        ask=lambda q: (f"{_name(q)} in {_fmt(q, 'dtype')} over {q.inputs['gpus']} GPUs with "
                       "expert parallelism (experts split, the dense part copied on every GPU): "
                       "how many bytes of weights does each GPU hold?"),
        mistakes=(Mistake("everything split evenly", "Attention and shared layers are copied, "
                          "not split, under expert parallelism.",
                          lambda q: float(q.result.values["total_bytes"]) / q.inputs["gpus"]),),
    ),
    DrillKind(
        slug="fleet-gpus", problem=25, topic="capacity", level="staff",
        title="GPUs for a daily load", calculator="capacity", answer="gpus",
        dimension="count", rounding="ceil",
        draw=lambda r: {"daily_users": _pick(r, (100_000, 1_000_000, 5_000_000)),
                        "requests_per_user": _pick(r, (5, 10, 20)), "input_tokens": 1_000,
                        "output_tokens": _pick(r, (300, 500)), "peak_to_average": 3.0,
                        "gpu": "h100-sxm", "tokens_per_second_per_gpu": _pick(r, (1_000, 2_000)),
                        "input_tokens_per_second_per_gpu": 20_000.0, "target_utilization": 0.7},
        ask=lambda q: (f"{_n(q.inputs['daily_users'])} users a day, "
                       f"{q.inputs['requests_per_user']} requests each, 1,000 tokens in and "
                       f"{q.inputs['output_tokens']} out; peak is 3× the average; a GPU produces "
                       f"{_n(q.inputs['tokens_per_second_per_gpu'])} output tokens/s and "
                       "prefills 20,000 tokens/s; run at 70% at most. How many GPUs at peak?"),
        mistakes=(Mistake("sized for the average", "Size for the peak, not the daily mean.",
                          lambda q: math.ceil(q.answer / q.inputs["peak_to_average"])),),
    ),
    DrillKind(
        slug="blended-cost", problem=24, topic="cost", level="senior",
        title="Cost per million tokens with input counted", calculator="cost",
        answer="dollars_per_million_output_tokens", dimension="dollars",
        draw=lambda r: {"gpu": "h100-sxm", "tokens_per_second": _pick(r, (1_000, 2_000)),
                        "price_per_hour": 2.5,
                        "input_tokens_per_second": _pick(r, (10_000.0, 20_000.0))},
        ask=lambda q: (f"An H100 at $2.50 an hour spends its time on prefill "
                       f"({_n(q.inputs['input_tokens_per_second'])} input tokens/s) and decode "
                       f"({_n(q.inputs['tokens_per_second'])} output tokens/s). What does a "
                       "million output tokens cost (the GPU-hours both phases take, charged to "
                       "the output)?"),
        mistakes=(Mistake("input tokens free", "Prefill takes GPU time too.",
                          lambda q: float(q.result.values["dollars_per_million_tokens"])),),
    ),
)

_BY_SLUG = {k.slug: k for k in KINDS}
TOPICS: dict[str, str] = {}
for _k in KINDS:
    TOPICS.setdefault(_k.topic, _k.topic.replace("-", " "))


def kind_get(slug: str) -> DrillKind | None:
    return _BY_SLUG.get(slug)


def kinds_for(*, topic: str | None = None, problem: int | None = None) -> list[DrillKind]:
    return [k for k in KINDS if (topic is None or k.topic == topic)
            and (problem is None or k.problem == problem)]


DRAW_TRIES = 100


def question_draw(kind: DrillKind, seed: int) -> Question:
    """The question `kind` asks with this seed: its inputs drawn, the calculator's result.

    A draw the calculator refuses (a context past the model's window, a load past capacity) is
    drawn again from the same seeded sequence, so a seed always gives the same question."""
    rng = random.Random(f"{kind.slug}:{seed}")
    calculator = calculator_get(kind.calculator)
    for _ in range(DRAW_TRIES):
        inputs = {**calculator.defaults(), **kind.draw(rng)}
        try:
            result = calculator.compute(**inputs)
        except ArithmeticInputError:
            continue
        question = Question(kind=kind, seed=seed, inputs=inputs, result=result)
        if math.isfinite(question.answer) and question.answer > 0:
            return question
    raise LookupError(f"drill {kind.slug} found no valid inputs for seed {seed}")


@dataclass(frozen=True)
class Grade:
    """A graded answer: "right", "close" (within a factor of two), "wrong" or "unit" (not
    graded: wrong kind of quantity)."""

    verdict: str
    message: str
    given: float | None = None
    mistake: Mistake | None = None
    note: str = ""

    @property
    def counts(self) -> bool:
        return self.verdict in ("right", "close", "wrong")


def _within(value: float, target: float, tolerance: float = RIGHT_WITHIN) -> bool:
    if target == 0:
        return abs(value) <= 1e-12
    return abs(value / target - 1) <= tolerance


def mistakes_offered(question: Question) -> list[tuple[Mistake, float]]:
    """The mistakes that apply at these inputs, each with its number, leaving out any whose
    number cannot be told from the right answer."""
    offered = []
    for mistake in question.kind.mistakes:
        value = mistake.value(question)
        if value is None or not math.isfinite(value) or value <= 0:
            continue
        if _within(value, question.answer, RIGHT_WITHIN * 2):
            continue
        offered.append((mistake, float(value)))
    return offered


def answer_grade(question: Question, text: str) -> Grade:
    """Grade `text` against the question's answer. Raises AnswerError for unreadable text."""
    parsed = answer_parse(text)
    dimension = question.kind.dimension
    value = parsed.value
    if parsed.dimension is not None and parsed.dimension != dimension:
        # A count may carry its noun, a ratio its ×; a percentage asked as a plain share is
        # fine the other way round.
        if not (dimension == "ratio" and parsed.dimension == "count"):
            return Grade("unit", f"That is {DIMENSIONS[parsed.dimension]}; the question asks "
                         f"for {DIMENSIONS[dimension]}. Not graded: try again.")
    if parsed.dimension is None:
        if dimension == "percent":
            # "70" for 70%; a share under one ("0.7") is read as a fraction.
            value = value / 100 if value > 1 else value
        elif dimension not in ("count", "ratio", "flop_per_byte", "flops", "dollars",
                               "tokens_per_second", "requests_per_second"):
            return Grade("unit", f"Give a unit: the question asks for {DIMENSIONS[dimension]}.")
    answer = question.answer
    shown = answer_format(answer, dimension)
    if _within(value, answer):
        note = ""
        if dimension == "bytes" and parsed.dimension == "bytes" and text:
            ratio = value / answer
            if abs(ratio - 2**30 / 1e9) < 0.005 or abs(ratio - 1e9 / 2**30) < 0.005:
                note = ("Right, though off by exactly GB against GiB (7.4%): a GiB is 2³⁰ "
                        "bytes, a GB 10⁹.")
        return Grade("right", f"Right: {shown}.", given=value, note=note)
    for mistake, mistaken in mistakes_offered(question):
        if _within(value, mistaken):
            return Grade("wrong", f"Not quite: the answer is {shown}. You likely made this "
                         f"mistake: {mistake.name}. {mistake.explain}", given=value,
                         mistake=mistake)
    if answer > 0 and 1 / ORDER_FACTOR <= value / answer <= ORDER_FACTOR:
        return Grade("close", f"Right order of magnitude: the answer is {shown} "
                     f"(you were {_n(value / answer)}× off). With the reasoning said aloud, an "
                     "interviewer accepts it.", given=value)
    return Grade("wrong", f"Wrong: the answer is {shown}. Read the working below.", given=value)


# ---- as JSON (the API at /api/drills/) ------------------------------------------------------

def question_json(question: Question) -> dict:
    """A drawn question as the API gives it: what to ask, and what kind of answer it wants
    (never the answer)."""
    kind = question.kind
    return {"kind": kind.slug, "seed": question.seed, "topic": kind.topic, "title": kind.title,
            "problem": kind.problem, "level": kind.level, "question": question.text,
            "answer_dimension": kind.dimension, "answer_unit_hint": DIMENSIONS[kind.dimension]}


def grade_json(question: Question, grade: Grade) -> dict:
    """A graded answer, with the answer, the mistake named and the working."""
    return {**question_json(question), "verdict": grade.verdict, "message": grade.message,
            "note": grade.note, "given": grade.given, "answer": question.answer,
            "answer_text": answer_format(question.answer, question.kind.dimension),
            "mistake": grade.mistake.name if grade.mistake else None,
            "steps": [{"label": s.label, "expression": s.expression, "value": s.value,
                       "unit": s.unit, "display": s.display} for s in question.steps]}
