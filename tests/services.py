"""A pytest plugin (loaded with -p, before Django's settings) that finds or starts Redis.

The suite uses the same rule as `make run`: REDIS_URL when set and answering, otherwise a
private redis-server from the virtual environment. Settings read REDIS_URL when they load, so
this must run first; `pytest_unconfigure` stops the server it started.
"""

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports `course` (whose Celery app defaults DJANGO_SETTINGS_MODULE to dev):
# the suite runs on the test settings, with the file-based test database its worker
# processes share.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.test")

from course.redis_server import RedisHandle, redis_resolve  # noqa: E402

_handle: RedisHandle | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    global _handle
    if _handle is None:
        directory = Path(tempfile.mkdtemp(prefix="course-redis-"))
        _handle = redis_resolve(env_url=os.environ.get("REDIS_URL"), directory=directory)
        os.environ["REDIS_URL"] = _handle.url


def pytest_unconfigure(config):
    if _handle is not None:
        _handle.stop()
