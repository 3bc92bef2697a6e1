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
    # The clock waits while the question is read; Start runs it and puts the cursor in the
    # answer (it was 13 Tabs away).
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^5:00 on the clock"))
    page.wait_for_timeout(1200)
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^5:00 on the clock"))
    page.get_by_role("button", name="Start the clock and answer").click()
    answer = page.get_by_label("Your answer, as you would say it")
    expect(answer).to_be_focused()
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"^[45]:\d\d left$"))
    page.keyboard.type("The API server checks limits, ")
    answer.fill("The API server checks limits, applies the chat template, then the queue.")
    page.reload()
    expect(answer).to_have_value(
        "The API server checks limits, applies the chat template, then the queue.")
    expect(page.locator("[data-countdown-note]")).to_contain_text("restored")

    page.get_by_role("button", name="Submit answer").click()
    expect(page).to_have_url(re.compile(r"/practice/attempts/[0-9a-f-]+/$"))
    expect(page.locator(".your-answer")).to_contain_text("then the queue")
    expect(page.locator(".model-answer")).to_contain_text("API server")
    # The follow-up is asked before the grading (saving leads away to the history); its hint
    # stays hidden until asked for.
    assert page.evaluate("""() => document.querySelector('.followup').compareDocumentPosition(
        document.querySelector('.points-checklist')) & Node.DOCUMENT_POSITION_FOLLOWING""")
    hint = page.locator(".followup details")
    expect(hint).not_to_have_attribute("open", "")
    hint.locator("summary").click()
    expect(hint).to_have_attribute("open", "")

    boxes = page.locator(".points-checklist input[name=heard]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.locator(".points-checklist input[name=partly]").nth(2).check()
    page.get_by_role("button", name="Save the points heard").click()
    expect(page).to_have_url(re.compile(r"/practice/1/history/#attempt-"))
    expect(page.locator("table.attempts")).to_contain_text("2 of 10, 1 in part")
    expect(page.locator(".plot .main-svg").first).to_be_visible()
    # One attempt: the x axis ticks at whole attempts only.
    ticks = page.evaluate(
        "() => [...document.querySelectorAll('.plot .xtick text')].map(t => t.textContent)")
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks

    # The server has the attempt, so this browser forgot the draft: a new interview is empty.
    page.goto(live_server.url + "/practice/1/")
    expect(page.get_by_label("Your answer, as you would say it")).to_have_value("")


def test_the_clock_submits_at_zero(live_server, page):
    page.goto(live_server.url + "/practice/2/?minutes=1")
    page.get_by_label("Your answer, as you would say it").fill("Server-sent events.")
    # As if the minute had passed while the tab was closed.
    page.evaluate("""() => {
        const key = Object.keys(localStorage).find((k) => k.endsWith(".2"));
        const state = JSON.parse(localStorage.getItem(key));
        state.startedAt -= 61000;
        localStorage.setItem(key, JSON.stringify(state));
    }""")
    page.reload()
    expect(page).to_have_url(re.compile(r"/practice/attempts/[0-9a-f-]+/$"))
    expect(page.locator(".your-answer")).to_contain_text("Server-sent events.")


def _draft_keys(page) -> list[str]:
    return page.evaluate("() => Object.keys(localStorage).filter((k) => k.startsWith('course.'))")


def test_seeing_an_old_attempt_keeps_a_draft_being_written(live_server, page):
    # One attempt saved; then a second interview on the same problem is left half-written.
    page.goto(live_server.url + "/practice/1/")
    page.get_by_label("Your answer, as you would say it").fill("First go.")
    page.get_by_role("button", name="Submit answer").click()
    expect(page).to_have_url(re.compile(r"/practice/attempts/"))
    old_attempt = page.url
    page.goto(live_server.url + "/practice/1/")
    page.get_by_label("Your answer, as you would say it").fill("Second go, half written.")
    # The learner looks back at the first attempt (as from the history), then returns.
    page.goto(old_attempt)
    expect(page.locator(".your-answer")).to_contain_text("First go.")
    page.goto(live_server.url + "/practice/1/")
    expect(page.get_by_label("Your answer, as you would say it")).to_have_value(
        "Second go, half written.")


def test_a_draft_follows_login_and_is_never_shown_to_the_next_person(live_server, page):
    from django.contrib.auth import get_user_model
    for name in ("ada", "bob"):
        get_user_model().objects.create_user(name, password="a-long-Passphrase-42")

    def login(name: str) -> None:
        page.goto(live_server.url + "/accounts/login/")
        page.get_by_label("Username").fill(name)
        page.get_by_label("Password").fill("a-long-Passphrase-42")
        page.locator("main form button[type=submit]").click()
        expect(page).not_to_have_url(re.compile(r"/accounts/login/"))

    answer = page.get_by_label("Your answer, as you would say it")
    page.goto(live_server.url + "/practice/1/")
    answer.fill("Ada's draft, typed before logging in.")
    login("ada")
    page.goto(live_server.url + "/practice/1/")
    expect(answer).to_have_value("Ada's draft, typed before logging in.")
    page.get_by_role("button", name="Log out").click()
    login("bob")
    page.goto(live_server.url + "/practice/1/")
    expect(page.locator("[data-countdown]")).to_have_text(re.compile(r"on the clock"))
    expect(answer).to_have_value("")
    assert len(_draft_keys(page)) == 2  # Ada's, kept for her, and Bob's empty one


def test_a_refused_answer_is_not_resent_by_an_expired_clock(live_server, page):
    page.goto(live_server.url + "/practice/2/?minutes=1")
    page.get_by_label("Your answer, as you would say it").fill("Kept through a refusal.")
    # Post a forged answer too long for the server, as a script might, after the clock ran out.
    page.evaluate("""() => {
        const key = Object.keys(localStorage).find((k) => k.endsWith(".2"));
        const state = JSON.parse(localStorage.getItem(key));
        state.startedAt -= 61000;
        localStorage.setItem(key, JSON.stringify(state));
        const area = document.querySelector("[data-answer]");
        area.removeAttribute("maxlength");
        area.value = "x".repeat(20001);
        document.querySelector("[data-answer-form]").submit();
    }""")
    expect(page.locator("#id_answer_error")).to_be_visible()
    expect(page.locator("[data-countdown-note]")).to_contain_text("Time is up")
    assert "/practice/2/" in page.url  # still here: not sent again in a loop


@pytest.mark.parametrize("paper", ["A4", "Letter"])
def test_the_numbers_sheet_prints_on_two_pages(live_server, page, paper):
    page.goto(live_server.url + "/numbers/")
    expect(page.locator("#numbers-links table")).to_be_visible()
    margin = {side: "9mm" for side in ("top", "bottom", "left", "right")}
    pdf = page.pdf(format=paper, margin=margin)
    assert len(re.findall(rb"/Type\s*/Page[^s]", pdf)) == 2


def test_the_last_minute_is_announced_once(live_server, page):
    page.goto(live_server.url + "/practice/1/")
    timer = page.get_by_role("timer")
    page.get_by_label("Your answer, as you would say it").press("A")  # the first keystroke
    expect(timer).to_have_text(re.compile(r"left$"))
    page.evaluate("""() => {
        const key = Object.keys(localStorage).find((k) => k.endsWith(".1"));
        const state = JSON.parse(localStorage.getItem(key));
        state.startedAt -= 250000;  // 50 s left of 5 minutes
        localStorage.setItem(key, JSON.stringify(state));
    }""")
    page.reload()
    note = page.locator("[data-countdown-note]")
    expect(note).to_have_text("One minute left.")
    expect(note).to_have_attribute("aria-live", "polite")
    expect(timer).to_have_class(re.compile(r"is-late"))
