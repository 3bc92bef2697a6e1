"""Imports every module of built-in calculators, which registers them (one per formula family)."""

from problems.calculators import fleet, memory, serving, timing  # noqa: F401
