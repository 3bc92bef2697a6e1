"""The contract between the Celery task and a demo runner."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from plumbing.events import CANCEL_POLL_S, EVENT_WAIT_S  # noqa: F401  (runners import them here)

# CANCEL_POLL_S: how often a runner asks Redis whether it was cancelled; EVENT_WAIT_S: how long
# it waits for its next engine event (seconds). Shared with the /v1 task (worker/tasks.py).


class RunTimeLimit(Exception):
    """The run took longer than the demo's time limit."""


class RunCancelled(Exception):
    """Raised inside a runner by `RunContext.check` when the whole run was cancelled."""

    def __init__(self, reason: str, *, summary: dict | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.summary = {"reason": reason, **(summary or {})}


@dataclass
class RunOutcome:
    state: str  # "finished" or "cancelled"
    summary: dict


@dataclass
class RunContext:
    """What a runner may do besides driving the engine."""

    publish: Callable[..., None]  # publish(type, data, stream=None)
    cancel_targets: Callable[[], dict[str, str]]  # {"all" | "stream:<n>": reason}
    time_limit_s: float
    # Seconds between one request's tokens where a demo slows itself down (the streaming
    # demo, so a learner can cut a stream mid-answer); the shared engine's other requests
    # are not slowed.
    pace_s: float = 0.0
    # keep_file(name, data) -> URL: keeps a file the run produced (a profiler trace) for its
    # owner to download while the run's events last; None where nothing can be kept.
    keep_file: Callable[[str, bytes], str | None] | None = None
    started: float = field(default_factory=time.perf_counter)
    _cancel_seen: dict[str, str] = field(default_factory=dict)
    _cancel_polled: float = 0.0

    def elapsed_ms(self, at: float | None = None) -> float:
        """Milliseconds from the run's start to `at` (a perf_counter reading), or to now."""
        return round(((at if at is not None else time.perf_counter()) - self.started) * 1000, 3)

    def check_time(self) -> None:
        if time.perf_counter() - self.started > self.time_limit_s:
            raise RunTimeLimit(f"the run passed its time limit of {self.time_limit_s:g} s")

    def cancels(self) -> dict[str, str]:
        """What has been asked to stop, read from Redis at most every CANCEL_POLL_S."""
        now = time.perf_counter()
        if now - self._cancel_polled >= CANCEL_POLL_S:
            self._cancel_polled = now
            self._cancel_seen = dict(self.cancel_targets())
        return self._cancel_seen


def engine_error_raise(event: dict) -> None:
    """An `error` event: the shared engine failed a step that carried this run's request."""
    if event.get("type") == "error":
        raise RuntimeError(event.get("message", "the engine failed"))
