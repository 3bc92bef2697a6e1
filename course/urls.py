"""The root URLconf: the site, the health check, and each app's own URLs."""

from django.urls import include, path

from course.health import healthz
from course.metrics import metrics
from course.openai_api import unknown_route
from problems.api import api

urlpatterns = [
    path("", include("course.site_urls")),
    path("healthz", healthz, name="healthz"),
    path("api/", api.urls),
    path("", include("problems.urls")),
    path("demos/", include("demos.urls")),
    path("v1/", include("course.openai_api")),  # the OpenAI-compatible API
    path("v1", unknown_route),  # a JSON 404, not a redirect to /v1/
    path("metrics", metrics, name="metrics"),
]
