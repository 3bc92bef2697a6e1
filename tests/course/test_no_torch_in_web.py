"""The web process never imports torch or transformers, whatever URL it serves.

Runs in a fresh interpreter: this test process itself may have imported torch for engine tests.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "course.settings.test"
import django
django.setup()
from django.test.utils import setup_test_environment
setup_test_environment()
from django.test import Client
from django.test.runner import DiscoverRunner
from django.urls import get_resolver, URLPattern, URLResolver

runner = DiscoverRunner(verbosity=0, interactive=False)
old = runner.setup_databases()
paths = json.loads(sys.argv[1])
client = Client()
statuses = {}
for path in paths:
    statuses[path] = client.get(path).status_code
# Starting a run counts the prompt's tokens in this process (tokenizers), still without torch.
started = client.post("/demos/lifecycle/runs", data='{"prompt": "What is a token?"}',
                      content_type="application/json").status_code
runner.teardown_databases(old)
print(json.dumps({"statuses": statuses, "started": started,
                  "tokenizers": "tokenizers" in sys.modules,
                  "torch": "torch" in sys.modules,
                  "transformers": "transformers" in sys.modules}))
"""


def every_url() -> list[str]:
    """One concrete path for each URL pattern of the site (arguments filled with sample values)."""
    from django.urls import get_resolver
    from django.urls.resolvers import RoutePattern

    samples = {"number": "1", "slug": "lifecycle", "run_id": "00000000-0000-0000-0000-000000000000"}
    paths = set()

    def walk(resolver, prefix=""):
        for entry in resolver.url_patterns:
            pattern = entry.pattern
            text = str(pattern)
            if isinstance(pattern, RoutePattern):
                for name, value in samples.items():
                    for conv in ("int", "str", "slug", "uuid", "path", ""):
                        token = f"<{conv}:{name}>" if conv else f"<{name}>"
                        text = text.replace(token, value)
            else:
                text = (text.lstrip("^").rstrip("$").replace("(?P<number>\\d+)", "01")
                        .replace("\\", ""))
            if hasattr(entry, "url_patterns"):
                walk(entry, prefix + text)
            elif "<" not in text and "(" not in text:
                paths.add("/" + prefix + text)

    walk(get_resolver())
    return sorted(paths)


@pytest.mark.slow
def test_serving_every_url_imports_no_torch(tmp_path):
    paths = every_url()
    assert "/" in paths and "/pages/01/" in paths and "/healthz" in paths
    # Its own var/ so its test database never meets the one this session is using.
    env = {**os.environ, "COURSE_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE":
           "course.settings.test", "DEMO_QUEUE": "demos-nobody-listens-no-torch"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(paths)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["statuses"]["/"] == 200
    assert report["started"] == 201 and report["tokenizers"]
    assert not report["torch"], "the web process imported torch"
    assert not report["transformers"], "the web process imported transformers"
