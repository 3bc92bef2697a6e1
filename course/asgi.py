"""ASGI entry point: uvicorn serves the site, including the async SSE relay of run events."""

import os

from django.core.asgi import get_asgi_application

# What a server starts without being told is production: it refuses to start without a
# SECRET_KEY rather than run with DEBUG on and a public key. `make run` names dev explicitly.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "course.settings.production")
application = get_asgi_application()

# Every web process sweeps now and then (runs whose worker is gone, expired sessions); a lock
# in Redis lets one of them do it per interval.
from course.sweeper import sweeper_start  # noqa: E402 (needs the settings loaded above)

sweeper_start()
