"""Which pages a visitor has done: in the session for anonymous visitors, in the database for
accounts. Services write (`progress_mark`, `progress_merge_session`); selectors read.
"""

from dataclasses import dataclass

from django.http import HttpRequest

from course.models import PageProgress
from problems.registry import PAGE_NUMBERS, Page, page_get

SESSION_KEY = "pages_done"


@dataclass(frozen=True)
class ProgressSummary:
    done: frozenset[int]
    total: int
    next_page: Page | None  # the first page not done; None when all are done

    @property
    def done_count(self) -> int:
        return len(self.done)


def _session_pages(request: HttpRequest) -> set[int]:
    # Only whole page numbers that exist count: anything else in the session is ignored.
    stored = request.session.get(SESSION_KEY, [])
    if not isinstance(stored, list):
        return set()
    return {n for n in stored if type(n) is int and n in PAGE_NUMBERS}


def progress_pages_done(*, request: HttpRequest) -> frozenset[int]:
    """Page numbers this visitor has marked done."""
    if request.user.is_authenticated:
        return frozenset(
            PageProgress.objects.filter(user=request.user).values_list("page", flat=True)
        )
    return frozenset(_session_pages(request))


def progress_summary(*, request: HttpRequest) -> ProgressSummary:
    """Pages done, out of how many, and the first page not done (the "Next up")."""
    done = progress_pages_done(request=request)
    next_number = next((n for n in PAGE_NUMBERS if n not in done), None)
    return ProgressSummary(
        done=done,
        total=len(PAGE_NUMBERS),
        next_page=page_get(number=next_number) if next_number else None,
    )


def progress_mark(*, request: HttpRequest, page: int, done: bool) -> None:
    """Mark `page` done or not done for this visitor."""
    if page not in PAGE_NUMBERS:
        raise ValueError(f"no page {page}")
    if request.user.is_authenticated:
        if done:
            PageProgress.objects.get_or_create(user=request.user, page=page)
        else:
            PageProgress.objects.filter(user=request.user, page=page).delete()
        return
    pages = _session_pages(request)
    pages = pages | {page} if done else pages - {page}
    request.session[SESSION_KEY] = sorted(pages)


def progress_merge_session(*, request: HttpRequest, user) -> None:
    """On login: the union of the session's pages and the account's. Nothing is lost."""
    for page in _session_pages(request):
        PageProgress.objects.get_or_create(user=user, page=page)
    # The account holds them now; the session copy would only go stale.
    request.session.pop(SESSION_KEY, None)
