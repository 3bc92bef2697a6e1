"""Demo `lifecycle` (problem 1): one request, end to end, each stage measured as it happens.

The request joins the worker's shared engine, so other visitors' requests may ride in the
same steps. Events, in order: tokenized, queued, admitted, prefill, then token (one per token)
interleaved with step (how many sequences the step carried, how many of them were other
visitors', and from how many visitors; sent when that changes); the task then publishes
finished with this runner's summary (or cancelled).

Durations come from the engine's own clock, not from when this runner read the events: the
engine hands out a step's events together once the step is over, so the admission and the end
of a one-step prefill arrive in one batch and would look simultaneous. Live, the prefill is the
sum of the engine's step times for the steps that carried its chunks; the summary's queue,
prefill, TTFT and token times are the engine's milestones for the request (RequestMetrics).
"""

import time

from demos.runners.base import (
    EVENT_WAIT_S,
    RunCancelled,
    RunContext,
    RunOutcome,
    engine_error_raise,
)


def _blocks(stats: dict) -> dict:
    return {"kv_blocks_free": int(stats["kv_blocks_free"]),
            "kv_blocks_total": int(stats["kv_blocks_total"])}


def _step_after(batch: list[dict], index: int) -> dict | None:
    """The engine's step event that closes the step `batch[index]` happened in: the engine
    appends each step's own event after the events of that step."""
    return next((e for e in batch[index + 1:] if e.get("type") == "step"), None)


def lifecycle_run(*, client, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Run one request in the worker's shared engine and report every stage, and how many
    other visitors' sequences shared each step; `machine` holds this worker's measured
    rates."""
    from demos.estimate import lifecycle_estimate
    from worker.engine import SamplingParams

    t_start = time.perf_counter()
    token_ids = client.encode_prompt(params["prompt"], chat=True)
    t_tokenized = time.perf_counter()
    ctx.publish("tokenized", {
        "token_count": len(token_ids),
        "token_ids": token_ids,
        "pieces": client.token_pieces(token_ids),
        "chat_template": True,
        "ms": round((t_tokenized - t_start) * 1000, 3),
        "at_ms": ctx.elapsed_ms(t_tokenized),
    })

    # ignore_eos is never sent by the page (the web form has no such field); tests use it.
    sampling = SamplingParams(temperature=params["temperature"], top_p=params["top_p"],
                              max_tokens=params["max_tokens"],
                              ignore_eos=bool(params.get("ignore_eos", False)))
    stats = client.stats()
    request_id = client.add_request(token_ids, sampling)
    t_queued = time.perf_counter()
    ctx.publish("queued", {"request_id": request_id, "at_ms": ctx.elapsed_ms(t_queued),
                           "waiting": int(stats.get("num_requests_waiting", 0)) + 1,
                           **_blocks(stats)})

    prefill_seconds = 0.0  # the engine's step times of the steps that carried the prompt
    token_times: list[float] = []
    text_parts: list[str] = []
    prefill_tokens = 0
    steps: list[dict] = []  # who shared each step that carried this request
    finished: dict | None = None
    cancel_reason: str | None = None
    while finished is None:
        ctx.check_time()
        if cancel_reason is None and "all" in ctx.cancels():
            cancel_reason = ctx.cancels()["all"]
            client.abort(request_id)
        batch = client.events(timeout=EVENT_WAIT_S)
        t_seen = time.perf_counter()
        for index, event in enumerate(batch):
            engine_error_raise(event)
            kind = event.get("type")
            if kind == "admitted":
                # The admission is at the start of its step: the step's own time is not queueing.
                step_s = float((_step_after(batch, index) or {}).get("seconds", 0.0))
                t_admitted = max(t_queued, t_seen - step_s)
                ctx.publish("admitted", {
                    "blocks": event.get("blocks"),
                    "prompt_tokens": event.get("prompt_tokens", len(token_ids)),
                    "cached_tokens": event.get("cached_tokens", 0),
                    "queue_ms": round((t_admitted - t_queued) * 1000, 3),
                    "at_ms": ctx.elapsed_ms(t_admitted),
                })
            elif kind == "prefill_chunk":
                prefill_tokens += int(event.get("tokens", 0))
                prefill_seconds += float((_step_after(batch, index) or {}).get("seconds", 0.0))
                if event.get("done"):
                    ctx.publish("prefill", {
                        "tokens": prefill_tokens,
                        "cached_tokens": len(token_ids) - prefill_tokens,
                        "ms": round(prefill_seconds * 1000, 3),
                        "at_ms": ctx.elapsed_ms(t_seen),
                    })
            elif kind == "token":
                token_times.append(t_seen)
                text_parts.append(event.get("text", ""))
                ctx.publish("token", {"index": event.get("index", len(token_times) - 1),
                                      "token_id": event.get("token_id"),
                                      "text": event.get("text", ""),
                                      "at_ms": ctx.elapsed_ms(t_seen)})
            elif kind == "step":
                share = {"num_seqs": int(event["num_seqs"]),
                         "num_others": int(event["num_seqs"]) - int(event["num_mine"]),
                         "num_visitors": int(event["num_owners"])}
                if not steps or share != steps[-1]:
                    # Only when who rides along changes: half the writes of a solo run.
                    ctx.publish("step", {**share, "at_ms": ctx.elapsed_ms(t_seen)})
                steps.append(share)
            elif kind == "aborted":
                stats = client.stats()
                raise RunCancelled(cancel_reason or "cancelled", summary={
                    "blocks_freed": int(event.get("blocks_freed", 0)), **_blocks(stats),
                    "completion_tokens": len(token_times), "text": "".join(text_parts),
                })
            elif kind == "finished":
                finished = event
    t_end = time.perf_counter()
    n_out = len(token_times)
    # The engine's own count: the final step may allocate a block and free everything at once,
    # which counting free blocks around it would miss.
    blocks_freed = int(finished["blocks_freed"])

    def ms(t: float) -> float:
        return round((t - t_start) * 1000, 3)

    # The engine's milestones (seconds since the request arrived in it, which is when
    # add_request returned here, to within the lock's microseconds).
    engine = finished.get("metrics") or {}
    queue_s = float(engine.get("queue_time") or 0.0)
    t_admitted = t_queued + queue_s
    engine_ttft = engine.get("ttft")
    if engine_ttft is not None and n_out:
        t_first = t_queued + float(engine_ttft)
        engine_times = [t_first, *(t_first + gap for gap in _running_sum(engine.get("itl") or []))]
        if len(engine_times) == n_out:  # otherwise keep the times the tokens were read here
            token_times = engine_times
    t_prefilled = token_times[0] if token_times else t_admitted
    ttft_ms = ms(token_times[0]) if token_times else None
    tpot_ms = (round((token_times[-1] - token_times[0]) * 1000 / (n_out - 1), 3)
               if n_out > 1 else None)
    timeline = [
        {"stage": "tokenize", "start_ms": 0.0, "end_ms": ms(t_tokenized)},
        {"stage": "queue", "start_ms": ms(t_queued), "end_ms": ms(t_admitted)},
        {"stage": "prefill", "start_ms": ms(t_admitted), "end_ms": ms(t_prefilled)},
    ]
    if n_out > 1:
        timeline.append({"stage": "decode", "start_ms": ms(token_times[0]),
                         "end_ms": ms(token_times[-1])})
    stats = client.stats()
    measured = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms,
                "prefill_ms": round((t_prefilled - t_admitted) * 1000, 3), "e2e_ms": ms(t_end)}
    return RunOutcome(state="finished", summary={
        "finish_reason": finished.get("finish_reason"),
        "text": "".join(text_parts),
        "usage": {"prompt_tokens": len(token_ids), "completion_tokens": n_out,
                  "total_tokens": len(token_ids) + n_out},
        "blocks_freed": blocks_freed,
        **_blocks(stats),
        "sharing": {
            "steps": len(steps),
            "shared_steps": sum(1 for s in steps if s["num_others"]),
            "max_seqs": max((s["num_seqs"] for s in steps), default=0),
            "max_visitors": max((s["num_visitors"] for s in steps), default=0),
        },
        "tokenize_ms": ms(t_tokenized),
        "queue_ms": round(queue_s * 1000, 3),
        **measured,
        "token_at_ms": [ms(t) for t in token_times],
        "timeline": timeline,
        "engine_metrics": finished.get("metrics", {}),
        "estimate": lifecycle_estimate(machine=machine, prompt_tokens=len(token_ids),
                                       output_tokens=n_out, measured=measured),
    })


def _running_sum(gaps: list[float]) -> list[float]:
    """0.1, 0.2, 0.3 → 0.1, 0.3, 0.6: each token's time after the first, from the gaps."""
    total, out = 0.0, []
    for gap in gaps:
        total += float(gap)
        out.append(total)
    return out


from demos.runners import runner_register  # noqa: E402

runner_register("lifecycle", lifecycle_run, engine="shared")
