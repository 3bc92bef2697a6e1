"""Problem 19 on page 09, through Django's test client: every section written, the canary's
figures equal to the arithmetic's and the JSON API's, inputs that change them, hints hidden,
field errors, and no figure typed into the template."""

import re
from pathlib import Path

import pytest

from problems.content import p19
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures
from tests.problems.content.page09 import api_get, calculator_query, page_get

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p19.__file__).with_suffix(".html")


def worked_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 19), 19, "worked"))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 19)
    for slug, heading in SECTIONS:
        section = section_html(problem, 19, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_figures_equal_the_api(client) -> None:
    """1,663 requests for the error gate, 551 for p99, corrected to 1,868 and 632 for so few
    events: 31.1 min at 1 request/s (test_rollout.py works them by hand)."""
    worked = worked_text(client)
    body = api_get(client, "canary")
    assert body["requests_errors"] == 1663 and body["requests_latency"] == 551
    assert f"{body['requests_errors']:,} requests" in worked
    assert f"{body['requests_latency']:,} requests" in worked
    assert "1,868 requests and 632 requests" in worked and "about 8.31 errors" in worked
    assert "31.1 min at 1 request/s" in worked
    assert "the error rate binds" in worked


def test_changing_inputs_changes_the_figures(client) -> None:
    query = calculator_query(p19.CALCULATOR, p19.PREFIX, canary_share=0.2, request_rate=100)
    worked = worked_text(client, query)
    body = api_get(client, "canary", canary_share=0.2, request_rate=100)
    assert f"{body['requests']:,} requests (the" in worked
    assert "100 requests/s × 20% = 20 requests/s" in worked


def test_a_bad_input_is_named_beside_its_field(client) -> None:
    query = calculator_query(p19.CALCULATOR, p19.PREFIX, error_rate_regressed=0.001)
    html = page_get(client, query)
    assert "Must be above the current error rate" in html
    response = client.get("/api/calc/canary", {"error_rate_regressed": 0.001})
    assert response.status_code in (400, 422)
    assert "error_rate_regressed" in response.content.decode()


def test_the_plots_are_drawn_with_tables(client) -> None:
    worked = section_html(problem_html(page_get(client), 19), 19, "worked")
    assert "How long the canary must run against its share of traffic" in worked
    assert worked.count('class="plot"') == 2


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 19), 19, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def test_the_rollout_diagram_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 19), 19, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg and re.search(r"<desc[^>]*>[^<]+</desc>", svg)


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p19.SOURCES) >= 5
    for title, url in p19.SOURCES:
        assert title and url.startswith("https://")


def test_two_versions_on_one_gpu_names_the_driver_total(client) -> None:
    """The H100 SXM's CUDA total, 79.22 GiB = 85,061,827,297 B, is 85.1 GB as a program sees it,
    not the datasheet's 80 GB (nor nvidia-smi's 85.5); 85.06 − 5 − 16.06 (Llama 3.1 8B in BF16)
    = 64.0 GB of KV room."""
    concepts = text_of(section_html(problem_html(page_get(client), 19), 19, "concepts"))
    assert "85.1 GB as a program sees it; the datasheet says 80 GB" in concepts
    assert "leaves 64 GB for the KV cache" in concepts


def test_the_canary_is_assigned_by_user_and_the_page_says_why(client) -> None:
    """A staff answer routes the canary by user or conversation: the concepts, the answer, what
    the interviewer listens for and the mistakes all carry it."""
    problem = problem_html(page_get(client), 19)
    for slug in ("concepts", "answer", "listens", "mistakes"):
        assert "by user" in text_of(section_html(problem, 19, slug)), slug


def test_a_one_replica_fleet_gets_an_added_canary_at_half_the_traffic(client) -> None:
    """Review E7, 1 replica at 0.05 requests/s and 8 GPUs a replica: the canary is 1 added
    replica, 1 of 2, so 50% of the traffic, not 5%, unless the router weights by request; it
    costs the same as a blue-green second fleet of one replica, and the page says so."""
    worked = worked_text(client, calculator_query(p19.CALCULATOR, p19.PREFIX, replicas=1,
                                                  request_rate=0.05, gpus_per_replica=8))
    assert ("A canary of 5% beside a fleet of 1 replica is 1 added replica, while the fleet "
            "keeps serving as the baseline: 50% of the traffic (1 added replica of 2), not 5%")\
        in worked
    assert "100% of the traffic" not in worked and "1 replicas" not in worked
    assert "the canary's one replica is as large as a second fleet" in worked


def test_a_half_share_canary_says_the_baseline_is_as_noisy_and_the_count_moves(client) -> None:
    """Review M4, canary_share 0.5: k = 0.5 ÷ 0.5 = 1, so the baseline is as noisy as the
    canary; the plan needs 3,234 requests against 1,806 at a 1% share, 3,234 ÷ 1,806 = 1.79×
    more, and about 16 extra failures against 9; 'barely move' would be false."""
    worked = worked_text(client, calculator_query(p19.CALCULATOR, p19.PREFIX, canary_share=0.5))
    assert "its own noise counts as much as the canary's" in worked
    assert "3,234 requests" in worked and "at this share the canary needs 1.79× more" in worked
    assert "barely" not in worked
    assert "1 times larger" not in worked
