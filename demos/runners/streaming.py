"""Demo `streaming` (problem 2): several requests decode side by side in the shared engine.

Each request is a "stream" (0, 1, 2) with its own SSE connection on the page. Cutting one (its
connection closes) or cancelling it aborts that request in the engine, and its KV blocks go
back to the pool at once while the others carry on. The requests are paced (one token every
`ctx.pace_s` seconds) so there is time to cut one mid-answer; pacing leaves them out of the
steps in between, so the engine's other requests are not slowed. Events: streams, admitted,
token, step (free blocks), aborted or done per stream; the task then publishes finished or
cancelled.
"""

from demos.events import XREAD_BLOCK_MS
from demos.runners.base import (
    EVENT_WAIT_S,
    RunCancelled,
    RunContext,
    RunOutcome,
    engine_error_raise,
)

# The learner's prompt is stream 0; these two keep it company.
COMPANION_PROMPTS = (
    "What is continuous batching?",
    "What is prefix caching?",
)


def streaming_prompts(prompt: str) -> list[str]:
    return [prompt, *COMPANION_PROMPTS]


def _kv(client) -> dict:  # noqa: ANN001
    stats = client.stats()
    return {"kv_blocks_free": int(stats["kv_blocks_free"]),
            "kv_blocks_total": int(stats["kv_blocks_total"])}


def streaming_run(*, client, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Stream len(streaming_prompts) requests at once; abort the ones asked to stop."""
    from worker.engine import SamplingParams

    prompts = streaming_prompts(params["prompt"])
    # ignore_eos: every stream runs to max_tokens, so there is time to cut one mid-answer.
    sampling = SamplingParams(temperature=params["temperature"], top_p=params["top_p"],
                              max_tokens=params["max_tokens"], ignore_eos=True)
    stream_of: dict[str, int] = {}
    streams: list[dict] = []
    for index, prompt in enumerate(prompts):
        token_ids = client.encode_prompt(prompt, chat=True)
        request_id = client.add_request(token_ids, sampling, pace_s=ctx.pace_s)
        stream_of[request_id] = index
        streams.append({"stream": index, "prompt": prompt, "request_id": request_id,
                        "prompt_tokens": len(token_ids), "state": "running",
                        "completion_tokens": 0, "reason": None, "cut_seen_ms": None,
                        "freed_ms": None, "blocks_freed": None})
    ctx.publish("streams", {"streams": [{k: s[k] for k in ("stream", "prompt", "prompt_tokens")}
                                        for s in streams], **_kv(client),
                            "at_ms": ctx.elapsed_ms()})

    def stream_end(index: int, state: str, data: dict) -> None:
        streams[index]["state"] = state
        # The pool as it is now, unless `data` carries the pool as the engine saw it.
        ctx.publish("done" if state == "done" else "aborted", {**_kv(client), **data,
                    "at_ms": ctx.elapsed_ms()}, stream=index)

    def summary() -> list[dict]:
        return [{k: s[k] for k in ("stream", "state", "completion_tokens")} for s in streams]

    step_seconds: list[float] = []

    cancel_all: str | None = None
    freed_by_cancel = 0
    while any(s["state"] in ("running", "aborting") for s in streams):
        ctx.check_time()
        cancel = ctx.cancels()
        if "all" in cancel and cancel_all is None:
            cancel_all = cancel["all"]
            for s in streams:
                if s["state"] == "running":
                    s["state"] = "aborting"
                    client.abort(s["request_id"])
        for target, reason in cancel.items():
            index = int(target.partition(":")[2]) if target.startswith("stream:") else -1
            if 0 <= index < len(streams) and streams[index]["state"] == "running":
                streams[index]["state"], streams[index]["reason"] = "aborting", reason
                streams[index]["cut_seen_ms"] = ctx.elapsed_ms()
                client.abort(streams[index]["request_id"])
        for event in client.events(timeout=EVENT_WAIT_S):
            engine_error_raise(event)
            kind = event.get("type")
            index = stream_of.get(event.get("request_id", ""))
            if kind == "step":
                if event.get("seconds") is not None:
                    step_seconds.append(float(event["seconds"]))
                # The pool as the step left it (later reads may already see an abort).
                ctx.publish("step", {"kv_blocks_free": int(event["blocks_free"]),
                                     "kv_blocks_total": int(event["blocks_total"]),
                                     "num_seqs": event.get("num_seqs"),
                                     "num_others": event["num_seqs"] - event["num_mine"],
                                     "seconds": event.get("seconds"),
                                     "at_ms": ctx.elapsed_ms()})
            elif index is None:
                continue
            elif kind == "aborted":
                if cancel_all is not None:
                    streams[index]["state"] = "aborted"
                    freed_by_cancel += int(event.get("blocks_freed", 0))
                else:
                    streams[index]["freed_ms"] = ctx.elapsed_ms()
                    streams[index]["blocks_freed"] = int(event.get("blocks_freed", 0))
                    # The engine's own count: it may have sampled a token the page never saw.
                    streams[index]["completion_tokens"] = int(event.get(
                        "completion_tokens", streams[index]["completion_tokens"]))
                    # The free blocks just before and just after the abort, from the
                    # engine: by the time this reads the pool, other streams may have grown.
                    free_after = int(event["blocks_free"])
                    stream_end(index, "aborted", {
                        "reason": streams[index]["reason"],
                        "blocks_freed": streams[index]["blocks_freed"],
                        "kv_blocks_free": free_after,
                        "kv_blocks_free_before": free_after - streams[index]["blocks_freed"],
                        "cut_seen_ms": streams[index]["cut_seen_ms"],
                        "completion_tokens": streams[index]["completion_tokens"]})
            elif kind == "finished" and streams[index]["state"] in ("running", "aborting"):
                # Finished before an abort could land: it is done, not aborted.
                stream_end(index, "done", {
                    "finish_reason": event.get("finish_reason"),
                    "completion_tokens": streams[index]["completion_tokens"]})
            elif streams[index]["state"] != "running":
                continue
            elif kind == "admitted":
                ctx.publish("admitted", {"blocks": event.get("blocks"),
                                         "cached_tokens": event.get("cached_tokens", 0)},
                            stream=index)
            elif kind == "token":
                streams[index]["completion_tokens"] += 1
                ctx.publish("token", {"index": event.get("index"), "text": event.get("text", ""),
                                      "at_ms": ctx.elapsed_ms()}, stream=index)
    if cancel_all is not None:
        raise RunCancelled(cancel_all, summary={"blocks_freed": freed_by_cancel, **_kv(client),
                                                "streams": summary()})
    return RunOutcome(state="finished", summary={
        **_kv(client), "streams": summary(),
        "measured_vs_predicted": _measured_vs_predicted(
            client=client, streams=streams, params=params, pace_s=ctx.pace_s,
            step_seconds=step_seconds)})


def _measured_vs_predicted(*, client, streams: list[dict], params: dict, pace_s: float,
                           step_seconds: list[float]) -> dict:
    """Each stopped stream's blocks and how fast they came back, beside problem 2's
    arithmetic for the same stream (demos/estimate.py)."""
    from demos.estimate import streaming_estimate

    stats = client.stats()
    step_s = sum(step_seconds) / len(step_seconds) if step_seconds else 0.0
    estimate = streaming_estimate(
        streams=streams, block_size=int(stats["block_size"]),
        block_bytes=int(stats["kv_block_bytes"]), pace_s=pace_s,
        max_tokens=int(params["max_tokens"]), step_s=step_s,
        relay_poll_s=XREAD_BLOCK_MS / 1000, runner_poll_s=EVENT_WAIT_S)
    measured = [{k: s[k] for k in ("stream", "reason", "completion_tokens", "prompt_tokens",
                                   "blocks_freed", "cut_seen_ms", "freed_ms")}
                for s in streams if s["state"] == "aborted"]
    return {"measured": measured, "predicted": estimate["streams"],
            "pace_s": pace_s, "step_s": step_s, "relay_poll_s": estimate["relay_poll_s"],
            "block_size": int(stats["block_size"]), "max_tokens": int(params["max_tokens"])}


from demos.runners import runner_register  # noqa: E402

runner_register("streaming", streaming_run, engine="shared")
