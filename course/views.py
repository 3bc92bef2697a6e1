"""The site's pages: home, the ten course pages, progress, accounts."""

from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from course.progress import progress_mark, progress_summary
from problems.registry import PAGES, SECTIONS, page_get, problem_get


def _page_or_404(number: str) -> "Page":  # noqa: F821
    page = page_get(number=int(number)) if number.isdigit() and len(number) == 2 else None
    if page is None:
        raise Http404("No such page")
    return page


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "course/home.html", {"pages": PAGES})


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
    progress_mark(request=request, page=page.number, done=done == "1")
    if request.htmx:
        return render(request, "course/_progress_panel.html",
                      {"page": page, "progress": progress_summary(request=request)})
    return redirect(reverse("course:page", args=[page.slug]) + "#progress")


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)  # merges the session's progress into the new account
        return redirect("course:home")
    return render(request, "registration/signup.html", {"form": form})
