"""Demo `streaming` (problem 2): several requests decode side by side in one engine.

Each request is a "stream" (0, 1, 2) with its own SSE connection on the page. Cutting one (its
connection closes) or cancelling it aborts that request in the engine, and its KV blocks go
back to the pool at once while the others carry on. Events: streams, admitted, token, step
(free blocks), aborted or done per stream; the task then publishes finished or cancelled.
"""

import time

from demos.runners.base import (
    RunCancelled,
    RunContext,
    RunOutcome,
    engine_abort_all,
    engine_events_sorted,
)

# The learner's prompt is stream 0; these two keep it company.
COMPANION_PROMPTS = (
    "What is continuous batching?",
    "What is prefix caching?",
)


def streaming_prompts(prompt: str) -> list[str]:
    return [prompt, *COMPANION_PROMPTS]


def _kv(engine) -> dict:
    stats = engine.stats()
    return {"kv_blocks_free": int(stats["kv_blocks_free"]),
            "kv_blocks_total": int(stats["kv_blocks_total"])}


def streaming_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Stream len(streaming_prompts) requests at once; abort the ones asked to stop."""
    from worker.engine import SamplingParams

    prompts = streaming_prompts(params["prompt"])
    # ignore_eos: every stream runs to max_tokens, so there is time to cut one mid-answer.
    sampling = SamplingParams(temperature=params["temperature"], top_p=params["top_p"],
                              max_tokens=params["max_tokens"], ignore_eos=True)
    stream_of: dict[str, int] = {}
    streams: list[dict] = []
    for index, prompt in enumerate(prompts):
        token_ids = engine.encode_prompt(prompt, chat=True)
        request_id = engine.add_request(token_ids, sampling)
        ctx.request_ids.add(request_id)
        stream_of[request_id] = index
        streams.append({"stream": index, "prompt": prompt, "request_id": request_id,
                        "prompt_tokens": len(token_ids), "state": "running",
                        "completion_tokens": 0})
    ctx.publish("streams", {"streams": [{k: s[k] for k in ("stream", "prompt", "prompt_tokens")}
                                        for s in streams], **_kv(engine),
                            "at_ms": ctx.elapsed_ms()})

    def stream_end(index: int, state: str, data: dict) -> None:
        streams[index]["state"] = state
        ctx.request_ids.discard(streams[index]["request_id"])
        ctx.publish("done" if state == "done" else "aborted", {**data, **_kv(engine),
                    "at_ms": ctx.elapsed_ms()}, stream=index)

    while any(s["state"] == "running" for s in streams):
        ctx.check_time()
        cancel = ctx.cancel_targets()
        if "all" in cancel:
            free_before = _kv(engine)["kv_blocks_free"]
            engine_abort_all(engine, ctx.request_ids)
            kv = _kv(engine)
            raise RunCancelled(cancel["all"], summary={
                "blocks_freed": kv["kv_blocks_free"] - free_before, **kv,
                "streams": [{k: s[k] for k in ("stream", "state", "completion_tokens")}
                            for s in streams]})
        for target, reason in cancel.items():
            index = int(target.partition(":")[2]) if target.startswith("stream:") else -1
            if 0 <= index < len(streams) and streams[index]["state"] == "running":
                free_before = _kv(engine)["kv_blocks_free"]
                engine.abort(streams[index]["request_id"])
                stream_end(index, "aborted", {
                    "reason": reason,
                    "blocks_freed": _kv(engine)["kv_blocks_free"] - free_before,
                    "completion_tokens": streams[index]["completion_tokens"]})
        step_events = engine.step()
        for event in engine_events_sorted(step_events):
            kind = event.get("type")
            index = stream_of.get(event.get("request_id", ""))
            if kind == "step":
                ctx.publish("step", {**_kv(engine), "num_seqs": event.get("num_seqs"),
                                     "seconds": event.get("seconds"),
                                     "at_ms": ctx.elapsed_ms()})
            elif index is None or streams[index]["state"] != "running":
                continue
            elif kind == "admitted":
                ctx.publish("admitted", {"blocks": event.get("blocks"),
                                         "cached_tokens": event.get("cached_tokens", 0)},
                            stream=index)
            elif kind == "token":
                streams[index]["completion_tokens"] += 1
                ctx.publish("token", {"index": event.get("index"), "text": event.get("text", ""),
                                      "at_ms": ctx.elapsed_ms()}, stream=index)
            elif kind == "finished":
                stream_end(index, "done", {
                    "finish_reason": event.get("finish_reason"),
                    "completion_tokens": streams[index]["completion_tokens"]})
        if ctx.step_delay_s:
            time.sleep(ctx.step_delay_s)
    return RunOutcome(state="finished", summary={
        **_kv(engine),
        "streams": [{k: s[k] for k in ("stream", "state", "completion_tokens")} for s in streams],
    })
