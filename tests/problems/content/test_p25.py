"""Problem 25 on page 10, through Django's test client: every section written, the fleet's figures
equal to the arithmetic and to the JSON API's, inputs that change them, hints hidden, the
architecture SVG, the tornado and the day simulator."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import money_format
from problems.content import p25
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures
from tests.problems.content.page10 import api_get, calculator_query, page_get

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p25.__file__).with_suffix(".html")


def worked_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 25), 25, "worked"))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 25)
    for slug, heading in SECTIONS:
        section = section_html(problem, 25, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_figures_equal_the_api(client) -> None:
    """156 GPUs, $284,700 a month sized for the peak and $94,900 following the load
    (test_capacity.py works them by hand)."""
    worked = worked_text(client)
    body = api_get(client, "capstone")
    assert f"{body['total_gpus']:,} GPUs in all" in worked
    assert f"{money_format(body['monthly_cost_peak'])} a month" in worked
    assert f"would cost about {money_format(body['monthly_cost_follow'])}" in worked
    assert f"so {body['batch_memory']:,} sequences fit" in worked
    # Review M9: the two decode sizings are one formula; the batch choice settled what binds.
    assert "These are one formula, rate × step ÷ (batch × utilisation)" in worked
    assert "668 set by the KV memory (668 by memory against 1,373 by the latency target)" \
        in worked
    assert "memory, not bandwidth, sizes the decode pool" not in worked
    assert "4 decode replicas (16 GPUs) and 9 prefill replicas (36 GPUs" in worked
    assert "turns per session moves it most" in worked


def test_changing_inputs_changes_the_figures(client) -> None:
    query = calculator_query(p25.CALCULATOR, p25.PREFIX, daily_users=2_000_000, regions=2)
    worked = worked_text(client, query)
    body = api_get(client, "capstone", daily_users=2_000_000, regions=2)
    assert f"{body['total_gpus']:,} GPUs in all" in worked
    assert "2 regions, each able to take the peak ÷ 1" in worked


def test_the_tornado_and_the_day_are_drawn_as_tables_too(client) -> None:
    problem = problem_html(page_get(client), 25)
    worked = section_html(problem, 25, "worked")
    assert "Which assumption moves the monthly cost most" in worked
    demo = section_html(problem, 25, "demo")
    assert 'data-calculator="capstone-day"' in demo and demo.count('class="plot"') == 3
    assert "The simulated autoscaler paid for" in text_of(demo)


def test_the_simulated_day_costs_between_the_two_predictions(client) -> None:
    for policy in ("reactive", "predictive", "queue"):
        body = api_get(client, "capstone-day", policy=policy, noise=0.0)
        assert (body["monthly_cost_follow"] < body["monthly_cost_simulated"]
                < body["monthly_cost_peak"]), policy
    static = api_get(client, "capstone-day", policy="static", noise=0.0)
    assert static["monthly_cost_simulated"] == pytest.approx(static["monthly_cost_peak"],
                                                             rel=1e-9)


def test_more_headroom_costs_more_and_leaves_fewer_short_minutes(client) -> None:
    lean = api_get(client, "capstone-day", headroom=0.0)
    padded = api_get(client, "capstone-day", headroom=0.3)
    assert padded["gpu_hours_per_day"] > lean["gpu_hours_per_day"]
    assert padded["minutes_short"] <= lean["minutes_short"]


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 25), 25, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def test_the_architecture_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 25), 25, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]*serving system[^<]*</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p25.SOURCES) >= 6
    for title, url in p25.SOURCES:
        assert title and url.startswith("https://")


def test_a_prompts_prefill_is_a_roofline_with_its_bound_named(client) -> None:
    """950 computed tokens of a 1,750-token prompt on 4 × H100 in FP8: 950 × 140,248,367,104 ÷ 4
    ÷ (1,979 TFLOP/s × 0.5) = 33.7 ms of compute against about 17.7 GB ÷ 2.68 TB/s = 6.61 ms of
    reads, so compute-bound; the API says the same."""
    text = worked_text(client)
    body = api_get(client, "capstone")
    assert body["prefill_bound"] == "compute"
    assert body["prefill_seconds"] == pytest.approx(950 * 140_248_367_104 / 4 / 989.5e12)
    assert ("A typical prompt's 950 new tokens take 33.7 ms of compute on 4 GPUs at 50% of the "
            "dense peak, against 6.61 ms") in text
    assert "so a prefill is compute-bound at 33.7 ms" in text


def test_the_kv_per_token_is_split_per_gpu_where_it_can_be(client) -> None:
    """163,840 B per token in FP8, a quarter of it (40,960 B) on each of 4 GPUs: 53.4 GB ÷
    (40,960 B × 1,950) = 668 sequences. DeepSeek-V3's latent stays whole on every GPU."""
    text = worked_text(client)
    assert "A token's KV is 164 kB, of which each GPU keeps 41 kB. A running" in text
    query = calculator_query(p25.CALCULATOR, p25.PREFIX, model="deepseek-v3", gpu="h200", tp=8)
    text = worked_text(client, query)
    assert ("A token's KV is 35.1 kB, of which each GPU keeps 35.1 kB (all of it: tensor "
            "parallelism cannot split MLA's latent)") in text


def test_the_model_answer_names_the_prefill_bound_the_worked_answer_found(client) -> None:
    """With every repeated token cached only the 150-token new message is computed, and reading
    the weights then takes longer than its FLOPs: the model answer must not still call it
    compute-bound."""
    for hit, bound in ((0.5, "compute"), (1.0, "memory")):
        query = calculator_query(p25.CALCULATOR, p25.PREFIX, prefix_hit=hit)
        problem = problem_html(page_get(client, query), 25)
        worked = text_of(section_html(problem, 25, "worked"))
        answer = text_of(section_html(problem, 25, "answer"))
        assert f"so a prefill is {bound}-bound at" in worked
        assert f"Prefill is {bound}-bound:" in answer


def test_a_throughput_bound_pool_names_the_bound_of_its_step(client) -> None:
    """Single-turn chats at a 25 ms target: the latency target limits the batch, throughput sizes
    the pool, and the step is compute-bound, so bandwidth must not be named as the limit."""
    query = calculator_query(p25.CALCULATOR, p25.PREFIX, tpot_target_ms=25, turns=1)
    worked = worked_text(client, query)
    assert "limited by the latency target. A step then takes 25 ms (compute-bound)" in worked
    assert "set by the latency target" in worked
    assert "bandwidth at the latency target" not in worked


def test_one_turn_in_one_region_reads_in_the_singular(client) -> None:
    query = calculator_query(p25.CALCULATOR, p25.PREFIX, turns=1, regions=1)
    worked = worked_text(client, query)
    assert "1 turn per session" in worked and "1 turns per session" not in worked
    assert "1 region, able to take the peak ÷ 1" in worked
    assert "5 turns per session" in worked_text(client)
