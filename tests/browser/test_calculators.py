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
    before = memory.kv_cache(model="llama-3.1-70b", tokens=32768, users=100)
    assert total_cell.inner_text() == before.steps[2].display

    page.fill("#id_kv-cache-users", "7")
    after = memory.kv_cache(model="llama-3.1-70b", tokens=32768, users=7)
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


def test_page_01_hundred_users_calculator_moves_the_step_time(page, live_server):
    """On page 01, the batch × context calculator re-renders its step time when the batch
    changes: 100 sequences at 1,150 tokens take 9 ms a step; 10 take 5 ms."""
    from problems.arithmetic import decode
    from problems.arithmetic.units import seconds_format

    page.goto(f"{live_server.url}/pages/01/")
    output = page.locator("#calc-p1-users-output")
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    label = "Step floor (memory-bound)"
    row = output.locator("table.steps tbody tr", has_text=label).first
    many = decode(model="llama-3-8b", gpu="h100-sxm", batch=100, context_tokens=1150,
                  output_tokens=300)
    assert row.locator("td.value").inner_text() == seconds_format(many["step_seconds"])

    page.fill("#id_p1-users-batch", "10")
    few = decode(model="llama-3-8b", gpu="h100-sxm", batch=10, context_tokens=1150,
                 output_tokens=300)
    expected = seconds_format(few["step_seconds"])
    page.wait_for_function(
        """([label, text]) => [...document.querySelectorAll(
             '#calc-p1-users-output table.steps tbody tr')]
           .some(tr => tr.querySelector('th').innerText === label
                       && tr.querySelector('td.value').innerText === text)""",
        arg=[label, expected])
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    drawn = output.locator(".plot").evaluate("element => element.data.map(t => t.name)")
    assert "Reading every sequence's KV" in drawn


def test_index_filters_and_opens_a_folded_calculator(page, live_server):
    """On /calculators/ each calculator is folded under its page and problem; the filter keeps
    the matching ones, and opening one draws its plot and marks what a change moved."""
    page.goto(f"{live_server.url}/calculators/")
    page.get_by_label("Find a calculator").fill("kv cache")
    expect(page.locator("#calculators-filter-count")).to_contain_text("of")
    assert page.locator("#fold-kv-cache").is_visible()
    assert not page.locator("#fold-cost").is_visible()
    page.locator("#fold-kv-cache > summary").click()
    output = page.locator("#calc-kv-cache-output")
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    page.fill("#id_kv-cache-users", "10")
    expect(output.locator("tr.moved").first).to_be_visible(timeout=15_000)
    expect(output.locator("tr.moved .moved-from").first).to_contain_text("was ")
    # The plot's numbers wait behind their toggle.
    numbers = output.locator("details.plot-numbers").first
    expect(numbers.locator("table.plot-table")).to_be_hidden()
    numbers.locator("summary").click()
    expect(numbers.locator("table.plot-table")).to_be_visible()
    # ... and stay shown when a change re-renders the working.
    output.evaluate("element => { element.dataset.before = 'swap'; }")
    page.fill("#id_kv-cache-users", "20")
    page.wait_for_function(
        "() => { const o = document.querySelector('#calc-kv-cache-output');"
        " return o && !o.dataset.before && o.dataset.moved; }", timeout=15_000)
    expect(output.locator("details.plot-numbers table.plot-table").first).to_be_visible()
