"""Demo `lifecycle` (problem 1): one request, end to end, each stage measured as it happens.

Events, in order: tokenized, queued, admitted, prefill, token (one per token), then the task
publishes finished with this runner's summary (or cancelled).
"""

import time

from demos.runners.base import (
    RunCancelled,
    RunContext,
    RunOutcome,
    engine_abort_all,
    engine_events_sorted,
)


def _blocks_held(engine) -> int:
    stats = engine.stats()
    return int(stats["kv_blocks_total"]) - int(stats["kv_blocks_free"])


def token_pieces(engine, token_ids: list[int]) -> list[str]:
    """Each token's own text, for the chips. Special tokens (the chat template's markers)
    decode to nothing, so they show by name; byte-level pieces may be partial characters."""
    names = (engine.tokenizer.convert_ids_to_tokens(token_ids)
             if engine.tokenizer is not None else [""] * len(token_ids))
    return [engine.decode([token_id]) or name
            for token_id, name in zip(token_ids, names, strict=True)]


def lifecycle_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Run one request and report every stage; `machine` holds this worker's measured rates."""
    from demos.estimate import lifecycle_estimate
    from worker.engine import SamplingParams

    t_start = time.perf_counter()
    token_ids = engine.encode_prompt(params["prompt"], chat=True)
    t_tokenized = time.perf_counter()
    ctx.publish("tokenized", {
        "token_count": len(token_ids),
        "token_ids": token_ids,
        "pieces": token_pieces(engine, token_ids),
        "chat_template": True,
        "ms": round((t_tokenized - t_start) * 1000, 3),
        "at_ms": ctx.elapsed_ms(t_tokenized),
    })

    # ignore_eos is never sent by the page (the web form has no such field); tests use it.
    sampling = SamplingParams(temperature=params["temperature"], top_p=params["top_p"],
                              max_tokens=params["max_tokens"],
                              ignore_eos=bool(params.get("ignore_eos", False)))
    free_before = int(engine.stats()["kv_blocks_free"])
    request_id = engine.add_request(token_ids, sampling)
    ctx.request_ids.add(request_id)
    t_queued = time.perf_counter()
    stats = engine.stats()
    ctx.publish("queued", {"request_id": request_id, "at_ms": ctx.elapsed_ms(t_queued),
                           "waiting": int(stats.get("num_requests_waiting", 1)),
                           "kv_blocks_free": free_before,
                           "kv_blocks_total": int(stats["kv_blocks_total"])})

    t_admitted = t_prefilled = None
    token_times: list[float] = []
    text_parts: list[str] = []
    held = 0
    prefill_tokens = 0
    finished: dict | None = None
    while finished is None:
        ctx.check_time()
        cancel = ctx.cancel_targets()
        if "all" in cancel:
            engine.abort(request_id)
            ctx.request_ids.discard(request_id)
            held_now = _blocks_held(engine)
            engine_abort_all(engine, ctx.request_ids)
            stats = engine.stats()
            raise RunCancelled(cancel["all"], summary={
                "blocks_freed": held - held_now,
                "kv_blocks_free": int(stats["kv_blocks_free"]),
                "kv_blocks_total": int(stats["kv_blocks_total"]),
                "completion_tokens": len(token_times),
                "text": "".join(text_parts),
            })
        t_step = time.perf_counter()
        step_events = engine.step()
        t_done = time.perf_counter()
        for event in engine_events_sorted(step_events):
            kind = event.get("type")
            if kind != "step" and event.get("request_id") != request_id:
                continue
            if kind == "admitted":
                t_admitted = t_step
                ctx.publish("admitted", {
                    "blocks": event.get("blocks"),
                    "prompt_tokens": event.get("prompt_tokens", len(token_ids)),
                    "cached_tokens": event.get("cached_tokens", 0),
                    "queue_ms": round((t_step - t_queued) * 1000, 3),
                    "at_ms": ctx.elapsed_ms(t_step),
                })
            elif kind == "prefill_chunk":
                prefill_tokens += int(event.get("tokens", 0))
                if event.get("done"):
                    t_prefilled = t_done
                    ctx.publish("prefill", {
                        "tokens": prefill_tokens,
                        "cached_tokens": len(token_ids) - prefill_tokens,
                        "ms": round((t_done - (t_admitted or t_step)) * 1000, 3),
                        "at_ms": ctx.elapsed_ms(t_done),
                    })
            elif kind == "token":
                token_times.append(t_done)
                text_parts.append(event.get("text", ""))
                ctx.publish("token", {"index": event.get("index", len(token_times) - 1),
                                      "token_id": event.get("token_id"),
                                      "text": event.get("text", ""),
                                      "at_ms": ctx.elapsed_ms(t_done)})
            elif kind == "finished":
                finished = event
        if finished is None:
            held = _blocks_held(engine)
        if ctx.step_delay_s:
            time.sleep(ctx.step_delay_s)
    ctx.request_ids.discard(request_id)
    t_end = time.perf_counter()
    n_out = len(token_times)
    # The engine's own count: the final step may allocate a block and free everything at once,
    # which counting free blocks around it would miss.
    blocks_freed = int(finished["blocks_freed"])

    def ms(t: float) -> float:
        return round((t - t_start) * 1000, 3)

    ttft_ms = ms(token_times[0]) if token_times else None
    tpot_ms = (round((token_times[-1] - token_times[0]) * 1000 / (n_out - 1), 3)
               if n_out > 1 else None)
    t_admitted = t_admitted or t_queued
    t_prefilled = t_prefilled or t_admitted
    timeline = [
        {"stage": "tokenize", "start_ms": 0.0, "end_ms": ms(t_tokenized)},
        {"stage": "queue", "start_ms": ms(t_queued), "end_ms": ms(t_admitted)},
        {"stage": "prefill", "start_ms": ms(t_admitted), "end_ms": ms(t_prefilled)},
    ]
    if n_out > 1:
        timeline.append({"stage": "decode", "start_ms": ms(token_times[0]),
                         "end_ms": ms(token_times[-1])})
    stats = engine.stats()
    measured = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms,
                "prefill_ms": round(ms(t_prefilled) - ms(t_admitted), 3), "e2e_ms": ms(t_end)}
    return RunOutcome(state="finished", summary={
        "finish_reason": finished.get("finish_reason"),
        "text": "".join(text_parts),
        "usage": {"prompt_tokens": len(token_ids), "completion_tokens": n_out,
                  "total_tokens": len(token_ids) + n_out},
        "blocks_freed": blocks_freed,
        "kv_blocks_free": int(stats["kv_blocks_free"]),
        "kv_blocks_total": int(stats["kv_blocks_total"]),
        "tokenize_ms": ms(t_tokenized),
        "queue_ms": round(ms(t_admitted) - ms(t_queued), 3),
        **measured,
        "token_at_ms": [ms(t) for t in token_times],
        "timeline": timeline,
        "engine_metrics": finished.get("metrics", {}),
        "estimate": lifecycle_estimate(machine=machine, prompt_tokens=len(token_ids),
                                       output_tokens=n_out, measured=measured),
    })

