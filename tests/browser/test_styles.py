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


@pytest.mark.parametrize("width", [360, 1280])
def test_no_horizontal_scroll(live_server, browser, width):
    context = browser.new_context(viewport={"width": width, "height": 800})
    try:
        page = context.new_page()
        for path in ("/", "/pages/01/", "/pages/03/", "/accounts/signup/"):
            page.goto(live_server.url + path)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at {width}px"
    finally:
        context.close()
