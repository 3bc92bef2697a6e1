"""Local development: `make run` uses these."""

import os

from .base import *  # noqa: F401,F403

DEBUG = True

# `make run` (manage.py serve) collects the static files first and sets this: then they go out
# as the production settings send them, compressed (gzip) under content-hashed names cached for
# good, instead of 1 MB of plotly uncompressed with max-age=0 on every page. runserver and the
# tests keep serving the files where they are, so an edit shows on the next reload.
if os.environ.get("COURSE_STATIC_COLLECTED") == "1":
    WHITENOISE_USE_FINDERS = False
    WHITENOISE_AUTOREFRESH = False
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "course.static_files.HashedEvenInDebugStorage"},
    }
