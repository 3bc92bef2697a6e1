"""Views of drills: pick a topic, answer a drawn question, see it graded with the working, play
a rapid-fire round of ten, and see accuracy per topic over time. Every view works as a plain
form post; htmx swaps the drill panel in place when it is there."""

import random

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from course import drills
from problems.calculators.registry import Drawn
from problems.drills import (
    DIMENSIONS,
    ROUND_SIZE,
    SECONDS_PER_QUESTION,
    TOPICS,
    AnswerError,
    answer_grade,
    kind_get,
    question_draw,
)
from problems.plots import Plot, Series, plot_figure, plot_table
from problems.registry import PROBLEMS

ANSWER_MAX = 80


def _mode(request: HttpRequest) -> str:
    mode = request.GET.get("mode") or request.POST.get("mode") or "mixed"
    return mode if drills.mode_valid(mode) else "mixed"


def _mode_label(mode: str) -> str:
    if mode == "mixed":
        return "mixed topics"
    if mode == "weak":
        return "your weak spots"
    return TOPICS[mode]


@require_GET
def drills_index(request: HttpRequest) -> HttpResponse:
    stats = drills.topic_stats(request=request)
    return render(request, "course/drills.html", {
        "stats": stats, "weak": drills.weak_topics(stats), "round_size": ROUND_SIZE,
        "seconds": SECONDS_PER_QUESTION,
        "kind_count": sum(s.kinds for s in stats),
    })


@require_GET
def drill_next(request: HttpRequest) -> HttpResponse:
    """A fresh question for the chosen mode (a topic, mixed, or weak spots)."""
    mode = _mode(request)
    kind = kind_get(request.GET.get("kind") or "")
    if kind is None:
        kind = drills.kind_pick(request=request, mode=mode, rng=random.Random())
    url = reverse("course:drill", args=[kind.slug, drills.seed_new()])
    return redirect(f"{url}?mode={mode}")


def _question_or_404(kind_slug: str, seed: int):  # noqa: ANN202
    kind = kind_get(kind_slug)
    if kind is None or not 0 < seed <= drills.SEED_MAX:
        raise Http404("No such drill")
    try:
        return question_draw(kind, seed)
    except LookupError as error:
        raise Http404("No such drill") from error


def _answer_field(request: HttpRequest) -> str:
    return (request.POST.get("answer") or "")[:ANSWER_MAX * 4]


@require_http_methods(["GET", "POST"])
def drill_question(request: HttpRequest, kind: str, seed: int) -> HttpResponse:
    question = _question_or_404(kind, seed)
    mode = _mode(request)
    context = {"question": question, "mode": mode, "mode_label": _mode_label(mode),
               "problem": PROBLEMS[question.kind.problem],
               "asks_for": DIMENSIONS[question.kind.dimension]}
    if request.method == "POST":
        answer = _answer_field(request)
        try:
            grade = answer_grade(question, answer)
        except AnswerError as error:
            context.update(answer=answer, error=str(error))
            return render(request, _template(request), context, status=400)
        if not grade.counts:
            context.update(answer=answer, error=grade.message)
            return render(request, _template(request), context, status=400)
        drills.drill_record(request=request, question=question, answer=answer, grade=grade)
        context.update(answer=answer, grade=grade)
    return render(request, _template(request), context)


def _template(request: HttpRequest) -> str:
    return "course/_drill_panel.html" if request.htmx else "course/drill.html"


# ---- rounds --------------------------------------------------------------------------------

@require_POST
def drill_round_start(request: HttpRequest) -> HttpResponse:
    drills.round_start(request=request, mode=_mode(request))
    return redirect("course:drill_round")


@require_http_methods(["GET", "POST"])
def drill_round(request: HttpRequest) -> HttpResponse:
    state = drills.round_get(request)
    if state is None:
        return redirect(reverse("course:drills") + "#round")
    context = {"state": state, "round_size": len(state["items"]),
               "mode_label": _mode_label(state.get("mode", "mixed"))}
    if state["index"] >= len(state["items"]):
        return _round_end(request, state, context)
    kind_slug, seed = state["items"][state["index"]]
    question = _question_or_404(kind_slug, seed)
    context.update(question=question, number=state["index"] + 1,
                   asks_for=DIMENSIONS[question.kind.dimension],
                   problem=PROBLEMS[question.kind.problem])
    if request.method == "POST":
        answer = _answer_field(request)
        timed_out = request.POST.get("timeout") == "1"
        grade = None
        if answer.strip() or not timed_out:
            try:
                grade = answer_grade(question, answer)
            except AnswerError as error:
                if not timed_out:
                    context.update(answer=answer, error=str(error),
                                   seconds_left=drills.round_question_shown(request, state))
                    return render(request, "course/drill_round.html", context, status=400)
            if grade is not None and not grade.counts:
                if not timed_out:
                    context.update(answer=answer, error=grade.message,
                                   seconds_left=drills.round_question_shown(request, state))
                    return render(request, "course/drill_round.html", context, status=400)
                grade = None
        drills.round_answer(request=request, state=state, question=question, answer=answer,
                            grade=grade)
        verdict = state["results"][-1]["verdict"]
        context.update(answer=answer, grade=grade if verdict != "late" else None,
                       late=verdict == "late", answered=True,
                       last=state["index"] >= len(state["items"]))
        return render(request, "course/drill_round.html", context)
    context["seconds_left"] = drills.round_question_shown(request, state)
    return render(request, "course/drill_round.html", context)


def _round_end(request: HttpRequest, state: dict, context: dict) -> HttpResponse:
    score, asked = drills.round_score(state)
    misses = []
    for result in state["results"]:
        if result["verdict"] != "right":
            question = _question_or_404(result["kind"], result["seed"])
            misses.append({"question": question, "result": result})
    context.update(score=score, asked=asked, misses=misses, finished=True)
    return render(request, "course/drill_round.html", context)


# ---- history ---------------------------------------------------------------------------------

def _history_plot(history: list) -> Drawn | None:  # noqa: ANN001
    days = sorted({day for _, points in history for day, _ in points})
    if not days:
        return None
    position = {day: float(i + 1) for i, day in enumerate(days)}
    plot = Plot(
        title="Share right per day, by topic",
        x_title="day practised (1 = the first)", y_title="right (%)",
        series=tuple(Series(TOPICS.get(topic, topic),
                            tuple(position[d] for d, _ in points),
                            tuple(100 * share for _, share in points), markers=True)
                     for topic, points in history),
    )
    return Drawn(plot_figure(plot), plot_table(plot))


@require_GET
def drill_history(request: HttpRequest) -> HttpResponse:
    attempts = drills.drill_attempts(request=request)
    return render(request, "course/drill_history.html", {
        "stats": drills.topic_stats(request=request, attempts=attempts),
        "attempts": attempts[:30], "drawn": _history_plot(drills.drill_history(request=request)),
    })
