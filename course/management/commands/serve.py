"""`manage.py serve` (what `make run` calls): database, Redis, two Celery workers, uvicorn.

The workers: one on the engine queue (threads pool, one shared engine every chat-like request
joins, loaded at start) and one on the experiments queue (engines of their own, one run at a
time), which also takes Celery's default queue.

Starts each process and prefixes its log lines with its name. A process that dies is started
again after a backoff (1, 2, 4 … 30 s; back to 1 s once it has run a minute) while the others
keep serving: the runs a dead worker held fail cleanly through the heartbeat sweep, and a
private Redis comes back on the same port. Ctrl-C (or SIGTERM) stops every process it started,
and so does `serve` dying any other way: each child is asked (Linux's parent-death signal) to
stop when it does, instead of running on in a session of its own.
"""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from course.redis_server import RedisHandle, redis_resolve

COLOURS = {"redis": "31", "engine": "35", "experiments": "33", "web": "36"}

# Connections (and so requests and event streams) one uvicorn process serves at once; past it
# uvicorn answers 503 at once rather than letting every request slow down. Each open event
# stream counts, and each web process also caps its streams (DEMO_SSE_PER_PROCESS, 200).
WEB_CONCURRENCY_LIMIT = int(os.environ.get("WEB_CONCURRENCY_LIMIT", "400"))


# Seconds to wait before each successive restart of a process that keeps dying; a process that
# has run STABLE_AFTER_S seconds starts again from the first.
RESTART_BACKOFF_S = (1, 2, 4, 8, 16, 30)
STABLE_AFTER_S = 60
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child receives SIGTERM when `serve` dies, even by SIGKILL (Linux)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def restart_delay(failures: int) -> int:
    """The backoff before restart number `failures` + 1 in a row."""
    return RESTART_BACKOFF_S[min(failures, len(RESTART_BACKOFF_S) - 1)]


def worker_commands(*, loglevel: str) -> dict[str, list[str]]:
    """The two Celery workers' command lines: "engine" (threads pool, the shared engine's queue)
    and "experiments" (prefork, the demos' own engines and Celery's default queue)."""
    celery = [sys.executable, "-m", "celery", "-A", "worker.celery", "worker", "--loglevel",
              loglevel, "--without-gossip", "--without-mingle"]
    return {
        "engine": [*celery, "--pool", "threads", "--concurrency",
                   str(settings.ENGINE_WORKER_CONCURRENCY), "--queues",
                   settings.ENGINE_QUEUE, "--hostname", "engine@%h"],
        "experiments": [*celery, "--pool", "prefork", "--concurrency",
                        str(settings.CELERY_WORKER_CONCURRENCY), "--queues",
                        f"{settings.EXPERIMENT_QUEUE},{settings.CELERY_TASK_DEFAULT_QUEUE}",
                        "--hostname", "experiments@%h"],
    }


def web_command(*, host: str, port: int, processes: int) -> list[str]:
    """The uvicorn command line serving the site: the same in `make run` and production."""
    command = [sys.executable, "-m", "uvicorn", "course.asgi:application", "--host", host,
               "--port", str(port), "--lifespan", "off", "--timeout-graceful-shutdown", "3",
               "--limit-concurrency", str(WEB_CONCURRENCY_LIMIT),
               # Closes connections that send no complete request head within a few seconds.
               "--http", "course.web_protocol:HeadTimeoutProtocol"]
    if processes > 1:
        command += ["--workers", str(processes)]
    return command


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class Command(BaseCommand):
    help = "Run the course: migrate, Redis, two Celery workers and the ASGI web server."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--processes", type=int,
                            default=int(os.environ.get("WEB_PROCESSES", "1")),
                            help="uvicorn processes (production: one per CPU core)")

    def handle(self, *args, host: str, port: int, processes: int, **options):
        if not _port_free(host, port):
            raise CommandError(f"{host}:{port} is in use: stop what runs there or pass --port")
        self.stdout.write("Migrating the database…")
        call_command("migrate", interactive=False, verbosity=0)

        redis_handle = redis_resolve(env_url=os.environ.get("REDIS_URL"),
                                     directory=settings.VAR_DIR / "redis",
                                     preexec_fn=die_with_parent)
        where = "private redis-server under var/redis" if redis_handle.process else "REDIS_URL"
        self.stdout.write(f"Redis at {redis_handle.url} ({where})")

        env = {
            **os.environ,
            "REDIS_URL": redis_handle.url,
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE",
                                                     "course.settings.dev"),
            "PYTHONUNBUFFERED": "1",
        }
        python = sys.executable
        if env["DJANGO_SETTINGS_MODULE"] == "course.settings.dev":
            # Compressed, content-hashed static files (course/settings/dev.py): collected here,
            # where only changed files are copied and compressed again.
            self.stdout.write("Collecting the static files…")
            env["COURSE_STATIC_COLLECTED"] = "1"
            subprocess.run([python, "manage.py", "collectstatic", "--noinput", "-v0"],
                           env=env, check=True, cwd=settings.BASE_DIR)
        commands = {**worker_commands(loglevel="INFO"),
                    "web": web_command(host=host, port=port, processes=processes)}
        processes: dict[str, subprocess.Popen] = {}
        stopping = threading.Event()

        def stop_all(*_):
            stopping.set()

        signal.signal(signal.SIGINT, stop_all)
        signal.signal(signal.SIGTERM, stop_all)
        started: dict[str, float] = {}
        failures: dict[str, int] = {}
        restart_at: dict[str, float] = {}
        try:
            for name, command in commands.items():
                processes[name] = self._start(name, command, env)
                started[name] = time.monotonic()
            self.stdout.write(self.style.SUCCESS(
                f"\nThe course is at http://{host}:{port}/  (Ctrl-C stops everything)\n"))
            while not stopping.is_set():
                now = time.monotonic()
                running = {**processes}
                if redis_handle.process is not None:
                    running["redis"] = redis_handle.process
                for name, process in running.items():
                    if process.poll() is None or name in restart_at:
                        continue
                    if now - started.get(name, now) > STABLE_AFTER_S:
                        failures[name] = 0
                    delay = restart_delay(failures.get(name, 0))
                    failures[name] = failures.get(name, 0) + 1
                    self.stderr.write(f"{name} stopped (exit status {process.returncode}); "
                                      f"starting it again in {delay} s.")
                    restart_at[name] = now + delay
                for name, when in list(restart_at.items()):
                    if now < when:
                        continue
                    del restart_at[name]
                    started[name] = now
                    if name == "redis":
                        redis_handle = self._redis_restart(redis_handle)
                    else:
                        processes[name] = self._start(name, commands[name], env)
                stopping.wait(0.5)
        finally:
            self._stop_all(processes, redis_handle)

    def _redis_restart(self, handle: RedisHandle) -> RedisHandle:
        """The private Redis again, on the port every other process was given."""
        from course.redis_server import redis_server_start

        port = urlsplit(handle.url).port
        try:
            handle = redis_server_start(directory=settings.VAR_DIR / "redis", port=port,
                                        preexec_fn=die_with_parent)
            self.stdout.write(f"Redis is back at {handle.url} (empty: queued runs are "
                              "swept as lost).")
        except RuntimeError as exc:  # the port was taken meanwhile: try again after backoff
            self.stderr.write(f"redis could not start again: {exc}")
        return handle

    def _start(self, name: str, command: list[str], env: dict) -> subprocess.Popen:
        # A session of its own, so a terminal's Ctrl-C reaches `serve` alone and it stops the
        # children in order; the parent-death signal stops them if `serve` is killed.
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, bufsize=1,
                                   start_new_session=True, preexec_fn=die_with_parent)
        prefix = f"[{name}]".ljust(9)
        if sys.stdout.isatty():
            prefix = f"\033[{COLOURS.get(name, '0')}m{prefix}\033[0m"

        def relay():
            for line in process.stdout:
                sys.stdout.write(f"{prefix}{line}")
                sys.stdout.flush()

        threading.Thread(target=relay, daemon=True).start()
        return process

    def _stop_all(self, processes: dict[str, subprocess.Popen], redis: RedisHandle) -> None:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        redis.stop()
        self.stdout.write("Stopped.")
