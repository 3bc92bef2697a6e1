"""The site in a real browser: progress through htmx, accounts keeping progress, the calculator."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

PASSWORD = "a-long-Passphrase-42"


def _summary(page):
    return page.locator("#progress-summary")


def test_mark_page_done_and_see_progress_on_home(live_server, page):
    page.goto(live_server.url + "/")
    expect(_summary(page)).to_contain_text("Pages done 0 / 10")
    expect(_summary(page)).to_contain_text("Next up: 01 A request, end to end")

    page.locator("#map").get_by_role("link", name="03 Batching and scheduling").click()
    expect(page).to_have_url(re.compile(r"/pages/03/$"))
    # The URL changes as the new page commits; htmx (a deferred script) takes the form over
    # only once the document has loaded, and a key pressed before that posts the plain form.
    page.wait_for_load_state("load")
    page.evaluate("window.__notReloaded = true")
    # From the keyboard: focus the button and press Enter.
    page.get_by_role("button", name="Mark as done").focus()
    page.keyboard.press("Enter")
    # Swapped in place by htmx: the button flips (keeping the focus) and the summary follows,
    # with no reload.
    expect(page.get_by_role("button", name="Mark as not done")).to_be_focused()
    expect(_summary(page)).to_contain_text("Pages done 1 / 10")
    assert page.evaluate("window.__notReloaded === true")

    page.goto(live_server.url + "/")
    expect(_summary(page)).to_contain_text("Pages done 1 / 10")
    expect(_summary(page)).to_contain_text("Next up: 01 A request, end to end")
    expect(page.locator(".map-page.is-done")).to_have_count(1)

    _summary(page).get_by_role("link", name="01 A request, end to end").click()
    page.get_by_role("button", name="Mark as done").click()
    expect(_summary(page)).to_contain_text("Pages done 2 / 10")
    page.goto(live_server.url + "/")
    expect(_summary(page)).to_contain_text("Next up: 02 The KV cache and attention")


def test_signup_and_login_keep_anonymous_progress(live_server, page):
    page.goto(live_server.url + "/pages/03/")
    page.get_by_role("button", name="Mark as done").click()
    expect(_summary(page)).to_contain_text("Pages done 1 / 10")

    page.get_by_role("link", name="Sign up").click()
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password confirmation").fill(PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_text("Signed in as grace")).to_be_visible()
    expect(_summary(page)).to_contain_text("Pages done 1 / 10")

    page.get_by_role("button", name="Log out").click()
    expect(_summary(page)).to_contain_text("Pages done 0 / 10")
    page.goto(live_server.url + "/pages/05/")
    page.get_by_role("button", name="Mark as done").click()
    expect(_summary(page)).to_contain_text("Pages done 1 / 10")

    page.get_by_role("link", name="Log in").click()
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    # The account had page 03; this visit added page 05: the union is kept.
    expect(_summary(page)).to_contain_text("Pages done 2 / 10")
    expect(page.locator(".map-page.is-done")).to_have_count(2)


def test_stopping_distance_updates_in_place(live_server, page):
    page.goto(live_server.url + "/#reaction")
    page.evaluate("window.__notReloaded = true")
    output = page.locator("#reaction-output")
    expect(output).to_contain_text("8.33 m")

    page.get_by_label("Speed").fill("90")
    page.get_by_label("Inference latency").fill("100")
    # 90 km/h is 25 m/s; a tenth of a second of it is 2.5 m.
    expect(output).to_contain_text("2.5 m")
    expect(output).to_contain_text("25 m/s × 0.1 s")

    page.get_by_label("Speed").fill("-5")
    error = page.locator("#id_speed_kmh_error")
    expect(error).to_have_text("Speed cannot be negative.")
    expect(page.get_by_label("Speed")).to_have_attribute("aria-invalid", "true")
    expect(output).not_to_contain_text("2.5 m")

    page.get_by_label("Speed").fill("36")
    expect(error).to_be_empty()
    expect(output).to_contain_text("travels 1 m before")  # 36 km/h = 10 m/s, for 0.1 s
    expect(page.get_by_label("Speed")).not_to_have_attribute("aria-invalid", "true")
    assert page.evaluate("window.__notReloaded === true")


def test_calculator_works_without_javascript(live_server, browser):
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(live_server.url + "/")
        page.get_by_label("Speed").fill("90")
        page.get_by_label("Inference latency").fill("100")
        page.get_by_role("button", name="Work it out").click()
        expect(page).to_have_url(re.compile(r"speed_kmh=90"))
        expect(page.locator("#reaction-output")).to_contain_text("2.5 m")
    finally:
        context.close()
