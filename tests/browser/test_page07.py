"""Page 07 in Chromium, served by uvicorn with a real worker behind it: each live demo starts
from its form, runs, and draws its plots (the last comparing what it measured with what the
arithmetic predicts); the calculators draw theirs; nothing breaks the Content-Security-Policy."""

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow,
              pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective));
"""
# (demo, {field: value} for a tiny run, plots it draws)
DEMOS = (
    ("triton-rmsnorm", {"tokens": "8", "hidden": "96"}, 1),
    ("profile", {"num_sequences": "2", "prompt_tokens": "16", "profile_steps": "2"}, 2),
    ("utilization", {"prompt_tokens": "8", "steps": "4", "lean_host": True}, 2),
)


def test_each_demo_on_page_07_runs_and_draws_its_plots(page, asgi_server,  # noqa: F811
                                                       celery_worker_process):
    page.add_init_script(VIOLATIONS)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/07/")
    for dom_id in ("calc-p13-breakdown", "calc-p14-util", "calc-p15-rmsnorm"):
        page.wait_for_function(
            "id => document.querySelectorAll(`#${id}-output .plot svg.main-svg`).length >= 1",
            arg=dom_id)
    for slug, fields, plots in DEMOS:
        demo = page.locator(f"#demo-{slug}")
        for name, value in fields.items():
            if value is True:
                demo.locator(f"[name={name}]").check()
            else:
                demo.locator(f"[name={name}]").fill(value)
        demo.get_by_role("button", name="Run", exact=True).click()
        page.wait_for_function(
            "slug => document.querySelector(`#demo-${slug}`).dataset.runState === 'finished'",
            arg=slug, timeout=120_000)
        page.wait_for_function(
            "([slug, n]) => document.querySelectorAll(`#demo-${slug} .demo-plots .plot.drawn`)"
            ".length >= n", arg=[slug, plots], timeout=30_000)
        assert demo.locator(".demo-plots .plot-table").count() == plots
        assert demo.locator(".run-note").inner_text().strip()
    assert page.locator("#demo-triton-rmsnorm .parity-table tbody tr").count() >= 4
    assert "Download the trace" in page.locator("#demo-profile .profile-trace").inner_text()
    utilization = page.locator("#demo-utilization")
    assert utilization.locator(".utilization-table tbody tr").count() == 6
    # The lever measured beside the usual host: its column shown, one cell per batch size.
    assert utilization.locator(".utilization-table th.lean-col").is_visible()
    assert utilization.locator(".utilization-table tbody tr td").count() == 6 * 9
    assert "measured peaks" in utilization.locator(".utilization-peaks").inner_text()
    assert page.evaluate("window.__csp") == []


def test_a_bad_value_shows_beside_its_field(page, asgi_server):  # noqa: F811
    page.goto(f"http://127.0.0.1:{asgi_server}/demos/profile/")
    demo = page.locator("#demo-profile")
    demo.locator("[name=num_sequences]").fill("99")
    demo.get_by_role("button", name="Run", exact=True).click()
    error = demo.locator('[data-error-for="num_sequences"]')
    error.wait_for()
    page.wait_for_function(
        "() => document.querySelector('#demo-profile [data-error-for=num_sequences]')"
        ".textContent.includes('at most 16')")


def test_the_utilization_rates_read_in_plain_units(page, asgi_server):  # noqa: F811
    """A GPU worker's peaks and per-step rates, handed to the demo's own handlers: 989 TFLOP/s
    and 4.8 TB/s read as such (toPrecision alone would print "9.89e+5 GFLOP/s"), a CPU's
    120 GFLOP/s stays in G; each peak says how the worker measured it."""
    page.goto(f"http://127.0.0.1:{asgi_server}/demos/utilization/")
    texts = page.evaluate("""() => {
        const root = document.querySelector('#demo-utilization');
        const h = window.courseDemos.modules.utilization.handlers(root);
        h.started({device: 'cuda:0', machine: {matmul_flops_per_s: 9.894e14,
                                               memory_bytes_per_s: 4.8e12,
                                               matmul_how: 'a large matmul',
                                               memory_how: 'a copy'}});
        h.batch({batch: 32, step_ms: 2, model_ms: 1.5, host_ms: 0.5, device_busy: 0.75,
                 forward_share: 0.75, flops: 2.4e11, bytes: 1.5e9, mfu_wall: 0.1,
                 mbu_wall: 0.2, predicted_floor_ms: 1, predicted_bound: 'memory'});
        const peaks = root.querySelector('.utilization-peaks').textContent;
        h.started({device: 'cpu', machine: {matmul_flops_per_s: 1.2e11,
                                            memory_bytes_per_s: 9.5e9,
                                            matmul_how: "the engine's own kernel",
                                            memory_how: "reads of the model's weights"}});
        return [peaks, root.querySelector('.utilization-table tbody td:nth-of-type(5)')
                .textContent, root.querySelector('.utilization-peaks').textContent];
    }""")
    gpu_peaks, achieved, cpu_peaks = texts
    assert gpu_peaks == ("This worker's measured peaks on cuda:0: 989 TFLOP/s, a large "
                         "matmul; and 4.8 TB/s, a copy.")
    # 2.4e11 FLOP and 1.5e9 B in 2 ms: 120 TFLOP/s and 750 GB/s.
    assert achieved == "120 TFLOP/s, 750 GB/s"
    assert cpu_peaks == ("This worker's measured peaks on cpu: 120 GFLOP/s, the engine's own "
                         "kernel; and 9.5 GB/s, reads of the model's weights.")
