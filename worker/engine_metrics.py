"""The shared engine's Prometheus metrics, with vLLM's names and types.

Names follow vLLM's v1 engine (vllm/v1/metrics/loggers.py), so dashboards and alerts written
for vLLM read this engine too: gauges of running and waiting requests and KV-cache usage (a
fraction, 1 = full), counters of prefix-cache queries and hits (in tokens), prompt and
generation tokens and preemptions, finished requests by finish reason
(`request_success_total`), histograms of each finished request's prompt and generation tokens,
and histograms of time to first token, inter-token
latency (one observation per gap), time per output token (one per request: the mean of its
gaps), end-to-end latency and queue time (seconds). Labels: `model_name`, `engine`.

Each worker keeps its own registry, fed from the engine loop's events; it publishes the
registry's text to Redis (`metrics_publish`) every second, and the web process serves every
live worker's text at /metrics with a `worker` label added (course/metrics.py). Workers are
separate processes, often on separate machines, so prometheus_client's multiprocess mode
(files in one shared directory) does not apply.
"""

import redis
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# No `_created` series: they would read as extra gauges once relayed in the text format
# (vLLM turns them off too).
disable_created_metrics()

METRICS_KEY_PREFIX = "course:metrics:"
METRICS_TTL_S = 15  # a worker that stops publishing drops out of /metrics after this

# Bucket bounds in seconds, at this engine's scale: the demo model decodes a token in about a
# millisecond on two CPU cores (0.5 ms idle), so the inter-token buckets start at 0.1 ms
# (vLLM's start at 10 ms, where 94% of this engine's gaps fell into the first bucket), and a
# whole answer takes from a few milliseconds to a few seconds.
_TTFT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
_ITL_BUCKETS = (0.0001, 0.0002, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075,
                0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_REQUEST_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.5,
                    2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0)


def token_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's bounds for its prompt- and generation-token histograms: 1, 2, 5, 10, 20, 50, ...
    up to the model's context (vllm/v1/metrics/loggers.py, build_1_2_5_buckets)."""
    bounds, scale = [], 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return tuple(bounds)
            bounds.append(mantissa * scale)
        scale *= 10


def metrics_key(hostname: str) -> str:
    return f"{METRICS_KEY_PREFIX}{hostname}"


class EngineMetrics:
    """Feeds one registry from a loop's events: `observe(events, stats)` after every step."""

    def __init__(self, *, model_name: str, engine: str = "0", max_model_len: int = 1024) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name", "engine"]
        values = (model_name, engine)
        r = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=r).labels(*values)

        def histogram(name: str, doc: str, buckets: tuple) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(*values)

        self.running = gauge("vllm:num_requests_running",
                             "Requests admitted and running (holding KV blocks).")
        self.waiting = gauge("vllm:num_requests_waiting", "Requests queued for admission.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc",
                              "Fraction of the KV-cache blocks in use (1 = full).")
        self.prefix_queries = counter("vllm:prefix_cache_queries",
                                      "Prompt tokens looked up in the prefix cache.")
        self.prefix_hits = counter("vllm:prefix_cache_hits",
                                   "Prompt tokens found in the prefix cache.")
        self.preemptions = counter("vllm:num_preemptions",
                                   "Requests preempted (blocks freed, to be recomputed).")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Prompt tokens prefilled.")
        self.generation_tokens = counter("vllm:generation_tokens", "Output tokens generated.")
        self.ttft = histogram("vllm:time_to_first_token_seconds",
                              "Seconds from arrival to the first output token.", _TTFT_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds",
                             "Seconds between consecutive output tokens of a request.",
                             _ITL_BUCKETS)
        # vLLM's per-request TPOT (decode time ÷ (output tokens − 1), 0 for a one-token
        # answer), beside the per-gap ITL.
        self.tpot = histogram("vllm:request_time_per_output_token_seconds",
                              "Each request's mean gap between output tokens (its TPOT).",
                              _ITL_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds",
                             "Seconds from arrival to the end of a request.", _REQUEST_BUCKETS)
        self.queue_time = histogram("vllm:request_queue_time_seconds",
                                    "Seconds a request waited before its first step.",
                                    _REQUEST_BUCKETS)
        # Per finished request, as vLLM: how it ended, and its prompt and output lengths.
        self.success = Counter("vllm:request_success", "Requests finished, by finish reason.",
                               [*labels, "finished_reason"], registry=r)
        for reason in ("stop", "length", "abort"):
            self.success.labels(*values, reason)  # every reason shows, at 0 until it happens
        self._labels = values
        tokens = token_buckets(max_model_len)
        self.request_prompt_tokens = histogram("vllm:request_prompt_tokens",
                                               "Prompt tokens of each finished request.", tokens)
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Output tokens of each finished request.", tokens)
        self._prompt_len: dict[str, int] = {}
        self._prompt_len_all: dict[str, int] = {}  # kept to the request's end
        self._prefix_seen = (0, 0)  # the engine's cumulative (queries, hits) at the last step

    def observe(self, events: list[dict], stats: dict) -> None:
        for event in events:
            kind, request_id = event["type"], event.get("request_id")
            if kind == "queued":
                self._prompt_len[request_id] = int(event["prompt_tokens"])
                self._prompt_len_all[request_id] = int(event["prompt_tokens"])
            elif kind == "token":
                self.generation_tokens.inc()
                if event.get("index") == 0:
                    # The prompt's prefill is done once the first token exists.
                    self.prompt_tokens.inc(self._prompt_len.get(request_id, 0))
            elif kind == "forked":  # a sample of an n > 1 request: its parent's prompt
                self._prompt_len_all[request_id] = self._prompt_len_all.get(event["parent"], 0)
            elif kind == "preempted":
                self.preemptions.inc()
            elif kind == "finished":
                self._prompt_len.pop(request_id, None)
                self._request_end(request_id, event.get("finish_reason", "stop"),
                                  int(event.get("num_output_tokens", 0)))
                m = event.get("metrics", {})
                for value, histogram in ((m.get("ttft"), self.ttft), (m.get("e2e"), self.e2e),
                                         (m.get("queue_time"), self.queue_time)):
                    if value is not None:
                        histogram.observe(value)
                gaps = m.get("itl") or []
                for gap in gaps:
                    self.itl.observe(gap)
                # One TPOT per finished request, as vLLM observes it: a one-token answer has
                # no gap and counts 0 (vllm/v1/metrics/stats.py), so the count matches E2E's.
                self.tpot.observe(sum(gaps) / len(gaps) if gaps else 0.0)
            elif kind == "aborted":
                self._prompt_len.pop(request_id, None)
                self._request_end(request_id, "abort", int(event.get("completion_tokens", 0)))
        self.running.set(stats["num_requests_running"])
        self.waiting.set(stats["num_requests_waiting"])
        self.kv_usage.set(stats["kv_cache_usage_perc"])
        queries, hits = stats["prefix_cache_queries"], stats["prefix_cache_hits"]
        seen_queries, seen_hits = self._prefix_seen
        if queries >= seen_queries and hits >= seen_hits:  # a fresh engine restarts at zero
            self.prefix_queries.inc(queries - seen_queries)
            self.prefix_hits.inc(hits - seen_hits)
        self._prefix_seen = (queries, hits)

    def _request_end(self, request_id: str, reason: str, output_tokens: int) -> None:
        self.success.labels(*self._labels, reason).inc()
        self.request_prompt_tokens.observe(self._prompt_len_all.pop(request_id, 0))
        self.request_generation_tokens.observe(output_tokens)

    def text(self) -> bytes:
        """The registry in Prometheus's text format."""
        return generate_latest(self.registry)


def metrics_publish(client: redis.Redis, *, hostname: str, text: bytes,
                    ttl_s: int = METRICS_TTL_S) -> None:
    client.set(metrics_key(hostname), text, ex=ttl_s)
