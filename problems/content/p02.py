"""Problem 2, streaming over SSE, disconnects and cancellation: the "streaming-cost" calculator
(bytes per event, first text vs whole answer, KV blocks held by an abandoned request) and the
figures its prose quotes, all computed at render time by problems/arithmetic.
"""

import math

from django.http import HttpRequest

from course.openai_api import model_id
from problems.arithmetic.catalog import dtype_get, gpu_get, model_get
from problems.arithmetic.catalog.models import DEMO_MODEL_ID
from problems.arithmetic.memory import embedding_dtype_resolve, weight_bytes_model
from problems.arithmetic.streaming import (
    SSE_DONE,
    abandoned_blocks_timeline,
    chat_served_name,
    sse_chunk_event,
    streaming_for_scale,
)
from problems.arithmetic.units import (
    GB,
    bytes_format,
    count_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import amount_phrase, bytes_phrase, count_phrase, share_phrase
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    bandwidth_input,
    dtype_input,
    gpu_input,
    inputs_normalise,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import Mark, Plot, Series

SLUG = "streaming-cost"
THINKING_EXAMPLE_TOKENS = 500
# Weiss et al., 'What Was Your Prompt? A Remote Keylogging Attack on AI Assistants' (USENIX
# Security 2024, https://arxiv.org/abs/2403.09751), abstract: responses reconstructed accurately
# and topics inferred from token lengths alone.
KEYLOGGING_RECONSTRUCTED = 0.29
KEYLOGGING_TOPIC = 0.55
PREFIX = "p2-stream"
TOKENS_FIELD_MAX = 1_000_000
BATCH_MAX = 4_096


STREAMING_INPUTS = (
    model_input(initial="llama-3-8b", api="llama-3-8b"),
    gpu_input(initial="h100-sxm", api="h100-sxm"),
    dtype_input(label="Weight format"),
    whole_input("prompt_tokens", "Prompt", unit="tokens", initial=1_000, api=1_000,
                maximum=TOKENS_FIELD_MAX),
    whole_input("output_tokens", "max_tokens", unit="tokens", initial=1_000, api=1_000,
                maximum=TOKENS_FIELD_MAX,
                help="What the engine would generate if nobody stopped it."),
    whole_input("cut_after_tokens", "Client leaves after", unit="tokens", initial=100, api=100,
                minimum=0, maximum=TOKENS_FIELD_MAX),
    whole_input("batch", "Sequences sharing each decode step", initial=32, api=32,
                maximum=BATCH_MAX),
    whole_input("block_size", "KV block size", unit="tokens", initial=16, api=16,
                maximum=4_096),
    real_input("chars_per_token", "Text per token", unit="characters", initial=4.0, api=4.0,
               maximum=100.0),
    whole_input("tokens_per_event", "Tokens per event (stream interval)", initial=1, api=1,
                maximum=10_000,
                help="Later tokens are packed this many to an event; the first is sent at once."),
    whole_input("reasoning_tokens", "Hidden reasoning tokens before the answer", unit="tokens",
                initial=0, api=0, minimum=0, maximum=TOKENS_FIELD_MAX,
                help="A reasoning model's thinking: generated, often not shown, before the "
                     "first visible text. It counts inside max_tokens, so it must be fewer."),
    real_input("requests_per_second", "Requests per second", unit="requests/s", initial=10.0,
               api=10.0, minimum=0.001, maximum=1e6),
    real_input("abandon_rate", "Share of streams abandoned", unit="fraction", initial=0.1,
               api=0.1, maximum=1.0,
               help="An assumption: how often readers leave before the answer ends."),
    mfu_input(initial=0.5, api=0.5),
    bandwidth_input(),
    kv_dtype_input(),
    *memory_inputs(),
)


def streaming_cost_plot(*, inputs: dict, result) -> Plot:
    """KV blocks the abandoned request holds against time since its client left."""
    seconds, without, with_cancel = abandoned_blocks_timeline(
        blocks_at_cut=int(result["blocks_at_cut"]), blocks_at_end=int(result["blocks_at_end"]),
        held_seconds_without_cancel=float(result["held_seconds_without_cancel"]),
        held_seconds_with_cancel=float(result["held_seconds_with_cancel"]))
    fits = "" if result["fits"] else " (this batch does not fit in memory: times as if it did)"
    return Plot(
        title="KV blocks held after the client leaves" + fits,
        x_title="Seconds since the client left",
        y_title="KV blocks held",
        series=(Series("Without cancellation", seconds, without),
                Series("Aborted on disconnect", seconds, with_cancel, dash=True)),
        marks=(Mark(float(result["held_seconds_without_cancel"]), "max_tokens reached"),),
    )


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="What streaming costs and saves",
    explanation=("Bytes per event and in all, when the first text appears streamed or sent "
                 "whole, the KV blocks a request keeps after its client leaves, with and "
                 "without cancellation, and what abandoned streams waste per second."),
    inputs=STREAMING_INPUTS,
    compute=streaming_for_scale,
    plot=streaming_cost_plot,
    listed=False,
    api_path="/streaming",
    api_summary="Streaming: bytes per event, first text vs whole answer, abandoned KV blocks",
))

SOURCES: list[tuple[str, str]] = [
    ("WHATWG HTML Living Standard: Server-sent events (the text/event-stream format, "
     "EventSource, Last-Event-ID)",
     "https://html.spec.whatwg.org/multipage/server-sent-events.html"),
    ("OpenAI API reference: streaming chat completions (chat.completion.chunk, data: [DONE])",
     "https://platform.openai.com/docs/api-reference/chat-streaming"),
    ("vLLM documentation: engine arguments (--served-model-name: the name in each response's "
     "model field, by default the --model argument)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("vLLM issue #5924: meta-llama/Meta-Llama-3-8B, a base model, has no chat template; chat "
     "requests belong on meta-llama/Meta-Llama-3-8B-Instruct",
     "https://github.com/vllm-project/vllm/issues/5924"),
    ("Hugging Face: meta-llama/Meta-Llama-3-8B-Instruct, the chat-tuned Llama 3 8B (each "
     "family's -Instruct or -chat repository is its chat checkpoint)",
     "https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct"),
    ("OpenAI Help Center: 'What are tokens and how to count them' (about four characters per "
     "token of English)",
     "https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them"),
    ("vLLM source: AsyncLLM.generate aborts the request when the client disconnects",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/async_llm.py"),
    ("vLLM source: RequestOutputCollector merges streamed deltas when the consumer falls "
     "behind; with a stream interval the first token is still sent at once",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/output_processor.py"),
    ("vLLM source: incremental detokenizer (holding back text for stop strings)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/detokenizer.py"),
    ("vLLM documentation: engine arguments (block size, stream interval)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("SGLang documentation: server arguments (--stream-interval)",
     "https://docs.sglang.ai/advanced_features/server_arguments.html"),
    ("NGINX: ngx_http_proxy_module (proxy_buffering, X-Accel-Buffering, "
     "proxy_ignore_client_abort)", "https://nginx.org/en/docs/http/ngx_http_proxy_module.html"),
    ("NGINX: ngx_http_core_module, send_timeout (closes a connection whose client stops "
     "accepting data)", "https://nginx.org/en/docs/http/ngx_http_core_module.html#send_timeout"),
    ("uvicorn issue 2754: a streaming send waits in flow control (drain) with no timeout of its "
     "own", "https://github.com/Kludex/uvicorn/issues/2754"),
    ("MDN: EventSource (six connections per browser and origin over HTTP/1.1)",
     "https://developer.mozilla.org/en-US/docs/Web/API/EventSource"),
    ("Weiss et al., 'What Was Your Prompt? A Remote Keylogging Attack on AI Assistants' "
     "(token lengths leak through encrypted streams)", "https://arxiv.org/abs/2403.09751"),
    ("OpenAI API reference: stream_options.include_obfuscation (random padding on streamed "
     "chunks)", "https://platform.openai.com/docs/api-reference/chat/create"),
    ("SGLang source: the scheduler streams a request's first token at once, later ones every "
     "stream_interval steps",
     "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/managers/"
     "scheduler_output_processor_mixin.py"),
    ("ASGI HTTP connection scope: the http.disconnect event",
     "https://asgi.readthedocs.io/en/latest/specs/www.html"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (fixed-size KV blocks)", "https://arxiv.org/abs/2309.06180"),
]


# Below this per-stream rate (bytes per second, 1 Mbit/s) streaming's bytes are small for any
# network a reader is on; above it, the rate is worth sizing at the proxy.
SMALL_STREAM_RATE = 125_000
# Streaming saves little when the first visible text comes within this share of the whole
# answer's time of its end (hidden reasoning filling nearly all of max_tokens).
SAVES_LITTLE = 0.1
# A step time under this (seconds) is a byte count no engine reaches: each real step also pays
# fixed costs (launching its kernels, scheduling, sampling) that the count leaves out.
FIXED_COSTS_DOMINATE = 1e-4


def bits_rate(bytes_per_second: float) -> str:
    """A network rate as network people say it: "216 Mbit/s", "6.94 Gbit/s", "343 kbit/s"."""
    bits = bytes_per_second * 8
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits >= scale:
            return f"{number_format(bits / scale)} {unit}"
    return f"{number_format(bits)} bit/s"


def bytes_said(count: float) -> str:
    """Bytes in the decimal unit that reads best: "1.05 GB", "1.4 kB", never "1.4×10⁻⁶ GB"."""
    for scale, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if count >= scale:
            return f"{number_format(count / scale)} {unit}"
    return f"{number_format(count)} B"


def average_count(value: float, noun: str) -> str:
    """An average number of whole things, said as a person would: "about 5 streams", "fewer
    than one stream" (Little's law gives averages, but a stream is never fractional)."""
    if value < 0.5:
        return f"fewer than one {noun}"
    # An average is an estimate: three significant figures, not 148,266,473.
    if value >= 1000:
        value = round(value, 2 - math.floor(math.log10(value)))
    return "about " + count_phrase(value, noun, rounding="nearest")


def _weights_overflow(inputs: dict, usable: float) -> bool:
    """Whether the model's weights and the runtime reserve alone exceed what the engine may use
    on one GPU: then no smaller batch fits, and the model must be split over GPUs."""
    model, dtype = model_get(inputs["model"]), dtype_get(inputs["dtype"])
    weights = weight_bytes_model(model=model, dtype=dtype,
                                 embedding=embedding_dtype_resolve(model=model, dtype=dtype))
    return weights["total"] + inputs["reserve_gb"] * GB > usable


def context(*, request: HttpRequest) -> dict:
    """The figures problem 2's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
        result = state.result
    else:
        # Bad input shows beside the calculator's field, and the shared notice above the
        # Worked answer says the prose keeps the defaults.
        inputs = CALCULATOR.defaults()
        result = streaming_for_scale(**inputs)
    r = result.values
    # The sample is an event of the model the worked answer follows, named as a server serving
    # that checkpoint names it (the calculator's bytes per event count the same name).
    model = model_get(inputs["model"])
    served = chat_served_name(model)
    sample_event = sse_chunk_event(content="Hello", model_name=served)
    engine_id = model_id()
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "model_name": model.name,
        "served_name": served,
        # A base repository has no chat template: the chat stream is its chat-tuned sibling's.
        "chat_checkpoint": bool(model.repo) and served != model.repo,
        "base_repo": model.repo,
        # The base repository vLLM's issue #5924 finds without a chat template (SOURCES).
        "no_template_repo": "meta-llama/Meta-Llama-3-8B",
        # The name this course's own /v1 answers with when the sample's model is the one its
        # engine serves; otherwise the name vLLM gives a checkpoint it was started on.
        "served_by_course": model.served_name == engine_id and model.id == DEMO_MODEL_ID,
        "served_from_repo": bool(model.repo),
        "gpu_name": gpu_get(inputs["gpu"]).name,
        "prompt_tokens": count_phrase(inputs["prompt_tokens"], "token"),
        "output_tokens": f"{inputs['output_tokens']:,}",
        "cut_after_tokens": f"{inputs['cut_after_tokens']:,}",
        "batch": count_phrase(inputs["batch"], "sequence"),
        "block_size": count_phrase(inputs["block_size"], "token"),
        "chars_per_token": number_format(inputs["chars_per_token"]),
        "tokens_per_event": f"{inputs['tokens_per_event']:,}",
        # A real event, shown verbatim so the learner sees what the bytes are.
        "sample_event": sample_event,
        "sample_done": SSE_DONE,
        "r": r,
        "bytes_per_event": f"{int(r['bytes_per_event']):,} B",
        "envelope_bytes": f"{int(r['envelope_bytes']):,} B",
        "event_chars": count_phrase(int(r["event_chars"]), "character"),
        "overhead_ratio": f"{number_format(float(r['overhead_ratio']), digits=2)}×",
        "stream_rate": next(s.display for s in result.steps if s.label == "Bandwidth per stream"),
        "stream_rate_small": float(r["bytes_per_second_per_stream"]) < SMALL_STREAM_RATE,
        "stream_rate_bits": bits_rate(float(r["bytes_per_second_per_stream"])),
        "batch_rate_bits": bits_rate(float(r["bytes_per_second_per_stream"]) * inputs["batch"]),
        # Microsecond steps: the byte count is far below what a real engine's step takes.
        "steps_unreachable": float(r["tpot_seconds"]) < FIXED_COSTS_DOMINATE,
        "ttft": seconds_format(float(r["ttft_seconds"])),
        "tpot": seconds_format(float(r["tpot_seconds"])),
        # A decode step at full bandwidth is a floor, and the prose says so.
        # ... of a batch that fits (otherwise the warning below says the times are "as if").
        "tpot_floor": r["decode_bound"] == "memory" and inputs["bandwidth_efficiency"] >= 1
        and bool(r["fits"]),
        "first_text": seconds_format(float(r["first_text_seconds"])),
        "full_answer": seconds_format(float(r["full_answer_seconds"])),
        "blocks_at_cut": f"{int(r['blocks_at_cut']):,}",
        "blocks_at_cut_text": count_phrase(int(r["blocks_at_cut"]), "block"),
        "blocks_at_end": f"{int(r['blocks_at_end']):,}",
        # With blocks as large as the rest of the answer, the abandoned request needs no new one.
        "blocks_grow": int(r["blocks_at_end"]) > int(r["blocks_at_cut"]),
        "blocks_at_cut_one": int(r["blocks_at_cut"]) == 1,
        "wasted_tokens": f"{int(r['wasted_tokens']):,}",
        "held_without": seconds_format(float(r["held_seconds_without_cancel"])),
        "held_with": seconds_format(float(r["held_seconds_with_cancel"])),
        "block_seconds": number_format(float(r["block_seconds_wasted"])),
        "reasoning_tokens": count_phrase(inputs["reasoning_tokens"], "token"),
        "has_reasoning": inputs["reasoning_tokens"] > 0,
        "keylogging_reconstructed": percent_format(KEYLOGGING_RECONSTRUCTED),
        "keylogging_topic": percent_format(KEYLOGGING_TOPIC),
        # A ratio worth remarking on: streaming at least doubles the bytes (every answer but
        # the shortest, or the most densely packed, at one token per event).
        "stream_larger": float(r["overhead_ratio"]) >= 2,
        "stream_extra": bytes_format(float(r["stream_bytes"]) - float(r["plain_bytes"])),
        "wasted_tokens_text": count_format(int(r["wasted_tokens"]), "token"),
        "one_wasted_step": int(r["wasted_decode_steps"]) == 1,
        "left_before_first": inputs["cut_after_tokens"] == 0,
        # A reader who leaves before the hidden reasoning ends has seen no answer text.
        "left_while_thinking": 0 < inputs["cut_after_tokens"] <= inputs["reasoning_tokens"],
        # A cut with nothing after it to decode (a one-token answer): nothing to waste.
        "no_decode_wasted": int(r["wasted_decode_steps"]) == 0,
        "none_abandoned": inputs["abandon_rate"] == 0,
        "one_token_answer": inputs["output_tokens"] == 1,
        "cut_after_text": count_phrase(inputs["cut_after_tokens"], "token"),
        # A prefill at full efficiency on its binding side is a floor, and the prose says so.
        # (and, as the warning below says, no time is a floor when the batch does not fit).
        "ttft_floor": bool(r["fits"]) and (
            (r["prefill_bound"] == "memory" and inputs["bandwidth_efficiency"] >= 1)
            or (r["prefill_bound"] == "compute" and inputs["mfu"] >= 1)),
        "first_visible": seconds_format(float(r["first_visible_seconds"])),
        # Hidden thinking that fills nearly all of max_tokens leaves streaming almost nothing
        # to save: the first visible text comes within 10% of the whole answer's time.
        "streaming_saves_little": inputs["reasoning_tokens"] > 0
        and float(r["full_answer_seconds"]) - float(r["first_visible_seconds"])
        < SAVES_LITTLE * float(r["full_answer_seconds"]),
        "one_visible_token": inputs["output_tokens"] - inputs["reasoning_tokens"] == 1,
        "streaming_saved": seconds_format(
            float(r["full_answer_seconds"]) - float(r["first_visible_seconds"])),
        # What streaming saves, against the whole answer: the first visible text's wait.
        "first_seen": seconds_format(float(r["first_visible_seconds"])),
        # What a reasoning model's hidden thinking does to the first visible text, at these
        # step times, when nothing else is set: 500 tokens of thinking (an illustration).
        "thinking_example_tokens": f"{THINKING_EXAMPLE_TOKENS:,}",
        "thinking_example": seconds_format(
            float(r["ttft_seconds"]) + THINKING_EXAMPLE_TOKENS * float(r["tpot_seconds"])),
        # "1 request", "10 requests", "0.5 requests": the noun agrees with the rate.
        "requests_per_second": amount_phrase(inputs["requests_per_second"], "requests"),
        "abandon_percent": percent_format(inputs["abandon_rate"]),
        "abandoned_per_second": count_format(float(r["abandoned_per_second"]), "stream"),
        "wasted_rate": amount_phrase(float(r["wasted_tokens_per_second"]), "tokens"),
        "wasted_share": share_phrase(float(r["wasted_share"])),
        "running": average_count(float(r["running_sequences"]), "sequence"),
        "abandoned_running": average_count(float(r["abandoned_running"]), "stream"),
        "abandoned_running_one": average_count(float(r["abandoned_running"]), "stream")
        in ("about 1 stream", "fewer than one stream"),
        "batches_at_batch": count_phrase(
            max(1.0, float(r["running_sequences"]) / inputs["batch"]), "batch",
            rounding="ceil", plural_noun="batches"),
        "gpus_at_batch": count_phrase(max(1.0, float(r["running_sequences"]) / inputs["batch"]),
                                      "GPU", rounding="ceil"),
        "one_gpu_holds_them": float(r["running_sequences"]) <= inputs["batch"],
        "abandoned_kv": bytes_said(float(r["abandoned_kv_bytes"])),
        "fits": r["fits"],
        "memory_needed": bytes_phrase(float(r["memory_needed_bytes"])),
        "memory_usable": bytes_phrase(float(r["memory_usable_bytes"])),
        "weights_overflow": _weights_overflow(inputs, float(r["memory_usable_bytes"])),
    }
