"""The web side of the demos (views, relay, services, the task module it queues through) never
imports torch or transformers. A fresh interpreter: this test process may have imported both."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "course.settings.test"
import django
django.setup()
import demos.views, demos.relay, demos.services, demos.tasks, demos.runners, demos.estimate
import worker.demo_engine, demos.templatetags.demo_tags
from django.template.loader import render_to_string
render_to_string("demos/demo_page.html", demos.views.demo_context("streaming"))
print(json.dumps({"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


def test_demo_web_modules_import_no_torch():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"torch": False,
                                                               "transformers": False}
