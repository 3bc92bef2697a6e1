"""`manage.py serve` (make run) on a machine with nothing configured: it migrates, starts its own
Redis, a worker and uvicorn, /healthz turns 200, and Ctrl-C stops every process it started."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course.redis_server import free_port, redis_answers

ROOT = Path(__file__).resolve().parents[2]


def _health(url: str) -> tuple[int, dict] | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return None


def _serve_start(tmp_path: Path, port: int, out) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(COURSE_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="course.settings.dev")
    return subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_healthy(process: subprocess.Popen, port: int, log: Path) -> None:
    health = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        health = _health(f"http://127.0.0.1:{port}/healthz")
        if health and health[0] == 200 and health[1]["workers"] == 2:
            break
        time.sleep(0.5)
    # Both workers ready: the engine worker only once its shared engine has loaded.
    assert health == (200, {"db": "ok", "redis": "ok", "workers": 2}), log.read_text()


def _static_compressed_and_cached(port: int) -> None:
    """Issue 35: under make run the static files went out uncompressed with max-age=0 (plotly,
    1.07 MB, on every page with a plot). Now the page links content-hashed names, served
    gzip-compressed and cached for good."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/pages/01/", timeout=10) as response:
        html = response.read().decode()
    css = re.search(r'href="(/static/css/course\.[0-9a-f]{12}\.css)"', html)
    plotly = re.search(r'"(/static/vendor/plotly-basic-[0-9.]+/plotly-basic\.min\.[0-9a-f]{12}'
                       r'\.js)"', html)
    assert css and plotly, "static files are not linked under content-hashed names"
    for path in (css.group(1), plotly.group(1)):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Encoding"] == "gzip", path
            assert "immutable" in response.headers["Cache-Control"], path


@pytest.mark.slow
def test_serve_starts_everything_and_stops_everything(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        process = _serve_start(tmp_path, port, out)
        try:
            _wait_healthy(process, port, log)
            assert (tmp_path / "db.sqlite3").exists()
            _static_compressed_and_cached(port)
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 0, log.read_text()

    text = log.read_text()
    assert f"http://127.0.0.1:{port}/" in text
    assert "[web]" in text and "[engine]" in text and "[experiments]" in text
    assert "shared engine loaded" in text
    redis_url = re.search(r"Redis at (redis://\S+)", text).group(1)
    assert "private redis-server" in text
    assert not redis_answers(redis_url), "the private Redis outlived make run"
    assert _health(f"http://127.0.0.1:{port}/healthz") is None, "the web server outlived make run"


@pytest.mark.slow
def test_serve_restarts_a_dead_process_and_a_killed_serve_takes_its_children(tmp_path):
    """SIGKILL the web process: it used to stop the whole site for good ("web stopped:
    stopping everything"). Now `serve` starts it again after a backoff and /healthz answers
    200 again. Then SIGKILL `serve` itself: its children ran in sessions of their own and
    outlived it; now each gets its parent-death signal and stops."""
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        process = _serve_start(tmp_path, port, out)
        try:
            _wait_healthy(process, port, log)
            pattern = r"\[web\]\s+INFO:\s+Started server process \[(\d+)\]"
            web_pid = int(re.search(pattern, log.read_text()).group(1))
            os.kill(web_pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(re.findall(pattern, log.read_text())) < 2:
                time.sleep(0.5)
            _wait_healthy(process, port, log)
            assert process.poll() is None, "serve stopped with its web process"
            assert "web stopped (exit status -9); starting it again in 1 s." in log.read_text()
            text = log.read_text()
            new_web = int(re.findall(pattern, text)[-1])
            redis_url = re.search(r"Redis at (redis://\S+)", text).group(1)
            process.kill()  # SIGKILL: serve cannot stop anything itself
            process.wait(10)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (_alive(new_web) or redis_answers(redis_url)):
                time.sleep(0.5)
            assert not _alive(new_web), "the web process outlived a killed serve"
            assert not redis_answers(redis_url), "the private Redis outlived a killed serve"
        finally:
            if process.poll() is None:
                process.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its dead parent's heir) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
