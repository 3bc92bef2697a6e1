"""Page 03 in Chromium, served by uvicorn with a real worker behind it: each live demo starts
from its form, runs, and draws its plots (the last comparing what it measured with what the
arithmetic predicts); the calculators draw theirs; nothing breaks the Content-Security-Policy."""

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
    ("batching", {"num_requests": "3", "batch": "2", "output_min": "2", "output_max": "5",
                  "prompt_tokens": "8"}, 3),
    ("chunked-prefill", {"streams": "1", "long_prompt_tokens": "64", "token_budget": "33",
                         "stream_prompt_tokens": "4"}, 2),
    ("fairness", {"heavy_requests": "4", "light_tenants": "1", "light_requests": "1",
                  "seats": "2", "output_tokens": "4", "queue_bound": "2"}, 4),
)


def test_each_demo_on_page_03_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                       celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/03/")
    for dom_id in ("calc-p06-batching", "calc-p06-occupancy", "calc-p07-long", "calc-p07-gaps",
                   "calc-p21-tenants", "calc-p21-sweep"):
        page.wait_for_function(
            "id => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= 1",
            arg=dom_id)
    for slug, fields, plots in DEMOS:
        demo = page.locator(f"#demo-{slug}")
        for name, value in fields.items():
            demo.locator(f"[name={name}]").fill(value)
        demo.get_by_role("button", name="Run", exact=True).click()
        page.wait_for_function(
            "slug => document.querySelector(`#demo-${slug}`).dataset.runState === 'finished'",
            arg=slug, timeout=120_000)
        page.wait_for_function(
            "([slug, n]) => document.querySelectorAll(`#demo-${slug} .demo-plots .plot.drawn`)"
            ".length >= n", arg=[slug, plots], timeout=30_000)
        assert demo.locator(".demo-plots .plot-table").count() == plots
        assert demo.locator(".run-note").inner_text().strip()
    assert page.locator("#demo-batching .occupancy-strip .occupancy-bar").count() > 4
    assert page.locator("#demo-batching .batching-table tbody tr").count() == 2
    assert page.locator("#demo-chunked-prefill .chunked-table tbody tr").count() == 2
    assert page.locator("#demo-fairness .fairness-table tbody tr").count() == 4
    assert page.evaluate("window.__csp") == []


def test_a_bad_value_shows_beside_its_field(page, asgi_server):  # noqa: F811
    page.goto(f"http://127.0.0.1:{asgi_server}/demos/chunked-prefill/")
    demo = page.locator("#demo-chunked-prefill")
    demo.locator("[name=long_prompt_tokens]").fill("5000")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-chunked-prefill "
        "[data-error-for=long_prompt_tokens]').textContent.includes('at most 960')")
