"""The SSE relay under load: streams are capped per visitor, per run and per process, share one
bounded Redis pool per process, and uvicorn runs with a concurrency limit."""

import http.client
import json
import time

import pytest

from course.redis_server import free_port
from tests.conftest import process_stop
from tests.demos.conftest import SiteClient, http_wait_ready, uvicorn_process_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CAPS = {"DEMO_SSE_PER_VISITOR": "3", "DEMO_SSE_PER_RUN": "2", "DEMO_SSE_PER_PROCESS": "4",
        "DEMO_QUEUE": "demos-nobody-listens-relay", "DEMO_ACTIVE_PER_ADDRESS": "10"}


@pytest.fixture
def capped_site(django_db_blocker):
    port = free_port()
    with django_db_blocker.unblock():
        process = uvicorn_process_start(port=port, extra_env=CAPS)
    try:
        http_wait_ready(port=port)
        yield port
    finally:
        process_stop(process)


def open_stream(visitor: SiteClient, path: str) -> tuple[int, object]:
    """(status, the open connection or the JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", visitor.port, timeout=30)
    conn.request("GET", path, headers=visitor._headers({"Accept": "text/event-stream"}))
    response = conn.getresponse()
    if response.status == 200:
        response.readline()  # the retry: line, so the relay has started
        return 200, conn
    body = json.loads(response.read())
    conn.close()
    return response.status, body


def new_run(port: int) -> tuple[SiteClient, str]:
    visitor = SiteClient(port=port)
    visitor.visit()
    status, body = visitor.request("POST", "/demos/lifecycle/runs", {"prompt": "Hi"})
    assert status == 201, body
    return visitor, body["events_url"]


def test_streams_are_capped_per_run_per_visitor_and_per_process(capped_site):
    visitor, url = new_run(capped_site)
    opened = [open_stream(visitor, url) for _ in range(2)]
    assert [status for status, _ in opened] == [200, 200]
    status, body = open_stream(visitor, url)
    assert status == 429 and "this run" in body["error"]

    # A second visitor's run: two more streams reach the process cap of four.
    other, other_url = new_run(capped_site)
    opened += [open_stream(other, other_url) for _ in range(2)]
    assert [status for status, _ in opened] == [200] * 4
    third, third_url = new_run(capped_site)
    status, body = open_stream(third, third_url)
    assert status == 503 and body["error"]

    # Closing streams gives their places back.
    for _, conn in opened:
        conn.close()
    for _ in range(50):  # the server notices each close within a second (its XREAD block)
        status, reopened = open_stream(third, third_url)
        if status == 200:
            break
        time.sleep(0.1)
    assert status == 200
    reopened.close()


def test_streams_are_capped_per_visitor_across_runs(capped_site):
    from demos.models import Run

    visitor, url = new_run(capped_site)
    first = [open_stream(visitor, url) for _ in range(2)]
    # The same visitor's earlier run (finished now) is still followed by another tab.
    Run.objects.filter(owner__startswith="session:").update(state="finished")
    status, body = visitor.request("POST", "/demos/lifecycle/runs", {"prompt": "Hi"})
    assert status == 201, body
    second = open_stream(visitor, body["events_url"])
    assert second[0] == 200
    status, body = open_stream(visitor, body["events_url"])
    assert status == 429 and "you" in body["error"].lower()
    for _, conn in [*first, second]:
        conn.close()


def test_serve_runs_uvicorn_with_a_concurrency_limit():
    from course.management.commands.serve import web_command

    command = web_command(host="127.0.0.1", port=8000, processes=1)
    assert "--limit-concurrency" in command
    assert int(command[command.index("--limit-concurrency") + 1]) > 0
