"""The site's pages through Django's test client: home, the ten pages, redirects, the calculator."""

import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.template.loader import render_to_string
from django.urls import reverse

from course.glossary import TERMS
from course.plan import PLAN
from problems.arithmetic.reaction import reaction_distance
from problems.registry import PAGES, PROBLEMS, SECTIONS

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return response.content.decode()


def test_home_has_every_part(client):
    html = _text(client.get("/"))
    for anchor in ("start-here", "beyond-chat", "reaction", "words", "map", "plan"):
        assert f'id="{anchor}"' in html
    assert "Pages done 0 / 10" in html
    assert 'Next up: <a href="/pages/01/">01 A request, end to end</a>' in html


def test_site_navigation(client):
    html = _text(client.get("/pages/02/"))
    nav = re.search(r'<nav class="site-nav".*?</nav>', html, re.S).group(0)
    for href in ('href="/"', 'href="/#map"', 'href="/#words"', 'href="/calculators/"',
                 'href="/accounts/login/"', 'href="/accounts/signup/"'):
        assert href in nav
    assert 'class="skip-link" href="#main"' in html and 'id="main"' in html


def test_home_start_here_has_five_request_steps(client):
    html = _text(client.get("/"))
    steps = re.search(r'<ol class="request-steps">(.*?)</ol>', html, re.S).group(1)
    assert steps.count("<li>") == 5


def test_home_glossary_links_every_term(client):
    html = _text(client.get("/"))
    names = {term.name for term in TERMS}
    assert {"Inference", "Token", "Latency", "Throughput", "GPU", "Prefill", "Decode",
            "KV cache", "Batch", "TTFT", "TPOT / ITL", "p50 / p99", "MFU", "MBU", "Goodput",
            "Roofline"} <= names
    for term in TERMS:
        assert f'id="term-{term.slug}"' in html
        assert f"<dt>{term.name}</dt>" in html


def test_home_says_what_chunked_prefill_and_prefix_caching_change(client):
    """Prefill is not 'one forward pass over the whole prompt' (chunked prefill splits it); the
    notes are not thrown away when prefix caching keeps them; they grow while writing too."""
    html = _text(client.get("/"))
    assert "one forward pass over the whole prompt" not in html
    assert "in as few passes as each step" in html
    steps = re.search(r'<ol class="request-steps">(.*?)</ol>', html, re.S).group(1)
    assert "thrown away" not in steps and "prefix caching" in steps
    assert "adds a line for every word of the reply" in html
    terms = {term.slug: term.definition for term in TERMS}
    assert "dense peak for the number format in use" in terms["mfu"]
    assert "memory-bound at any batch size" in terms["decode"]


def test_home_calculator_asks_for_p99_latency(client):
    html = _text(client.get("/"))
    reaction = re.search(r'<div class="calculator" id="reaction">(.*?)</form>', html, re.S)
    assert "p99" in reaction.group(1) and "not its average" in reaction.group(1)


def test_home_map_lists_every_page_and_problem(client):
    html = _text(client.get("/"))
    for page in PAGES:
        assert f'href="/pages/{page.slug}/"' in html
    for problem in PROBLEMS.values():
        assert f'href="/pages/{problem.page:02d}/#problem-{problem.number}"' in html
    assert html.count('<span class="badge">Not done</span>') == len(PAGES)


def test_home_plan_follows_the_course_brief(client):
    html = _text(client.get("/"))
    plan = re.search(r'<table class="plan">(.*?)</table>', html, re.S).group(1)
    rows = re.findall(r'<th scope="row">(\d+)–(\d+)</th>', plan)
    assert rows == [("0", "4"), ("4", "8"), ("8", "12"), ("12", "16"), ("16", "20"), ("20", "24")]
    assert [block.page_numbers for block in PLAN[:5]] == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
    assert PLAN[5].problem_numbers == (25,)
    assert "Explain prefill vs decode" in plan and "Size a KV cache on paper" in plan
    assert 'href="/pages/10/#problem-25"' in plan


def test_home_calculator_shows_the_default_result_without_javascript(client):
    html = _text(client.get("/"))
    expected = reaction_distance(speed_kmh=100, latency_ms=300)
    assert f"{expected.steps[-1].display}</strong>" in html
    assert expected.steps[-1].display == "8.33 m"
    assert '<table class="steps">' in html
    assert 'value="100"' in html and 'value="300"' in html


def test_home_calculator_plain_form_submission(client):
    response = client.get("/", {"speed_kmh": "90", "latency_ms": "100"})
    html = _text(response)
    # 90 km/h is 25 m/s; 0.1 s of it is 2.5 m.
    assert "2.5 m</strong>" in html
    assert "90 km/h × 1,000 m/km ÷ 3,600 s/h" in html
    assert "<html" in html


def test_home_calculator_htmx_returns_the_fragment(client):
    response = client.get("/", {"speed_kmh": "90", "latency_ms": "100"}, HTTP_HX_REQUEST="true")
    html = _text(response)
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<div id="reaction-output"')
    assert "2.5 m</strong>" in html
    # Empty error slots replace stale errors beside each field.
    assert '<p class="field-error" id="id_speed_kmh_error" hx-swap-oob="true"></p>' in html
    assert "HX-Request" in response["Vary"]


@pytest.mark.parametrize(
    ("speed", "latency", "field", "message"),
    [
        ("-5", "100", "speed_kmh", "Speed cannot be negative."),
        ("", "100", "speed_kmh", "Enter the speed in km/h."),
        ("fast", "100", "speed_kmh", "Enter the speed as a number of km/h"),
        ("5000", "100", "speed_kmh", "enter at most 1,000 km/h"),
        ("inf", "100", "speed_kmh", "Enter the speed as a number of km/h"),
        ("50", "-1", "latency_ms", "Latency cannot be negative."),
        ("50", "", "latency_ms", "Enter the latency in milliseconds."),
        ("50", "999999", "latency_ms", "Enter at most 60,000 ms"),
        ("50", "nan", "latency_ms", "Enter the latency as a number of milliseconds"),
        ("5e-324", "100", "speed_kmh", "Speed must be 0 or at least 1e-09 km/h."),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_home_calculator_field_errors(client, speed, latency, field, message, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get("/", {"speed_kmh": speed, "latency_ms": latency}, **headers)
    assert response.status_code == 200
    html = _text(response)
    slot = re.search(rf'<p class="field-error" id="id_{field}_error"[^>]*>(.*?)</p>', html, re.S)
    assert message in slot.group(1)
    assert "calc-answer" not in html
    other = "latency_ms" if field == "speed_kmh" else "speed_kmh"
    other_slot = re.search(rf'<p class="field-error" id="id_{other}_error"[^>]*>(.*?)</p>', html)
    assert other_slot.group(1) == ""


def test_home_calculator_inputs_are_labelled_with_units(client):
    html = _text(client.get("/"))
    assert '<label for="id_speed_kmh">Speed <span class="unit">(km/h)</span></label>' in html
    assert ('<label for="id_latency_ms">Inference latency <span class="unit">(ms)</span></label>'
            in html)
    assert 'aria-describedby="id_speed_kmh_error"' in html
    assert 'hx-get="/"' in html and 'hx-target="#reaction-output"' in html
    assert 'hx-trigger="input changed delay:0.3s, submit"' in html


def test_home_calculator_marks_the_invalid_field(client):
    html = _text(client.get("/", {"speed_kmh": "-5", "latency_ms": "100"}))
    speed_input = re.search(r'<input[^>]*id="id_speed_kmh"[^>]*>', html).group(0)
    assert 'aria-invalid="true"' in speed_input


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.slug)
def test_each_page_shows_its_problems_with_nine_sections(client, page):
    response = client.get(f"/pages/{page.slug}/")
    assert response.status_code == 200
    html = _text(response)
    assert f"<h1>{page.title}</h1>" in html
    for problem in page.problems:
        assert f'id="problem-{problem.number}"' in html
        assert f'href="#problem-{problem.number}"' in html  # the table of contents
        start = html.index(f'id="problem-{problem.number}"')
        headings = re.findall(r"<h3>(.*?)</h3>", html[start:])[: len(SECTIONS)]
        assert headings == [heading for _, heading in SECTIONS]
    assert "Pages done 0 / 10" in html
    assert "Mark as done" in html


def test_unwritten_sections_say_so(rf):
    # The shared problem template is what every problem falls back on until it is written.
    request = rf.get("/pages/10/")
    request.user, request.session = AnonymousUser(), {}
    html = render_to_string("problems/_problem.html", {"problem": PROBLEMS[25]}, request=request)
    assert html.count("This section is being written.") == len(SECTIONS)
    for slug, _ in SECTIONS:
        assert f'id="problem-25-{slug}"' in html


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.slug)
def test_table_of_contents_links_sources_exactly_when_the_page_has_them(client, page):
    html = _text(client.get(f"/pages/{page.slug}/"))
    assert ('href="#sources"' in html) == ('id="sources"' in html)


def test_previous_and_next_links(client):
    first = _text(client.get("/pages/01/"))
    assert 'rel="next" href="/pages/02/"' in first
    assert 'rel="prev"' not in first
    middle = _text(client.get("/pages/05/"))
    assert 'rel="prev" href="/pages/04/"' in middle and 'rel="next" href="/pages/06/"' in middle
    last = _text(client.get("/pages/10/"))
    assert 'rel="prev" href="/pages/09/"' in last
    assert 'rel="next"' not in last


@pytest.mark.parametrize("path", ["/pages/00/", "/pages/11/", "/pages/3/", "/pages/003/",
                                  "/pages/99/progress"])
def test_unknown_pages_are_404(client, path):
    method = client.post if path.endswith("progress") else client.get
    assert method(path, {"done": "1"} if path.endswith("progress") else None).status_code == 404


def test_not_found_page_is_the_sites_own(client):
    response = client.get("/pages/11/")
    assert response.status_code == 404
    html = _text(response)
    assert "Nothing here" in html and 'href="/#map"' in html


@pytest.mark.parametrize("number", [1, 7, 21, 25])
def test_problem_redirects_to_its_page(client, number):
    response = client.get(f"/problems/{number}/")
    problem = PROBLEMS[number]
    assert response.status_code == 302
    assert response["Location"] == f"/pages/{problem.page:02d}/#problem-{number}"


@pytest.mark.parametrize("number", [0, 26, 100])
def test_unknown_problems_are_404(client, number):
    assert client.get(f"/problems/{number}/").status_code == 404


def test_home_rejects_post(client):
    assert client.post("/").status_code == 405


def test_pages_are_reachable_by_name():
    assert reverse("course:page", args=["03"]) == "/pages/03/"
    assert reverse("course:progress", args=["03"]) == "/pages/03/progress"


def test_home_says_how_progress_and_reviews_work_above_the_map(client):
    """A newcomer reads, above the map, that a page is marked done on the page itself, that
    doing so schedules a review a day later (then out along 1, 3, 7, 21 and 60 days), and why
    page 03 holds problem 21: the pages group problems by topic, and 21 is past page 04's first
    problem, 8."""
    from course.views import problems_away

    html = _text(client.get("/"))
    map_at = html.index('<ol class="page-map">')
    how = html[html.index('class="how-it-works"'):map_at]
    assert "Mark this page done" in how
    assert "due 1 day later" in how and "a ladder of 1, 3, 7, 21 and 60 days" in how
    assert "at least 75%" in how and "under 40%" in how
    assert "problem 21 (Multi-tenant fairness and admission control) sits on page 03" in how
    assert [p.number for p in problems_away()][:2] == [21, 22]
