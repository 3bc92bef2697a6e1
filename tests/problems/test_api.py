"""The JSON API through Django's test client: every endpoint, defaults, and bad input."""

import json
import math

import pytest
from django.test import Client

ENDPOINTS = {
    "params": {"model": "llama-3-8b"},
    "weights": {"model": "llama-3-8b", "dtype": "bf16"},
    "kv-cache": {"model": "llama-3-8b", "tokens": 1300, "users": 1, "dtype": "bf16"},
    "batch-max": {"model": "llama-3-8b", "gpu": "h100-sxm", "context_tokens": 4096},
    "prefill": {"model": "llama-3-8b", "gpu": "h100-sxm", "prompt_tokens": 1000, "mfu": 0.5},
    "decode": {
        "model": "llama-3-8b",
        "gpu": "h100-sxm",
        "batch": 1,
        "context_tokens": 1000,
        "output_tokens": 300,
        "dtype": "bf16",
    },
    "roofline": {"gpu": "h100-sxm", "dtype": "bf16"},
    "roofline-decode": {"model": "llama-3-8b", "gpu": "h100-sxm", "batch": 32},
    "roofline-batches": {"model": "llama-3-8b", "gpu": "h100-sxm", "batches": "1,8,64,512"},
    "speculative": {"acceptance": 0.8, "draft_tokens": 4},
    "queue": {"arrival_rate": 9, "service_rate": 10},
    "chunked-prefill": {"model": "llama-3-8b", "gpu": "h100-sxm", "prompt_tokens": 8000},
    "prefix-cache": {
        "model": "llama-3-8b",
        "gpu": "h100-sxm",
        "prompt_tokens": 3000,
        "prefix_tokens": 2000,
        "hit_rate": 0.8,
    },
    "kv-transfer": {"model": "llama-3-70b", "prompt_tokens": 4000, "gpu": "h100-sxm"},
    "quantization": {"model": "llama-3-70b", "gpu": "h100-sxm", "to_dtype": "fp8"},
    "moe-memory": {"model": "deepseek-v3", "gpus": 8, "dtype": "fp8"},
    "moe-all-to-all": {"model": "mixtral-8x7b", "ep": 8},
    "cost": {"gpu": "h100-sxm", "tokens_per_second": 2500, "price_per_hour": 2.5},
    "capacity": {
        "daily_users": 100000,
        "requests_per_user": 5,
        "output_tokens": 300,
        "tokens_per_second_per_gpu": 2500,
        "gpu": "h100-sxm",
    },
}


@pytest.fixture
def client() -> Client:
    return Client()


def _no_nan(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    return True


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_every_endpoint_answers_with_results_and_steps(client: Client, name: str) -> None:
    response = client.get(f"/api/calc/{name}", ENDPOINTS[name])
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["steps"] and {"label", "expression", "value", "unit", "display"} <= set(
        body["steps"][0]
    )
    assert _no_nan(body)
    # The raw text too: Python's json would happily write NaN or Infinity.
    assert "NaN" not in response.content.decode() and "Infinity" not in response.content.decode()


def test_field_names_the_pages_rely_on(client: Client) -> None:
    def get(name: str, **params: object) -> dict:
        return client.get(f"/api/calc/{name}", params).json()

    kv = get("kv-cache", model="llama-3-70b", tokens=1000, users=2, dtype="bf16", tp=16)
    assert kv["bytes_per_token"] == 327_680
    assert kv["total_bytes"] == 327_680 * 2000
    assert kv["total_bytes_per_gpu"] == kv["total_bytes"] / 8  # 8 KV heads, replicated
    assert kv["bytes_per_token_per_gpu"] == 327_680 / 8
    weights = get("weights", model="llama-3-8b", dtype="bf16")
    assert (weights["params"], weights["bytes"]) == (8_030_261_248, 16_060_522_496)
    prefill = get("prefill", model="llama-3-8b", gpu="h100-sxm", prompt_tokens=1000, mfu=0.5)
    assert round(prefill["rule_of_thumb_flops"] / 1e13, 1) == 1.6
    assert round(prefill["flops"] / 1e13, 1) == 1.4 and prefill["seconds"] > 0
    assert prefill["bound"] == "compute"
    decode = get(
        "decode",
        model="llama-3-8b",
        gpu="h100-sxm",
        batch=4,
        context_tokens=1000,
        output_tokens=300,
    )
    assert set(decode) >= {
        "bytes_per_step",
        "step_seconds",
        "total_seconds",
        "tokens_per_second",
        "tokens_per_second_per_sequence",
    }
    assert set(get("roofline", gpu="h100-sxm")) >= {
        "peak_flops",
        "bandwidth_bytes_per_second",
        "ridge_flops_per_byte",
    }
    spec = get("speculative", acceptance=0.8, draft_tokens=4)
    assert spec["speedup"] == spec["expected_tokens_per_step"]  # draft_cost defaults to 0
    queue = get("queue", arrival_rate=9, service_rate=10, servers=1)
    assert set(queue) >= {
        "utilization",
        "mean_wait_seconds",
        "mean_response_seconds",
        "p50_response_seconds",
        "p99_response_seconds",
    }
    cost = get("cost", gpu="h100-sxm", tokens_per_second=2500, price_per_hour=2.5)
    assert cost["dollars_per_million_tokens"] == pytest.approx(0.2778, abs=1e-4)


def test_defaults(client: Client) -> None:
    """tp 1; the KV cache in the model's own precision (BF16) whatever the weights' format;
    bandwidth_efficiency and mfu 1, so times are floors; a 90% memory share, a 3.3 GB reserve
    (vLLM's measured 3.05 GiB for Llama 3 8B on an H100)."""
    kv = client.get("/api/calc/kv-cache", {"model": "llama-3-8b", "tokens": 10}).json()
    assert kv["total_bytes_per_gpu"] == kv["total_bytes"]
    fp8 = client.get(
        "/api/calc/decode",
        {"model": "llama-3-8b", "gpu": "h100-sxm", "context_tokens": 100, "dtype": "fp8"},
    ).json()
    assert fp8["kv_bytes_per_step"] == 100 * 131_072
    # 0.9 × CUDA's 79.22 GiB on an H100 (round(79.22 × 2³⁰) = 85,061,827,297 B).
    assert fp8["memory_usable_bytes"] == pytest.approx(85_061_827_297 * 0.9)
    assert fp8["reserve_bytes"] == 3.3e9
    fp8_kv = client.get(
        "/api/calc/decode",
        {"model": "llama-3-8b", "gpu": "h100-sxm", "context_tokens": 100, "dtype": "fp8",
         "kv_dtype": "fp8"},
    ).json()
    assert fp8_kv["kv_bytes_per_step"] == 100 * 65_536
    full = client.get(
        "/api/calc/prefill", {"model": "llama-3-8b", "gpu": "h100-sxm", "prompt_tokens": 1000}
    ).json()
    assert full["compute_seconds"] == pytest.approx(full["flops"] / 989.5e12)
    assert full["seconds"] == max(full["compute_seconds"], full["memory_seconds"])


def test_every_endpoint_comes_from_a_calculator_declaration(client: Client) -> None:
    """No endpoint is written by hand: each API path belongs to exactly one registered
    formula, whose inputs are the endpoint's query parameters."""
    from problems.calculators import calculators_all

    paths = json.loads(client.get("/api/openapi.json").content)["paths"]
    declared = {c.api_path: c for c in calculators_all(listed_only=False) if c.api_path}
    calc_paths = {p.removeprefix("/api/calc") for p in paths if p.startswith("/api/calc/")}
    assert calc_paths == set(declared)
    for path, calculator in declared.items():
        parameters = {p["name"] for p in paths[f"/api/calc{path}"]["get"]["parameters"]}
        assert parameters == {i.name for i in calculator.inputs}, path


def test_new_inputs_are_exposed_with_defaults(client: Client) -> None:
    """kv_dtype, reserve_gb, memory_fraction, the efficiencies and embedding_dtype reach the
    formulas through the API, and leaving them out keeps old calls working."""
    base = {"model": "llama-3-8b", "gpu": "h100-sxm", "context_tokens": 8192, "dtype": "int4"}
    old = client.get("/api/calc/batch-max", base).json()
    assert old["batch"] == 62  # ⌊(76.56 − 5.73 − 3.3) GB ÷ 1.074 GB⌋, test_memory.py
    tighter = client.get("/api/calc/batch-max", {**base, "reserve_gb": 10}).json()
    assert tighter["batch"] < old["batch"]
    slow = client.get("/api/calc/prefill", {"model": "llama-3-8b", "gpu": "h100-sxm",
                                             "prompt_tokens": 20,
                                             "bandwidth_efficiency": 0.5}).json()
    assert slow["bound"] == "memory"
    assert slow["memory_seconds"] == pytest.approx(2 * client.get(
        "/api/calc/prefill", {"model": "llama-3-8b", "gpu": "h100-sxm",
                              "prompt_tokens": 20}).json()["memory_seconds"])


def test_tokens_past_the_context_window_are_a_400_naming_the_field(client: Client) -> None:
    response = client.get("/api/calc/kv-cache", {"model": "llama-3-70b", "tokens": 32768})
    assert response.status_code == 400 and response.json()["field"] == "tokens"
    response = client.get("/api/calc/kv-cache", {"model": "llama-3.1-70b", "tokens": 32768})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("name", "params", "field", "status"),
    [
        ("kv-cache", {"model": "gpt-9", "tokens": 10}, "model", 400),
        ("kv-cache", {"model": "llama-3-8b"}, "tokens", 422),
        ("kv-cache", {"model": "llama-3-8b", "tokens": "many"}, "tokens", 422),
        ("kv-cache", {"model": "llama-3-8b", "tokens": -1}, "tokens", 400),
        ("kv-cache", {"model": "llama-3-8b", "tokens": 0}, "tokens", 400),
        ("kv-cache", {"model": "llama-3-8b", "tokens": 10**40}, "tokens", 400),
        ("kv-cache", {"model": "llama-3-8b", "tokens": 10, "tp": 3}, "tp", 400),
        ("kv-cache", {"model": "llama-3-8b", "tokens": 10, "dtype": "fp3"}, "dtype", 400),
        (
            "prefill",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "prompt_tokens": 10, "mfu": "nan"},
            "mfu",
            400,
        ),
        (
            "prefill",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "prompt_tokens": 10, "mfu": "inf"},
            "mfu",
            400,
        ),
        ("prefill", {"model": "llama-3-8b", "gpu": "tpu-v5", "prompt_tokens": 10}, "gpu", 400),
        ("decode", {"model": "llama-3-8b", "gpu": "h100-sxm", "batch": "1e999"}, "batch", 422),
        (
            "decode",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "bandwidth_efficiency": 2},
            "bandwidth_efficiency",
            400,
        ),
        ("decode", {"model": "llama-3-8b", "gpu": "h100-sxm", "kv_dtype": "x"}, "kv_dtype", 400),
        ("roofline", {"gpu": "a100-80gb-sxm", "dtype": "fp3"}, "dtype", 400),
        (
            "roofline-batches",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "batches": "1,x"},
            "batches",
            400,
        ),
        (
            "roofline-batches",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "batches": "0,2"},
            "batches",
            400,
        ),
        (
            "roofline-batches",
            {"model": "llama-3-8b", "gpu": "h100-sxm", "batches": ",".join(["1"] * 65)},
            "batches",
            400,
        ),
        ("speculative", {"acceptance": 1.5, "draft_tokens": 4}, "acceptance", 400),
        ("queue", {"arrival_rate": 10, "service_rate": 10}, "arrival_rate", 400),
        ("queue", {"arrival_rate": 1, "service_rate": 0}, "service_rate", 400),
        ("queue", {"arrival_rate": 1e300, "service_rate": 1e300}, "arrival_rate", 400),
        ("cost", {"gpu": "h100-sxm", "tokens_per_second": 0}, "tokens_per_second", 400),
        (
            "cost",
            {"gpu": "h100-sxm", "tokens_per_second": 1, "price_per_hour": -2},
            "price_per_hour",
            400,
        ),
        ("moe-all-to-all", {"model": "llama-3-8b", "ep": 2}, "model", 400),
        # Positive-only inputs so small that dividing by them would overflow.
        ("cost", {"gpu": "l4", "tokens_per_second": 1e-310}, "tokens_per_second", 400),
        ("queue", {"arrival_rate": 1e-301, "service_rate": 1e-300}, "arrival_rate", 400),
        (
            "prefill",
            {"model": "llama-3-8b", "gpu": "l4", "prompt_tokens": 10, "mfu": 1e-12},
            "mfu",
            400,
        ),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(
    client: Client, name: str, params: dict, field: str, status: int
) -> None:
    response = client.get(f"/api/calc/{name}", params)
    assert response.status_code == status, response.content
    body = response.json()
    assert body["field"] == field
    assert field in body["detail"]


def test_catalogs_carry_their_sources(client: Client) -> None:
    for kind, count in (("models", 10), ("gpus", 8), ("dtypes", 8)):
        response = client.get(f"/api/catalog/{kind}")
        assert response.status_code == 200
        entries = response.json()
        assert len(entries) >= count
        assert all(entry["source"] for entry in entries)
    gpus = {g["id"]: g for g in client.get("/api/catalog/gpus").json()}
    assert gpus["h100-sxm"]["price_per_hour_assumed"] > 0
    models = {m["id"]: m for m in client.get("/api/catalog/models").json()}
    assert models["deepseek-v3"]["active_params"] < models["deepseek-v3"]["params"]


def test_openapi_schema_lists_every_endpoint(client: Client) -> None:
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for name in ENDPOINTS:
        assert f"/api/calc/{name}" in paths
    parameters = {p["name"] for p in paths["/api/calc/kv-cache"]["get"]["parameters"]}
    assert parameters == {"model", "tokens", "users", "dtype", "tp"}


def test_docs_load_swagger_from_our_own_static_files(client: Client) -> None:
    response = client.get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()
    assert client.get("/static/ninja/swagger-ui-bundle.js").status_code == 200
