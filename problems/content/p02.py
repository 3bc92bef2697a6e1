"""Problem 2, streaming over SSE, disconnects and cancellation: the "streaming-cost" calculator
(bytes per event, first text vs whole answer, KV blocks held by an abandoned request) and the
figures its prose quotes, all computed at render time by problems/arithmetic.
"""

from django.http import HttpRequest

from problems.arithmetic.catalog import gpu_get, model_get
from problems.arithmetic.streaming import (
    SSE_DONE,
    abandoned_blocks_timeline,
    sse_chunk_event,
    streaming_for_scale,
)
from problems.arithmetic.units import number_format, seconds_format
from problems.calculators import Calculator, calculator_evaluate, calculator_register
from problems.forms import (
    CalculatorForm,
    dtype_field,
    gpu_field,
    model_field,
    real_field,
    whole_field,
)
from problems.plots import Mark, Plot, Series

SLUG = "streaming-cost"
PREFIX = "p2-stream"
TOKENS_FIELD_MAX = 1_000_000
BATCH_MAX = 4_096


class StreamingCostForm(CalculatorForm):
    model = model_field(initial="llama-3-8b")
    gpu = gpu_field(initial="h100-sxm")
    dtype = dtype_field(label="Precision (weights and KV cache)", initial="bf16")
    prompt_tokens = whole_field("Prompt", unit="tokens", initial=1_000, maximum=TOKENS_FIELD_MAX)
    output_tokens = whole_field("max_tokens", unit="tokens", initial=1_000,
                                maximum=TOKENS_FIELD_MAX,
                                help_text="What the engine would generate if nobody stopped it.")
    cut_after_tokens = whole_field("Client leaves after", unit="tokens", initial=100, minimum=0,
                                   maximum=TOKENS_FIELD_MAX)
    batch = whole_field("Sequences sharing each decode step", initial=32, maximum=BATCH_MAX)
    block_size = whole_field("KV block size", unit="tokens", initial=16, maximum=4_096)
    chars_per_token = real_field("Text per token", unit="characters", initial=4.0,
                                 maximum=100.0)
    tokens_per_event = whole_field("Tokens per event", initial=1, maximum=10_000)


def streaming_cost_plot(*, inputs: dict, result) -> Plot:
    """KV blocks the abandoned request holds against time since its client left."""
    seconds, without, with_cancel = abandoned_blocks_timeline(
        blocks_at_cut=int(result["blocks_at_cut"]), blocks_at_end=int(result["blocks_at_end"]),
        held_seconds_without_cancel=float(result["held_seconds_without_cancel"]),
        held_seconds_with_cancel=float(result["held_seconds_with_cancel"]))
    return Plot(
        title="KV blocks held after the client leaves",
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
                 "whole, and the KV blocks a request keeps after its client leaves, with and "
                 "without cancellation."),
    form_class=StreamingCostForm,
    compute=streaming_for_scale,
    plot=streaming_cost_plot,
    listed=False,
))

SOURCES: list[tuple[str, str]] = [
    ("WHATWG HTML Living Standard: Server-sent events (the text/event-stream format, "
     "EventSource, Last-Event-ID)",
     "https://html.spec.whatwg.org/multipage/server-sent-events.html"),
    ("OpenAI API reference: streaming chat completions (chat.completion.chunk, data: [DONE])",
     "https://platform.openai.com/docs/api-reference/chat-streaming"),
    ("OpenAI Help Center: 'What are tokens and how to count them' (about four characters per "
     "token of English)",
     "https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them"),
    ("vLLM source: AsyncLLM.generate aborts the request when the client disconnects",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/async_llm.py"),
    ("vLLM source: RequestOutputCollector merges streamed deltas when the consumer falls behind",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/output_processor.py"),
    ("vLLM source: incremental detokenizer (holding back text for stop strings)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/v1/engine/detokenizer.py"),
    ("vLLM documentation: engine arguments (block size, stream interval)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("SGLang documentation: server arguments (--stream-interval)",
     "https://docs.sglang.ai/advanced_features/server_arguments.html"),
    ("NGINX: ngx_http_proxy_module (proxy_buffering, X-Accel-Buffering, "
     "proxy_ignore_client_abort)", "https://nginx.org/en/docs/http/ngx_http_proxy_module.html"),
    ("ASGI HTTP connection scope: the http.disconnect event",
     "https://asgi.readthedocs.io/en/latest/specs/www.html"),
    ("Kwon et al., 'Efficient Memory Management for Large Language Model Serving with "
     "PagedAttention' (fixed-size KV blocks)", "https://arxiv.org/abs/2309.06180"),
]


def context(*, request: HttpRequest) -> dict:
    """The figures problem 2's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs, result = dict(state.form.cleaned_data), state.result
    else:
        # Bad input shows beside the calculator's field; the prose keeps the defaults.
        inputs = StreamingCostForm(prefix=PREFIX).defaults()
        result = streaming_for_scale(**inputs)
    r = result.values
    sample_event = sse_chunk_event(content="Hello")
    return {
        "calculator_slug": SLUG,
        "calculator_prefix": PREFIX,
        "inputs_valid": state.result is not None,
        "model_name": model_get(inputs["model"]).name,
        "gpu_name": gpu_get(inputs["gpu"]).name,
        "prompt_tokens": f"{inputs['prompt_tokens']:,}",
        "output_tokens": f"{inputs['output_tokens']:,}",
        "cut_after_tokens": f"{inputs['cut_after_tokens']:,}",
        "batch": f"{inputs['batch']:,}",
        "block_size": f"{inputs['block_size']:,}",
        "chars_per_token": number_format(inputs["chars_per_token"]),
        "tokens_per_event": f"{inputs['tokens_per_event']:,}",
        # A real event, shown verbatim so the learner sees what the bytes are.
        "sample_event": sample_event,
        "sample_done": SSE_DONE,
        "r": r,
        "bytes_per_event": f"{int(r['bytes_per_event']):,} B",
        "envelope_bytes": f"{int(r['envelope_bytes']):,} B",
        "event_chars": f"{int(r['event_chars']):,}",
        "overhead_ratio": f"{number_format(float(r['overhead_ratio']), digits=2)}×",
        "stream_rate": next(s.display for s in result.steps if s.label == "Bandwidth per stream"),
        "ttft": seconds_format(float(r["ttft_seconds"])),
        "tpot": seconds_format(float(r["tpot_seconds"])),
        "first_text": seconds_format(float(r["first_text_seconds"])),
        "full_answer": seconds_format(float(r["full_answer_seconds"])),
        "blocks_at_cut": f"{int(r['blocks_at_cut']):,}",
        "blocks_at_end": f"{int(r['blocks_at_end']):,}",
        "wasted_tokens": f"{int(r['wasted_tokens']):,}",
        "held_without": seconds_format(float(r["held_seconds_without_cancel"])),
        "held_with": seconds_format(float(r["held_seconds_with_cancel"])),
        "block_seconds": number_format(float(r["block_seconds_wasted"])),
    }
