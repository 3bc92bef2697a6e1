"""Page 06 in Chromium: the calculators draw their plots, the quantization demo runs on a real
worker and draws its closing plots, and the rooflines redraw in place with the worker's own
measured roofline added on top."""

import json

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""
MEASURED = {
    "device": "cpu", "device_name": "test", "dtype": "float32", "threads": 1,
    "peak_flops": 5e10, "copy_bytes_per_second": 5e9, "ridge": 10.0, "matmul_n": 64,
    "copy_bytes": 2**20, "sweep_k": 128,
    "sweep": [{"batch": 1, "intensity": 0.49, "achieved": 2e9, "predicted": 2.45e9,
               "ratio": 0.816},
              {"batch": 64, "intensity": 21.3, "achieved": 3e10, "predicted": 5e10,
               "ratio": 0.6}],
    "measured_at": "2026-05-01T00:00:00+00:00", "hostname": "test-host",
    "torch_version": "2.13.0",
}


def _drawn(page, selector: str, count: int) -> None:
    page.wait_for_function(
        "([s, n]) => document.querySelectorAll(`${s} svg.main-svg`).length >= n",
        arg=[selector, count])


def _trace(page, selector: str, prefix: str) -> dict:
    return page.locator(selector).first.evaluate(
        "(element, prefix) => { const t = element.data.find(t => t.name.startsWith(prefix));"
        " return {x: t.x, y: t.y}; }", prefix)


def test_rooflines_redraw_in_place_and_carry_the_workers_roofline(page, live_server):
    from demos.hardware import hardware_store
    from demos.services import redis

    hardware_store(redis(), MEASURED)
    page.add_init_script(VIOLATIONS)
    page.goto(f"{live_server.url}/pages/06/")
    _drawn(page, "#calc-p11-formats-output .plot", 2)
    _drawn(page, "#calc-p12-gpus-output .plot", 1)
    roof = "#calc-p12-roofline-output .plot"
    _drawn(page, roof, 1)
    names = page.locator(roof).first.evaluate("element => element.data.map(t => t.name)")
    assert names[:4] == ["H100 SXM", "H200", "B200", "L40S"]
    # The worker's own roofline and sweep are added on top of the four.
    page.wait_for_function(
        f"() => document.querySelector('{roof}').data.some(t => t.meta === 'worker')")
    assert page.locator("#demo-gpus .hw-table tbody tr").count() == 2
    before = _trace(page, roof, "H100 SXM: this workload")
    # A longer context: fewer sequences fit, so the decode points move, in place.
    field = page.locator("#id_p12-roofline-context_tokens")
    field.fill("32768")
    field.dispatch_event("change")
    page.wait_for_function(
        "([s, x]) => { const e = document.querySelector(s); return e && e.data &&"
        " JSON.stringify(e.data.find(t => t.name.startsWith('H100 SXM: this')).x) !== x; }",
        arg=[roof, json.dumps(before["x"])])
    # ...and the worker's lines come back after the redraw.
    page.wait_for_function(
        f"() => document.querySelector('{roof}').data.some(t => t.meta === 'worker')")
    assert page.evaluate("window.__csp") == []


@pytest.mark.worker
@pytest.mark.slow
def test_the_quantization_demo_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                        celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/06/")
    demo = page.locator("#demo-quantization")
    for format in ("bf16", "fp8", "nvfp4", "mxfp4"):
        demo.locator(f'input[name=formats][value="{format}"]').uncheck()
    demo.locator("input[name=documents]").fill("4")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-quantization').dataset.runState === 'finished'",
        timeout=120_000)
    demo.locator(".quant-plots .plot.drawn").nth(1).wait_for(timeout=30_000)
    assert demo.locator(".quant-plots .plot .main-svg").count() >= 2
    rows = demo.locator(".quant-table tbody tr")
    assert rows.count() == 3  # FP32, INT8, INT4
    assert "(equal)" in rows.nth(2).inner_text()
    assert "lowest mean KL" in demo.locator(".quant-summary").inner_text()
    assert page.evaluate("window.__csp") == []


def test_a_bad_parameter_shows_beside_its_field(page, asgi_server):  # noqa: F811
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/06/")
    demo = page.locator("#demo-quantization")
    demo.locator("input[name=documents]").fill("99")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-quantization [data-error-for=documents]')"
        ".textContent")
    assert "at most 32" in demo.locator('[data-error-for="documents"]').inner_text()


@pytest.mark.worker
@pytest.mark.slow
def test_measure_this_worker_draws_its_roofline(page, asgi_server,  # noqa: F811
                                                celery_worker_process):
    """The demo's live part: the button asks a real worker to measure itself (the test
    settings' tiny sizes), and its roofline and sweep are drawn onto the rooflines plot."""
    from demos.hardware import LATEST_KEY, LOCK_KEY
    from demos.services import redis

    redis().delete(LATEST_KEY, LOCK_KEY)
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/06/")
    demo = page.locator("#demo-gpus")
    assert "Not measured yet" in demo.locator(".hw-state").inner_text()
    roof = "#calc-p12-roofline-output .plot"
    _drawn(page, roof, 1)
    demo.get_by_role("button", name="Measure this worker").click()
    page.wait_for_function(
        f"() => document.querySelector('{roof}').data.some(t => t.meta === 'worker')",
        timeout=60_000)
    assert "Measured" in demo.locator(".hw-state").inner_text()
    assert demo.locator(".hw-table tbody tr").count() == 2  # batches 1 and 8
    assert page.evaluate("window.__csp") == []
    redis().delete(LOCK_KEY)
