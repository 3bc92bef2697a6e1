from django.http import HttpRequest

from course.progress import progress_summary
from problems.registry import PAGES


def progress(request: HttpRequest) -> dict:
    """Every page shows "Pages done N / 10" and "Next up"."""
    return {"progress": progress_summary(request=request), "course_pages": PAGES}
