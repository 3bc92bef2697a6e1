"""Problem 16 on page 08, through Django's test client: every section written, the figures equal
to the JSON API's, inputs that move them, hints hidden, an accessible SVG, the examples the
concepts quote."""

from pathlib import Path

import pytest

from problems.arithmetic.units import money_format, percent_format
from problems.content import p16
from tests.problems.content.helpers import typed_figures
from tests.problems.content.page08 import (
    api_get,
    calculator_query,
    hints_hidden,
    mistakes_at_least_four,
    section_text,
    sections_written,
    svg_accessible,
)

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p16.__file__).with_suffix(".html")


def test_all_nine_sections_are_written(client) -> None:
    sections_written(client, 16)


def test_the_worked_answer_equals_the_api(client) -> None:
    """The defaults: $3.95/h, 2,000 + 300 tokens half cached, 20,000 and 3,000 tokens/s, 60%
    utilisation: $0.274 per thousand requests, 13.3% more after a 20-point drop."""
    worked = section_text(client, 16, "worked")
    r = api_get(client, "request-cost")
    assert money_format(r["dollars_per_request"] * 1000, significant=3) in worked
    assert f"{percent_format(r['cost_increase'])} more" in worked
    assert money_format(r["extra_dollars_per_month"]) in worked
    assert (money_format(r["dollars_per_request"] * 1000, significant=3),
            percent_format(r["cost_increase"])) == ("$0.274", "13.3%")


def test_changing_the_inputs_moves_the_prose(client) -> None:
    query = calculator_query(p16.CALCULATOR, p16.PREFIX, cache_hit_rate=0.8, hit_rate_drop=0.5)
    worked = section_text(client, 16, "worked", query)
    r = api_get(client, "request-cost", cache_hit_rate=0.8, hit_rate_drop=0.5)
    assert "from 80% to 30%" in worked
    assert f"{percent_format(r['cost_increase'])} more" in worked


def test_a_drop_past_the_hit_rate_is_an_error_beside_the_field(client) -> None:
    query = calculator_query(p16.CALCULATOR, p16.PREFIX, cache_hit_rate=0.1, hit_rate_drop=0.5)
    response = client.get("/pages/08/" + query)
    assert response.status_code == 200
    assert "Cannot be more than the hit rate" in response.content.decode()
    api = client.get("/api/calc/request-cost", {"cache_hit_rate": 0.1, "hit_rate_drop": 0.5})
    assert api.status_code in (400, 422) and "hit_rate_drop" in api.content.decode()


def test_the_concepts_quote_computed_examples(client) -> None:
    concepts = section_text(client, 16, "concepts")
    # 98 requests at 200 ms and 2 at 20 s: mean 596 ms, median 200 ms, p99 20 s; the
    # histogram's p99 rank 990 falls between 1 s and 2.5 s: 1 + 1.5 × (990 − 985)/13.
    assert "The mean is 596 ms" in concepts
    assert "the p99 is 20 s" in concepts
    assert "Prometheus reports 1.58 s" in concepts
    assert "vllm:num_requests_waiting" in concepts


def test_hints_svg_mistakes_and_no_typed_figures(client) -> None:
    hints_hidden(client, 16)
    svg_accessible(client, 16)
    source = TEMPLATE.read_text()
    mistakes_at_least_four(source)
    assert typed_figures(source) == []


def test_sources_are_titled_links() -> None:
    assert len(p16.SOURCES) >= 6
    for title, url in p16.SOURCES:
        assert title and url.startswith("https://")


def test_the_hit_rate_advice_is_consistent(client) -> None:
    """Review: the concepts said the hit rate is only plotted while the model answer alerted on
    it; both now warn (not page) on a sudden fall. The histogram example says its bounds are a
    subset of vLLM's, so its coarse first bucket is not presented as vLLM's."""
    concepts = section_text(client, 16, "concepts")
    answer = section_text(client, 16, "answer")
    assert "hit rate are not themselves bad or good" not in concepts
    assert "worth a warning of its own" in concepts
    assert "alert on the hit rate too" not in answer
    assert "a warning (not a page) on a sudden fall in the hit" in answer
    assert "five consecutive ones of vLLM's" in concepts
    assert "all of them but the success counter and the phase times" in concepts


def test_the_clocks_are_placed_where_the_engines_put_them(client) -> None:
    """Review: vLLM's own TTFT starts when tokenization begins (its design notes), so the page
    must not say every engine's TTFT leaves tokenization out; and vLLM's per-request TPOT
    histogram is named beside the per-gap one."""
    concepts = section_text(client, 16, "concepts")
    assert "vLLM starts it in its API server when tokenization begins" in concepts
    assert "vllm:request_time_per_output_token_seconds" in concepts
    assert any("design/metrics" in url for _, url in p16.SOURCES)


def test_the_drop_reads_right_when_it_is_one_point_or_changes_nothing(client) -> None:
    """Review: a 1-point drop read "1 points"; a drop of 0 (or a prompt of 0 tokens, with
    nothing to cache) still said the hit rate drops, the fleet "grows" from a figure to the same
    figure and TTFT rises, and the model answer called it a drop that makes requests prefill
    more."""
    one = section_text(client, 16, "worked",
                       calculator_query(p16.CALCULATOR, p16.PREFIX, hit_rate_drop=0.01))
    assert "drops by 1 point ," in one and "1 points" not in one
    for changes in ({"hit_rate_drop": 0}, {"prompt_tokens": 0}):
        query = calculator_query(p16.CALCULATOR, p16.PREFIX, **changes)
        worked = section_text(client, 16, "worked", query)
        answer = section_text(client, 16, "answer", query)
        assert "TTFT rises too" not in worked and "grows from" not in worked
        assert "point drop makes every request prefill more" not in answer
        assert "A drop in the hit rate." in worked
    assert "nothing to cache" in section_text(
        client, 16, "worked", calculator_query(p16.CALCULATOR, p16.PREFIX, prompt_tokens=0))


def test_counts_of_one_read_in_the_singular(client) -> None:
    """Review: one output token and one request a day read "1 output tokens", "decode 1
    tokens" and "for 1 requests a day"."""
    query = calculator_query(p16.CALCULATOR, p16.PREFIX, output_tokens=1, requests_per_day=1)
    worked = section_text(client, 16, "worked", query)
    answer = section_text(client, 16, "answer", query)
    assert "2,000 prompt tokens and 1 output token." in worked
    assert "decode 1 token at" in worked and "for 1 request a day" in worked
    assert "at 1 request a day" in answer
    assert "1 output tokens" not in worked and "1 requests a day" not in worked + answer
    default = section_text(client, 16, "worked")
    assert "2,000 prompt tokens and 300 output tokens." in default
    assert "Prefill 1,000 tokens at" in default and "decode 300 tokens at" in default


def test_a_short_prompt_does_not_make_the_hit_rate_a_direct_lever(client) -> None:
    """Review M10, 100 prompt and 2,000 output tokens: a 20-point drop adds 20 tokens of
    prefill to a request whose time is mostly 2,000 decode steps, 0.149% more per request, so
    the answer must not call the hit rate 'a direct lever', and the fleet, 12.9 replicas'
    worth either way at one decimal, must not 'grow from 12.9 to 12.9'."""
    query = calculator_query(p16.CALCULATOR, p16.PREFIX, prompt_tokens=100, output_tokens=2000)
    worked = section_text(client, 16, "worked", query)
    assert "grows from 12.9 to 12.9" not in worked
    assert "stays at about 12.9 replicas' worth" in worked
    answer = section_text(client, 16, "answer", query)
    assert "The hit rate is a direct lever" not in answer
    assert "the hit rate is not a lever worth watching for cost" in answer


def test_alerting_uses_burn_rates_and_conditions_ttft_on_the_prompt(client) -> None:
    """Review K1: the SRE Workbook's multi-window alerts. 2% of a 30-day budget in one hour is
    a burn of 0.02 × 720 h ÷ 1 h = 14.4×; 5% in six hours is 0.05 × 720 ÷ 6 = 6×; 10% in three
    days is 1×. And TTFT alerts split into queue time and prefill time per prompt token."""
    concepts = section_text(client, 16, "concepts")
    assert "2% of a month's budget goes in an hour (a burn of 14.4×" in concepts
    assert "5% in six hours" in concepts and "10% in three days" in concepts
    assert "vllm:request_queue_time_seconds" in concepts
    assert any("alerting-on-slos" in url for _, url in p16.SOURCES)
