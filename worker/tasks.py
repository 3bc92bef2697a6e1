"""Tasks every worker offers; demo runs live in demos/tasks.py."""

import logging
import platform
import socket

from celery import shared_task
from django.conf import settings

logger = logging.getLogger(__name__)


@shared_task(name="worker.describe")
def worker_describe() -> dict:
    """What this worker is: host, Python, torch and the engine model it serves."""
    import torch  # only ever imported in worker processes

    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "engine_model": settings.ENGINE_MODEL,
    }


@shared_task(name="worker.hardware_measure", soft_time_limit=120, time_limit=150,
             acks_late=False)
def hardware_measure_task(**sizes: object) -> dict:
    """Measure this worker's roofline (worker/hardware.py) on its engine device and store it
    where the page reads it (demos/hardware.py). `sizes` override the measurement's sizes, as
    settings.HARDWARE_MEASURE_SIZES does when given (the tests' tiny ones); the page never sends
    any."""
    from demos.hardware import hardware_store
    from demos.services import redis
    from worker.hardware import hardware_measure

    sizes = sizes or dict(getattr(settings, "HARDWARE_MEASURE_SIZES", {}))
    measurement = hardware_measure(device=getattr(settings, "ENGINE_DEVICE", "cpu"), **sizes)
    hardware_store(redis(), measurement)
    return measurement


# How long an OpenAI-API request may run in the worker, seconds.
V1_TIME_LIMIT_S = 120


@shared_task(name="worker.v1_generate", acks_late=False)
def v1_generate(request_id: str, payload: dict) -> str:
    """One /v1 completion in the shared engine; events go to Redis for the web to relay.

    Events on stream `run:v1-<request_id>:events`: `accepted` (prompt_tokens), `delta` (text,
    tokens: what the step produced), then `done` (finish_reason, usage) or `error` (status,
    message, param). A cancel flag (the client went away) aborts the request at once and
    publishes `aborted` (blocks_freed).
    """
    from demos import events
    from demos.services import redis

    run_id = f"v1-{request_id}"
    client = redis()

    def publish(type: str, data: dict) -> None:
        events.event_publish(client, run_id=run_id, type=type, data=data, ttl_s=600)

    try:
        return _v1_serve(run_id, payload, publish, client)
    except Exception as exc:
        # Whatever went wrong, the web (waiting for `accepted` or the next event) hears of it
        # now, in words, instead of timing out 30 s later with a misleading 503.
        logger.exception("/v1 request %s failed", request_id)
        try:
            publish("error", {"status": 500, "message": "the worker hit an internal error "
                              f"({type(exc).__name__}; it has been logged)", "param": None})
        except Exception:  # Redis itself is gone: the web's wait ends in its own 503
            logger.warning("could not publish the failure of %s", run_id)
        return "error"


def _v1_serve(run_id: str, payload: dict, publish, client) -> str:  # noqa: ANN001
    import time

    from demos import events
    from demos.runners.base import CANCEL_POLL_S, EVENT_WAIT_S
    from demos.tasks import _Heartbeat
    from worker.demo_engine import serving_get
    from worker.engine import SamplingParams

    with _Heartbeat(run_id):
        serving = serving_get(settings.ENGINE_MODEL,
                              device=getattr(settings, "ENGINE_DEVICE", "cpu"))
        engine_client = serving.loop.client(owner=payload["owner"])
        try:
            try:
                params = SamplingParams(
                    temperature=payload["temperature"], top_p=payload["top_p"],
                    max_tokens=payload["max_tokens"], stop=tuple(payload["stop"]),
                    seed=payload["seed"], ignore_eos=payload.get("ignore_eos", False))
                chat = payload["messages"] is not None
                prompt = payload["messages"] if chat else payload["prompt"]
                engine_request = engine_client.add_request(
                    prompt, params, chat=chat, cache_salt=payload["cache_salt"])
            except ValueError as exc:
                publish("error", {"status": 400, "message": str(exc), "param": "messages"
                                  if payload["messages"] is not None else "prompt"})
                return "error"
            started = time.monotonic()
            polled = 0.0
            prompt_tokens = None
            while True:
                now = time.monotonic()
                if now - polled >= CANCEL_POLL_S:
                    polled = now
                    if events.cancel_targets(client, run_id=run_id):
                        engine_client.abort(engine_request)
                    elif now - started > V1_TIME_LIMIT_S:
                        engine_client.abort(engine_request)
                        publish("error", {"status": 504, "message": "the request passed its "
                                          f"time limit of {V1_TIME_LIMIT_S} s", "param": None})
                        return "error"
                text, tokens = [], 0
                ended = None
                for event in engine_client.events(timeout=EVENT_WAIT_S):
                    kind = event["type"]
                    if kind == "queued":
                        prompt_tokens = int(event["prompt_tokens"])
                        publish("accepted", {"prompt_tokens": prompt_tokens})
                    elif kind == "token":
                        text.append(event["text"])
                        tokens += 1
                    elif kind in ("finished", "aborted", "error"):
                        ended = event
                if tokens:
                    publish("delta", {"text": "".join(text), "tokens": tokens})
                if ended is None:
                    continue
                if ended["type"] == "finished":
                    completion = int(ended["num_output_tokens"])
                    publish("done", {"finish_reason": ended["finish_reason"], "usage": {
                        "prompt_tokens": prompt_tokens, "completion_tokens": completion,
                        "total_tokens": (prompt_tokens or 0) + completion}})
                    return "finished"
                if ended["type"] == "aborted":
                    publish("aborted", {"blocks_freed": int(ended.get("blocks_freed", 0))})
                    return "aborted"
                publish("error", {"status": 500, "message": ended.get("message", "engine "
                                  "error"), "param": None})
                return "error"
        finally:
            engine_client.close()
