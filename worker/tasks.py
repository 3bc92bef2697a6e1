"""Tasks every worker offers; demo runs live in demos/tasks.py. What the tasks share with the web
(Redis, a run's events and heartbeat, where measurements are kept) comes from plumbing/: worker/
imports nothing from demos/ or course/."""

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
    where the page reads it (plumbing/hardware.py). `sizes` override the measurement's sizes, as
    settings.HARDWARE_MEASURE_SIZES does when given (the tests' tiny ones); the page never sends
    any."""
    from plumbing.events import redis_shared
    from plumbing.hardware import hardware_store
    from worker.hardware import hardware_measure

    sizes = sizes or dict(getattr(settings, "HARDWARE_MEASURE_SIZES", {}))
    measurement = hardware_measure(device=getattr(settings, "ENGINE_DEVICE", "cpu"), **sizes)
    hardware_store(redis_shared(), measurement)
    return measurement


# How long an OpenAI-API request may run in the worker, seconds.
V1_TIME_LIMIT_S = 120


@shared_task(name="worker.v1_generate", acks_late=False)
def v1_generate(request_id: str, payload: dict) -> str:
    """One /v1 completion in the shared engine; events go to Redis for the web to relay.

    Events on stream `run:v1-<request_id>:events`: `accepted` (prompt_tokens), `delta` (index:
    which of the n samples, text, tokens: what the step produced for it, and with logprobs
    asked, each token's), then `done` (finish_reasons by index, usage) or `error` (status,
    message, param). A cancel flag (the client went away) aborts the request at once and
    publishes `aborted` (blocks_freed).
    """
    from plumbing import events
    from plumbing.events import redis_shared

    run_id = f"v1-{request_id}"
    client = redis_shared()

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

    from plumbing import events
    from plumbing.events import CANCEL_POLL_S, EVENT_WAIT_S, RunHeartbeat
    from worker.demo_engine import serving_get
    from worker.engine import SamplingParams

    with RunHeartbeat(run_id):
        serving = serving_get(settings.ENGINE_MODEL,
                              device=getattr(settings, "ENGINE_DEVICE", "cpu"))
        engine_client = serving.loop.client(owner=payload["owner"])
        n = int(payload.get("n", 1))
        try:
            chat = payload["messages"] is not None
            try:
                token_ids = engine_client.encode_prompt(
                    payload["messages"] if chat else payload["prompt"], chat=chat)
                max_tokens = _v1_max_tokens(payload, len(token_ids),
                                            engine_client.stats()["max_model_len"])
                params = SamplingParams(
                    temperature=payload["temperature"], top_p=payload["top_p"],
                    top_k=payload.get("top_k", 0), max_tokens=max_tokens,
                    stop=tuple(payload["stop"]), seed=payload["seed"],
                    ignore_eos=payload.get("ignore_eos", False), n=n,
                    presence_penalty=payload.get("presence_penalty", 0.0),
                    frequency_penalty=payload.get("frequency_penalty", 0.0),
                    logprobs=payload.get("logprobs"))
                engine_request = engine_client.add_request(
                    token_ids, params, cache_salt=payload["cache_salt"])
            except ValueError as exc:
                publish("error", {"status": 400, "message": str(exc), "param": getattr(
                    exc, "param", "messages" if chat else "prompt")})
                return "error"
            started = time.monotonic()
            polled = 0.0
            prompt_tokens = None
            finishes: dict[int, str] = {}
            completion = 0
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
                deltas: dict[int, dict] = {}
                ended = None
                for event in engine_client.events(timeout=EVENT_WAIT_S):
                    kind = event["type"]
                    index = _sample_index(event.get("request_id", ""), engine_request)
                    if kind == "queued":
                        prompt_tokens = int(event["prompt_tokens"])
                        publish("accepted", {"prompt_tokens": prompt_tokens})
                    elif kind == "token":
                        delta = deltas.setdefault(index, {"index": index, "text": [],
                                                          "tokens": 0, "logprobs": []})
                        delta["text"].append(event["text"])
                        delta["tokens"] += 1
                        if "logprobs" in event:
                            delta["logprobs"].append((event["token_id"], event["logprobs"]))
                    elif kind == "finished":
                        finishes[index] = event["finish_reason"]
                        completion += int(event["num_output_tokens"])
                    elif kind == "error" or (kind == "aborted" and index == 0):
                        ended = event
                for delta in deltas.values():
                    delta["text"] = "".join(delta["text"])
                    if delta["logprobs"]:
                        delta["logprobs"] = _v1_logprobs(engine_client, delta["logprobs"])
                    else:
                        del delta["logprobs"]
                    publish("delta", delta)
                if len(finishes) == n:
                    publish("done", {"finish_reason": finishes[0], "finish_reasons": [
                        finishes[i] for i in range(n)], "usage": {
                        "prompt_tokens": prompt_tokens, "completion_tokens": completion,
                        "total_tokens": (prompt_tokens or 0) + completion}})
                    return "finished"
                if ended is None:
                    continue
                if ended["type"] == "aborted":
                    publish("aborted", {"blocks_freed": int(ended.get("blocks_freed", 0))})
                    return "aborted"
                publish("error", {"status": 500, "message": ended.get("message", "engine "
                                  "error"), "param": None})
                return "error"
        finally:
            engine_client.close()


def _v1_max_tokens(payload: dict, prompt_tokens: int, max_model_len: int) -> int:
    """The request's max_tokens, checked against the context: a client that asked for more
    than fits gets a ValueError naming both numbers (as vLLM and OpenAI answer 400); one that
    left max_tokens out gets what fits, up to the default it was given."""
    max_tokens = int(payload["max_tokens"])
    if prompt_tokens + max_tokens <= max_model_len:
        return max_tokens
    room = max_model_len - prompt_tokens
    if not payload.get("max_tokens_given", True) and room >= 1:
        return room
    from worker.engine.sampling_params import ParamError

    if room < 1:  # the prompt alone fills the context
        raise ParamError(
            f"the prompt has {prompt_tokens} tokens; this model's context (max_model_len) is "
            f"{max_model_len} tokens and at least one must be left for the output",
            param="messages" if payload["messages"] is not None else "prompt")
    raise ParamError(
        f"the prompt's {prompt_tokens} tokens and max_tokens {max_tokens} come to "
        f"{prompt_tokens + max_tokens} tokens, past this model's context (max_model_len) of "
        f"{max_model_len}: ask for at most {room} tokens or shorten the prompt",
        param=payload.get("max_tokens_name", "max_tokens"))


def _sample_index(request_id: str, parent: str) -> int:
    """Which of a request's n samples an engine request id is: `parent` is 0, `parent:i` i."""
    suffix = request_id.removeprefix(parent)
    return int(suffix[1:]) if suffix.startswith(":") and suffix[1:].isdigit() else 0


def _v1_logprobs(engine_client, chosen: list[tuple[int, dict]]) -> list[dict]:  # noqa: ANN001
    """Each chosen token's text and log-probability, with its alternatives' (one call to the
    tokenizer for them all)."""
    ids = [token for token, _ in chosen]
    for _, logprobs in chosen:
        ids += [token for token, _ in logprobs["top"]]
    texts = dict(zip(ids, engine_client.token_pieces(ids), strict=True))
    return [{"token": texts[token], "logprob": logprobs["logprob"],
             "top": [[texts[t], lp] for t, lp in logprobs["top"]]}
            for token, logprobs in chosen]
