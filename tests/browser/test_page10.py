"""Page 10 in a real browser: every calculator and simulator draws all its plots, the waterfall
redraws in place when a lever changes, each simulator re-runs in place (its last plot, measured
against predicted, drawn again), and nothing breaks the Content-Security-Policy."""

import os

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (element id, plots it draws)
CALCULATORS = {
    "calc-p23-moe": 2, "calc-p23-routing": 3, "calc-p24-cost": 2, "calc-p24-replica": 3,
    "calc-p25-fleet": 2, "calc-p25-day": 3,
}
VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""


def _drawn(page, dom_id: str, count: int) -> None:
    """Wait until `count` plotly plots are drawn in the calculator's output."""
    page.wait_for_function(
        "([id, n]) => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= n",
        arg=[dom_id, count])


def _traces(page, dom_id: str, index: int) -> list[str]:
    return page.locator(f"#{dom_id}-output .plot").nth(index).evaluate(
        "element => element.data.map(t => t.name)")


@pytest.mark.slow
def test_every_plot_on_page_10_is_drawn(page, live_server):
    page.add_init_script(VIOLATIONS)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/pages/10/")
    for dom_id, count in CALCULATORS.items():
        _drawn(page, dom_id, count)
        assert page.locator(f"#{dom_id}-output .plot").count() == count
    # The final plots compare what was measured with what the arithmetic predicts.
    assert _traces(page, "calc-p23-routing", 2)[-1].startswith("Predicted")
    assert _traces(page, "calc-p24-replica", 2) == ["Simulated replica",
                                                    "Predicted (the calculator)"]
    assert _traces(page, "calc-p25-day", 2) == ["Predicted (the calculator)",
                                                "Simulated day"]
    shots = os.environ.get("PAGE10_SCREENSHOTS")  # a folder: one picture per plot, to look at
    if shots:
        plots = page.locator(".calculator-output .plot-figure")
        for index in range(plots.count()):
            plots.nth(index).screenshot(path=f"{shots}/plot-{index:02d}.png")
    assert page.evaluate("window.__csp") == []


@pytest.mark.slow
def test_the_waterfall_redraws_when_a_lever_changes(page, live_server):
    page.goto(f"{live_server.url}/pages/10/")
    _drawn(page, "calc-p24-cost", 2)
    before = page.locator("#calc-p24-cost-output .plot").first.evaluate(
        "element => element.data[0].text[2]")
    assert before != "off"
    page.select_option("#id_p24-cost-fp8", "off")
    # The FP8 bar is now labelled off, and speculative decoding starts to pay.
    page.wait_for_function(
        "() => { const p = document.querySelector('#calc-p24-cost-output .plot');"
        " return p && p.data && p.data[0].text[2] === 'off'; }")
    _drawn(page, "calc-p24-cost", 2)
    spec = page.locator("#calc-p24-cost-output .plot").first.evaluate(
        "element => element.data[0].text[5]")
    assert spec not in ("off", "not applied")
    assert page.url.endswith("/pages/10/")


@pytest.mark.slow
def test_a_simulator_reruns_in_place(page, live_server):
    page.goto(f"{live_server.url}/pages/10/")
    _drawn(page, "calc-p25-day", 3)
    page.select_option("#id_p25-day-policy", "static")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#calc-p25-day-output table.steps th')]"
        ".some(th => th.innerText.startsWith('GPU-hours')) && "
        "[...document.querySelectorAll('#calc-p25-day-output table.steps td')]"
        ".some(td => td.innerText.startsWith('static'))")
    _drawn(page, "calc-p25-day", 3)
    note = page.locator("#calc-p25-day-output .calculator-note").inner_text()
    assert "GPU-hours" in note
