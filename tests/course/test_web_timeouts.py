"""The web server closes connections that send no complete request head in time (issue 33):
idle and slow-header sockets no longer hold uvicorn's concurrency limit shut. Runs uvicorn
with `manage.py serve`'s own command line, a 1 s head timeout and a limit of 5 connections."""

import http.client
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from course.management.commands import serve
from course.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    serve.WEB_CONCURRENCY_LIMIT = 5
    command = serve.web_command(host="127.0.0.1", port=port, processes=1)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.test",
           "WEB_HEADER_TIMEOUT": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([*command, "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _status(port) is not None:
                break
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def _status(port: int) -> int | None:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/v1/nothing-here")
        return conn.getresponse().status
    except OSError:
        return None


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (recv sees the end, or a reset)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_idle_sockets_are_closed_and_stop_holding_the_limit(server):
    """6 idle sockets against a limit of 5: before, every request answered 503 for as long as
    they stayed (75 s and more). Now each is closed after the 1 s head timeout, and the next
    request is served."""
    idle = [socket.create_connection(("127.0.0.1", server)) for _ in range(6)]
    try:
        assert all(_closed_within(s, 4) for s in idle)
        assert _status(server) == 404  # /v1's JSON 404, not the limit's 503
    finally:
        for s in idle:
            s.close()


def test_a_slow_header_socket_is_closed(server):
    """A client sending its head a byte every 0.2 s never completes it within 1 s: closed."""
    sock = socket.create_connection(("127.0.0.1", server))
    head = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
    started = time.monotonic()
    closed = False
    try:
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if _closed_within(sock, 0.2):
                closed = True
                break
    finally:
        sock.close()
    assert closed and time.monotonic() - started < 5


def test_a_complete_request_is_not_cut_by_the_head_clock(server):
    """A kept-alive connection that sends its next request in time is served each time."""
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=5)
    for _ in range(3):
        conn.request("GET", "/v1/nothing-here")
        response = conn.getresponse()
        assert response.status == 404 and response.read()
        time.sleep(0.5)
    conn.close()
