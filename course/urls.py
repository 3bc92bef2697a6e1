"""The root URLconf: the site, the health check, and each app's own URLs."""

from django.urls import include, path

from course.health import healthz

urlpatterns = [
    path("", include("course.site_urls")),
    path("healthz", healthz, name="healthz"),
]
