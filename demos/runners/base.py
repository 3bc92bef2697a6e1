"""The contract between the Celery task and a demo runner."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Engine event types in the order a runner handles them within one step, so a prefill that
# completes is reported before the first token that the same step sampled.
EVENT_ORDER = {"queued": 0, "admitted": 1, "preempted": 2, "prefill_chunk": 3, "token": 4,
               "finished": 5, "aborted": 6, "step": 7}


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
    step_delay_s: float = 0.0  # a pause between engine steps, where a demo slows itself down
    started: float = field(default_factory=time.perf_counter)
    request_ids: set[str] = field(default_factory=set)  # to abort on any failure

    def elapsed_ms(self, at: float | None = None) -> float:
        """Milliseconds from the run's start to `at` (a perf_counter reading), or to now."""
        return round(((at if at is not None else time.perf_counter()) - self.started) * 1000, 3)

    def check_time(self) -> None:
        if time.perf_counter() - self.started > self.time_limit_s:
            raise RunTimeLimit(f"the run passed its time limit of {self.time_limit_s:g} s")


def engine_events_sorted(events: list[dict]) -> list[dict]:
    return sorted(events, key=lambda event: EVENT_ORDER.get(event.get("type", ""), 9))


def engine_abort_all(engine, request_ids: set[str]) -> None:
    """Abort every request a run still holds, so the engine the worker keeps is clean."""
    for request_id in list(request_ids):
        try:
            engine.abort(request_id)
        except Exception:  # already finished or unknown: nothing left to free
            pass
    request_ids.clear()
    # One step hands out the events the aborts queued (aborted), so the next run starts clean.
    engine.step()
