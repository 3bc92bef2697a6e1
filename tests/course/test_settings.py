"""Production settings pass Django's deployment checks with no warnings."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_production_settings_pass_check_deploy(tmp_path):
    # The browser tests allow async-unsafe ORM calls in this process; a deployment never does.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        **env,
        "DJANGO_SETTINGS_MODULE": "course.settings.production",
        "SECRET_KEY": "k7#Qp2!vZr9Lm4@Xw8$Nc1^Bt6&Hy3*Jd5(Gf0)Sa-Ue+Io=Pl_Mn;Kb",
        "ALLOWED_HOSTS": "course.example.org",
        "COURSE_VAR_DIR": str(tmp_path),
    }
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level",
                           "WARNING"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DJANGO_SETTINGS_MODULE="course.settings.production", COURSE_VAR_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


ENTRY_POINT_PROBE = r"""
import sys
import {module}
from django.conf import settings
print(settings.SETTINGS_MODULE, settings.DEBUG)
"""


def _entry_point_run(module: str, tmp_path, **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(COURSE_VAR_DIR=str(tmp_path), **extra)
    return subprocess.run([sys.executable, "-c", ENTRY_POINT_PROBE.format(module=module)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["course.asgi", "worker.celery"])
def test_entry_points_default_to_production_settings(module, tmp_path):
    done = _entry_point_run(module, tmp_path, SECRET_KEY="k" * 60, ALLOWED_HOSTS="example.org")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["course.settings.production", "False"]


@pytest.mark.parametrize("module", ["course.asgi", "worker.celery"])
def test_entry_points_refuse_to_start_without_settings_or_secret(module, tmp_path):
    done = _entry_point_run(module, tmp_path)
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr
