"""ASGI entry point: uvicorn serves the site, including the async SSE relay of run events."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.dev")
application = get_asgi_application()
