"""Calculators for serving: speculative decoding, queueing (p50 vs p99), chunked prefill, prefix
caching, and moving the KV cache between prefill and decode machines."""

from problems import arithmetic as a
from problems.arithmetic.inputs import TOKENS_MAX
from problems.arithmetic.queueing import SERVERS_MAX
from problems.arithmetic.speculative import DRAFT_TOKENS_MAX
from problems.arithmetic.steps import Result
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    CalculatorForm,
    dtype_field,
    gpu_field,
    model_field,
    real_field,
    whole_field,
)
from problems.plots import Mark, Plot, Series, series_values, sweep_points, sweep_whole

MS = 1e3  # seconds → milliseconds on plot axes
RATE_FIELD_MAX = 1e6


def _mfu_field():
    return real_field("Model FLOPs utilisation (MFU)", unit="fraction of peak", initial=0.5,
                      minimum=0.01, maximum=1.0)


class SpeculativeForm(CalculatorForm):
    acceptance = real_field("Acceptance rate α", unit="fraction", initial=0.7, maximum=1.0,
                            help_text="The chance the target model accepts each drafted token.")
    draft_tokens = whole_field("Drafted tokens per step γ", unit="tokens", initial=4,
                               maximum=DRAFT_TOKENS_MAX)
    draft_cost = real_field("Draft step cost", unit="× a target step", initial=0.05,
                            maximum=1e3,
                            help_text="One draft forward pass as a fraction of one target pass.")


def speculative_compute(*, acceptance: float, draft_tokens: int, draft_cost: float) -> Result:
    return a.speculative(acceptance=acceptance, draft_tokens=draft_tokens, draft_cost=draft_cost)


def speculative_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_points(0.0, 0.98, count=50)
    gammas = sorted({max(1, inputs["draft_tokens"] // 2), inputs["draft_tokens"],
                     min(DRAFT_TOKENS_MAX, inputs["draft_tokens"] * 2)})
    series = tuple(
        Series(f"γ = {gamma}", tuple(xs), series_values(xs, lambda x, g=gamma: speculative_compute(
            acceptance=x, draft_tokens=g, draft_cost=inputs["draft_cost"])["speedup"]),
            dash=gamma != inputs["draft_tokens"])
        for gamma in gammas)
    return Plot(title="Speculative decoding: speedup vs acceptance", x_title="Acceptance rate α",
                y_title="Speedup over plain decoding (×)", series=series,
                marks=(Mark(inputs["acceptance"], "your α"),))


class QueueForm(CalculatorForm):
    arrival_rate = real_field("Arrivals λ", unit="requests/s", initial=8.0,
                              maximum=RATE_FIELD_MAX)
    service_rate = real_field("Service rate per server μ", unit="requests/s", initial=10.0,
                              maximum=RATE_FIELD_MAX,
                              help_text="How many requests one server finishes per second.")
    servers = whole_field("Servers c", unit="servers", initial=1, maximum=SERVERS_MAX)


def queue_compute(*, arrival_rate: float, service_rate: float, servers: int) -> Result:
    return a.queue(arrival_rate=arrival_rate, service_rate=service_rate, servers=servers)


def queue_plot(*, inputs: dict, result: Result) -> Plot:
    utilisations = sweep_points(0.05, 0.97, count=40)
    capacity = inputs["servers"] * inputs["service_rate"]

    def at(rho: float) -> Result:
        return queue_compute(**{**inputs, "arrival_rate": rho * capacity})

    xs = tuple(rho * 100 for rho in utilisations)
    return Plot(title="Response time vs utilisation", x_title="Utilisation (%)",
                y_title="Response time (ms)", y_log=True,
                series=(Series("p99", xs, series_values(
                            utilisations, lambda r: at(r)["p99_response_seconds"] * MS)),
                        Series("p50", xs, series_values(
                            utilisations, lambda r: at(r)["p50_response_seconds"] * MS))),
                marks=(Mark(result["utilization"] * 100, "your load"),))


class ChunkedPrefillForm(CalculatorForm):
    model = model_field()
    gpu = gpu_field()
    prompt_tokens = whole_field("Prompt length", unit="tokens", initial=100_000,
                                maximum=TOKENS_MAX)
    chunk_tokens = whole_field("Chunk size", unit="tokens", initial=512, maximum=TOKENS_MAX)
    dtype = dtype_field()
    mfu = _mfu_field()


def chunked_prefill_compute(*, model: str, gpu: str, prompt_tokens: int, chunk_tokens: int,
                            dtype: str, mfu: float) -> Result:
    return a.chunked_prefill(model=model, gpu=gpu, prompt_tokens=prompt_tokens,
                             chunk_tokens=chunk_tokens, dtype=dtype, mfu=mfu)


def chunked_prefill_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_whole(min(64, inputs["prompt_tokens"]), inputs["prompt_tokens"], count=20)

    def at(x: int) -> Result:
        return chunked_prefill_compute(**{**inputs, "chunk_tokens": x})

    return Plot(title="Stall added to decoders vs chunk size", x_title="Chunk size (tokens)",
                y_title="Longest stall one chunk adds (ms)", x_log=True, y_log=True,
                series=(Series("Largest chunk's stall", tuple(xs),
                               series_values(xs, lambda x: at(x)["max_chunk_stall_seconds"] * MS),
                               markers=True),),
                marks=(Mark(inputs["chunk_tokens"], "your chunk"),))


class PrefixCacheForm(CalculatorForm):
    model = model_field()
    gpu = gpu_field()
    prompt_tokens = whole_field("Prompt length", unit="tokens", initial=3_000, maximum=TOKENS_MAX)
    prefix_tokens = whole_field("Shared prefix", unit="tokens", initial=2_000, maximum=TOKENS_MAX,
                                help_text="The system prompt or document every request "
                                          "starts with.")
    hit_rate = real_field("Cache hit rate", unit="fraction", initial=0.8, maximum=1.0)
    dtype = dtype_field()
    mfu = _mfu_field()


def prefix_cache_compute(*, model: str, gpu: str, prompt_tokens: int, prefix_tokens: int,
                         hit_rate: float, dtype: str, mfu: float) -> Result:
    return a.prefix_cache(model=model, gpu=gpu, prompt_tokens=prompt_tokens,
                          prefix_tokens=prefix_tokens, hit_rate=hit_rate, dtype=dtype, mfu=mfu)


def prefix_cache_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_points(0.0, 1.0, count=21)

    def at(x: float) -> Result:
        return prefix_cache_compute(**{**inputs, "hit_rate": x})

    return Plot(title="Prefill time saved per request vs hit rate", x_title="Cache hit rate",
                y_title="Prefill time (ms)",
                series=(Series("Saved by the cache", tuple(xs), series_values(
                            xs, lambda x: at(x)["seconds_saved"] * MS)),
                        Series("The whole prompt's prefill", tuple(xs), series_values(
                            xs, lambda x: at(x)["prefill_seconds"] * MS), dash=True)),
                marks=(Mark(inputs["hit_rate"], "your hit rate"),))


class KvTransferForm(CalculatorForm):
    model = model_field(initial="llama-3-70b")
    prompt_tokens = whole_field("Prompt length", unit="tokens", initial=8_000, maximum=TOKENS_MAX)
    dtype = dtype_field(label="KV cache format")
    gpu = gpu_field(label="GPU (its interconnect is the link unless you give one)")
    link_gb_per_second = real_field(
        "Link bandwidth, one direction", unit="GB/s", initial=None, minimum=0.001, maximum=1e6,
        required=False, help_text="Leave blank to use the GPU's interconnect. A 400 Gb/s "
                                  "network port carries 50 GB/s each way.")
    link_efficiency = real_field("Link efficiency", unit="fraction", initial=0.8, minimum=0.01,
                                 maximum=1.0,
                                 help_text="An assumption: the share of the link's rated "
                                           "bandwidth a transfer achieves.")


def kv_transfer_compute(*, model: str, prompt_tokens: int, dtype: str, gpu: str,
                        link_gb_per_second: float | None, link_efficiency: float) -> Result:
    return a.kv_transfer(model=model, prompt_tokens=prompt_tokens, dtype=dtype, gpu=gpu,
                         link_gb_per_second=link_gb_per_second, link_efficiency=link_efficiency)


def kv_transfer_plot(*, inputs: dict, result: Result) -> Plot:
    top = max(inputs["prompt_tokens"], a.model_get(inputs["model"]).context)
    xs = sweep_whole(min(128, inputs["prompt_tokens"]), top, count=20)
    return Plot(title="KV transfer time vs prompt length", x_title="Prompt (tokens)",
                y_title="Transfer time (ms)", x_log=True, y_log=True,
                series=(Series("KV cache over the link", tuple(xs), series_values(
                    xs, lambda x: kv_transfer_compute(
                        **{**inputs, "prompt_tokens": x})["seconds"] * MS)),),
                marks=(Mark(inputs["prompt_tokens"], "your prompt"),))


calculator_register(Calculator(
    slug="speculative", title="Speculative decoding",
    explanation="A small draft model proposes γ tokens and the target checks them all in one "
                "pass. Each target step then yields (1 − α^(γ+1)) / (1 − α) tokens on average, "
                "but costs the draft passes too: low acceptance or a slow draft makes it a loss.",
    form_class=SpeculativeForm, compute=speculative_compute, plot=speculative_plot, order=70))

calculator_register(Calculator(
    slug="queue", title="Queueing: p50 vs p99",
    explanation="With random arrivals, waits grow as 1 / (capacity − load): near full "
                "utilisation the tail of the response time stretches far beyond the median.",
    form_class=QueueForm, compute=queue_compute, plot=queue_plot, order=80))

calculator_register(Calculator(
    slug="chunked-prefill", title="Chunked prefill",
    explanation="A long prompt split into chunks shares each step with the running decoders; "
                "every chunk stalls their next token by its own compute time, so smaller chunks "
                "mean shorter stalls but more steps.",
    form_class=ChunkedPrefillForm, compute=chunked_prefill_compute, plot=chunked_prefill_plot,
    order=90))

calculator_register(Calculator(
    slug="prefix-cache", title="Prefix caching",
    explanation="When requests share a prompt start whose KV cache is still held, a hit skips "
                "that prefix's prefill entirely; the saving per request is the prefix's share "
                "of the work times the hit rate.",
    form_class=PrefixCacheForm, compute=prefix_cache_compute, plot=prefix_cache_plot, order=100))

calculator_register(Calculator(
    slug="kv-transfer", title="Disaggregation: moving the KV cache",
    explanation="With prefill and decode on different GPUs, the prompt's whole KV cache must "
                "cross the link to the decode GPU: bytes ÷ usable bandwidth. Sent layer by layer "
                "while prefill is still running, much of that time can be hidden.",
    form_class=KvTransferForm, compute=kv_transfer_compute, plot=kv_transfer_plot, order=110))
