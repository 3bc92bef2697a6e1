"""The site's pages: home, the ten course pages, progress, accounts."""

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from course.forms import LoginForm, ReactionForm, SignupForm
from course.glossary import TERMS
from course.plan import PLAN
from course.practice import (
    GOOD_SHARE,
    POOR_SHARE,
    REVIEW_INTERVALS_DAYS,
    review_on_page_marked,
    reviews_due,
)
from course.progress import progress_mark, progress_summary
from course.throttle import address_of, new_session_allowed, window_take
from problems.arithmetic.numbers import numbers_sheet
from problems.arithmetic.reaction import reaction_texts
from problems.registry import PAGES, PROBLEMS, SECTIONS, Page, page_get, problem_get


def _page_or_404(number: str) -> Page:
    # Pages are always two digits (/pages/03/): one canonical URL per page.
    page = page_get(number=int(number)) if number.isdigit() and len(number) == 2 else None
    if page is None:
        raise Http404("No such page")
    return page


def _vary_on_htmx(response: HttpResponse) -> HttpResponse:
    # The same URL answers with a whole page or a fragment: caches must tell them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    form = ReactionForm.from_query(request.GET)
    reaction = form.result_or_none()
    context = {"form": form, "reaction": reaction,
               "reaction_texts": reaction_texts(reaction) if reaction else None}
    if request.htmx:
        return _vary_on_htmx(render(request, "course/_reaction_output.html", context))
    context.update(pages=PAGES, problem_count=len(PROBLEMS), terms=TERMS, plan=PLAN,
                   reviews_due=reviews_due(request=request), away=problems_away(),
                   review_days=REVIEW_INTERVALS_DAYS, review_good=round(GOOD_SHARE * 100),
                   review_poor=round(POOR_SHARE * 100))
    return _vary_on_htmx(render(request, "course/home.html", context))


def problems_away() -> list:
    """The problems a page holds out of number order (grouped by topic, not by number): each
    one numbered past the first problem of the page after its own, e.g. problem 21 on page 03."""
    away = []
    for page, following in zip(PAGES, PAGES[1:], strict=False):
        first_next = min(p.number for p in following.problems)
        away.extend(p for p in page.problems if p.number > first_next)
    return away


@require_GET
def page_detail(request: HttpRequest, number: str) -> HttpResponse:
    page = _page_or_404(number)
    index = PAGES.index(page)
    context = {
        "page": page,
        "sections": SECTIONS,
        "previous_page": PAGES[index - 1] if index > 0 else None,
        "next_page": PAGES[index + 1] if index + 1 < len(PAGES) else None,
    }
    return render(request, "course/page.html", context)


@require_GET
def problem_redirect(request: HttpRequest, number: int) -> HttpResponse:
    problem = problem_get(number=number)
    if problem is None:
        raise Http404("No such problem")
    url = reverse("course:page", args=[f"{problem.page:02d}"]) + f"#{problem.anchor}"
    return redirect(url)


@require_POST
def progress_update(request: HttpRequest, number: str) -> HttpResponse:
    page = _page_or_404(number)
    done = request.POST.get("done")
    if done not in ("0", "1"):
        return HttpResponse("done must be 0 or 1", status=400, content_type="text/plain")
    retry = new_session_allowed(request)  # checked before a session row is written
    if retry:
        return _too_many_sessions(retry)
    progress_mark(request=request, page=page.number, done=done == "1")
    review_on_page_marked(request=request, page=page.number, done=done == "1")
    if request.htmx:
        # The panel swaps in place; the summary at the top of the page follows out of band.
        return _vary_on_htmx(render(request, "course/_progress_panel.html",
                                    {"page": page, "progress": progress_summary(request=request),
                                     "summary_oob": True}))
    return redirect(reverse("course:page", args=[page.slug]) + "#progress")


def _too_many_sessions(retry: int) -> HttpResponse:
    response = HttpResponse(f"Too many new visitors from your address in the last hour; try "
                            f"again in {max(1, round(retry / 60))} minutes, or sign in.",
                            status=429, content_type="text/plain")
    response["Retry-After"] = str(retry)
    return response


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("course:home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        # Accounts are free: an address makes at most SIGNUPS_PER_ADDRESS_PER_HOUR of them.
        retry = window_take(scope=f"signup:{address_of(request)}",
                            limit=settings.SIGNUPS_PER_ADDRESS_PER_HOUR, window_s=3600)
        if retry:
            form.add_error(None, f"Too many accounts were made from your address in the last "
                           f"hour; try again in {max(1, round(retry / 60))} minutes.")
            response = render(request, "registration/signup.html", {"form": form}, status=429)
            response["Retry-After"] = str(retry)
            return response
        user = form.save()
        # login() sends user_logged_in, whose receiver merges the session's progress.
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("course:home")
    return render(request, "registration/signup.html", {"form": form})


def login_view(request: HttpRequest, *args, **kwargs) -> HttpResponse:
    """Django's login page, refused (the locked-out page) while this address has failed
    LOGIN_ADDRESS_FAILURE_LIMIT logins within the cool-off, whatever the usernames; django-axes
    pauses a single address-and-username pair sooner."""
    if request.method == "POST" and window_take(
            scope=f"loginfail:{address_of(request)}", take=False,
            limit=settings.LOGIN_ADDRESS_FAILURE_LIMIT,
            window_s=settings.AXES_COOLOFF_TIME.total_seconds()):
        return login_locked_out(request)
    return _login_page(request, *args, **kwargs)


_login_page = auth_views.LoginView.as_view(authentication_form=LoginForm,
                                           redirect_authenticated_user=True)


def login_locked_out(request: HttpRequest, credentials: dict | None = None,
                     *args, **kwargs) -> HttpResponse:
    """What django-axes answers while logins are paused for this address or username: a page
    that says so and for how long, with 429 Too Many Requests."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)


@require_GET
def numbers(request: HttpRequest) -> HttpResponse:
    """The numbers to know, computed from the catalogs, each section citing its sources."""
    sections = []
    for section in numbers_sheet():
        sources: list[str] = []
        rows = []
        for row in section.rows:
            if row.source not in sources:
                sources.append(row.source)
            rows.append({"cells": row.cells, "ref": sources.index(row.source) + 1})
        problem = problem_get(number=section.problem)
        sections.append({"section": section, "rows": rows, "sources": sources,
                         "problem": problem})
    return render(request, "course/numbers.html", {"sections": sections})
