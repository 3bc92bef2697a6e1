"""Page 05 in Chromium, served by uvicorn with a real worker behind it: the calculators draw
their plots; the speculative, itl and tail-latency demos each start from their form, run and
draw their plots; nothing breaks the Content-Security-Policy."""

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""


def test_page_05_calculators_and_the_speculative_demo(page, asgi_server,  # noqa: F811
                                                      celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/05/")
    for dom_id in ("calc-p09-itl", "calc-p10-spec", "calc-p17-tail"):
        page.wait_for_function(
            "id => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= 1",
            arg=dom_id)
    demo = page.locator("#demo-speculative")
    for name, value in {"draft_tokens": "2", "output_tokens": "4", "large_batch": "2"}.items():
        demo.locator(f"[name={name}]").fill(value)
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-speculative').dataset.runState === 'finished'",
        timeout=120_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#demo-speculative .demo-plots .plot.drawn').length"
        " >= 2", timeout=30_000)
    assert demo.locator(".demo-plots .plot-table").count() == 2
    assert demo.locator(".spec-trace-table tbody tr").count() >= 1
    assert demo.locator(".spec-speed-table tbody tr").count() == 2
    assert demo.locator(".run-note").inner_text().strip()
    itl = page.locator("#demo-itl")
    itl.locator("[name=prompt_tokens]").fill("8")
    itl.locator("[name=output_tokens]").fill("4")
    itl.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-itl').dataset.runState === 'finished'",
        timeout=120_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#demo-itl .demo-plots .plot.drawn').length >= 2",
        timeout=30_000)
    assert itl.locator(".itl-table tbody tr").count() == 12
    tail = page.locator("#demo-tail-latency")
    tail.locator("[name=duration_s]").fill("2")
    tail.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-tail-latency').dataset.runState === 'finished'",
        timeout=120_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#demo-tail-latency .tail-final .plot.drawn').length"
        " >= 4", timeout=30_000)
    assert tail.locator(".tail-slow-table tbody tr").count() >= 1
    assert page.evaluate("window.__csp") == []
