"""axe-core (bundled by axe-playwright-python) on every page of the course, on a desktop and on
a 390 px phone: no serious or critical violation anywhere, and no page that scrolls sideways
on the phone.

The walkthrough of issue 35 found serious ones on every page with a plot (scrolling tables and
code blocks a keyboard could not reach, aria-label on plain divs, stage names at 4.46:1,
empty table headers) and seven pages 514–878 px wide at 390 px."""

import pytest
from axe_playwright_python.sync_playwright import Axe

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.usefixtures("transactional_db")]

PAGES = ["/", *(f"/pages/{n:02d}/" for n in range(1, 11)), "/numbers/", "/calculators/",
         "/calculators/kv-cache/", "/practice/", "/practice/1/", "/practice/1/history/",
         "/practice/drills/", "/practice/drills/next/", "/practice/drills/history/",
         "/accounts/login/", "/accounts/signup/", "/demos/lifecycle/", "/api/docs"]

WIDTHS = {"desktop": 1280, "phone": 390}


def _serious(results) -> list[str]:
    return [f"{v['id']} ({v['impact']}, {len(v['nodes'])}×): {v['nodes'][0]['target']} "
            f"{v['nodes'][0]['html'][:120]}"
            for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_no_serious_violation_and_no_sideways_scroll(live_server, browser, width):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    axe = Axe()
    found, wide = {}, {}
    try:
        for path in PAGES:
            page.goto(live_server.url + path, wait_until="load")
            page.wait_for_timeout(300)  # course.js marks scrolling boxes once laid out
            problems = _serious(axe.run(page))
            if problems:
                found[path] = problems
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            if scroll_width > width:
                wide[path] = scroll_width
    finally:
        context.close()
    assert not found, found
    assert not wide or width > 390, f"pages wider than the phone: {wide}"
