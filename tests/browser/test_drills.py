"""A rapid-fire round of drills played in a real browser with the keyboard alone: the answer box
has the focus, Enter submits, Enter again moves on, and the score comes at the end."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

# An answer in the unit each question asks for (the label says which).
ANSWERS = (("size in bytes", "1 GB"), ("a time", "1 s"), ("percentage", "50%"),
           ("money", "$1"), ("tokens per second", "100 tokens/s"),
           ("requests per second", "10 requests/s"), ("", "2"))


def test_a_round_by_keyboard_to_its_score(live_server, page):
    page.goto(live_server.url + "/practice/drills/")
    page.get_by_role("button", name="Start a round").click()
    for number in range(1, 11):
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Question {number} of 10")
        box = page.get_by_label(re.compile("Your answer"))
        expect(box).to_be_focused()
        expect(page.locator("#round-clock")).to_have_text(re.compile(r"^\d+$"))
        label = page.locator("label[for=drill-answer]").inner_text()
        page.keyboard.type(next(a for hint, a in ANSWERS if hint in label))
        page.keyboard.press("Enter")
        expect(page.locator(".drill-grade")).to_be_visible()
        expect(page.locator("#round-next")).to_be_focused()
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(
        re.compile(r"^Round over: [\d.]+ of 10$"))
    expect(page.locator("#round-score")).to_contain_text("from 10 questions")
