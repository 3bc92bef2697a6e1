"""Streaming a generation over Server-Sent Events: what it costs on the wire, what it saves in
waiting, and what an abandoned request keeps holding when nobody cancels it.

Plain Python, no Django. Event sizes are measured, not guessed: the functions build a real
OpenAI-style `chat.completion.chunk` event (the shape the OpenAI API and vLLM's
OpenAI-compatible server stream) and count its UTF-8 bytes.
"""

import json
import math

from problems.arithmetic.catalog import model_get
from problems.arithmetic.catalog.models import Model
from problems.arithmetic.compute import prefill
from problems.arithmetic.decode import decode
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import TOKENS_MAX, count_check, fraction_check, number_check
from problems.arithmetic.memory import MEMORY_FRACTION_DEFAULT, RESERVE_GB_DEFAULT, kv_cache
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_format,
    bytes_in,
    bytes_short,
    count_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, count_phrase, share_phrase

# A chunk's fixed fields, with placeholder values of realistic length: ids are "chatcmpl-"
# plus 32 hex digits, `created` a Unix time in seconds. Its `model` is the name the server
# serves the model under (`chat_served_name`); this one only when none is given.
CHUNK_ID = "chatcmpl-" + "0" * 32
CHUNK_CREATED = 1_700_000_000
CHUNK_MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
# A chat stream comes from a chat-tuned checkpoint. Where a catalog model's repository (the one
# its config.json is read from) is a base model, it was never tuned to chat, and some ship no
# chat template, so a server started on them refuses chat requests (vLLM issue #5924 on
# meta-llama/Meta-Llama-3-8B: no chat template, use meta-llama/Meta-Llama-3-8B-Instruct). The
# stream's `model` then names the family's instruction-tuned repository,
# https://huggingface.co/<repo>.
# DeepSeek-V3's repository is itself the chat model (its base is DeepSeek-V3-Base).
CHAT_CHECKPOINTS = {
    "llama-2-7b": "meta-llama/Llama-2-7b-chat-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-chat-hf",
    "llama-3-8b": "meta-llama/Meta-Llama-3-8B-Instruct",
    "llama-3-70b": "meta-llama/Meta-Llama-3-70B-Instruct",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "mistral-7b": "mistralai/Mistral-7B-Instruct-v0.3",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
    "qwen2.5-72b": "Qwen/Qwen2.5-72B-Instruct",
}


def chat_served_name(model: Model) -> str:
    """The name a chat stream's `model` field carries for `model` when a server is started on
    its chat checkpoint with no other name given (vLLM's --served-model-name defaults to
    --model): the family's chat-tuned repository where the catalog's is a base model, else the
    catalog's own served name (DeepSeek-V3's repository; the demo model's directory)."""
    return CHAT_CHECKPOINTS.get(model.id, model.served_name)
SSE_PREFIX = "data: "
SSE_END = "\n\n"
# The OpenAI-style stream ends with this sentinel event.
SSE_DONE = "data: [DONE]\n\n"
CHARS_PER_TOKEN_MAX = 100.0
TOKENS_PER_EVENT_MAX = 10_000
BLOCK_SIZE_MAX = 4_096
SECONDS_MAX = 1e6


def _text(chars: int) -> str:
    # ASCII letters: one byte each in UTF-8, so characters and bytes agree.
    return "x" * chars


def sse_chunk_event(*, content: str, model_name: str = CHUNK_MODEL, role: str = "") -> str:
    """One streamed event: `data: ` + a compact chat.completion.chunk JSON + a blank line.

    With `role`, the stream's opening event: vLLM's OpenAI-compatible server (like the OpenAI
    API) first sends a chunk that declares the assistant's role with empty content."""
    delta = {"role": role, "content": content} if role else {"content": content}
    chunk = {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": CHUNK_CREATED,
        "model": model_name,
        "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        ],
    }
    return SSE_PREFIX + json.dumps(chunk, separators=(",", ":")) + SSE_END


def plain_response_body(
    *, content: str, prompt_tokens: int, completion_tokens: int, model_name: str = CHUNK_MODEL
) -> str:
    """The same answer sent in one piece: a compact chat.completion JSON body."""
    body = {
        "id": CHUNK_ID,
        "object": "chat.completion",
        "created": CHUNK_CREATED,
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json.dumps(body, separators=(",", ":"))


def stream_cost(
    *,
    output_tokens: int,
    ttft_seconds: float,
    tpot_seconds: float,
    prompt_tokens: int = 1_000,
    chars_per_token: float = 4.0,
    tokens_per_event: int = 1,
    reasoning_tokens: int = 0,
    model_name: str = CHUNK_MODEL,
) -> Result:
    """Bytes on the wire and waiting time, streamed vs sent whole (bytes, seconds).

    `model_name` is what every event's `model` field repeats: the name the model is served
    under, so a longer name costs bytes in every event.

    `ttft_seconds` is the time to the first token (queue + prefill); `tpot_seconds` the time per
    output token after it; `tokens_per_event` how many tokens the server packs in one event
    (the stream interval). Engines send the first token at once and batch only the later ones,
    so the interval never delays the first text. `reasoning_tokens` are generated before the
    visible answer (a reasoning model's hidden thinking), so the first visible text waits for
    them too; they count in `output_tokens`.
    """
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    tokens_per_event = count_check(
        tokens_per_event, field="tokens_per_event", maximum=TOKENS_PER_EVENT_MAX
    )
    number_check(chars_per_token, field="chars_per_token", maximum=CHARS_PER_TOKEN_MAX)
    number_check(ttft_seconds, field="ttft_seconds", maximum=SECONDS_MAX)
    number_check(tpot_seconds, field="tpot_seconds", maximum=SECONDS_MAX)
    reasoning_tokens = count_check(
        reasoning_tokens, field="reasoning_tokens", minimum=0, maximum=TOKENS_MAX
    )
    if reasoning_tokens >= output_tokens:
        raise ArithmeticInputError(
            field="reasoning_tokens",
            message=f"must be fewer than output_tokens (max_tokens, {output_tokens:,} here): "
            "max_tokens counts the hidden reasoning as well as the visible answer",
        )

    # A later event holds at most the later answer: a stream interval longer than the answer
    # packs all of it into one event.
    event_tokens = min(tokens_per_event, max(1, output_tokens - 1))
    event_chars = max(1, round(chars_per_token * event_tokens))
    event = sse_chunk_event(content=_text(event_chars), model_name=model_name)
    event_bytes = len(event.encode())
    overhead_bytes = event_bytes - event_chars
    # The first token goes out alone at once; the rest in events of `tokens_per_event`.
    events = 1 + math.ceil((output_tokens - 1) / tokens_per_event)
    answer_chars = max(1, round(chars_per_token * output_tokens))
    # An opening event declares the role; every later one carries its share of the text plus
    # the same envelope; [DONE] closes it.
    role_bytes = len(sse_chunk_event(content="", role="assistant",
                                     model_name=model_name).encode())
    stream_bytes = role_bytes + events * overhead_bytes + answer_chars + len(SSE_DONE)
    plain_bytes = len(
        plain_response_body(
            content=_text(answer_chars),
            prompt_tokens=prompt_tokens,
            completion_tokens=output_tokens,
            model_name=model_name,
        ).encode()
    )
    first_text = ttft_seconds
    first_visible = ttft_seconds + reasoning_tokens * tpot_seconds
    full_answer = ttft_seconds + (output_tokens - 1) * tpot_seconds
    rate = event_bytes / (event_tokens * tpot_seconds) if tpot_seconds > 0 else 0.0
    event_held = ", all the later answer," if event_tokens < tokens_per_event else ""
    steps = (
        Step(
            "Bytes per event",
            f"'{SSE_PREFIX.strip()} ' + chat.completion.chunk JSON with "
            f"{count_phrase(event_chars, 'character')} of text "
            f"({count_phrase(event_tokens, 'token')}{event_held} × "
            f"{amount_phrase(chars_per_token, 'characters')}) + blank line",
            event_bytes,
            "B",
            bytes_format(event_bytes),
        ),
        Step(
            "Envelope per event",
            f"{event_bytes:,} B − {event_chars:,} B of text",
            overhead_bytes,
            "B",
            bytes_format(overhead_bytes),
        ),
        Step(
            "Events",
            f"1 for the first token, sent at once + ⌈{output_tokens - 1:,} later tokens ÷ "
            f"{tokens_per_event:,} per event⌉",
            events,
            "events",
            f"{events:,} events",
        ),
        Step(
            "Bytes streamed",
            f"{role_bytes} B opening event (the assistant's role, no text) + {events:,} events "
            f"× {overhead_bytes} B envelope + {answer_chars:,} B of text + {len(SSE_DONE)} B "
            "[DONE]",
            stream_bytes,
            "B",
            bytes_format(stream_bytes),
        ),
        Step(
            "Bytes sent whole",
            "one chat.completion JSON body with the same text and usage",
            plain_bytes,
            "B",
            bytes_format(plain_bytes),
        ),
        Step(
            "Streaming's extra bytes",
            f"{bytes_short(stream_bytes)} ÷ {bytes_short(plain_bytes)}",
            stream_bytes / plain_bytes,
            "×",
            f"{number_format(stream_bytes / plain_bytes)}×",
        ),
        Step(
            "Bandwidth per stream",
            f"{event_bytes:,} B per event ÷ ({event_tokens:,} × {seconds_format(tpot_seconds)} "
            f"per token)",
            rate,
            "B/s",
            bandwidth_format(rate),
        ),
        Step(
            "First token on the wire, streamed",
            f"TTFT {seconds_format(ttft_seconds)}: engines send the first token at once and "
            f"pack only later ones {tokens_per_event} to an event",
            first_text,
            "s",
            seconds_format(first_text),
        ),
        Step(
            "First visible text, streamed",
            f"TTFT {seconds_format(ttft_seconds)} + {reasoning_tokens:,} reasoning tokens × "
            f"{seconds_format(tpot_seconds)}"
            + (" (no hidden reasoning)" if not reasoning_tokens else ""),
            first_visible,
            "s",
            seconds_format(first_visible),
        ),
        Step(
            "First text on screen, sent whole",
            f"TTFT {seconds_format(ttft_seconds)} + {output_tokens - 1:,} × "
            f"{seconds_format(tpot_seconds)}",
            full_answer,
            "s",
            seconds_format(full_answer),
        ),
        Step(
            "Waiting saved by streaming",
            f"{seconds_format(full_answer)} − {seconds_format(first_visible)}",
            full_answer - first_visible,
            "s",
            seconds_format(full_answer - first_visible),
        ),
    )
    return Result(
        values={
            "bytes_per_event": event_bytes,
            "envelope_bytes": overhead_bytes,
            "event_chars": event_chars,
            "events": events,
            "stream_bytes": stream_bytes,
            "plain_bytes": plain_bytes,
            "overhead_ratio": stream_bytes / plain_bytes,
            "bytes_per_second_per_stream": rate,
            "first_text_seconds": first_text,
            "first_visible_seconds": first_visible,
            "full_answer_seconds": full_answer,
            "waiting_saved_seconds": full_answer - first_visible,
        },
        steps=steps,
    )


def abandoned_request(
    *,
    model: str,
    prompt_tokens: int,
    output_tokens: int,
    cut_after_tokens: int,
    step_seconds: float,
    dtype: str | None = None,
    block_size: int = 16,
) -> Result:
    """KV blocks an abandoned request holds, and for how long without cancellation (blocks, s).

    The client goes away after `cut_after_tokens` of `output_tokens` (max_tokens). The cache
    then holds the prompt and every generated token but the newest, which is sampled but not
    yet fed back. Without cancellation the engine generates the rest, one decode step per
    token, each `step_seconds` (when the client leaves before the first token, that one still
    comes from the prefill under way: an answer of n tokens is 1 prefill + n − 1 decode steps);
    with it, the blocks return within one engine step. `block_size` is tokens per KV block;
    `dtype` the KV cache's format (default: the model's own precision).
    """
    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    cut_after_tokens = count_check(
        cut_after_tokens, field="cut_after_tokens", minimum=0, maximum=TOKENS_MAX
    )
    if cut_after_tokens >= output_tokens:
        raise ArithmeticInputError(
            field="cut_after_tokens",
            message=f"must be fewer than output_tokens (max_tokens, {output_tokens:,} here): "
            "a reader who stays to the last token has not left early",
        )
    block_size = count_check(block_size, field="block_size", maximum=BLOCK_SIZE_MAX)
    number_check(step_seconds, field="step_seconds", maximum=SECONDS_MAX)

    per_token = kv_cache(model=model, tokens=1, users=1, dtype=dtype)["bytes_per_token"]
    block_bytes = per_token * block_size
    # The newest token is sampled but not yet fed back, so its K and V are not written yet.
    fed_back = max(cut_after_tokens - 1, 0)
    at_cut = prompt_tokens + fed_back
    blocks_cut = math.ceil(at_cut / block_size)
    # The last token is sampled but never fed back, so its K and V are never written.
    at_end = prompt_tokens + output_tokens - 1
    blocks_end = math.ceil(at_end / block_size)
    remaining = output_tokens - cut_after_tokens
    # The first token comes from prefill; every later one takes a decode step.
    decode_steps = output_tokens - max(cut_after_tokens, 1)
    held = decode_steps * step_seconds
    # Blocks grow linearly from the cut to the end, so the average held is their midpoint.
    block_seconds = (blocks_cut + blocks_end) / 2 * held
    steps = (
        Step(
            "KV bytes per block",
            f"{bytes_short(per_token)} per token × {count_phrase(block_size, 'token')} per block",
            block_bytes,
            "B",
            bytes_format(block_bytes),
        ),
        Step(
            "Tokens in the cache at the cut",
            (f"{prompt_tokens:,} prompt + {fed_back:,} generated and fed back (the newest of "
             f"the {cut_after_tokens:,} is sampled but not yet fed back)")
            if cut_after_tokens else f"{prompt_tokens:,} prompt (the client left before the "
            "first token)",
            at_cut,
            "tokens",
            count_phrase(at_cut, "token"),
        ),
        Step(
            "Blocks held at the cut",
            f"⌈{at_cut:,} ÷ {block_size}⌉",
            blocks_cut,
            "blocks",
            count_phrase(blocks_cut, "block"),
        ),
        Step(
            "Memory held at the cut",
            f"{count_phrase(blocks_cut, 'block')} × {bytes_short(block_bytes)}",
            blocks_cut * block_bytes,
            "B",
            bytes_format(blocks_cut * block_bytes),
        ),
        Step(
            "Tokens generated for nobody without cancellation",
            f"{output_tokens:,} max_tokens − {cut_after_tokens:,}",
            remaining,
            "tokens",
            count_format(remaining, "token"),
        ),
        Step(
            "Time the blocks stay held without cancellation",
            f"{count_format(decode_steps, 'decode step')} × {seconds_format(step_seconds)}"
            + (" (the first token comes from the prefill under way, which adds its own time)"
               if not cut_after_tokens else ""),
            held,
            "s",
            seconds_format(held),
        ),
        Step(
            "Blocks held at the end",
            f"⌈({prompt_tokens:,} + {output_tokens:,} − 1) ÷ {block_size}⌉ (the last token is "
            "never fed back)",
            blocks_end,
            "blocks",
            count_phrase(blocks_end, "block"),
        ),
        Step(
            "Memory held at the end",
            f"{count_phrase(blocks_end, 'block')} × {bytes_short(block_bytes)}",
            blocks_end * block_bytes,
            "B",
            bytes_format(blocks_end * block_bytes),
        ),
        Step(
            "Block-seconds wasted",
            f"({blocks_cut:,} + {blocks_end:,}) ÷ 2 blocks × {seconds_format(held)}",
            block_seconds,
            "block·s",
            f"{number_format(block_seconds)} block·s",
        ),
        Step(
            "Time held with cancellation",
            "freed at the next engine step: at most one step",
            step_seconds,
            "s",
            seconds_format(step_seconds),
        ),
    )
    return Result(
        values={
            "bytes_per_token": per_token,
            "block_bytes": block_bytes,
            "tokens_at_cut": at_cut,
            "blocks_at_cut": blocks_cut,
            "bytes_at_cut": blocks_cut * block_bytes,
            "wasted_tokens": remaining,
            "wasted_decode_steps": decode_steps,
            "held_seconds_without_cancel": held,
            "blocks_at_end": blocks_end,
            "bytes_at_end": blocks_end * block_bytes,
            "block_seconds_wasted": block_seconds,
            "held_seconds_with_cancel": step_seconds,
        },
        steps=steps,
    )


def abandoned_blocks_timeline(
    *,
    blocks_at_cut: int,
    blocks_at_end: int,
    held_seconds_without_cancel: float,
    held_seconds_with_cancel: float,
    points: int = 24,
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """KV blocks an abandoned request holds against seconds since its client left.

    Returns (seconds, blocks without cancellation, blocks with cancellation): without it the
    blocks grow from `blocks_at_cut` to `blocks_at_end` as the engine decodes for nobody, then
    drop to zero; with it they drop to zero after one engine step.
    """
    end = max(held_seconds_without_cancel, held_seconds_with_cancel)
    count = max(points, 3)
    # Evenly spaced times, plus a point just after each release so the drop shows as a drop.
    times = {end * i / (count - 1) for i in range(count)}
    times |= {held_seconds_with_cancel, held_seconds_with_cancel * 1.001,
              held_seconds_without_cancel * 1.001, end * 1.1}
    ordered = sorted(times)
    growth = blocks_at_end - blocks_at_cut
    without = []
    with_cancel = []
    for t in ordered:
        if t <= held_seconds_without_cancel and held_seconds_without_cancel > 0:
            share = t / held_seconds_without_cancel
            without.append(float(math.ceil(blocks_at_cut + growth * share)))
        else:
            without.append(0.0)
        with_cancel.append(float(blocks_at_cut) if t <= held_seconds_with_cancel else 0.0)
    return tuple(ordered), tuple(without), tuple(with_cancel)


def streaming_for_scale(
    *,
    model: str = "llama-3-8b",
    gpu: str = "h100-sxm",
    dtype: str = "bf16",
    prompt_tokens: int = 1_000,
    output_tokens: int = 1_000,
    cut_after_tokens: int = 100,
    batch: int = 32,
    block_size: int = 16,
    chars_per_token: float = 4.0,
    tokens_per_event: int = 1,
    mfu: float = 0.5,
    kv_dtype: str | None = None,
    bandwidth_efficiency: float = 1.0,
    reasoning_tokens: int = 0,
    requests_per_second: float = 10.0,
    abandon_rate: float = 0.1,
    memory_fraction: float = MEMORY_FRACTION_DEFAULT,
    reserve_gb: float = RESERVE_GB_DEFAULT,
) -> Result:
    """Problem 2's whole working: TTFT from prefill, TPOT from a decode step shared by `batch`
    sequences, then `stream_cost` and `abandoned_request` with those times, and the waste of
    abandoned streams as a rate: `requests_per_second` × `abandon_rate` × tokens left."""
    # Imported here: request.py composes the same formulas and this keeps the modules acyclic.
    from problems.arithmetic.request import context_check

    prompt_tokens = count_check(prompt_tokens, field="prompt_tokens", maximum=TOKENS_MAX)
    output_tokens = count_check(output_tokens, field="output_tokens", maximum=TOKENS_MAX)
    context_check(model=model, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
    rps = number_check(requests_per_second, field="requests_per_second", maximum=1e6)
    abandon = fraction_check(abandon_rate, field="abandon_rate", allow_zero=True)
    memory = {"kv_dtype": kv_dtype, "memory_fraction": memory_fraction, "reserve_gb": reserve_gb}
    pre = prefill(model=model, gpu=gpu, prompt_tokens=prompt_tokens, dtype=dtype, mfu=mfu,
                  bandwidth_efficiency=bandwidth_efficiency, **memory)
    dec = decode(model=model, gpu=gpu, batch=batch, context_tokens=prompt_tokens,
                 output_tokens=output_tokens, dtype=dtype, mfu=mfu,
                 bandwidth_efficiency=bandwidth_efficiency, **memory)
    ttft = float(pre["seconds"])
    tpot = float(dec["step_seconds"])
    cost = stream_cost(output_tokens=output_tokens, ttft_seconds=ttft, tpot_seconds=tpot,
                       prompt_tokens=prompt_tokens, chars_per_token=chars_per_token,
                       tokens_per_event=tokens_per_event, reasoning_tokens=reasoning_tokens,
                       model_name=chat_served_name(model_get(model)))
    abandoned = abandoned_request(model=model, prompt_tokens=prompt_tokens,
                                  output_tokens=output_tokens, cut_after_tokens=cut_after_tokens,
                                  step_seconds=tpot, dtype=kv_dtype, block_size=block_size)
    abandoned_per_second = rps * abandon
    # Decode seats taken for nobody: one per decode step left (a token the prefill under way
    # yields, when the client leaves before the first, takes no decode step).
    wasted_rate = abandoned_per_second * float(abandoned["wasted_decode_steps"])
    # Little's law twice: the sequences this traffic keeps running at once (each runs to
    # max_tokens when nobody cancels), and the abandoned ones among them. Their ratio is the
    # share of decode seats spent on nobody; it never exceeds 100%, whatever the batch, unlike
    # the waste over one GPU's output at a batch the traffic may not fill or may overflow.
    running = rps * float(cost["full_answer_seconds"])
    abandoned_running = abandoned_per_second * float(abandoned["held_seconds_without_cancel"])
    seats_share = abandoned_running / running if running > 0 else 0.0
    # Little's law: abandoned streams arriving per second × block-seconds each = blocks held.
    blocks_held = abandoned_per_second * float(abandoned["block_seconds_wasted"])
    bytes_held = blocks_held * float(abandoned["block_bytes"])
    timing = (
        Step("Time to first token (no queue)",
             f"prefill of {count_phrase(prompt_tokens, 'token')} ({pre['bound']}-bound)", ttft,
             "s",
             seconds_format(ttft)),
        Step("Time per output token",
             f"one decode step shared by {count_phrase(batch, 'sequence')} "
             f"({dec['bound']}-bound)", tpot, "s", seconds_format(tpot)),
    )
    waste = (
        Step(
            "Streams abandoned per second",
            f"{amount_phrase(rps, 'requests')}/s × {percent_format(abandon)} abandoned",
            abandoned_per_second,
            "streams/s",
            f"{count_format(abandoned_per_second, 'stream')} per second",
        ),
        Step(
            "Tokens decoded for nobody, per second",
            f"{count_format(abandoned_per_second, 'stream')} per second × "
            f"{count_format(int(abandoned['wasted_decode_steps']), 'decode step')} left each, "
            "without cancellation",
            wasted_rate,
            "tokens/s",
            f"{amount_phrase(wasted_rate, 'tokens')}/s",
        ),
        Step(
            "Sequences running at once (Little's law)",
            f"{amount_phrase(rps, 'requests')}/s × "
            f"{seconds_format(float(cost['full_answer_seconds']))} each, to max_tokens",
            running,
            "sequences",
            number_format(running),
        ),
        Step(
            "Abandoned streams decoding at once (Little's law)",
            f"{count_format(abandoned_per_second, 'stream')} per second × "
            f"{seconds_format(float(abandoned['held_seconds_without_cancel']))} of decode left "
            "each",
            abandoned_running,
            "sequences",
            number_format(abandoned_running),
        ),
        Step(
            "Share of the decode seats spent on nobody",
            f"{number_format(abandoned_running)} ÷ {number_format(running)} sequences at once "
            "on average",
            seats_share,
            "",
            share_phrase(seats_share),
        ),
        Step(
            "KV held by abandoned streams, on average",
            f"{count_format(abandoned_per_second, 'stream')} per second × "
            f"{number_format(float(abandoned['block_seconds_wasted']))} block·s each × "
            f"{bytes_short(float(abandoned['block_bytes']))} per block (Little's law)",
            bytes_held,
            "B",
            bytes_format(bytes_held),
        ),
    )
    values = {**cost.values, **abandoned.values, "ttft_seconds": ttft, "tpot_seconds": tpot,
              "prefill_bound": pre["bound"], "decode_bound": dec["bound"],
              "fits": dec["fits"], "memory_needed_bytes": dec["memory_needed_bytes"],
              "memory_usable_bytes": dec["memory_usable_bytes"],
              "abandoned_per_second": abandoned_per_second,
              "wasted_tokens_per_second": wasted_rate,
              "wasted_share": seats_share,
              "running_sequences": running,
              "abandoned_running": abandoned_running,
              "abandoned_kv_bytes": bytes_held,
              "bytes_at_cut_text": bytes_in(abandoned["bytes_at_cut"], "MB"),
              "bytes_at_end_text": bytes_in(abandoned["bytes_at_end"], "MB"),
              "abandoned_kv_text": bytes_in(bytes_held, "GB", digits=2)}
    return Result(values=values,
                  steps=timing + cost.steps + abandoned.steps + waste + dec.steps[-4:-1])
