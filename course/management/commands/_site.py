"""The site under production settings on 127.0.0.1, for the commands that measure it
(`loadtest`, `streambench`). Django lists no command for a module whose name starts with "_".

`site_serve` starts, in a temporary directory of its own: a private Redis, the two Celery
workers `make run` starts (the shared engine's and the experiments'), and uvicorn with
`processes` web processes serving `course.settings.production` (static files collected, the
SSL redirect off since nothing here speaks TLS); it yields the port, the directory and the
environment once /healthz answers, and stops them all on the way out.
"""

import contextlib
import http.client
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from course.management.commands.serve import web_command, worker_commands
from course.redis_server import free_port, redis_server_start


def http_get(conn_box: list, port: int, path: str, *, htmx: bool = False) -> tuple[int, float]:
    """(status, ms) of one GET on a kept-alive connection (reopened when it broke)."""
    headers = {"HX-Request": "true"} if htmx else {}
    for attempt in (0, 1):
        if conn_box[0] is None:
            conn_box[0] = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        start = time.perf_counter()
        try:
            conn_box[0].request("GET", path, headers=headers)
            response = conn_box[0].getresponse()
            response.read()
            elapsed = (time.perf_counter() - start) * 1000
            if response.getheader("Connection", "").lower() == "close":
                conn_box[0].close()
                conn_box[0] = None
            return response.status, elapsed
        except (OSError, http.client.HTTPException):
            conn_box[0].close()
            conn_box[0] = None
            if attempt:
                return 0, (time.perf_counter() - start) * 1000
    return 0, 0.0


def site_manage(env: dict, *args: str) -> str:
    """Runs `manage.py args` against the served site's settings; returns its stdout."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise CommandError(done.stderr[-2000:])
    return done.stdout


@contextlib.contextmanager
def site_serve(*, processes: int, prefix: str = "course-loadtest-"
               ) -> Iterator[tuple[int, Path, dict]]:
    """(port, directory, env): the site served, its temporary directory and the environment
    its processes run in (for `site_manage`)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    redis_handle = redis_server_start(directory=directory / "redis")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "course.settings.production",
           "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1",
           "SECURE_SSL_REDIRECT": "0", "COURSE_VAR_DIR": str(directory),
           "REDIS_URL": redis_handle.url, "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    started: list[subprocess.Popen] = []
    log = (directory / "servers.log").open("w")
    try:
        for step in (["migrate", "--noinput"], ["collectstatic", "--noinput"]):
            site_manage(env, *step, "-v", "0")
        port = free_port()
        for command in worker_commands(loglevel="WARNING").values():  # as `make run` starts
            started.append(subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, stdout=log,
                                            stderr=subprocess.STDOUT))
        started.append(subprocess.Popen(
            # The command `manage.py serve` runs (its concurrency limit and head timeout).
            [*web_command(host="127.0.0.1", port=port, processes=processes),
             "--no-access-log", "--log-level", "warning"],
            cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait_up(port, directory)
        yield port, directory, env
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        redis_handle.stop()
        log.close()


def _wait_up(port: int, directory: Path) -> None:
    box = [None]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, _ = http_get(box, port, "/healthz")
        if status == 200:
            return
        time.sleep(0.5)
    raise CommandError(f"the site did not become healthy; see {directory / 'servers.log'}")
