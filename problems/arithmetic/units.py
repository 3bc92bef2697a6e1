"""Formatting numbers for people: bytes in GB (10⁹) and GiB (2³⁰) each labelled, times with
sensible prefixes, FLOPs in scientific notation, thousands separators, rates and money."""

import math

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def number_format(value: float, *, digits: int = 3) -> str:
    """`value` with thousands separators and about `digits` significant figures.

    Whole numbers keep every digit ("131,072"); others are rounded to `digits` significant
    figures without scientific notation ("0.171", "32.4").
    """
    if not math.isfinite(value):
        return "∞" if value > 0 else ("−∞" if value < 0 else "NaN")
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if value == 0:
        return "0"
    if abs(value) < 1e-4 or abs(value) >= 1e15:
        return scientific_format(value, digits=digits)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def scientific_format(value: float, *, digits: int = 2, unit: str = "") -> str:
    """`value` as "1.6×10¹³" (about `digits` significant figures), with `unit` after a space."""
    suffix = f" {unit}" if unit else ""
    if value == 0 or not math.isfinite(value):
        return f"{number_format(value)}{suffix}"
    # Python's own e-format rounds the mantissa (9.96e3 → "1.0e+04") and, unlike dividing by
    # 10**exponent, stays exact for subnormal floats such as 5e-324.
    mantissa_text, exponent_text = f"{value:.{digits - 1}e}".split("e")
    exponent = int(exponent_text)
    if "." in mantissa_text:
        mantissa_text = mantissa_text.rstrip("0").rstrip(".")
    if exponent == 0:
        return f"{mantissa_text}{suffix}"
    return f"{mantissa_text}×10{str(exponent).translate(_SUPERSCRIPT)}{suffix}"


def flops_format(flops: float) -> str:
    """A FLOP count in scientific notation: "1.6×10¹³ FLOP"."""
    return scientific_format(flops, unit="FLOP")


def flops_rate_format(flops_per_second: float) -> str:
    """A compute rate: "989 TFLOP/s" (decimal prefixes, as datasheets use)."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(flops_per_second) >= scale:
            return f"{number_format(flops_per_second / scale, digits=4)} {prefix}FLOP/s"
    return f"{number_format(flops_per_second)} FLOP/s"


def ops_format(ops_per_second: float) -> str:
    """An integer-operation rate, as datasheets rate INT8 tensor cores: "1,979 TOPS"."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(ops_per_second) >= scale:
            return f"{number_format(ops_per_second / scale, digits=4)} {prefix}OPS"
    return f"{number_format(ops_per_second)} OPS"


def rate_of_format(rate: float, *, unit: str = "FLOP") -> str:
    """A compute rate in its own unit: FLOP/s for floating point, OPS for integer ("OP")."""
    return ops_format(rate) if unit == "OP" else flops_rate_format(rate)


def _binary_bytes(count: float) -> str:
    for scale, name in ((TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if abs(count) >= scale:
            return f"{number_format(count / scale)} {name}"
    return f"{number_format(count)} B"


def _decimal_bytes(count: float) -> str:
    for scale, name in ((TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "kB")):
        if abs(count) >= scale:
            return f"{number_format(count / scale)} {name}"
    return f"{number_format(count)} B"


def bytes_short(count: float) -> str:
    """A byte count in one decimal unit, for use inside expressions: "131,072 B", "16.1 GB"."""
    return f"{number_format(count)} B" if abs(count) < MB else _decimal_bytes(count)


def bytes_in(count: float, unit: str, *, digits: int = 3) -> str:
    """A byte count in a chosen unit ("GB", "GiB", "MB", ...) to about `digits` significant
    figures: bytes_in(1.7e8, "GB") → "0.17 GB"; bytes_in(1.6e10, "GB", digits=2) → "16 GB"."""
    scale = {
        "B": 1,
        "kB": KB,
        "MB": MB,
        "GB": GB,
        "TB": TB,
        "KiB": KIB,
        "MiB": MIB,
        "GiB": GIB,
        "TiB": TIB,
    }[unit]
    value = count / scale
    if value and math.isfinite(value) and value != int(value):
        value = float(f"{value:.{digits}g}")
    return f"{number_format(value, digits=digits)} {unit}"


def bytes_format(count: float) -> str:
    """A byte count in both units, each labelled: "16.1 GB = 15 GiB"; "131,072 B = 128 KiB".

    GB/MB/kB are powers of ten (datasheets, bandwidths); GiB/MiB/KiB are powers of two
    (how memory is allocated and how nvidia-smi reports it). Small counts show exact bytes.
    """
    if abs(count) < KIB:
        return f"{number_format(count)} B"
    if abs(count) < MB:
        return f"{number_format(count)} B = {_binary_bytes(count)}"
    return f"{_decimal_bytes(count)} = {_binary_bytes(count)}"


def bandwidth_format(bytes_per_second: float) -> str:
    """A bandwidth in decimal units, as vendors quote it: "3.35 TB/s"."""
    return f"{_decimal_bytes(bytes_per_second)}/s"


def seconds_format(seconds: float) -> str:
    """A duration with a sensible unit: "850 ns", "32.4 ms", "1.44 s", "2.5 min", "3.1 h"."""
    if not math.isfinite(seconds):
        return f"{number_format(seconds)} s"
    magnitude = abs(seconds)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1e-6:
        return f"{number_format(seconds * 1e9)} ns"
    if magnitude < 1e-3:
        return f"{number_format(seconds * 1e6)} µs"
    if magnitude < 1:
        return f"{number_format(seconds * 1e3)} ms"
    if magnitude < 120:
        return f"{number_format(seconds)} s"
    if magnitude < 2 * 3600:
        return f"{number_format(seconds / 60)} min"
    if magnitude < 2 * 86400:
        return f"{number_format(seconds / 3600)} h"
    return f"{number_format(seconds / 86400)} days"


def rate_format(value: float, unit: str) -> str:
    """A rate such as tokens/s or requests/s: "209 tokens/s"."""
    return f"{number_format(value)} {unit}"


def money_format(dollars: float, *, significant: int | None = None) -> str:
    """US dollars: "$2.50", "$1,234", "$0.0042" (small sums keep significant figures). With
    `significant`, sums under $100 keep that many significant figures: "$0.0469", "$0.823"."""
    if significant is not None and 0 < abs(dollars) < 100:
        text = number_format(dollars, digits=significant)
        # Cents are written in pairs: "$6.40", not "$6.4" (sub-cent sums keep their figures).
        if abs(dollars) >= 0.01 and "." in text and len(text.split(".")[1]) == 1:
            text += "0"
        return f"${text}"
    if abs(dollars) >= 100:
        return f"${dollars:,.0f}"
    if abs(dollars) >= 0.01 or dollars == 0:
        return f"${dollars:,.2f}"
    return f"${number_format(dollars)}"


def count_format(count: float, noun: str) -> str:
    """A count with its noun, plural unless it reads as exactly one: "1 sequence", "8 sequences"
    (a value that rounds to "1" on the page is singular too)."""
    text = number_format(count)
    return f"{text} {noun if text == '1' else noun + 's'}"


def percent_format(fraction: float) -> str:
    """A fraction as a percentage: 0.5 → "50%"."""
    return f"{number_format(fraction * 100)}%"


def percent_given_format(fraction: float) -> str:
    """A fraction the learner gave, as a percentage with the digits it was given in: 0.7 →
    "70%", 0.9995 → "99.95%" (three figures would round it to a "100%" it is not)."""
    return f"{number_format(fraction * 100, digits=6)}%"
