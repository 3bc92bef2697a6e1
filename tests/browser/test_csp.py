"""The Content-Security-Policy holds in a real browser: every page, htmx swaps, plotly plots and
a live demo's event stream work under it, and Chromium reports no violation."""

import pytest

from tests.demos.conftest import asgi_server  # noqa: F401  (the fixture: uvicorn on a free port)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
    e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sourceFile || '') + ':' + e.lineNumber));
"""


def _watched(page) -> list[str]:
    page.add_init_script(VIOLATIONS)
    console = []
    page.on("console", lambda m: console.append(m.text)
            if "Content Security Policy" in m.text else None)
    return console


def _violations(page, console: list[str]) -> list[str]:
    return page.evaluate("window.__csp || []") + console


def test_the_policy_is_sent_and_strict_about_scripts(client):
    policy = client.get("/")["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if " " in d.strip())
    assert directives["script-src"] == "'self'"
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-eval" not in policy


@pytest.mark.slow
def test_pages_calculators_and_plots_work_under_the_policy(page, live_server):
    console = _watched(page)
    for path in ("/", "/pages/01/", "/calculators/", "/accounts/login/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
    # htmx swap and a plotly redraw on a calculator.
    page.goto(f"{live_server.url}/calculators/kv-cache/")
    output = page.locator("#calc-kv-cache-output")
    output.locator(".plot svg.main-svg").first.wait_for(state="attached")
    page.fill("#id_kv-cache-users", "7")
    page.wait_for_function("() => document.querySelector('#calc-kv-cache-output .plot')"
                           ".data[0].name === 'All 7 users, in total'")
    page.goto(f"{live_server.url}/")
    assert _violations(page, console) == []
    # The watch itself works: an injected inline script is blocked and reported.
    page.evaluate("""() => { const s = document.createElement('script');
        s.textContent = 'window.__ran = true'; document.body.appendChild(s); }""")
    page.wait_for_function("() => window.__csp.length > 0")
    assert page.evaluate("window.__ran === undefined")


@pytest.mark.slow
@pytest.mark.worker
def test_a_live_demo_streams_under_the_policy(page, asgi_server,  # noqa: F811
                                              celery_worker_process):
    console = _watched(page)
    page.goto(f"http://127.0.0.1:{asgi_server}/pages/01/")
    demo = page.locator("#demo-lifecycle")
    demo.locator("input[name=max_tokens]").fill("4")
    demo.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_function(
        "() => document.querySelector('#demo-lifecycle').dataset.runState === 'finished'",
        timeout=90_000)
    demo.locator(".demo-timeline .main-svg").first.wait_for(state="attached")
    assert _violations(page, console) == []
