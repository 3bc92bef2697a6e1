"""What each live demo does with the engine, one module per demo slug, in a small registry.

A runner is plain Python (no Django). It publishes events through a `RunContext` and returns a
`RunOutcome`; the Celery task supplies both. Two kinds, by what they need from the engine:
- "shared": chat-like demos join the worker's shared engine through an `EngineClient`
  (worker/engine_loop.py), so they batch with every other visitor's requests; they run on
  settings.ENGINE_QUEUE. Called as runner(client=..., machine=..., params=..., ctx=...).
- "own": controlled experiments get an engine of their own, built for the run, on
  settings.EXPERIMENT_QUEUE, so a long comparison never delays a learner's request. Called
  as runner(engine=..., machine=..., params=..., ctx=...).
Modules register themselves on import; importing them imports no torch.
"""

from collections.abc import Callable
from dataclasses import dataclass

from demos.runners.base import RunCancelled, RunContext, RunOutcome, RunTimeLimit
from demos.schema import ParamSchema


@dataclass(frozen=True)
class Runner:
    slug: str
    run: Callable[..., RunOutcome]
    engine: str  # "shared" or "own"
    # A demo with parameters of its own (demos/schema.py): its form is drawn from them, its
    # partial is templates/demos/_<slug>.html and its script static/js/demos/<slug>.js.
    params: ParamSchema | None = None
    # Extra template context for the demo's partial (plain values; called in the web process).
    context: Callable[[], dict] | None = None


RUNNERS: dict[str, Runner] = {}


def runner_register(slug: str, run: Callable[..., RunOutcome], *, engine: str = "shared",
                    params: ParamSchema | None = None,
                    context: Callable[[], dict] | None = None) -> None:
    if engine not in ("shared", "own"):
        raise ValueError("engine must be 'shared' or 'own'")
    RUNNERS[slug] = Runner(slug=slug, run=run, engine=engine, params=params, context=context)


def runner_get(demo: str) -> Runner:
    try:
        return RUNNERS[demo]
    except KeyError:
        raise ValueError(f"no runner for demo {demo!r}") from None


def runner_queue(demo: str) -> str:
    """The Celery queue a demo's runs go to."""
    from django.conf import settings

    if runner_get(demo).engine == "shared":
        return settings.ENGINE_QUEUE
    return settings.EXPERIMENT_QUEUE


# They register themselves.
from demos.runners import (  # noqa: E402,F401
    attention_kernels,
    batching,
    benchmark,
    chunked_prefill,
    disagg,
    fairness,
    itl,
    kv_bytes,
    lifecycle,
    metrics,
    paged_blocks,
    prefix_cache,
    profile,
    quantization,
    rollout,
    speculative,
    streaming,
    tail_latency,
    triton_rmsnorm,
    utilization,
)

__all__ = ["RUNNERS", "RunCancelled", "RunContext", "RunOutcome", "RunTimeLimit", "Runner",
           "runner_get", "runner_queue", "runner_register"]
