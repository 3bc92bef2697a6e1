from django.apps import AppConfig


class CourseConfig(AppConfig):
    name = "course"
    verbose_name = "Course"

    def ready(self) -> None:
        from course import signals  # noqa: F401  (merge session progress into the account on login)
