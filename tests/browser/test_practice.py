"""A mock interview in a real browser: the clock runs, the answer survives a reload, the clock
submits at zero, and the points ticked are saved to the history."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]


def test_mock_interview_end_to_end_with_a_reload(live_server, page):
    page.goto(live_server.url + "/pages/01/")
    page.get_by_role("link", name="Practise it as a timed mock interview").first.click()
    expect(page).to_have_url(re.compile(r"/practice/1/$"))
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^[45]:\d\d left$"))

    answer = page.get_by_label("Your answer, as you would say it")
    answer.fill("The API server checks limits, applies the chat template, then the queue.")
    page.reload()
    expect(answer).to_have_value(
        "The API server checks limits, applies the chat template, then the queue.")
    expect(page.locator("[data-countdown-note]")).to_contain_text("restored")

    page.get_by_role("button", name="Submit answer").click()
    expect(page).to_have_url(re.compile(r"/practice/attempts/[0-9a-f-]+/$"))
    expect(page.locator(".your-answer")).to_contain_text("then the queue")
    expect(page.locator(".model-answer")).to_contain_text("API server")
    # The follow-up's hint stays hidden until asked for.
    hint = page.locator(".followup details")
    expect(hint).not_to_have_attribute("open", "")
    hint.locator("summary").click()
    expect(hint).to_have_attribute("open", "")

    boxes = page.locator(".points-checklist input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.get_by_role("button", name="Save the points heard").click()
    expect(page).to_have_url(re.compile(r"/practice/1/history/#attempt-"))
    expect(page.locator("table.attempts")).to_contain_text("2 of 10")
    expect(page.locator(".plot .main-svg").first).to_be_visible()

    # The server has the attempt, so this browser forgot the draft: a new interview is empty.
    page.goto(live_server.url + "/practice/1/")
    expect(page.get_by_label("Your answer, as you would say it")).to_have_value("")


def test_the_clock_submits_at_zero(live_server, page):
    page.goto(live_server.url + "/practice/2/?minutes=1")
    page.get_by_label("Your answer, as you would say it").fill("Server-sent events.")
    # As if the minute had passed while the tab was closed.
    page.evaluate("""() => {
        const key = "course.practice.2";
        const state = JSON.parse(localStorage.getItem(key));
        state.startedAt -= 61000;
        localStorage.setItem(key, JSON.stringify(state));
    }""")
    page.reload()
    expect(page).to_have_url(re.compile(r"/practice/attempts/[0-9a-f-]+/$"))
    expect(page.locator(".your-answer")).to_contain_text("Server-sent events.")
