"""Page 08 in Chromium, served by uvicorn with a real worker behind it: each live demo starts
from its form, runs, and draws its plots (the last comparing what it measured with what the
arithmetic predicts); the calculators draw theirs; nothing breaks the Content-Security-Policy."""

import re

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""
# (demo, {field: value} for a tiny run, plots it draws)
DEMOS = (
    ("metrics", {"rate": "5", "duration_s": "1", "prompt_tokens": "24", "output_tokens": "3",
                 "prefix_tokens": "16"}, 5),
    ("benchmark", {"requests": "4", "input_tokens": "8", "output_tokens": "3",
                   "static_batch": "2"}, 3),
)


def test_each_demo_on_page_08_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                       celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/08/")
    for dom_id in ("calc-p16-cost", "calc-p18-plan"):
        page.wait_for_function(
            "id => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= 1",
            arg=dom_id)
    for slug, fields, plots in DEMOS:
        demo = page.locator(f"#demo-{slug}")
        for name, value in fields.items():
            demo.locator(f"[name={name}]").fill(value)
        if slug == "benchmark":  # one load point: all at once
            for rate in ("2", "8"):
                demo.locator(f'input[name=rates][value="{rate}"]').uncheck()
        demo.get_by_role("button", name="Run", exact=True).click()
        page.wait_for_function(
            "slug => document.querySelector(`#demo-${slug}`).dataset.runState === 'finished'",
            arg=slug, timeout=120_000)
        page.wait_for_function(
            "([slug, n]) => document.querySelectorAll(`#demo-${slug} .demo-plots .plot.drawn`)"
            ".length >= n", arg=[slug, plots], timeout=30_000)
        assert demo.locator(".demo-plots .plot-table").count() == plots
        assert demo.locator(".run-note").inner_text().strip()
    metrics = page.locator("#demo-metrics")
    assert metrics.locator(".metrics-live-plot svg.main-svg").count() >= 1
    # The tile shows "p50 · p99" with units ("– · –" before any request finished).
    assert re.fullmatch(r"[\d.]+ m?s · [\d.]+ m?s",
                        metrics.locator('[data-tile="ttft"]').inner_text().strip())
    assert "vllm:time_to_first_token_seconds_count" in metrics.locator(
        ".metrics-text").text_content()
    bench = page.locator("#demo-benchmark")
    assert bench.locator(".bench-points tbody tr").count() == 2
    assert bench.locator(".bench-method tbody tr").count() >= 10
    assert page.evaluate("window.__csp") == []


def test_a_bad_value_shows_beside_its_field(page, asgi_server):  # noqa: F811
    page.goto(f"http://127.0.0.1:{asgi_server}/demos/metrics/")
    demo = page.locator("#demo-metrics")
    demo.locator("[name=rate]").fill("99")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-metrics [data-error-for=rate]')"
        ".textContent.includes('at most 20')")
