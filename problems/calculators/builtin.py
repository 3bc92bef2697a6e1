"""Imports every module of built-in calculators, which registers them (one per formula family)."""

from problems.calculators import memory  # noqa: F401
