"""Page 02 in Chromium, served by uvicorn with a real worker behind it: each live demo starts
from its form, runs, and draws its plots; the paged pool is drawn block by block with shared
blocks marked; the calculators draw theirs; nothing breaks the Content-Security-Policy."""

import pytest
from playwright.sync_api import expect

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""
# (demo, {field: value} for a tiny run, {choice boxes to untick}, plots it draws)
DEMOS = (
    ("kv-bytes", {"sequences": "1", "prompt_tokens": "16", "documents": "2"},
     ("precisions", ("float16", "float32")), 2),
    ("paged-blocks", {"requests": "3", "samples": "3", "pool_blocks": "24", "pace_ms": "30"},
     None, 2),
    ("attention-kernels", {"heads": "1", "repeats": "1"},
     ("lengths", ("512", "1024")), 2),
)
CALCULATORS = ("calc-p03-kv", "calc-p04-paging", "calc-p05-attn")


@pytest.mark.worker
@pytest.mark.slow
def test_each_demo_on_page_02_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                       celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/02/")
    for dom_id in CALCULATORS:
        page.wait_for_function(
            "id => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= 1",
            arg=dom_id)
    for slug, fields, untick, plots in DEMOS:
        demo = page.locator(f"#demo-{slug}")
        for name, value in fields.items():
            demo.locator(f"[name={name}]").fill(value)
        if untick:
            name, values = untick
            for value in values:
                demo.locator(f'input[name={name}][value="{value}"]').uncheck()
        demo.get_by_role("button", name="Run", exact=True).click()
        if slug == "paged-blocks":
            # While it runs, the samples' shared prompt blocks are drawn with their count.
            page.wait_for_function(
                "() => [...document.querySelectorAll('#demo-paged-blocks .pb-shared')]"
                ".some(b => b.textContent === '×3')", timeout=60_000)
        page.wait_for_function(
            "slug => document.querySelector(`#demo-${slug}`).dataset.runState === 'finished'",
            arg=slug, timeout=120_000)
        page.wait_for_function(
            "([slug, n]) => document.querySelectorAll(`#demo-${slug} .demo-plots .plot.drawn`)"
            ".length >= n", arg=[slug, plots], timeout=30_000)
        assert demo.locator(".demo-plots .plot-table").count() == plots
        assert demo.locator(".run-note").inner_text().strip()
    assert page.locator("#demo-kv-bytes .kv-bytes-table tbody tr").count() == 2
    assert page.locator("#demo-attention-kernels .ak-table tbody tr").count() == 2
    pool = page.locator("#demo-paged-blocks .pb-grid .pb-block")
    assert pool.count() == 24
    # The run over, the grid keeps the step that held the most blocks (the last step, all
    # grey, used to be all that was left), and a scrubber moves through every step.
    scrub = page.locator("#demo-paged-blocks .pb-scrub")
    expect(scrub).to_be_visible()
    expect(scrub.locator(".pb-step-text")).to_contain_text("the most blocks held")
    assert not all(t.endswith(": free") for t in page.eval_on_selector_all(
        "#demo-paged-blocks .pb-grid .pb-block", "cells => cells.map(c => c.title)"))
    last = int(scrub.locator(".pb-step").get_attribute("max"))
    scrub.locator(".pb-step").fill(str(last))
    expect(scrub.locator(".pb-step-text")).to_contain_text(f"({last + 1} of {last + 1})")
    # After the last step every block is drawn free, with no reference mark left.
    assert page.locator("#demo-paged-blocks .pb-grid .pb-shared").count() == 0
    assert all(t.endswith(": free") for t in page.eval_on_selector_all(
        "#demo-paged-blocks .pb-grid .pb-block", "cells => cells.map(c => c.title)"))
    assert "token slots filled" in page.locator("#demo-paged-blocks .pb-log").inner_text()
    # Each sequence's block table was listed live; at the end every one has finished.
    tables = page.locator("#demo-paged-blocks .pb-legend .pb-table").all_inner_texts()
    assert len(tables) == 5 and all("finished, blocks returned" in t for t in tables)
    # The run ended with every block free again; the legend lists the three samples too.
    assert page.locator("#demo-paged-blocks .pb-legend li").count() == 5
    assert "step" in page.locator("#demo-paged-blocks .pb-log").inner_text()
    assert page.evaluate("window.__csp") == []


@pytest.mark.worker
@pytest.mark.slow
def test_cancelling_the_paged_run_draws_every_block_free(page, asgi_server,  # noqa: F811
                                                         celery_worker_process):
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/02/")
    demo = page.locator("#demo-paged-blocks")
    for name, value in {"requests": "6", "samples": "3", "pool_blocks": "24",
                        "pace_ms": "200"}.items():
        demo.locator(f"[name={name}]").fill(value)
    demo.get_by_role("button", name="Run", exact=True).click()
    # Blocks are held (the samples share the prompt's), then the run is cancelled mid-way.
    page.wait_for_function(
        "() => document.querySelectorAll('#demo-paged-blocks .pb-shared').length > 0",
        timeout=60_000)
    demo.get_by_role("button", name="Cancel run").click()
    page.wait_for_function(
        "() => document.querySelector('#demo-paged-blocks').dataset.runState === 'cancelled'",
        timeout=60_000)
    assert "every block back on the free list" in demo.locator(".pb-log").inner_text()
    assert demo.locator(".pb-grid .pb-shared").count() == 0
    assert all(t.endswith(": free") for t in page.eval_on_selector_all(
        "#demo-paged-blocks .pb-grid .pb-block", "cells => cells.map(c => c.title)"))
