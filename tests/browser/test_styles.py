"""What only a browser shows about the stylesheet: hidden stays hidden, focus is visible."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]


def test_hidden_buttons_stay_hidden(live_server, page):
    # Buttons are styled inline-flex; the hidden attribute must still win.
    page.goto(live_server.url + "/")
    page.evaluate("""() => {
        const button = document.createElement('button');
        button.id = 'probe'; button.hidden = true; button.textContent = 'probe';
        document.querySelector('main').append(button);
    }""")
    expect(page.locator("#probe")).to_be_hidden()


def test_skip_link_appears_on_focus_and_focus_is_outlined(live_server, page):
    page.goto(live_server.url + "/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    assert page.evaluate("document.activeElement.getBoundingClientRect().top >= 0")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"


@pytest.mark.parametrize("width", [360, 1280, 1440])
def test_no_horizontal_scroll(live_server, browser, width):
    """Every page at a phone's width, a laptop's and a desktop's (at 1280 px a long worked value
    beside the form once pushed page 08 161 px sideways)."""
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        pages = [f"/pages/{n:02d}/" for n in range(1, 11)]
        for path in ("/", *pages, "/numbers/", "/calculators/", "/accounts/signup/"):
            page.goto(live_server.url + path)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at {width}px"
    finally:
        context.close()


LAYOUT = """(root) => {
    const box = (sel) => root.querySelector(sel).getBoundingClientRect();
    const form = box('.calculator-form'), output = box('.calculator-output');
    const label = box('.steps tbody th'), working = box('.steps tbody .expression');
    return {beside: output.left >= form.right && Math.abs(output.top - form.top) < 40,
            working_below_label: working.top >= label.bottom - 1};
}"""


@pytest.mark.parametrize(("width", "path", "beside", "below"), [
    # A course page at 1280 px: beside the table of contents the calculator has ~48rem, the
    # form goes beside the working, and each step's working under its name and value.
    (1280, "/pages/03/", True, True),
    # Its own page has the width for three columns beside the form.
    (1280, "/calculators/static-vs-continuous/", True, False),
    # A phone: the form above the working.
    (390, "/pages/03/", False, True),
])
def test_the_working_sits_beside_the_form_where_there_is_room(live_server, browser, width,
                                                              path, beside, below):
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(live_server.url + path)
        layout = page.locator(".calculator").first.evaluate(LAYOUT)
        assert layout["beside"] is beside, layout
        assert layout["working_below_label"] is below, layout
    finally:
        context.close()
