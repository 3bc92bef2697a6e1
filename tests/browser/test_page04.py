"""Page 04 in Chromium, served by uvicorn with a real worker behind it: the calculators draw their
plots, and each live demo starts from its form, runs, and draws its plots (the closing ones
comparing what it measured with what the arithmetic predicts); nothing breaks the
Content-Security-Policy."""

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""
# (demo, {field: value} for a tiny run, plots it draws, rows its table gets)
DEMOS = (
    ("prefix-cache", {"system_tokens": "48", "requests": "2", "replicas": "2",
                      "applications": "2", "cached_prefixes": "1", "fleet_requests": "8"}, 5),
    ("disagg", {"streams": "1", "stream_tokens": "16", "long_prompts": "1",
                "long_tokens": "64"}, 3),
)


def test_each_demo_on_page_04_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                       celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/04/")
    for dom_id in ("calc-p8-routing", "calc-p22-disagg"):
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
            arg=slug, timeout=180_000)
        page.wait_for_function(
            "([slug, n]) => document.querySelectorAll(`#demo-${slug} .demo-plots .plot.drawn`)"
            ".length >= n", arg=[slug, plots], timeout=30_000)
        assert demo.locator(".demo-plots .plot-table").count() == plots
        assert demo.locator(".run-note").inner_text().strip()
    assert page.locator("#demo-prefix-cache .prefix-requests tbody tr").count() == 4
    assert page.locator("#demo-prefix-cache .prefix-policies tbody tr").count() == 3
    assert page.locator("#demo-disagg .disagg-layouts tbody tr").count() == 2
    assert page.evaluate("window.__csp") == []
