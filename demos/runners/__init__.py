"""What each live demo does with the engine, one module per demo slug.

A runner is plain Python (no Django): it drives an engine through a `RunContext`, publishes
events as they happen and returns a `RunOutcome`. The Celery task supplies both.
"""

from demos.runners.base import RunCancelled, RunContext, RunOutcome, RunTimeLimit


def runner_for(demo: str):
    """The runner function for a demo slug (imported lazily: the runners touch the engine)."""
    if demo == "lifecycle":
        from demos.runners.lifecycle import lifecycle_run

        return lifecycle_run
    if demo == "streaming":
        from demos.runners.streaming import streaming_run

        return streaming_run
    raise ValueError(f"no runner for demo {demo!r}")


__all__ = ["RunCancelled", "RunContext", "RunOutcome", "RunTimeLimit", "runner_for"]
