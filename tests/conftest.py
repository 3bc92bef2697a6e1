"""Fixtures shared by the suite: a real Celery worker process and a real Chromium."""

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def _test_database_url() -> str:
    """The URL of the test database pytest-django created, for processes started by the tests."""
    from django.db import connection

    settings_dict = connection.settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + settings_dict["NAME"]))


def worker_process_start(*, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the project's own Celery worker against the test database and the suite's Redis:
    one threads-pool process on every queue, so it holds the shared engine (demo runs, /v1)
    and also takes experiments."""
    from django.conf import settings

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "course.settings.test",
        "DATABASE_URL": _test_database_url(),
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.celery", "worker", "--loglevel", "INFO",
         "--concurrency", "8", "--pool", "threads", "--without-gossip", "--without-mingle",
         "--queues", ",".join([settings.ENGINE_QUEUE, settings.EXPERIMENT_QUEUE,
                               settings.CELERY_TASK_DEFAULT_QUEUE]),
         "--hostname", f"test-{os.getpid()}-{time.monotonic_ns()}@%h"],
        cwd=ROOT,
        env=env,
    )


def worker_wait_ready(*, timeout: float = 90.0) -> None:
    """Block until at least one worker says it is ready (its engine loaded) and answers a
    ping."""
    from demos.services import redis
    from worker.celery import app
    from worker.heartbeat import workers_ready

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if workers_ready(redis()) and app.control.ping(timeout=0.5):
            return
        time.sleep(0.2)
    raise RuntimeError(f"no Celery worker was ready within {timeout:.0f} s")


def process_stop(process: subprocess.Popen) -> None:
    """Stop a process the tests started: politely, then for certain."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """One real worker process for the session (tests using it need django_db(transaction=True))."""
    with django_db_blocker.unblock():
        process = worker_process_start()
    try:
        worker_wait_ready()
        yield process
    finally:
        process_stop(process)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright (which cannot download its own browsers here)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's ORM calls from the
    # test itself are still synchronous, so allow them.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture(autouse=True)
def site_throttles_cleared():
    """Every test starts with no sign-ups, failed logins, new sessions, practice attempts or
    /v1 requests counted against anyone (the test client always comes from 127.0.0.1, and
    these windows last up to an hour in Redis). Without Redis there is nothing to clear."""
    import redis as redis_lib

    from demos.services import redis

    try:
        keys = [*redis().scan_iter(match="course:throttle:*"),
                *redis().scan_iter(match="course:ratelimit:*")]
        if keys:
            redis().delete(*keys)
    except redis_lib.RedisError:
        pass


@pytest.fixture(autouse=True)
def problem_contexts_cleared():
    """Each test computes problems' figures afresh (a test may change a catalog or a
    calculator): the per-process cache of them (course/render_cache.py) starts empty."""
    from course.render_cache import contexts

    contexts.clear()
