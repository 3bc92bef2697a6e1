"""Views of practice: the list, a mock interview, its grading, the history, reviews."""

import time
import uuid

from django.conf import settings
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from course import practice
from course.practice import (
    ANSWER_MAX_CHARS,
    MINUTES_DEFAULT,
    MINUTES_MAX,
    MINUTES_MIN,
    PracticeSheet,
)
from course.throttle import address_of, new_session_allowed, window_take
from problems.calculators.registry import Drawn
from problems.plots import Plot, Series, plot_figure, plot_table
from problems.registry import PAGES, Problem, page_get, problem_get

# A started interview's token is good for a day: long enough for any answer, short enough that
# an old page left open starts a fresh clock.
STARTED_MAX_AGE_SECONDS = 24 * 3600
_SIGNER_SALT = "course.practice.started"


def _sheet_or_404(request: HttpRequest, number: int) -> tuple[Problem, PracticeSheet]:
    problem = problem_get(number=number)
    sheet = practice.practice_sheet(problem=problem, request=request) if problem else None
    if sheet is None:
        raise Http404("No such problem to practise yet")
    return problem, sheet


def _minutes_parse(raw: str | None) -> tuple[int, str | None]:
    """Minutes on the clock from the query, or the default and an error to show by the field."""
    if raw in (None, ""):
        return MINUTES_DEFAULT, None
    try:
        minutes = int(raw)
    except ValueError:
        return MINUTES_DEFAULT, "Enter a whole number of minutes."
    if not MINUTES_MIN <= minutes <= MINUTES_MAX:
        return MINUTES_DEFAULT, f"Enter between {MINUTES_MIN} and {MINUTES_MAX} minutes."
    return minutes, None


def _started_token(problem: Problem, seconds_limit: int) -> tuple[str, str]:
    """A signed clock for one interview, and the interview's id (its nonce)."""
    nonce = uuid.uuid4().hex
    return signing.dumps({"p": problem.number, "s": seconds_limit, "t": time.time(), "n": nonce},
                         salt=_SIGNER_SALT), nonce


@require_GET
def practice_index(request: HttpRequest) -> HttpResponse:
    written = {p.number for p in practice.practice_problems()}
    attempts = practice.attempts_for(request=request)
    counts: dict[int, int] = {}
    for attempt in attempts:
        counts[attempt.problem] = counts.get(attempt.problem, 0) + 1
    return render(request, "course/practice.html", {
        "rows": [(page, [(p, p.number in written, counts.get(p.number, 0))
                         for p in page.problems]) for page in PAGES],
        "missed": practice.points_missed(attempts=attempts),
        "due": practice.reviews_due(request=request),
        "reviews": practice.reviews_all(request=request),
        "intervals": practice.REVIEW_INTERVALS_DAYS, "minutes_default": MINUTES_DEFAULT,
    })


@require_GET
def practice_random(request: HttpRequest) -> HttpResponse:
    problem = practice.practice_random_problem(request=request)
    if problem is None:
        return redirect("course:practice")
    return redirect("course:practice_interview", number=problem.number)


@require_GET
def practice_review(request: HttpRequest, page: int) -> HttpResponse:
    if page_get(number=page) is None:
        raise Http404("No such page")
    problem = practice.review_problem_pick(request=request, page=page)
    if problem is None:
        raise Http404("No problem of this page can be practised yet")
    return redirect(reverse("course:practice_interview", args=[problem.number]) + "?review=1")


def _reading_seconds(raw: str | None, *, elapsed: float) -> float:
    """Seconds between the page loading and the clock starting, as the page measured them:
    0 for a missing or unreadable value (no script: the clock ran from the load), at most
    `elapsed`."""
    try:
        reading = float(raw or 0)
    except ValueError:
        return 0.0
    if reading != reading:  # NaN
        return 0.0
    return min(max(reading, 0.0), elapsed)


def _attempts_owner(request: HttpRequest) -> str:
    """Whom practice attempts count against: the account, or for anonymous visitors their
    address (dropping the cookie makes a new visitor every time)."""
    if request.user.is_authenticated:
        return f"user:{request.user.pk}"
    return f"addr:{address_of(request)}"


@require_http_methods(["GET", "POST"])
def practice_interview(request: HttpRequest, number: int) -> HttpResponse:
    problem, sheet = _sheet_or_404(request, number)
    errors: dict[str, str] = {}
    answer = ""
    if request.method == "POST":
        answer = practice.answer_clean(request.POST.get("answer", ""))
        started = None
        try:
            started = signing.loads(request.POST.get("started", ""), salt=_SIGNER_SALT,
                                    max_age=STARTED_MAX_AGE_SECONDS)
            if started.get("p") != problem.number:
                raise signing.BadSignature("another problem's clock")
        except signing.BadSignature:  # SignatureExpired is one too
            errors["started"] = ("This interview's clock was lost or is over a day old; your "
                                 "answer is kept below: submit it again to save it.")
        if len(answer) > ANSWER_MAX_CHARS:
            errors["answer"] = (f"Answers are limited to {ANSWER_MAX_CHARS:,} characters; this "
                                f"one has {len(answer):,}. Shorten it and submit again.")
        if not errors:
            # Before anything is written: a new visitor's session, then this visitor's (or
            # account's) attempts this hour (300 answers of 20,000 characters added 6 MB).
            retry = new_session_allowed(request) or window_take(
                scope=f"practice:{_attempts_owner(request)}", window_s=3600,
                limit=settings.PRACTICE_ATTEMPTS_PER_HOUR)
            if retry:
                errors["answer"] = (f"Too many answers were saved from here in the last hour; "
                                    f"your answer is kept below: submit it again in "
                                    f"{max(1, round(retry / 60))} minutes.")
        if not errors:
            # The clock starts at the first keystroke (or Start), not when the page loaded:
            # the page says how long the question was read first, never more than elapsed.
            elapsed = max(0.0, time.time() - started["t"])
            seconds_used = round(elapsed - _reading_seconds(request.POST.get("reading_s"),
                                                            elapsed=elapsed))
            attempt = practice.attempt_start(request=request, problem=problem, sheet=sheet,
                                             answer=answer, seconds_limit=int(started["s"]),
                                             seconds_used=seconds_used,
                                             nonce=str(started.get("n", ""))[:32])
            return redirect("course:practice_attempt", uid=attempt.uid)
        minutes = max(1, int(started["s"]) // 60) if started and "answer" in errors else None
        minutes = minutes or MINUTES_DEFAULT
        status = 400
        restart = False
    else:
        minutes, minutes_error = _minutes_parse(request.GET.get("minutes"))
        # "Start again with this clock": a new clock even when the minutes are the same.
        restart = request.GET.get("restart") == "1"
        if minutes_error:
            errors["minutes"] = minutes_error
        status = 200
    seconds_limit = minutes * 60
    started_token, nonce = _started_token(problem, seconds_limit)
    # Showing the interview gives a new visitor an id (a session row): within the address's
    # allowance of new sessions, else a tag for this page only (cookie-less GETs made rows).
    owner, owner_merged = practice.practice_owner_tags(
        request, create=request.method == "GET" and not new_session_allowed(request))
    return render(request, "course/practice_interview.html", {
        "problem": problem, "sheet": sheet, "minutes": minutes, "seconds_limit": seconds_limit,
        "started": started_token, "nonce": nonce, "answer": answer, "errors": errors,
        "restart": restart, "failed": request.method == "POST",
        "owner": owner, "owner_merged": owner_merged,
        "review": request.GET.get("review") == "1", "answer_max": ANSWER_MAX_CHARS,
        "minutes_min": MINUTES_MIN, "minutes_max": MINUTES_MAX,
    }, status=status)


@require_http_methods(["GET", "POST"])
def practice_attempt(request: HttpRequest, uid: uuid.UUID) -> HttpResponse:
    attempt = practice.attempt_get(request=request, uid=uid)
    if attempt is None:
        raise Http404("No such attempt")
    problem, sheet = _sheet_or_404(request, attempt.problem)
    error = None
    if request.method == "POST":
        try:
            heard = {int(v) for v in request.POST.getlist("heard")}
            partly = {int(v) for v in request.POST.getlist("partly")}
        except ValueError:
            heard = partly = None
        listed = set(range(len(attempt.points)))
        if heard is None or not heard <= listed or not partly <= listed:
            error = "Tick only the points listed."
        else:
            practice.attempt_grade(request=request, attempt=attempt, heard=heard,
                                   partly=partly - heard)
            return redirect(reverse("course:practice_history", args=[problem.number])
                            + f"#attempt-{attempt.uid}")
    html_of = {p.text: p.html for p in sheet.points}  # the page's wording, where it still has it
    points = [{"index": i, "html": html_of.get(p["text"], p["text"]), "heard": p["heard"],
               "partly": p.get("partly", False)}
              for i, p in enumerate(attempt.points)]
    followup = (sheet.followups[attempt.followup]
                if attempt.followup is not None and attempt.followup < len(sheet.followups)
                else None)
    return render(request, "course/practice_attempt.html", {
        "owner": practice.practice_owner_tags(request)[0],
        "problem": problem, "sheet": sheet, "attempt": attempt, "points": points,
        "followup": followup, "error": error,
    }, status=400 if error else 200)


def _history_plot(attempts: list) -> Drawn | None:  # noqa: ANN001
    graded = [a for a in reversed(attempts) if a.graded_at is not None]
    if not graded:
        return None
    xs = tuple(float(i + 1) for i in range(len(graded)))
    plot = Plot(
        title="Points heard in each attempt",
        x_title="attempt (oldest first)",
        y_title="points heard (%)",
        series=(Series("points heard", xs, tuple(100 * a.share_heard for a in graded),
                       markers=True),),
        x_integer=True,  # attempt 1, 2, 3: never 1.5
    )
    return Drawn(plot_figure(plot), plot_table(plot))


@require_GET
def practice_history(request: HttpRequest, number: int) -> HttpResponse:
    problem, sheet = _sheet_or_404(request, number)
    attempts = practice.attempts_for(request=request, problem=problem.number)
    return render(request, "course/practice_history.html", {
        "problem": problem, "sheet": sheet, "attempts": attempts,
        "missed": practice.points_missed(attempts=attempts),
        "drawn": _history_plot(attempts),
    })
