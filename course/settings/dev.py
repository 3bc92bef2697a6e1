"""Local development: `make run` uses these."""

from .base import *  # noqa: F401,F403

DEBUG = True
