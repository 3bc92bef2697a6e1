"""Fixtures for the demo runs: uvicorn serving the site (SSE needs ASGI) against the test
database, a client for it, and helpers to read Server-Sent Events."""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from course.redis_server import free_port
from tests.conftest import _test_database_url, process_stop

ROOT = Path(__file__).resolve().parents[2]


def uvicorn_process_start(*, port: int,
                          extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """uvicorn serving course.asgi against the test database and the suite's Redis."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.test",
           "DATABASE_URL": _test_database_url(), "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "course.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, env=env)


def http_wait_ready(*, port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/demos/lifecycle/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"uvicorn did not answer on port {port}")


@pytest.fixture(scope="session")
def asgi_server(django_db_setup, django_db_blocker):
    """The site under uvicorn for the session: its base URL's port."""
    with django_db_blocker.unblock():
        database_url = _test_database_url()
    if "mode=memory" in database_url:
        pytest.fail("the test database is in memory, so uvicorn and the worker cannot see it: "
                    "the suite must run with DJANGO_SETTINGS_MODULE=course.settings.test "
                    "(importing worker.celery before pytest-django sets it to dev)")
    port = free_port()
    with django_db_blocker.unblock():
        process = uvicorn_process_start(port=port)
    try:
        http_wait_ready(port=port)
        yield port
    finally:
        process_stop(process)


@dataclass
class SiteClient:
    """A visitor of the uvicorn-served site: keeps its cookies and sends the CSRF header."""

    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    def _headers(self, extra: dict | None = None) -> dict:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if "csrftoken" in self.cookies:
            headers["X-CSRFToken"] = self.cookies["csrftoken"]
        return {**headers, **(extra or {})}

    def _remember(self, response: http.client.HTTPResponse) -> None:
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload,
                     headers=self._headers({"Content-Type": "application/json"}))
        response = conn.getresponse()
        self._remember(response)
        raw = response.read()
        conn.close()
        try:
            return response.status, json.loads(raw or b"{}")
        except ValueError:
            return response.status, {"raw": raw.decode(errors="replace")}

    def visit(self, path: str = "/demos/lifecycle/") -> None:
        """Load a page: sets the CSRF cookie like a browser's first visit."""
        self.request("GET", path)

    def events_open(self, path: str, *, last_event_id: str | None = None) -> "SseReader":
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        extra = {"Accept": "text/event-stream"}
        if last_event_id:
            extra["Last-Event-ID"] = last_event_id
        conn.request("GET", path, headers=self._headers(extra))
        sock = conn.sock  # http.client may drop its own reference once the response starts
        response = conn.getresponse()
        assert response.status == 200, response.read()
        return SseReader(conn=conn, response=response, sock=sock)


@dataclass
class SseEvent:
    id: str | None
    type: str
    data: dict


@dataclass
class SseReader:
    conn: http.client.HTTPConnection
    response: http.client.HTTPResponse
    sock: socket.socket
    comments: int = 0

    def __iter__(self):
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline()
            if not line:
                return
            line = line.decode().rstrip("\r\n")
            if line.startswith(":"):
                self.comments += 1
                continue
            if line == "":
                if "data" in fields:
                    yield SseEvent(id=fields.get("id"), type=fields.get("event", "message"),
                                   data=json.loads(fields["data"]))
                fields = {}
                continue
            name, _, value = line.partition(":")
            fields[name] = value.lstrip(" ")

    def until(self, predicate) -> list[SseEvent]:
        """Read events up to and including the first one `predicate` accepts."""
        seen = []
        for event in self:
            seen.append(event)
            if predicate(event):
                return seen
        return seen

    def close(self) -> None:
        """Go away as a client would: close the socket without reading on."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.response.close()
        self.conn.close()
        self.sock.close()


@pytest.fixture
def site(asgi_server) -> SiteClient:
    client = SiteClient(port=asgi_server)
    client.visit()
    return client


def run_wait_state(site: SiteClient, run_id: str, states: set[str], *,
                   timeout: float = 90.0) -> dict:
    """Poll GET /demos/runs/<id> until its state is one of `states` (a deadline, not a timing
    assertion: a broken run fails the test by never getting there)."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        status, body = site.request("GET", f"/demos/runs/{run_id}")
        assert status == 200, body
        if body["state"] in states:
            return body
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} stayed {body.get('state')}, wanted {states}")


@pytest.fixture(autouse=True)
def run_rate_limits_cleared():
    """Every test starts with no run starts counted against its visitors or addresses (the
    test client always comes from 127.0.0.1, and the counters live a minute in Redis)."""
    from demos.services import redis

    keys = list(redis().scan_iter(match="ratelimit:*"))
    if keys:
        redis().delete(*keys)
