"""The runners with the real engine and the shipped model, in this process, no Django needed."""

from pathlib import Path

import pytest

from demos.runners import RunContext

MODEL = Path(__file__).resolve().parents[3] / "worker" / "models" / "course-lm"


@pytest.fixture(scope="session")
def engine_and_machine():
    from worker.demo_engine import engine_get

    return engine_get(str(MODEL))


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

    def context(self, *, time_limit_s: float = 120.0) -> RunContext:
        return RunContext(publish=self.publish, cancel_targets=lambda: dict(self.cancel),
                          time_limit_s=time_limit_s)

    def types(self, stream: int | None = None) -> list[str]:
        return [t for t, s, _ in self.events if stream is None or s == stream]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
