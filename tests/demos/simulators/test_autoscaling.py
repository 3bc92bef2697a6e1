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
    fluid_waits,
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


# Waits, hand-worked for the fluid first-come queue (every request's wait, not step averages).

def test_one_overloaded_step_spreads_its_waits_evenly():
    """1,200 requests in one minute (20/s) against 10/s, then none: the request arriving at t
    is served at 2t, so waits run evenly from 0 to 60 s: mean 30 s, p99 59.4 s, and a quarter
    of the requests wait over 45 s. A step average would call every request's wait 30 s."""
    waits = fluid_waits(arrivals=np.array([1200.0, 0.0, 0.0]),
                        service_rps=np.array([10.0, 10.0, 10.0]),
                        backlog_start=np.array([0.0, 600.0, 0.0]), step_seconds=60)
    assert waits["mean"][0] == pytest.approx(30.0)
    assert waits["quantile"](0.99) == pytest.approx(59.4, abs=1e-6)
    assert waits["share_above"](45.0) == pytest.approx(0.25)


def test_replicas_that_join_while_a_request_waits_shorten_its_wait():
    """20 requests/s for two minutes; 10/s served, then 40/s from minute 2. The x-th request
    arrives at x/20 s; up to x = 1,200 it is served at x/10 (wait 0–60 s), beyond that at
    120 + (x − 1,200)/40 (wait 90 − x/40: 60 falling to 30 s). Step means 30 and 45 s; share
    over 45 s = ½ × ¼ + ½ × ½ = 37.5%; p99: (60 − s)/40 = 1% at s = 59.6 s. Draining the
    second minute's queue at the old 10/s would have said 90 s."""
    waits = fluid_waits(arrivals=np.array([1200.0, 1200.0, 0.0, 0.0]),
                        service_rps=np.array([10.0, 10.0, 40.0, 40.0]),
                        backlog_start=np.array([0.0, 600.0, 1200.0, 0.0]), step_seconds=60)
    assert waits["mean"][:2] == pytest.approx([30.0, 45.0])
    assert waits["share_above"](45.0) == pytest.approx(0.375)
    assert waits["quantile"](0.99) == pytest.approx(59.6, abs=1e-6)


def test_a_queue_left_at_the_end_drains_at_the_last_rate_or_never():
    drained = fluid_waits(arrivals=np.array([1200.0]), service_rps=np.array([10.0]),
                          backlog_start=np.array([0.0]), step_seconds=60)
    assert drained["mean"][0] == pytest.approx(30.0)
    stuck = fluid_waits(arrivals=np.array([1200.0]), service_rps=np.array([0.0]),
                        backlog_start=np.array([0.0]), step_seconds=60)
    assert math.isinf(stuck["quantile"](0.99)) and stuck["share_above"](1e9) == 1.0


def test_p99_and_the_slo_share_count_every_request():
    """A fixed replica of 10/s meets one minute of 20/s: waits 0–60 s evenly, plus 0.5 s of
    prefill: p99 59.9 s; with a 45.5 s target, a quarter of the requests miss it."""
    rate = np.array([20.0] + [0.0] * 9)
    demand = {"minute": np.arange(10, dtype=float), "smooth": rate, "rate": rate}
    run = simulate(demand=demand, step_minutes=1, pool=POOL,
                   policy=Policy(kind="static", static_replicas=1), base_ttft_seconds=0.5,
                   ttft_slo_seconds=45.5)
    assert run["p99_ttft"] == pytest.approx(59.9, abs=1e-6)
    assert run["slo_miss_share"] == pytest.approx(0.25)
    assert run["ttft"][0] == pytest.approx(30.5)


def test_the_reactive_step_test_waits_are_worked_by_hand():
    """The step of test_a_rise_is_met_exactly_one_cold_start_later: from minute 30 (T = 0) 50
    requests/s arrive, 10/s are served until minute 41 (T = 660 s), then 50/s, so the 26,400
    queued never drain. A request arriving at T waits 4T while T ≤ 132 s (served at 5T), then
    528 s (= 26,400 ÷ 50) for good. Minute 30's requests wait 120 s on average, minute 40's
    528 s (draining at the 10/s ready then would have said 2,520 s); p99 528 s; over a 60 s
    target: everything from T = 15 s on, (270,000 − 750) of 288,000 requests."""
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="reactive", cold_start_minutes=10),
                   ttft_slo_seconds=60.0)
    assert run["ttft"][30] == pytest.approx(120.0)
    assert run["ttft"][40] == pytest.approx(528.0)
    assert run["ttft"][100] == pytest.approx(528.0)
    assert run["p99_ttft"] == pytest.approx(528.0, abs=1e-6)
    assert run["slo_miss_share"] == pytest.approx((270_000 - 750) / 288_000)


def test_a_replica_is_paid_for_from_the_moment_it_is_asked_for():
    """The same step: 1 replica all 120 minutes, 4 more asked for at minute 31 (booting until
    41, then ready): (120 + 4 × 89) replica-minutes × 2 GPUs ÷ 60 = 15.87 GPU-hours."""
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="reactive", cold_start_minutes=10))
    assert run["booting"][31:41].tolist() == [4] * 10 and run["booting"][41] == 0
    assert run["gpu_hours"] == pytest.approx((120 + 4 * 89) * 2 / 60)


def test_a_warm_pool_refills_with_cold_starts_and_is_paid_throughout():
    """Two pooled replicas join a minute after the rise is seen (minute 31 → 32) while two cold
    ones refill the pool (ready at 41), and two more for the fleet boot cold: paid all along,
    1 + 2 replicas before the rise, 1 + 2 + 2 + 2 while everything is in flight."""
    run = simulate(demand=flat_then_step(10, 50, 30), step_minutes=1, pool=POOL,
                   policy=Policy(kind="warm_pool", cold_start_minutes=10, warm_pool=2,
                                 warm_start_minutes=1))
    assert run["paid"][10] == 3
    assert run["ready"][31] == 1 and run["ready"][32] == 3 and run["ready"][41] == 5
    assert run["standby"][31] == 2 and run["standby"][45] == 2
    assert run["paid"][35] == 7


@pytest.mark.parametrize("rounding", [0.0, 1e-9, -1e-9])
def test_a_step_with_no_replica_keeps_its_requests_waiting_whatever_the_rounding(rounding):
    """600 requests in a minute with nothing serving, then 40/s against 20/s of arrivals. The
    x-th of the first minute arrives at x/10 s and is served at 60 + x/40: waits fall from 60 to
    15 s, mean 37.5 s; the second minute's queue empties at 90 s, so its first 600 wait 15 → 0 s
    (mean 3.75 s over 1,200). p99: 18 of 1,800 wait over s where (60 − s) ÷ 0.075 = 18, s =
    58.65 s; over 30 s: the first 400, 22.2%. A backlog a hair above 600 (rounding) once sorted
    the served curve's later corner first and called every wait 0."""
    waits = fluid_waits(arrivals=np.array([600.0, 1200.0, 0.0]),
                        service_rps=np.array([0.0, 40.0, 40.0]),
                        backlog_start=np.array([0.0, 600.0 + rounding, 0.0]), step_seconds=60)
    assert waits["mean"][:2] == pytest.approx([37.5, 3.75], abs=1e-6)
    assert waits["quantile"](0.99) == pytest.approx(58.65, abs=1e-6)
    assert waits["share_above"](30.0) == pytest.approx(400 / 1800, abs=1e-9)
