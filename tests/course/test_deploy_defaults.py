"""Deployment defaults (issue 33): the proxy count check, /healthz over plain HTTP, HSTS preload
opt-in, /metrics behind a proxy on the same host, and HTML compressed."""

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "k7#Qp2!vZr9Lm4@Xw8$Nc1^Bt6&Hy3*Jd5(Gf0)Sa-Ue+Io=Pl_Mn;Kb"


def _production(tmp_path, code: str, **env_extra) -> subprocess.CompletedProcess:  # noqa: ANN003
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(DJANGO_SETTINGS_MODULE="course.settings.production", SECRET_KEY=SECRET,
               ALLOWED_HOSTS="course.example.org", COURSE_VAR_DIR=str(tmp_path), **env_extra)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True)


def test_check_deploy_fails_a_trusted_proxy_header_with_no_proxy_counted(tmp_path):
    """TRUSTED_PROXY_COUNT=0 behind the documented proxy made every client one address."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(DJANGO_SETTINGS_MODULE="course.settings.production", SECRET_KEY=SECRET,
               ALLOWED_HOSTS="course.example.org", COURSE_VAR_DIR=str(tmp_path),
               TRUSTED_PROXY_COUNT="0")
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "course.E001" in done.stderr + done.stdout


PROBE = r"""
import django
django.setup()
from django.test import Client
from django.conf import settings
c = Client()
r = c.get("/healthz", HTTP_HOST="course.example.org")
print("healthz", r.status_code)
r = c.get("/accounts/login/", HTTP_HOST="course.example.org")
print("login", r.status_code)
print("preload", settings.SECURE_HSTS_PRELOAD, "proxies", settings.TRUSTED_PROXY_COUNT)
r = c.get("/metrics", HTTP_HOST="course.example.org", REMOTE_ADDR="127.0.0.1",
          HTTP_X_FORWARDED_FOR="198.51.100.7", HTTP_X_FORWARDED_PROTO="https")
print("metrics", r.status_code)
"""


def test_production_answers_healthz_over_http_and_preload_is_opt_in(tmp_path):
    """A plain-HTTP probe of /healthz got a 301 to https; every other page still redirects.
    /metrics from a proxy on the same host (REMOTE_ADDR 127.0.0.1) for a client elsewhere
    answered the client: now 404, as for any address not allowed."""
    done = _production(tmp_path, PROBE)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["healthz"] != "301", done.stdout + done.stderr
    assert lines["login"] == "301"
    assert lines["preload"] == "False proxies 1"
    assert lines["metrics"] in ("403", "404")
    opted = _production(tmp_path, PROBE, SECURE_HSTS_PRELOAD="1")
    assert "preload True" in opted.stdout


@pytest.mark.django_db
def test_html_is_compressed_and_json_and_streams_are_not(client):
    """/calculators/ was served as 581 KB of plain HTML."""
    plain = client.get("/calculators/")
    packed = client.get("/calculators/", HTTP_ACCEPT_ENCODING="gzip")
    assert packed["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.content).decode().count("<section") == \
        plain.content.decode().count("<section")
    assert len(packed.content) < len(plain.content) / 4
    api = client.get("/v1/models", HTTP_ACCEPT_ENCODING="gzip")
    assert "Content-Encoding" not in api


V1_PROBE = r"""
import django, json
django.setup()
from django.test import Client
c = Client(raise_request_exception=False, HTTP_HOST="course.example.org",
           HTTP_X_FORWARDED_PROTO="https")
for name, response in [
        ("models", c.get("/v1/models", HTTP_AUTHORIZATION="Bearer sk-course-x")),
        ("unknown", c.get("/v1/embeddings")),
        ("digits", c.generic("POST", "/v1/completions", '{"seed": ' + "7" * 5000 + "}",
                             content_type="application/json")),
        ("host", c.get("/v1/models", HTTP_HOST="elsewhere.example"))]:
    body = json.loads(response.content)
    print(name, response.status_code, response.get("Retry-After"), sorted(body["error"]))
"""


def test_v1_answers_openai_json_in_production_with_redis_down(tmp_path):
    """Under the production settings, with Redis not answering: 503 with Retry-After, 404, 400
    (a 5,000-digit number answered 500 before authentication) and a refused Host header, all
    as OpenAI's JSON error body."""
    done = _production(tmp_path, V1_PROBE, REDIS_URL="redis://127.0.0.1:1/0")
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()}
    keys = "['code', 'message', 'param', 'type']"
    assert lines == {"models": f"503 5 {keys}", "unknown": f"404 None {keys}",
                     "digits": f"400 None {keys}", "host": f"400 None {keys}"}, done.stderr[-2000:]
