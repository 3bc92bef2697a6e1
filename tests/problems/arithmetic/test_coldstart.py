"""Cold starts, ramp headroom and warm pools (problems/arithmetic/coldstart.py), worked by hand."""

import pytest

from problems.arithmetic.coldstart import (
    autoscale,
    cold_start_parts,
    monthly_cost,
    ramp_headroom,
    replicas_for,
    spike_backlog,
)
from problems.arithmetic.errors import ArithmeticInputError

DEFAULTS = dict(model="llama-3-70b", dtype="bf16", gpus_per_replica=4, node_minutes=4.0,
                image_gb=10.0, image_gbps=0.5, load_gbps=1.0, warmup_seconds=60.0,
                react_seconds=60.0, load_rps=40.0, replica_rps=2.0, utilisation=0.7,
                ramp_per_minute=0.02, warm_start_seconds=10.0, standby_cost=1.0,
                fast_load_gbps=8.0, price_per_hour=2.5)


def test_parts_add_up():
    """141.1 GB at 2 GB/s is 70.55 s; 10 GB at 0.5 GB/s 20 s; + 240 s node + 60 s warm-up."""
    p = cold_start_parts(node_seconds=240, image_bytes=10e9, image_bandwidth=0.5e9,
                         weight_bytes=141.1e9, load_bandwidth=2e9, warmup_seconds=60)
    assert p["weights"] == pytest.approx(70.55)
    assert p["image"] == pytest.approx(20)
    assert p["total"] == pytest.approx(390.55)


def test_ramp_headroom():
    """2% a minute for 60 s + 6 min: 14%."""
    assert ramp_headroom(slope_per_minute=0.02, react_seconds=60,
                         start_seconds=360) == pytest.approx(0.14)


def test_replicas_and_cost():
    """40 ÷ (2 × 0.7) = 28.6 → 29; 5 replicas × 4 GPUs × $2.50 × 730 h = $36,500."""
    assert replicas_for(load_rps=40, replica_rps=2, utilisation=0.7) == 29
    assert replicas_for(load_rps=2.8, replica_rps=2, utilisation=0.7) == 2
    assert monthly_cost(replicas=5, gpus_per_replica=4, price_per_hour=2.5) == 36_500


def test_the_worked_answer_at_the_defaults():
    """Llama 3 70B in BF16 is 141,107,412,992 B: 141.1 s at 1 GB/s; cold start 240 + 20 + 141.1
    + 60 = 461.1 s. Headroom 2% × (1 + 7.685) min = 17.37%: ⌈40 × 1.1737 ÷ 1.4⌉ = ⌈33.53⌉ = 34,
    5 more than 29, $36,500 a month. Warm pool: 2% × (70 s) = 2.33% → ⌈29.24⌉ = 30, one more
    running and a pool of 4; at full standby cost the same $36,500. At 8 GB/s the weights take
    17.6 s, the cold start 337.6 s, headroom 13.25% → ⌈32.36⌉ = 33: 4 replicas, $29,200."""
    r = autoscale(**DEFAULTS)
    assert r["weight_bytes"] == 141_107_412_992
    assert r["cold_start_seconds"] == pytest.approx(461.107, abs=1e-3)
    assert r["headroom"] == pytest.approx(0.17370, abs=1e-5)
    assert (r["replicas"], r["extra_replicas"]) == (29, 5)
    assert r["cost_headroom"] == 36_500
    assert (r["extra_replicas_warm"], r["warm_pool"]) == (1, 4)
    assert r["cost_warm_pool"] == 36_500
    assert r["fast_cold_start_seconds"] == pytest.approx(337.638, abs=1e-3)
    assert (r["extra_replicas_fast"], r["cost_fast_load"]) == (4, 29_200)


def test_a_shared_pool_is_cheaper():
    """Half the standby cost: (1 + 4 × 0.5) × 4 × $2.50 × 730 = $21,900."""
    assert autoscale(**{**DEFAULTS, "standby_cost": 0.5})["cost_warm_pool"] == 21_900


@pytest.mark.parametrize(("field", "value"), [
    ("load_gbps", 0.0), ("utilisation", 0.0), ("model", "nope"), ("ramp_per_minute", 2.0)])
def test_bad_inputs_name_their_field(field, value):
    with pytest.raises(ArithmeticInputError) as caught:
        autoscale(**{**DEFAULTS, field: value})
    assert caught.value.field == field


def test_spike_backlog():
    """40 requests/s short for 60 s + 600 s: 26,400 requests; a pool of 30 requests/s joining
    after 60 + 30 s leaves 40 × 90 + 10 × 570 = 9,300; capacity above demand queues nothing."""
    assert spike_backlog(demand_rps=50, capacity_rps=10, react_seconds=60,
                         start_seconds=600) == pytest.approx(26_400)
    assert spike_backlog(demand_rps=50, capacity_rps=10, react_seconds=60, start_seconds=600,
                         pool_rps=30, pool_start_seconds=30) == pytest.approx(9_300)
    assert spike_backlog(demand_rps=5, capacity_rps=10, react_seconds=60,
                         start_seconds=600) == 0
