"""In a real browser: changing a calculator's input re-renders its steps in place (htmx) and the
plot is drawn by plotly.js, both on load and after the swap."""

import pytest
from playwright.sync_api import expect

from problems.arithmetic import memory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_changing_an_input_updates_the_steps_and_redraws_the_plot(page, live_server):
    page.goto(f"{live_server.url}/calculators/kv-cache/")
    output = page.locator("#calc-kv-cache-output")
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    total_cell = output.locator("table.steps tbody tr").nth(2).locator("td.value")
    before = memory.kv_cache(model="llama-3-70b", tokens=32768, users=100)
    assert total_cell.inner_text() == before.steps[2].display

    page.fill("#id_kv-cache-users", "7")
    after = memory.kv_cache(model="llama-3-70b", tokens=32768, users=7)
    # Playwright's expect-style wait: the new figure arrives by htmx, not by a page load.
    page.wait_for_function(
        "text => document.querySelectorAll('#calc-kv-cache-output table.steps td.value')[2]"
        ".innerText === text", arg=after.steps[2].display)
    assert page.url.endswith("/calculators/kv-cache/")  # swapped in place, no navigation
    output = page.locator("#calc-kv-cache-output")
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    # plotly.js keeps the traces it drew on the element: they are the new inputs' traces.
    drawn = output.locator(".plot").evaluate("element => element.data[0].name")
    assert drawn == "All 7 users, in total"


def test_a_bad_input_shows_its_error_beside_the_field(page, live_server):
    page.goto(f"{live_server.url}/calculators/kv-cache/")
    page.fill("#id_kv-cache-tokens", "0")
    error = page.locator("#id_kv-cache-tokens_error")
    page.wait_for_function(
        "() => document.querySelector('#id_kv-cache-tokens_error').innerText.trim() !== ''")
    assert "at least 1" in error.inner_text()
    # aria-invalid follows once htmx settles the swap, a moment after the error text lands.
    expect(page.locator("#id_kv-cache-tokens")).to_have_attribute("aria-invalid", "true")
