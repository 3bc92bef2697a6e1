"""The autoscaling simulator (demos/simulators/autoscaling.py): the daily curve, each policy's
rules, cold starts, cool-downs, floors, the queue and the GPU-hours paid."""

import math

import numpy as np
import pytest

from demos.simulators.autoscaling import (
    Policy,
    Pool,
    Spike,
    demand_curve,
    diurnal_beta,
    simulate,
)


@pytest.mark.parametrize("ratio", [1.5, 3.0, 6.0])
def test_beta_gives_the_peak_to_average_asked_for(ratio):
    beta = diurnal_beta(ratio)
    assert math.exp(beta) / float(np.i0(beta)) == pytest.approx(ratio, abs=1e-9)


def test_beta_for_three():
    assert diurnal_beta(3.0) == pytest.approx(1.7606, abs=1e-4)
    assert diurnal_beta(1.0) == 0.0


def test_the_noiseless_day_has_the_average_and_the_peak_asked_for():
    day = demand_curve(average_rps=100.0, peak_to_average=3.0, peak_minute=1200)
    assert day["rate"].mean() == pytest.approx(100.0, rel=1e-3)
    assert day["rate"].max() == pytest.approx(300.0, rel=1e-3)
    assert int(np.argmax(day["rate"])) in (1199, 1200)


def test_noise_keeps_the_mean_and_a_spike_multiplies_its_window():
    quiet = demand_curve(average_rps=100.0, peak_to_average=2.0)
    noisy = demand_curve(average_rps=100.0, peak_to_average=2.0, noise_sigma=0.1, seed=3)
    assert noisy["rate"].mean() == pytest.approx(100.0, rel=0.02)
    spiky = demand_curve(average_rps=100.0, peak_to_average=2.0,
                         spike=Spike(start_minute=600, duration_minutes=30, multiplier=3))
    assert np.allclose(spiky["rate"][600:630], 3 * quiet["rate"][600:630])
    assert np.allclose(spiky["rate"][:600], quiet["rate"][:600])


def flat_then_step(low: float, high: float, at: int, steps: int = 120) -> dict:
    rate = np.where(np.arange(steps) < at, low, high).astype(float)
    return {"minute": np.arange(steps, dtype=float), "smooth": rate, "rate": rate}


POOL = Pool(replica_rate=10.0, target_utilisation=1.0, gpus_per_replica=2)


def test_a_rise_is_met_exactly_one_cold_start_later():
    """Load jumps from 10 to 50 requests/s at minute 30: the reactive autoscaler sees it at
    minute 31 (one step of lag) and the four new replicas are ready at 31 + 10 = 41."""
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="reactive", cold_start_minutes=10))
    assert run["ready"][40] == 1 and run["ready"][41] == 5
    assert run["booting"][31] == 4
    # Meanwhile requests queue: 40 requests/s short for 11 minutes, then the queue drains.
    assert run["backlog"][40] == pytest.approx(40 * 60 * 11)
    assert run["minutes_short"] == 11
    assert run["ttft"][40] > 60


def test_a_predictive_autoscaler_is_ready_before_a_rise_it_can_forecast():
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="predictive", cold_start_minutes=10))
    assert run["ready"][30] == 5 and run["minutes_short"] == 0


def test_a_queue_driven_autoscaler_waits_for_the_queue():
    """It cannot see the load below saturation: the first minute of overload builds a queue,
    and only then does it ask for replicas."""
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="queue", cold_start_minutes=10))
    assert run["booting"][30] == 0 and run["booting"][31] > 0
    assert run["ready"][41] >= 5


def test_a_warm_pool_starts_in_seconds():
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="warm_pool", cold_start_minutes=10, warm_pool=4,
                                 warm_start_minutes=1))
    assert run["ready"][32] == 5
    assert run["minutes_short"] == 2
    # The standby replicas are paid for: before the rise, 1 ready + 4 on standby.
    assert run["paid"][10] == 5


def test_scaling_in_waits_for_the_cool_down_and_keeps_the_floor():
    demand = flat_then_step(50, 0, 30)
    pool = Pool(replica_rate=10.0, target_utilisation=1.0, min_replicas=2)
    run = simulate(demand=demand, step_minutes=1, pool=pool,
                   policy=Policy(kind="reactive", cooldown_minutes=15))
    assert run["ready"][44] == 5 and run["ready"][46] == 2
    assert run["ready"].min() == 2


def test_granularity_and_reserve_round_up_per_region():
    """25 requests/s at 10 per replica, 70% busy, with a 3/2 failover reserve: 25 × 1.5 ÷ 7 =
    5.36 replicas, in multiples of 3 regions: 6."""
    pool = Pool(replica_rate=10.0, target_utilisation=0.7, reserve_factor=1.5, granularity=3)
    assert pool.need(25.0) == 6
    assert pool.need(0.0) == 3  # never below the floor, rounded to the regions


def test_gpu_hours_count_every_paid_replica():
    """A static fleet of 4 replicas of 2 GPUs for 120 minutes: 4 × 2 × 2 h = 16 GPU-hours."""
    run = simulate(demand=flat_then_step(10, 10, 0), step_minutes=1, pool=POOL,
                   policy=Policy(kind="static", static_replicas=4))
    assert run["gpu_hours"] == pytest.approx(16.0)
    assert run["peak_paid_gpus"] == 8


def test_an_autoscaled_day_costs_between_following_the_load_and_the_peak():
    day = demand_curve(average_rps=100.0, peak_to_average=3.0)
    pool = Pool(replica_rate=10.0, target_utilisation=0.7)
    static = simulate(demand=day, step_minutes=1, pool=pool, policy=Policy(kind="static"))
    scaled = simulate(demand=day, step_minutes=1, pool=pool,
                      policy=Policy(kind="reactive", cold_start_minutes=10))
    ideal = float(sum(day["rate"])) / (10.0 * 0.7) / 60  # replica-hours, fractional
    assert ideal < scaled["gpu_hours"] < static["gpu_hours"]


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError):
        Policy(kind="magic")


def test_the_longest_queue_is_reported():
    """The reactive pool of the step test above: 40 requests/s short for 11 minutes, so the
    queue peaks at 40 × 60 × 11 = 26,400 requests (problems/arithmetic/coldstart.py's
    spike_backlog predicts the same)."""
    from problems.arithmetic.coldstart import spike_backlog

    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="reactive", cold_start_minutes=10))
    assert run["peak_backlog"] == pytest.approx(26_400)
    assert spike_backlog(demand_rps=50, capacity_rps=10, react_seconds=60,
                         start_seconds=600) == pytest.approx(run["peak_backlog"])
