"""`make test` runs the suite on the test settings even when the shell exports others.

pytest-django prefers DJANGO_SETTINGS_MODULE from the environment over pyproject.toml, so a
developer's exported `course.settings.dev` used to run the suite on development settings.
"""

import os
import shlex
import subprocess
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def test_this_suite_runs_on_the_test_settings():
    assert settings.SETTINGS_MODULE == "course.settings.test"


def _make_test_pytest_line(env: dict) -> str:
    """The pytest command `make test` would run, as make prints it with -n."""
    done = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    lines = [line for line in done.stdout.splitlines() if "-m pytest" in line]
    assert len(lines) == 1, done.stdout
    return lines[0]


def test_make_test_pins_the_test_settings_against_an_exported_module(tmp_path):
    # Its own var/: the nested run's test database must never be this session's.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.dev",
           "COURSE_VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    line = _make_test_pytest_line(env)
    probe = "tests/course/test_makefile.py::test_this_suite_runs_on_the_test_settings"
    done = subprocess.run(["bash", "-c", f"{line} -q -p no:cacheprovider {shlex.quote(probe)}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
