from django.apps import AppConfig


class CourseConfig(AppConfig):
    name = "course"
    verbose_name = "Course"

    def ready(self) -> None:
        from course import (  # noqa: F401
            checks,  # the site's own system checks
            signals,  # merge session progress into the account on login
        )
