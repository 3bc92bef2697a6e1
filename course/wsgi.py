"""WSGI entry point (the test suite's live server); production serves ASGI."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.production")
application = get_wsgi_application()
