"""The runners with the real shared engine loop and the shipped model, in this process, no
Celery needed."""

from pathlib import Path

import pytest

from demos.runners import RunContext

MODEL = Path(__file__).resolve().parents[3] / "worker" / "models" / "course-lm"


@pytest.fixture(scope="session")
def serving():
    """This process's shared engine loop, as a worker holds it."""
    from worker.demo_engine import serving_get

    return serving_get(str(MODEL))


@pytest.fixture
def client(serving):
    client = serving.loop.client(owner="session:test")
    yield client
    client.close()


def engine_idle(serving) -> bool:
    """No request left in the shared engine and every block free (after the loop's next step
    has handed out the aborts)."""
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stats = serving.loop.client(owner="probe").stats()
        with serving.loop.lock:
            busy = serving.loop.engine.has_unfinished() or serving.loop.engine.has_pending_events()
        if not busy and stats["kv_blocks_free"] == stats["kv_blocks_total"]:
            return True
        time.sleep(0.01)
    return False


class Recorder:
    """A RunContext's publish and cancel hooks that remember what happened."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int | None, dict]] = []
        self.cancel: dict[str, str] = {}
        self.cancel_after: tuple[str, int | None, str, str] | None = None

    def publish(self, type: str, data: dict, stream: int | None = None) -> None:
        self.events.append((type, stream, data))
        if self.cancel_after and (type, stream) == self.cancel_after[:2]:
            self.cancel.setdefault(self.cancel_after[2], self.cancel_after[3])

    def context(self, *, time_limit_s: float = 120.0, pace_s: float = 0.0) -> RunContext:
        return RunContext(publish=self.publish, cancel_targets=lambda: dict(self.cancel),
                          time_limit_s=time_limit_s, pace_s=pace_s)

    def types(self, stream: int | None = None) -> list[str]:
        return [t for t, s, _ in self.events if stream is None or s == stream]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
