"""Calculators for serving: speculative decoding, queueing (p50 vs p99), chunked prefill, prefix
caching, and moving the KV cache between prefill and decode machines."""

import functools

from problems import arithmetic as a
from problems.arithmetic.inputs import TOKENS_MAX, USERS_MAX
from problems.arithmetic.queueing import SERVERS_MAX
from problems.arithmetic.speculative import DRAFT_TOKENS_MAX
from problems.arithmetic.steps import Result
from problems.calculators.registry import Calculator, calculator_register
from problems.forms import (
    bandwidth_input,
    dtype_input,
    gpu_input,
    kv_dtype_input,
    memory_inputs,
    mfu_input,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import (
    Mark,
    Plot,
    Series,
    series_fit_split,
    series_values,
    sweep_points,
    sweep_whole,
)

MS = 1e3  # seconds → milliseconds on plot axes
RATE_FIELD_MAX = 1e6


def speculative_plot(*, inputs: dict, result: Result) -> Plot:
    batches = sweep_whole(1, max(512, inputs["batch"]), count=16)
    gammas = sorted({max(1, inputs["draft_tokens"] // 2), inputs["draft_tokens"],
                     min(DRAFT_TOKENS_MAX, inputs["draft_tokens"] * 2)})
    series: list[Series] = []
    for gamma in gammas:
        points = [a.speculative(**{**inputs, "draft_tokens": gamma, "batch": b})
                  for b in batches]
        series.extend(series_fit_split(
            f"γ = {gamma}", batches, tuple(p["speedup"] for p in points),
            tuple(bool(p.values.get("fits", True)) for p in points),
            dash=gamma != inputs["draft_tokens"]))
    series.append(Series("No gain (1×)", (batches[0], batches[-1]), (1.0, 1.0), dash=True))
    return Plot(title=f"Speculative decoding: speedup vs batch at α = {inputs['acceptance']:g}",
                x_title="Batch (sequences)", y_title="Speedup over plain decoding (×)",
                x_log=True, series=tuple(series),
                marks=(Mark(inputs["batch"], "your batch"),))


def queue_plot(*, inputs: dict, result: Result) -> Plot:
    utilisations = sweep_points(0.05, 0.97, count=40)
    capacity = inputs["servers"] * inputs["service_rate"]

    def at(rho: float) -> Result:
        return a.queue(**{**inputs, "arrival_rate": rho * capacity})

    xs = tuple(rho * 100 for rho in utilisations)
    return Plot(title="Response time vs utilisation", x_title="Utilisation (%)",
                y_title="Response time (ms)", y_log=True,
                series=(Series("p99", xs, series_values(
                            utilisations, lambda r: at(r)["p99_response_seconds"] * MS)),
                        Series("p50", xs, series_values(
                            utilisations, lambda r: at(r)["p50_response_seconds"] * MS))),
                marks=(Mark(result["utilization"] * 100, "your load"),))


def chunked_prefill_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_whole(min(16, inputs["prompt_tokens"]), inputs["prompt_tokens"], count=20)

    @functools.cache
    def at(x: int) -> Result:
        return a.chunked_prefill(**{**inputs, "chunk_tokens": x})

    fits = "" if result["fits"] else " (the decoders and prompt do not fit in memory)"
    return Plot(title="Stall a chunk adds to every running decoder vs chunk size" + fits,
                x_title="Chunk size (tokens)",
                y_title="Added to the decoders' next token (ms)", x_log=True, y_log=True,
                series=(Series("Largest chunk's stall", tuple(xs),
                               series_values(xs, lambda x: at(x)["max_chunk_stall_seconds"] * MS),
                               markers=True),
                        Series("The decode step it delays", tuple(xs),
                               series_values(xs, lambda x: at(x)["decode_step_seconds"] * MS),
                               dash=True)),
                marks=(Mark(inputs["chunk_tokens"], "your chunk"),))


def prefix_cache_plot(*, inputs: dict, result: Result) -> Plot:
    xs = sweep_points(0.0, 1.0, count=21)

    def at(x: float) -> Result:
        return a.prefix_cache(**{**inputs, "hit_rate": x})

    fits = "" if result["fits"] else " (the weights and prompt do not fit in memory)"
    return Plot(title="Prefill time saved per request vs hit rate" + fits,
                x_title="Cache hit rate",
                y_title="Prefill time (ms)",
                series=(Series("Saved by the cache", tuple(xs), series_values(
                            xs, lambda x: at(x)["seconds_saved"] * MS)),
                        Series("The whole prompt's prefill", tuple(xs), series_values(
                            xs, lambda x: at(x)["prefill_seconds"] * MS), dash=True)),
                marks=(Mark(inputs["hit_rate"], "your hit rate"),))


def kv_transfer_plot(*, inputs: dict, result: Result) -> Plot:
    top = max(inputs["prompt_tokens"], a.model_get(inputs["model"]).context)
    xs = sweep_whole(min(128, inputs["prompt_tokens"]), top, count=20)
    return Plot(title="KV transfer time vs prompt length", x_title="Prompt (tokens)",
                y_title="Transfer time (ms)", x_log=True, y_log=True,
                series=(Series("KV cache over the link", tuple(xs), series_values(
                    xs, lambda x: a.kv_transfer(
                        **{**inputs, "prompt_tokens": x})["seconds"] * MS)),),
                marks=(Mark(inputs["prompt_tokens"], "your prompt"),))


calculator_register(Calculator(
    slug="speculative", title="Speculative decoding",
    explanation="A small draft model proposes γ tokens and the target checks them all in one "
                "pass. Each target step then yields (1 − α^(γ+1)) / (1 − α) tokens on average, "
                "but costs the draft passes and the verification, which stays as cheap as a "
                "plain step only while the step is memory-bound. At large batches verifying "
                "γ + 1 tokens per sequence turns compute-bound and the gain shrinks, then "
                "reverses.",
    inputs=(
        real_input("acceptance", "Acceptance rate α", unit="fraction", initial=0.7,
                   maximum=1.0, help="The chance the target model accepts each drafted token."),
        whole_input("draft_tokens", "Drafted tokens per step γ", unit="tokens", initial=4,
                    maximum=DRAFT_TOKENS_MAX),
        real_input("draft_cost", "Draft step cost", unit="× a plain target step", initial=0.05,
                   api=0.0, maximum=1e3,
                   help="One draft forward pass as a fraction of one plain target step."),
        model_input(api=None), gpu_input(api=None),
        whole_input("batch", "Batch", unit="sequences", initial=1, api=1, maximum=USERS_MAX),
        whole_input("context_tokens", "Context per sequence", unit="tokens", initial=1_000,
                    api=1, maximum=TOKENS_MAX),
        dtype_input(), kv_dtype_input(), mfu_input(initial=0.5, api=1.0), bandwidth_input(),
        *memory_inputs(),
    ),
    compute=a.speculative, plot=speculative_plot, order=70,
    api_path="/speculative",
    api_summary="Speculative decoding: tokens per step, verification cost, speedup"))

calculator_register(Calculator(
    slug="queue", title="Queueing: p50 vs p99",
    explanation="With random arrivals, waits grow as 1 / (capacity − load): near full "
                "utilisation the tail of the response time stretches far beyond the median.",
    inputs=(
        real_input("arrival_rate", "Arrivals λ", unit="requests/s", initial=8.0,
                   maximum=RATE_FIELD_MAX),
        real_input("service_rate", "Service rate per server μ", unit="requests/s",
                   initial=10.0, maximum=RATE_FIELD_MAX,
                   help="How many requests one server finishes per second."),
        whole_input("servers", "Servers c", unit="servers", initial=1, api=1,
                    maximum=SERVERS_MAX),
    ),
    compute=a.queue, plot=queue_plot, order=80,
    api_path="/queue", api_summary="M/M/c queue: utilisation, waits, p50 and p99"))

CHUNKED_PREFILL_INPUTS = (
    model_input(initial="llama-3.1-8b"), gpu_input(),
    whole_input("prompt_tokens", "Prompt length", unit="tokens", initial=100_000,
                maximum=TOKENS_MAX),
    whole_input("chunk_tokens", "Chunk size", unit="tokens", initial=512, api=512,
                maximum=TOKENS_MAX),
    whole_input("decode_batch", "Decoders sharing each step", unit="sequences", initial=32,
                api=32, minimum=0, maximum=USERS_MAX),
    whole_input("decode_context_tokens", "Their context", unit="tokens", initial=1_000,
                api=1_000, maximum=TOKENS_MAX),
    dtype_input(), mfu_input(), bandwidth_input(), kv_dtype_input(), *memory_inputs(),
)

calculator_register(Calculator(
    slug="chunked-prefill", title="Chunked prefill",
    explanation="A long prompt split into chunks shares each step with the running decoders. "
                "A step takes the larger of its memory time (weights once, the decoders' KV) "
                "and its compute time, so a small chunk can hide under the weight reads the "
                "decoders pay anyway; a large one makes the step compute-bound and delays "
                "every decoder's next token by the step's growth.",
    inputs=CHUNKED_PREFILL_INPUTS,
    compute=a.chunked_prefill, plot=chunked_prefill_plot, order=90,
    api_path="/chunked-prefill", api_summary="Chunked prefill: chunks and the stalls they add"))

calculator_register(Calculator(
    slug="prefix-cache", title="Prefix caching",
    explanation="When requests share a prompt start whose KV cache is still held, a hit skips "
                "that prefix's prefill; the rest still attends to it. The time saved here is one "
                "request's prefill alone, which still reads every weight once, so a short "
                "prefix barely shortens its TTFT; on a loaded server, where prefills are "
                "batched and share those reads, every hit frees its skipped FLOPs.",
    inputs=(
        model_input(), gpu_input(),
        whole_input("prompt_tokens", "Prompt length", unit="tokens", initial=3_000,
                    maximum=TOKENS_MAX),
        whole_input("prefix_tokens", "Shared prefix", unit="tokens", initial=2_000,
                    maximum=TOKENS_MAX,
                    help="The system prompt or document every request starts with."),
        real_input("hit_rate", "Cache hit rate", unit="fraction", initial=0.8, api=1.0,
                   maximum=1.0),
        dtype_input(), mfu_input(), bandwidth_input(), kv_dtype_input(), *memory_inputs(),
    ),
    compute=a.prefix_cache, plot=prefix_cache_plot, order=100,
    api_path="/prefix-cache", api_summary="Prefix caching: FLOPs and time saved"))

calculator_register(Calculator(
    slug="kv-transfer", title="Disaggregation: moving the KV cache",
    explanation="With prefill and decode on different GPUs, the prompt's whole KV cache must "
                "cross the link to the decode GPU: bytes ÷ usable bandwidth. Sent layer by layer "
                "while prefill is still running, much of that time can be hidden.",
    inputs=(
        model_input(initial="llama-3-70b"),
        whole_input("prompt_tokens", "Prompt length", unit="tokens", initial=8_000,
                    maximum=TOKENS_MAX),
        kv_dtype_input(name="dtype", api="bf16"),
        gpu_input(label="GPU (its interconnect is the link unless you give one)", api=None),
        real_input("link_gb_per_second", "Link bandwidth, one direction", unit="GB/s",
                   initial=None, api=None, minimum=0.001, maximum=1e6, required=False,
                   help="Leave blank to use the GPU's interconnect. A 400 Gb/s network port "
                        "carries 50 GB/s each way."),
        real_input("link_efficiency", "Link efficiency", unit="fraction", initial=0.8, api=1.0,
                   minimum=0.01, maximum=1.0,
                   help="An assumption: the share of the link's rated bandwidth a transfer "
                        "achieves."),
    ),
    compute=a.kv_transfer, plot=kv_transfer_plot, order=110,
    api_path="/kv-transfer", api_summary="Disaggregation: KV bytes and transfer time"))


def prefix_routing_plot(*, inputs: dict, result: Result) -> Plot:
    top = max(16, inputs["replicas"] * 2)
    xs = sweep_whole(1, top, count=min(top, 24))

    def at(n: int) -> Result:
        return a.prefix_routing(**{**inputs, "replicas": n})

    return Plot(title="Prefix-cache hit rate vs replicas, by routing",
                x_title="Replicas", y_title="Hit rate (%)",
                series=(Series("Random or round-robin", tuple(xs), series_values(
                            xs, lambda n: at(n)["hit_random"] * 100), markers=True),
                        Series("Prefix-affine (fleet)", tuple(xs), series_values(
                            xs, lambda n: at(n)["hit_affine"] * 100), markers=True),
                        Series("Prefix-affine (busiest replica)", tuple(xs), series_values(
                            xs, lambda n: at(n)["hit_affine_busiest"] * 100), markers=True),
                        Series("Busiest replica's share of traffic, affine (%)", tuple(xs),
                               series_values(xs, lambda n: at(n)["busiest_share"] * 100),
                               dash=True)),
                marks=(Mark(inputs["replicas"], "your fleet"),))


def disagg_plan_plot(*, inputs: dict, result: Result) -> Plot:
    context = a.model_get(inputs["model"]).context or TOKENS_MAX
    top = max(inputs["prompt_tokens"], min(context - inputs["output_tokens"], TOKENS_MAX))
    points = {}
    for x in sweep_whole(min(256, inputs["prompt_tokens"]), top, count=16):
        try:  # past some length a decode replica has no room for one sequence: stop there
            points[x] = a.disagg_plan(**{**inputs, "prompt_tokens": x})
        except a.ArithmeticInputError:
            break
    xs = tuple(points)
    names = [link["name"] for link in result["links"]]
    series = [Series("Prefill (roofline bound)", xs, tuple(
        points[x]["prefill_seconds"] * MS for x in xs), markers=True)]
    for i, name in enumerate(names):
        if not result["links"][i]["applies"]:
            continue  # two replicas this wide cannot share a node's NVLink
        series.append(Series(f"KV over {name}", xs, tuple(
            points[x]["links"][i]["seconds"] * MS for x in xs), dash=True))
    return Plot(title="Prefill time against KV transfer time, by prompt length",
                x_title="Prompt (tokens)", y_title="Time (ms)", x_log=True, y_log=True,
                series=tuple(series), marks=(Mark(inputs["prompt_tokens"], "your prompt"),))


calculator_register(Calculator(
    slug="prefix-routing", title="Prefix caching on a fleet: savings and routing",
    explanation="A system prompt shared by many requests is prefilled once per replica that "
                "keeps it. What a hit saves is the prefix's prefill (FLOPs, GPU-seconds, "
                "TTFT); how often it hits depends on how many prefixes each replica must see "
                "and keep, which routing decides: random routing sends every prefix everywhere, "
                "prefix-affine routing gives each prefix one home.",
    inputs=(
        model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        whole_input("tp", "GPUs per replica", unit="GPUs", initial=4, api=4, maximum=1024,
                    help="Tensor parallel."),
        dtype_input(initial="bf16", api="bf16"), kv_dtype_input(),
        whole_input("system_tokens", "Shared system prompt", unit="tokens", initial=2_000,
                    maximum=TOKENS_MAX),
        whole_input("user_tokens", "Each request's own part", unit="tokens", initial=200,
                    maximum=TOKENS_MAX),
        real_input("requests_per_minute", "Requests", unit="per minute", initial=1_000.0,
                   minimum=0.001, maximum=1e9),
        whole_input("replicas", "Replicas", unit="replicas", initial=8, maximum=10_000),
        whole_input("applications", "Applications (distinct system prompts, equally used)",
                    unit="prompts", initial=40, api=1, maximum=100_000),
        real_input("cache_gb", "KV kept for cached prefixes, per replica", unit="GB",
                   initial=10.0, api=10.0, minimum=0.001, maximum=1e6,
                   help="What the engine leaves to idle cached prefixes beside running "
                        "requests (an assumption)."),
        mfu_input(initial=0.5, api=0.5), bandwidth_input(initial=0.8, api=0.8),
        real_input("request_seconds", "How long a request runs", unit="s", initial=5.0,
                   api=0.0, minimum=0.0, maximum=1e6,
                   help="Prefill plus the whole answer's decode (an assumption: 300 tokens at "
                        "about 16 ms each is about 5 s). Running requests hold their prefixes, "
                        "which hit for free; 0 counts only the idle cache."),
    ),
    compute=a.prefix_routing, plot=prefix_routing_plot, order=105,
    api_path="/prefix-routing",
    api_summary="Prefix caching on a fleet: savings per hit and per day, hit rate by routing"))

calculator_register(Calculator(
    slug="disagg-plan", title="Disaggregated prefill and decode: transfer and pools",
    explanation="Prefill on one replica, decode on another: the prompt's KV must cross a link. "
                "Each GPU sends its own share over its own link; pushed layer by layer while "
                "prefill runs, only a sliver sticks out, while pulled after prefill the whole "
                "transfer adds to TTFT. The pools are sized by the replica-time each request "
                "takes on each side, prompts batched up to a token budget a pass, and set "
                "against colocated replicas at the same TPOT target.",
    inputs=(
        model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
        gpu_input(initial="h100-sxm", api="h100-sxm"),
        whole_input("tp", "GPUs per replica", unit="GPUs", initial=4, api=4, maximum=1024,
                    help="The same for the prefill and the decode replicas."),
        dtype_input(initial="bf16", api="bf16"), kv_dtype_input(),
        whole_input("prompt_tokens", "Prompt", unit="tokens", initial=8_192, maximum=TOKENS_MAX),
        whole_input("output_tokens", "Answer", unit="tokens", initial=512, maximum=TOKENS_MAX),
        real_input("requests_per_second", "Load", unit="requests/s", initial=2.0, api=1.0,
                   minimum=0.001, maximum=1e6),
        real_input("link_efficiency", "Link efficiency", unit="fraction", initial=0.8,
                   api=0.8, minimum=0.01, maximum=1.0,
                   help="An assumption: the share of a link's line rate a transfer achieves."),
        real_input("mfu_prefill", "Prefill MFU", unit="fraction", initial=0.5, api=0.5,
                   minimum=0.01, maximum=1.0),
        real_input("mfu_decode", "Decode MFU", unit="fraction", initial=0.5, api=0.5,
                   minimum=0.01, maximum=1.0),
        bandwidth_input(initial=0.8, api=0.8),
        real_input("tpot_target_ms", "Time per output token target", unit="ms", initial=50.0,
                   api=50.0, minimum=1.0, maximum=1_000.0),
        *memory_inputs(),
        whole_input("prefill_token_budget", "Prefill tokens per pass", unit="tokens",
                    initial=8_192, api=8_192, maximum=TOKENS_MAX,
                    help="How many prompt tokens a loaded prefill replica packs into one pass "
                         "(vLLM's max_num_batched_tokens). Short prompts share a pass and its "
                         "weight reads; a longer prompt is chunked."),
    ),
    compute=a.disagg_plan, plot=disagg_plan_plot, order=115,
    api_path="/disagg-plan",
    api_summary="Disaggregation: KV per prompt over three links against prefill; pool ratio"))
