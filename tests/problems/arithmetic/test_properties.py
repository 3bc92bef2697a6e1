"""Property tests: linearity, scaling and the queueing blow-up, over many inputs."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from problems.arithmetic import MODELS, decode, kv_cache, queue

models = st.sampled_from(sorted(MODELS))
counts = st.integers(min_value=1, max_value=100_000)


@settings(max_examples=60, deadline=None)
@given(
    model=models,
    tokens=counts,
    users=st.integers(min_value=1, max_value=1000),
    k=st.integers(min_value=2, max_value=50),
)
def test_kv_bytes_are_linear_in_tokens_and_users(
    model: str, tokens: int, users: int, k: int
) -> None:
    # Stay inside the model's context window, which the formula enforces.
    tokens = max(1, min(tokens, MODELS[model].context // k))
    base = kv_cache(model=model, tokens=tokens, users=users)["total_bytes"]
    assert kv_cache(model=model, tokens=tokens * k, users=users)["total_bytes"] == base * k
    assert kv_cache(model=model, tokens=tokens, users=users * k)["total_bytes"] == base * k
    assert base == kv_cache(model=model, tokens=1)["bytes_per_token"] * tokens * users


@settings(max_examples=40, deadline=None)
@given(
    model=models,
    batch=st.integers(min_value=1, max_value=256),
    context=st.integers(min_value=1, max_value=32_000),
    efficiency=st.floats(min_value=0.05, max_value=0.5),
)
def test_doubling_bandwidth_halves_the_decode_floor(
    model: str, batch: int, context: int, efficiency: float
) -> None:
    context = min(context, MODELS[model].context - 1)
    slow = decode(
        model=model,
        gpu="h100-sxm",
        batch=batch,
        context_tokens=context,
        bandwidth_efficiency=efficiency,
    )
    fast = decode(
        model=model,
        gpu="h100-sxm",
        batch=batch,
        context_tokens=context,
        bandwidth_efficiency=2 * efficiency,
    )
    assert math.isclose(fast["memory_seconds"], slow["memory_seconds"] / 2, rel_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    service_rate=st.floats(min_value=0.1, max_value=1000),
    servers=st.integers(min_value=1, max_value=64),
    rho=st.floats(min_value=0.05, max_value=0.98),
)
def test_p99_grows_with_utilisation(service_rate: float, servers: int, rho: float) -> None:
    capacity = service_rate * servers
    lower = queue(arrival_rate=rho * capacity, service_rate=service_rate, servers=servers)
    higher_rho = rho + (1 - rho) / 2
    higher = queue(arrival_rate=higher_rho * capacity, service_rate=service_rate, servers=servers)
    assert higher["p99_response_seconds"] >= lower["p99_response_seconds"]
    assert lower["p99_response_seconds"] >= lower["p50_response_seconds"]


@given(servers=st.integers(min_value=1, max_value=32))
@settings(max_examples=20, deadline=None)
def test_p99_goes_to_infinity_as_utilisation_goes_to_one(servers: int) -> None:
    # As ρ → 1 the queue drains at c·μ − λ → 0, so p99 exceeds any bound.
    p99s = [
        queue(arrival_rate=servers * (1 - 10.0**-k), service_rate=1.0, servers=servers)[
            "p99_response_seconds"
        ]
        for k in range(1, 7)
    ]
    assert p99s == sorted(p99s)
    assert p99s[-1] > 1e5
