"""Page 09 in Chromium: the calculators and the policies simulator draw their plots and redraw in
place, and the rollout demo runs on a real worker, says what the gate decided and draws its
closing plots."""

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""


def _drawn(page, selector: str, count: int) -> None:
    page.wait_for_function(
        "([s, n]) => document.querySelectorAll(`${s} svg.main-svg`).length >= n",
        arg=[selector, count])


def test_the_calculators_and_the_simulator_draw_and_redraw(page, live_server):
    page.add_init_script(VIOLATIONS)
    page.goto(f"{live_server.url}/pages/09/")
    _drawn(page, "#calc-p19-canary-output .plot", 2)
    _drawn(page, "#calc-p20-cold-output .plot", 2)
    _drawn(page, "#calc-p20-day-output .plot", 5)
    before = page.locator("#calc-p20-day-output").inner_text()
    field = page.locator("#id_p20-day-cold_start_minutes")
    field.fill("30")
    field.dispatch_event("change")
    page.wait_for_function(
        "(b) => { const e = document.querySelector('#calc-p20-day-output');"
        " return e && e.innerText !== b && e.querySelectorAll('svg.main-svg').length >= 5; }",
        arg=before)
    assert page.evaluate("window.__csp") == []


@pytest.mark.worker
@pytest.mark.slow
def test_the_rollout_demo_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                   celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/09/")
    demo = page.locator("#demo-rollout")
    demo.locator("select[name=candidate]").select_option("int8")
    demo.locator("input[name=requests]").fill("16")
    demo.locator("input[name=inject_error_rate]").fill("0.5")
    demo.locator("input[name=canary_percent]").fill("50")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-rollout').dataset.runState === 'finished'",
        timeout=120_000)
    demo.locator(".rollout-plots .plot.drawn").nth(1).wait_for(timeout=30_000)
    assert demo.locator(".rollout-plots .plot .main-svg").count() >= 2
    assert "Rolled back (rule: errors)" in demo.locator(".rollout-gate").inner_text()
    assert demo.locator(".rollout-table tbody tr").count() == 2
    # The latency table's cells are milliseconds; its caption says so, as every plot table does.
    captions = demo.locator(".rollout-plots table.plot-table caption").all_inner_texts()
    assert "Values: ms" in captions
    assert page.evaluate("window.__csp") == []
