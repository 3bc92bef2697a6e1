"""The Celery app, configured from Django settings under the CELERY_ namespace.

Start a worker with `celery -A worker.celery worker`. Importing this module imports no torch:
the engine loads lazily inside the tasks that need it, once per worker process.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.dev")

app = Celery("course")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["worker", "demos"])
