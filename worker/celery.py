"""The Celery app, configured from Django settings under the CELERY_ namespace.

Start a worker with `celery -A worker.celery worker`. Importing this module imports no torch:
the engine loads lazily inside the tasks that need it, once per worker process.
"""

import os

from celery import Celery

# As for the web server: production unless told otherwise (it then needs SECRET_KEY);
# `make run` and the tests name their settings explicitly.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.production")

app = Celery("course")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker", "demos"])
