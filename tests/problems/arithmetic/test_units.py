"""Formatting for people."""

from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_in,
    flops_format,
    money_format,
    number_format,
    seconds_format,
)


def test_gb_and_gib_are_both_shown_and_labelled() -> None:
    # 80 GB of HBM is 74.5 GiB: the gap that makes "80 GB" GPUs report ~74.5 GiB.
    assert bytes_format(80e9) == "80 GB = 74.5 GiB"
    assert bytes_format(2**30) == "1.07 GB = 1 GiB"
    assert bytes_format(131_072) == "131,072 B = 128 KiB"
    assert bytes_format(512) == "512 B"


def test_bytes_in_a_chosen_unit() -> None:
    assert bytes_in(170_393_600, "GB") == "0.17 GB"


def test_seconds_pick_a_sensible_prefix() -> None:
    assert seconds_format(0.0000005) == "500 ns"
    assert seconds_format(0.0000168) == "16.8 µs"
    assert seconds_format(0.0324) == "32.4 ms"
    assert seconds_format(1.44) == "1.44 s"
    assert seconds_format(600) == "10 min"
    assert seconds_format(36_000) == "10 h"


def test_flops_in_scientific_notation() -> None:
    assert flops_format(1.606e13) == "1.6×10¹³ FLOP"
    assert flops_format(9.99e12) == "1×10¹³ FLOP"


def test_numbers_rates_and_money() -> None:
    assert number_format(1_234_567) == "1,234,567"
    assert number_format(0.17123) == "0.171"
    assert bandwidth_format(3.35e12) == "3.35 TB/s"
    assert money_format(2.5) == "$2.50"
    assert money_format(54_750) == "$54,750"
    assert money_format(0.0042) == "$0.0042"


def test_money_with_significant_figures_writes_cents_in_pairs() -> None:
    """Problem 16 at 100,000-token prompts and one output token: $0.0064 a request is $6.40 per
    thousand requests (3 significant figures of 6.4), printed as '$6.4'. Sub-cent sums and
    three-figure cents are unchanged."""
    assert money_format(6.4, significant=3) == "$6.40"
    assert money_format(0.5, significant=3) == "$0.50"
    assert money_format(0.823, significant=3) == "$0.823"
    assert money_format(0.0469, significant=3) == "$0.0469"
    assert money_format(12.34, significant=3) == "$12.30"


def test_tiny_and_huge_numbers_switch_to_scientific_notation() -> None:
    assert number_format(0.00001234) == "1.23×10⁻⁵"
    assert number_format(2.5e17) == "2.5×10¹⁷"


def test_scientific_format_survives_subnormal_floats():
    # 10**-324 underflows to 0.0: the mantissa must not be found by dividing by it.
    from problems.arithmetic.units import number_format, scientific_format

    assert scientific_format(5e-324) == "4.9×10⁻³²⁴"
    assert number_format(5e-324).endswith("10⁻³²⁴")
    assert scientific_format(9.96e3) == "1×10⁴"


def test_a_given_percentage_keeps_its_digits() -> None:
    """A cap of 0.9995 is 99.95%, not the "100%" three figures give."""
    from problems.arithmetic.units import percent_format, percent_given_format

    assert percent_format(0.9995) == "100%"
    assert percent_given_format(0.9995) == "99.95%"
    assert percent_given_format(0.7) == "70%" and percent_given_format(1.0) == "100%"
