"""GET /metrics: every worker's engine metrics, vLLM's names and types, moving with the load."""

import http.client
import time

import pytest
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from tests.demos.conftest import asgi_server  # noqa: F401  (the uvicorn fixture)

MODEL = "course-lm"
NAMES_AND_TYPES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_success": "counter",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
}


def scrape(port: int) -> dict[str, float]:
    """Sample name (with _total, _count, ...) -> value summed over workers and labels;
    also checks every family's type."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/plain")
    text = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        base = family.name.removesuffix("_total")
        if base in NAMES_AND_TYPES:
            assert family.type == NAMES_AND_TYPES[base], family.name
        for sample in family.samples:
            assert sample.labels.get("worker") and sample.labels.get("model_name") == MODEL
            if "le" in sample.labels:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_metrics_move_with_the_load(asgi_server, celery_worker_process,  # noqa: F811
                                    django_user_model):
    from openai import OpenAI

    from course.api_keys import api_key_create

    user = django_user_model.objects.create_user(username="metrics", password="a-long-pass-1")
    _, raw = api_key_create(user=user, name="metrics")
    client = OpenAI(base_url=f"http://127.0.0.1:{asgi_server}/v1", api_key=raw, max_retries=0)

    deadline = time.monotonic() + 30  # the worker publishes its metrics every second
    while "vllm:generation_tokens_total" not in (before := scrape(asgi_server)):
        assert time.monotonic() < deadline, before
        time.sleep(0.3)
    for name in NAMES_AND_TYPES:
        assert any(k.startswith(name) for k in before), name

    prompt = ("The KV cache holds the keys and values of every token so far, so each decode "
              "step reads them instead of recomputing the whole prompt again and again")
    outputs = [client.completions.create(model=MODEL, prompt=prompt, max_tokens=8,
                                         temperature=0, extra_body={"ignore_eos": True})
               for _ in range(2)]
    generated = sum(o.usage.completion_tokens for o in outputs)
    prompted = sum(o.usage.prompt_tokens for o in outputs)

    def moved() -> dict | None:
        after = scrape(asgi_server)
        grew = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
        return after if grew >= generated else None

    deadline = time.monotonic() + 15
    while (after := moved()) is None:
        assert time.monotonic() < deadline
        time.sleep(0.3)

    def delta(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert delta("vllm:generation_tokens_total") >= generated == 16
    assert delta("vllm:prompt_tokens_total") >= prompted
    for histogram in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                      "vllm:request_queue_time_seconds"):
        assert delta(f"{histogram}_count") >= 2 and delta(f"{histogram}_sum") > 0
    assert delta("vllm:inter_token_latency_seconds_count") >= 2 * 7
    # The same prompt twice: the second finds the first's full blocks in the prefix cache.
    assert delta("vllm:prefix_cache_queries_total") >= prompted
    assert delta("vllm:prefix_cache_hits_total") >= 16
    assert 0.0 <= after["vllm:kv_cache_usage_perc"] <= 1.0
    assert delta("vllm:request_success_total") >= 2
    assert delta("vllm:request_generation_tokens_sum") >= generated
    assert delta("vllm:request_prompt_tokens_sum") >= prompted


@pytest.mark.django_db
def test_metrics_answers_only_allowed_addresses(client):
    with override_settings(METRICS_ALLOWED_IPS=["10.0.0.9"]):
        assert client.get("/metrics").status_code == 403  # the test client is 127.0.0.1
        assert client.get("/metrics", REMOTE_ADDR="10.0.0.9").status_code == 200
    with override_settings(METRICS_ALLOWED_IPS=["*"]):
        assert client.get("/metrics", REMOTE_ADDR="192.0.2.1").status_code == 200


def test_the_fleet_view_labels_each_worker():
    from prometheus_client import CollectorRegistry, generate_latest

    from course.metrics import FleetCollector
    from worker.engine_metrics import EngineMetrics

    texts = {}
    for worker, tokens in (("engine@a", 3), ("engine@b", 5)):
        metrics = EngineMetrics(model_name=MODEL)
        metrics.observe([{"type": "token", "request_id": "r", "index": i, "text": "x"}
                         for i in range(1, tokens + 1)],
                        {"num_requests_running": 1, "num_requests_waiting": 0,
                         "kv_cache_usage_perc": 0.5, "prefix_cache_queries": 0,
                         "prefix_cache_hits": 0})
        texts[worker] = metrics.text().decode()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(texts))
    samples = {(s.name, s.labels["worker"]): s.value
               for f in text_string_to_metric_families(generate_latest(registry).decode())
               for s in f.samples}
    assert samples[("vllm:generation_tokens_total", "engine@a")] == 3
    assert samples[("vllm:generation_tokens_total", "engine@b")] == 5


def test_the_registry_observes_each_gap_and_each_request_mean() -> None:
    """Review: vLLM exports a request's TPOT (the mean of its gaps) beside every gap (ITL);
    the dashboard's TPOT is what the first observes."""
    from worker.engine_metrics import EngineMetrics

    metrics = EngineMetrics(model_name=MODEL)
    stats = {"num_requests_running": 0, "num_requests_waiting": 0, "kv_cache_usage_perc": 0.0,
             "prefix_cache_queries": 0, "prefix_cache_hits": 0}
    finished = [{"type": "finished", "request_id": "a", "metrics": {
                    "ttft": 0.05, "e2e": 0.35, "queue_time": 0.01, "itl": [0.1, 0.1, 0.1]}},
                {"type": "finished", "request_id": "b", "metrics": {
                    "ttft": 0.02, "e2e": 0.52, "queue_time": 0.0, "itl": [0.1, 0.4]}},
                {"type": "finished", "request_id": "c", "metrics": {
                    "ttft": 0.03, "e2e": 0.03, "queue_time": 0.0, "itl": []}}]
    metrics.observe(finished, stats)
    samples = {s.name: s.value
               for f in text_string_to_metric_families(metrics.text().decode())
               for s in f.samples if "le" not in s.labels}
    # Five gaps; a TPOT for every request (0.1 s and 0.25 s, and 0 for the one-token answer,
    # as vLLM observes it), so its count is the finished requests' like E2E's.
    assert samples["vllm:inter_token_latency_seconds_count"] == 5
    assert samples["vllm:inter_token_latency_seconds_sum"] == pytest.approx(0.8)
    assert samples["vllm:request_time_per_output_token_seconds_count"] == 3
    assert samples["vllm:e2e_request_latency_seconds_count"] == 3
    assert samples["vllm:request_time_per_output_token_seconds_sum"] == pytest.approx(0.35)
    assert samples["vllm:time_to_first_token_seconds_count"] == 3


def test_finished_requests_count_by_reason_with_their_token_lengths() -> None:
    """vLLM's request_success_total by finished_reason and its per-request token histograms:
    request a (prompt 12, 3 tokens, stop), b (prompt 700, 40 tokens, length) with a sample b:1
    (the same prompt, 7 tokens, stop), c (prompt 5, aborted after 2). Prompt buckets: 12 falls
    in le=20, 700 (twice) in le=1000; four requests in all."""
    from worker.engine_metrics import EngineMetrics, token_buckets

    assert token_buckets(1024) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
    metrics = EngineMetrics(model_name=MODEL, max_model_len=1024)
    stats = {"num_requests_running": 0, "num_requests_waiting": 0, "kv_cache_usage_perc": 0.0,
             "prefix_cache_queries": 0, "prefix_cache_hits": 0}
    metrics.observe([
        {"type": "queued", "request_id": "a", "prompt_tokens": 12},
        {"type": "queued", "request_id": "b", "prompt_tokens": 700},
        {"type": "queued", "request_id": "c", "prompt_tokens": 5},
        {"type": "forked", "request_id": "b:1", "parent": "b", "shared_blocks": 44},
        {"type": "finished", "request_id": "a", "finish_reason": "stop", "num_output_tokens": 3},
        {"type": "finished", "request_id": "b", "finish_reason": "length",
         "num_output_tokens": 40},
        {"type": "aborted", "request_id": "c", "blocks_freed": 1, "completion_tokens": 2},
        {"type": "finished", "request_id": "b:1", "finish_reason": "stop",
         "num_output_tokens": 7},
    ], stats)
    samples = {(s.name, s.labels.get("finished_reason"), s.labels.get("le")): s.value
               for f in text_string_to_metric_families(metrics.text().decode())
               for s in f.samples}
    assert samples[("vllm:request_success_total", "stop", None)] == 2
    assert samples[("vllm:request_success_total", "length", None)] == 1
    assert samples[("vllm:request_success_total", "abort", None)] == 1
    assert samples[("vllm:request_prompt_tokens_count", None, None)] == 4
    assert samples[("vllm:request_prompt_tokens_sum", None, None)] == 12 + 700 + 5 + 700
    assert samples[("vllm:request_prompt_tokens_bucket", None, "20.0")] == 2  # 12 and 5
    assert samples[("vllm:request_prompt_tokens_bucket", None, "1000.0")] == 4
    assert samples[("vllm:request_generation_tokens_sum", None, None)] == 3 + 40 + 2 + 7
    # A decode gap of 0.6 ms lands in a bucket of its own, not the first one.
    metrics.observe([{"type": "finished", "request_id": "d", "finish_reason": "stop",
                      "num_output_tokens": 2, "metrics": {"itl": [0.0006]}}], stats)
    samples = {(s.name, s.labels.get("le")): s.value
               for f in text_string_to_metric_families(metrics.text().decode())
               for s in f.samples}
    assert samples[("vllm:inter_token_latency_seconds_bucket", "0.0005")] == 0
    assert samples[("vllm:inter_token_latency_seconds_bucket", "0.00075")] == 1
