"""The two live demos of page 01 in Chromium, served by uvicorn with a real worker behind it."""

import re

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]


def test_lifecycle_run_streams_tokens_and_draws_the_timeline(page, asgi_server,  # noqa: F811
                                                              celery_worker_process):
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/01/")
    demo = page.locator("#demo-lifecycle")
    demo.locator("[data-example]").first.click()
    demo.locator("input[name=max_tokens]").fill("24")
    # Record how many tokens the output holds after each change the page makes to it.
    page.evaluate("""() => {
        const out = document.querySelector('#demo-lifecycle .demo-output');
        window.tokenCounts = [];
        new MutationObserver(() => window.tokenCounts.push(out.children.length))
            .observe(out, {childList: true});
    }""")
    demo.get_by_role("button", name="Run", exact=True).click()
    # Tokens arrive one event at a time: the chip row fills, then the output grows.
    demo.locator(".demo-chips .chip").first.wait_for(state="attached", timeout=90_000)
    demo.locator(".demo-output .token").first.wait_for(state="attached", timeout=90_000)
    page.wait_for_function(
        "() => document.querySelector('#demo-lifecycle').dataset.runState === 'finished'",
        timeout=90_000)
    tokens = demo.locator(".demo-output .token").count()
    assert tokens >= 1
    counts = [c for c in page.evaluate("window.tokenCounts") if c > 0]
    # One at a time: the page grew by single tokens, not in one block at the end.
    assert counts[-1] == tokens
    assert len(set(counts)) >= min(3, tokens)
    assert demo.locator('li[data-stage="admitted"].done').count() == 1
    # The prefill is measured on the engine's clock: never "in 0.00 ms" (it was, before).
    prefill = demo.locator('li[data-stage="prefill"] .stage-detail').inner_text()
    assert re.search(r"in \d", prefill) and "in 0.00 ms" not in prefill, prefill
    finished = demo.locator('li[data-stage="finished"] .stage-detail').inner_text()
    assert re.search(r"\b[1-9]\d* blocks? freed", finished), finished
    demo.locator(".demo-timeline.drawn").wait_for()
    assert demo.locator(".demo-timeline .main-svg").count() >= 1  # plotly drew it
    assert demo.locator(".estimate-table").count() == 1


def test_lifecycle_shows_a_field_error_for_bad_input(page, asgi_server):  # noqa: F811
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/01/")
    demo = page.locator("#demo-lifecycle")
    demo.locator("input[name=max_tokens]").fill("9999")
    demo.get_by_role("button", name="Run", exact=True).click()
    error = demo.locator('[data-error-for="max_tokens"]')
    error.wait_for()
    page.wait_for_function(
        "() => document.querySelector('#demo-lifecycle [data-error-for=max_tokens]').textContent")
    assert "512" in error.inner_text()


def test_cutting_one_stream_returns_its_blocks(page, asgi_server,  # noqa: F811
                                               celery_worker_process):
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/01/")
    demo = page.locator("#demo-streaming")
    demo.locator("input[name=max_tokens]").fill("120")
    demo.get_by_role("button", name="Run", exact=True).click()
    stream = demo.locator('.stream[data-stream="1"]')
    stream.locator(".stream-text .token").first.wait_for(state="attached", timeout=90_000)
    stream.get_by_role("button", name="Cut stream").click()
    stream.locator(".stream-state", has_text="aborted").wait_for(timeout=30_000)
    before = int(demo.get_attribute("data-kv-before-abort"))
    after = int(demo.get_attribute("data-kv-after-abort"))
    assert after > before  # the free-blocks bar rose at the abort
    assert "disconnected" in stream.locator(".stream-state").inner_text()
    # The other streams carry on streaming after the cut.
    count = demo.locator('.stream[data-stream="0"] .stream-text .token').count()
    page.wait_for_function(
        f"() => document.querySelectorAll('#demo-streaming .stream[data-stream=\"0\"] "
        f".stream-text .token').length > {count}")
    # The run ends with the cut stream measured against the arithmetic: a table and a plot.
    page.wait_for_function(
        "() => document.querySelector('#demo-streaming').dataset.runState === 'finished'",
        timeout=90_000)
    result = demo.locator(".streaming-result")
    result.locator(".streaming-plot.drawn").wait_for(timeout=30_000)
    assert "predicted" in result.locator("table").inner_text()
    assert "after the click" in result.locator(".streaming-verdict").inner_text()


def test_cancelling_the_run_ends_every_stream_panel(page, asgi_server,  # noqa: F811
                                                    celery_worker_process):
    """After "Cancel run" the three panels used to go on saying "streaming" with live buttons."""
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/01/")
    demo = page.locator("#demo-streaming")
    demo.locator("input[name=max_tokens]").fill("400")
    demo.get_by_role("button", name="Run", exact=True).click()
    demo.locator('.stream[data-stream="0"] .stream-text .token').first.wait_for(
        state="attached", timeout=90_000)
    demo.get_by_role("button", name="Cancel run").click()
    page.wait_for_function(
        "() => document.querySelector('#demo-streaming').dataset.runState === 'cancelled'",
        timeout=30_000)
    states = demo.locator(".stream .stream-state").all_inner_texts()
    assert len(states) == 3 and not [s for s in states if s == "streaming"], states
    assert demo.locator(".stream button:enabled").count() == 0
