"""A span of load (a day by default) against a pool of replicas that an autoscaler resizes, where
every new replica takes a cold start to become ready.

Demand: a daily curve whose peak-to-average ratio is an input, minute-to-minute noise, and an
optional spike. The pool: each ready replica serves up to `replica_rate` requests/s; the
autoscaler aims to keep ready replicas at most `target_utilisation` busy, with extra capacity
held for failover (`reserve_factor`) and `headroom` on top, in multiples of `granularity`
(one per region) and never below `min_replicas`. Policies:

- `static`: a fixed fleet, all ready from the start (by default sized for the day's peak).
- `reactive`: sizes for the load it saw in the last step (a metrics-driven autoscaler on KV use
  or tokens/s); new replicas arrive a cold start later.
- `queue`: scales up only once requests wait (queue depth as the signal), sized to serve the
  load and drain the queue; scales down like `reactive`.
- `predictive`: sizes for the load forecast one cold start ahead (the smooth daily curve,
  which knows neither the noise nor a spike) or the load seen, whichever is larger.
- `warm_pool`: `reactive`, plus `warm_pool` replicas kept loaded on standby (paid) that become
  ready in `warm_start_minutes`; the standby pool refills with cold starts.

Every policy scales in only after the surplus has lasted `cooldown_minutes`.

Requests that find no free capacity wait in a first-come queue, modelled as a fluid: requests
arrive evenly through each step, ready replicas serve up to replicas × rate while a queue
stands, the rest carries over. A request's wait is exact for that fluid: the time from its
arrival until everything that arrived before it has been served, at the capacity each later
step really had (replicas that join while it waits shorten its wait), and past the end of the
span at the last step's capacity. Its time to first token is `base_ttft` plus that wait, and
the p99 and the share over the target are taken over every request, not over step averages.
Random queueing below capacity (problem 17) is left out: waits here come from capacity falling
short of the load. GPU-hours count every replica paid for, from the step it is asked for:
ready, booting (its whole cold start) and on standby.

Used by problem 20 (every policy on the same day with a spike, the worst queue set against
`problems.arithmetic.coldstart.spike_backlog`) and problem 25 (a fleet's decode
and prefill pools over a day). Plain numpy; a day at one-minute steps takes a few milliseconds
per policy.
"""

import math
from dataclasses import dataclass

import numpy as np

POLICIES = ("static", "reactive", "queue", "predictive", "warm_pool")
STEPS_MAX = 20_000  # a week at half-minute steps
QUEUE_DRAIN_SECONDS = 300.0  # the queue policy sizes to empty a backlog in five minutes


def diurnal_beta(peak_to_average: float) -> float:
    """The β of a daily curve e^(β cos θ) / I₀(β), whose mean over the day is 1, so that its peak
    e^β / I₀(β) equals `peak_to_average` (≥ 1). Bisection; 3 → 1.7606."""
    if peak_to_average < 1:
        raise ValueError("peak_to_average must be at least 1")
    if peak_to_average == 1:
        return 0.0

    def peak(beta: float) -> float:
        # e^β / I₀(β) with I₀ scaled by e^-β (np.i0 overflows past β ≈ 700).
        return 1.0 / _i0_scaled(beta)

    low, high = 0.0, 1.0
    while peak(high) < peak_to_average:
        high *= 2
        if high > 1e7:
            raise ValueError("peak_to_average too large")
    for _ in range(200):
        middle = (low + high) / 2
        if peak(middle) < peak_to_average:
            low = middle
        else:
            high = middle
        if high - low < 1e-13 * max(1.0, high):
            break
    return (low + high) / 2


def _i0_scaled(beta: float) -> float:
    """I₀(β) e^(−β), stable for large β (asymptotic series past 500)."""
    if beta < 500:
        return float(np.i0(beta)) * math.exp(-beta)
    return (1 + 1 / (8 * beta) + 9 / (128 * beta**2)) / math.sqrt(2 * math.pi * beta)


@dataclass(frozen=True)
class Spike:
    """Demand multiplied by `multiplier` from `start_minute` for `duration_minutes`."""

    start_minute: float
    duration_minutes: float
    multiplier: float


def demand_curve(*, average_rps: float, peak_to_average: float, peak_minute: float = 20 * 60,
                 minutes: float = 1_440, step_minutes: float = 1.0, noise_sigma: float = 0.0,
                 spike: Spike | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Requests/s in each step of `step_minutes` over `minutes` (requests/s).

    `smooth`: the daily curve average × e^(β cos(2π(t − peak)/day)) / I₀(β), mean `average_rps`
    over a whole day and peak `peak_to_average` × that. `rate`: the same with lognormal noise
    of σ `noise_sigma` per step (mean 1) and the `spike`, what actually arrives. `minute`: each
    step's start.
    """
    steps = int(round(minutes / step_minutes))
    if not 1 <= steps <= STEPS_MAX:
        raise ValueError(f"between 1 and {STEPS_MAX} steps")
    beta = diurnal_beta(peak_to_average)
    minute = np.arange(steps) * step_minutes
    middle = minute + step_minutes / 2
    smooth = average_rps * np.exp(beta * (np.cos(2 * np.pi * (middle - peak_minute) / 1_440) - 1)
                                  ) / _i0_scaled(beta)
    rng = np.random.default_rng(seed)
    noise = np.exp(rng.normal(0.0, noise_sigma, steps) - noise_sigma**2 / 2) if noise_sigma else 1
    rate = smooth * noise
    if spike is not None:
        inside = (middle >= spike.start_minute) & (
            middle < spike.start_minute + spike.duration_minutes)
        rate = np.where(inside, rate * spike.multiplier, rate)
    return {"minute": minute, "smooth": smooth, "rate": np.asarray(rate, dtype=float)}


@dataclass(frozen=True)
class Pool:
    """What one replica serves and how the pool is sized.

    `replica_rate`: requests/s one ready replica serves at full load. `target_utilisation`:
    how busy the autoscaler lets ready replicas run. `reserve_factor`: capacity held on top for
    failover (R/(R − 1) to survive losing one of R regions). `granularity`: replicas come in
    multiples of it (one per region). `gpus_per_replica`: for GPU-hours.
    """

    replica_rate: float
    gpus_per_replica: int = 1
    target_utilisation: float = 0.7
    reserve_factor: float = 1.0
    granularity: int = 1
    min_replicas: int = 1
    max_replicas: int = 1_000_000

    def need(self, rate: float, *, headroom: float = 0.0) -> int:
        """Replicas the autoscaler wants for `rate` requests/s: rounded up to whole multiples of
        the granularity, never below the floor (itself a whole multiple), at most the cap."""
        raw = rate * self.reserve_factor * (1 + headroom) / (
            self.replica_rate * self.target_utilisation)
        wanted = math.ceil(raw / self.granularity - 1e-9) * self.granularity
        floor = math.ceil(self.min_replicas / self.granularity) * self.granularity
        return int(min(self.max_replicas, max(floor, wanted)))


@dataclass(frozen=True)
class Policy:
    """How the pool is resized: see the module's docstring for each `kind`."""

    kind: str
    cold_start_minutes: float = 10.0
    cooldown_minutes: float = 15.0
    headroom: float = 0.0
    warm_pool: int = 0
    warm_start_minutes: float = 0.5
    static_replicas: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in POLICIES:
            raise ValueError(f"policy {self.kind!r}: choose one of {', '.join(POLICIES)}")


def _steps_of(minutes: float, step_minutes: float) -> int:
    return max(0, int(math.ceil(minutes / step_minutes - 1e-9)))


def fluid_waits(*, arrivals: np.ndarray, service_rps: np.ndarray, backlog_start: np.ndarray,
                step_seconds: float) -> dict:
    """Every request's wait in a first-come fluid queue (s): step i brings `arrivals[i]`
    requests spread evenly over its `step_seconds`, finds `backlog_start[i]` waiting and serves
    at most `service_rps[i]` requests/s while any wait. Past the last step the queue drains at
    the last step's rate (an infinite wait where that is 0).

    With A(t) the requests arrived by t and D(t) those served by t (both piecewise linear), the
    request that arrives x-th arrives at A⁻¹(x) and is served at D⁻¹(x): its wait is the
    difference, linear in x between the two curves' corners, so its distribution is computed
    exactly. Returns `mean` (each step's mean wait, s), `share_above(s)` (the share of all
    requests waiting longer than s) and `quantile(q)` (the wait q of requests stay within).
    One step of 1,200 requests at 20 requests/s against 10/s, then none: waits spread evenly
    over 0–60 s, mean 30 s, p99 59.4 s.
    """
    arrivals = np.asarray(arrivals, dtype=float)
    mu = np.asarray(service_rps, dtype=float)
    queue = np.asarray(backlog_start, dtype=float)
    steps = len(arrivals)
    dt = step_seconds
    t = np.arange(steps + 1) * dt
    arrived = np.concatenate(([0.0], np.cumsum(arrivals)))
    # The served curve's corners: each step's start, and where a queue empties inside a step.
    lam = arrivals / dt
    corners_t = [t[:-1]]
    corners_d = [arrived[:-1] - queue]
    empties = (queue > 0) & (mu > lam) & (queue < (mu - lam) * dt)
    when = np.where(empties, queue / np.where(mu > lam, mu - lam, 1.0), 0.0)
    corners_t.append((t[:-1] + when)[empties])
    corners_d.append((arrived[:-1] - queue + mu * when)[empties])
    left = float(queue[-1] + arrivals[-1] - min(queue[-1] + arrivals[-1], mu[-1] * dt)) \
        if steps else 0.0
    corners_t.append(np.array([t[-1]]))
    corners_d.append(np.array([arrived[-1] - left]))
    if left > 0 and mu[-1] > 0:
        corners_t.append(np.array([t[-1] + left / mu[-1]]))
        corners_d.append(np.array([arrived[-1]]))
    served_t = np.concatenate(corners_t)
    served_d = np.concatenate(corners_d)
    # In time order, and never falling: where no one is served (no ready replica) rounding in
    # the backlog can leave a later corner a hair below an earlier one, and sorting by the count
    # would then put that later time first.
    order = np.argsort(served_t, kind="stable")
    served_t, served_d = served_t[order], np.maximum.accumulate(served_d[order])
    reach = float(served_d[-1])  # beyond this, no capacity ever serves them

    # Segments of x between every corner of either curve; both inverses are linear inside one.
    cuts = np.unique(np.concatenate((arrived, served_d[(served_d > 0) & (served_d < arrived[-1])])))
    x0, x1 = cuts[:-1], cuts[1:]
    keep = x1 > x0
    x0, x1 = x0[keep], x1[keep]
    length = x1 - x0

    def wait_at(x: np.ndarray) -> np.ndarray:
        w = np.interp(x, served_d, served_t) - np.interp(x, arrived, t)
        return np.where(x > reach, np.inf, np.maximum(w, 0.0))

    # Two inner points per segment (never on a corner, where an inverse may jump), extended
    # linearly to the segment's ends.
    wa, wb = wait_at(x0 + length / 4), wait_at(x0 + 3 * length / 4)
    infinite = ~np.isfinite(wb)
    slope = np.where(infinite, 0.0, wb - np.where(np.isfinite(wa), wa, 0.0))
    w0 = np.where(infinite, np.inf, np.maximum(wa - slope / 2, 0.0))
    w1 = np.where(infinite, np.inf, np.maximum(wb + slope / 2, 0.0))
    step = np.clip(np.searchsorted(arrived, x0, side="right") - 1, 0, max(steps - 1, 0))
    area = np.where(infinite, np.inf, length * (w0 + w1) / 2)
    mean = np.zeros(steps)
    if steps:
        sums = np.zeros(steps)
        np.add.at(sums, step, np.where(np.isfinite(area), area, 0.0))
        inf_steps = np.zeros(steps, dtype=bool)
        inf_steps[step[~np.isfinite(area)]] = True
        mean = np.divide(sums, arrivals, out=np.zeros(steps), where=arrivals > 0)
        mean[inf_steps] = np.inf
    total = float(length.sum())
    low = np.where(infinite, 0.0, np.minimum(w0, w1))
    high = np.where(infinite, 0.0, np.maximum(w0, w1))
    flat = high <= low
    spread = np.where(flat, 1.0, high - low)

    def share_above(limit: float) -> float:
        if total <= 0:
            return 0.0
        part = np.where(flat, (low > limit).astype(float),
                        np.clip((high - limit) / spread, 0.0, 1.0))
        part = np.where(infinite, 1.0, part)
        return float((length * part).sum() / total)

    def quantile(q: float) -> float:
        if total <= 0:
            return 0.0
        top = float(high.max()) if len(high) else 0.0
        if share_above(top) > 1 - q + 1e-12:
            return math.inf
        a, b = 0.0, top
        for _ in range(200):
            middle = (a + b) / 2
            if share_above(middle) > 1 - q:
                a = middle
            else:
                b = middle
            if b - a < 1e-9 * max(1.0, b):
                break
        return b

    return {"mean": mean, "share_above": share_above, "quantile": quantile}


def simulate(*, demand: dict[str, np.ndarray], step_minutes: float, pool: Pool, policy: Policy,
             base_ttft_seconds: float = 0.0, ttft_slo_seconds: float = 1.0) -> dict:
    """Play the pool through `demand` (from `demand_curve`) under `policy` (replicas, requests,
    seconds, GPU-hours).

    Returns per-step arrays (`ready`, `booting`, `standby`, `paid` and `needed_replicas`
    (what the load needs, before headroom), `capacity`, what the ready replicas serve at full
    load in requests/s, `backlog` in requests, `ttft` the mean time to first token of each
    step's requests in s) and the summary: `gpu_hours`,
    `peak_paid_gpus`, `minutes_short` (ready capacity below what the target utilisation and the
    reserve need, before headroom), `minutes_queued` (requests waiting), `p99_ttft` over all
    requests, `slo_miss_share` (requests whose TTFT passed `ttft_slo_seconds`), `requests`,
    `peak_backlog` (the longest queue at a step's end, requests).
    """
    rate = demand["rate"]
    smooth = demand["smooth"]
    steps = len(rate)
    dt = step_minutes * 60.0
    cold = _steps_of(policy.cold_start_minutes, step_minutes)
    warm = _steps_of(policy.warm_start_minutes, step_minutes)
    cooldown = _steps_of(policy.cooldown_minutes, step_minutes)
    headroom = policy.headroom
    arrivals = rate * dt

    ready = np.zeros(steps)
    booting = np.zeros(steps)
    standby = np.zeros(steps)
    backlog_start = np.zeros(steps)
    backlog_end = np.zeros(steps)
    needed = np.array([pool.need(r) for r in rate], dtype=float)

    if policy.kind == "static":
        fixed = policy.static_replicas or pool.need(float(rate.max()), headroom=headroom)
        current = fixed
    else:
        current = pool.need(float(rate[0]), headroom=headroom)
    pending: dict[int, int] = {}  # step at which replicas become ready → how many
    spare = policy.warm_pool if policy.kind == "warm_pool" else 0
    refilling: dict[int, int] = {}  # standby replicas still loading
    surplus_for = 0
    backlog = 0.0
    seen = float(rate[0])
    for i in range(steps):
        current += pending.pop(i, 0)
        spare += refilling.pop(i, 0)
        in_flight = sum(pending.values())
        if policy.kind != "static":
            if policy.kind == "predictive":
                ahead = min(steps - 1, i + cold)
                desired = max(pool.need(float(smooth[ahead]), headroom=headroom),
                              pool.need(seen, headroom=headroom))
            elif policy.kind == "queue":
                # Blind to the load until requests wait: then size for the load plus draining
                # the queue; with no queue it only ever scales in.
                if backlog > 0:
                    desired = max(current + in_flight, pool.need(
                        seen + backlog / QUEUE_DRAIN_SECONDS, headroom=headroom))
                else:
                    desired = min(current + in_flight, pool.need(seen, headroom=headroom))
            else:
                desired = pool.need(seen, headroom=headroom)
            have = current + in_flight
            if desired > have:
                surplus_for = 0
                add = desired - have
                if spare:
                    taken = min(spare, add)
                    spare -= taken
                    pending[i + warm] = pending.get(i + warm, 0) + taken
                    refilling[i + cold] = refilling.get(i + cold, 0) + taken
                    add -= taken
                if add:
                    pending[i + cold] = pending.get(i + cold, 0) + add
                current += pending.pop(i, 0)  # a zero-minute start is ready at once
            elif desired < have:
                surplus_for += 1
                if surplus_for >= cooldown:
                    # Cancel replicas still booting first, then release ready ones.
                    cut = have - desired
                    for when in sorted(pending, reverse=True):
                        take = min(cut, pending[when])
                        pending[when] -= take
                        cut -= take
                        if not pending[when]:
                            del pending[when]
                    current -= cut
                    surplus_for = 0
            else:
                surplus_for = 0
        capacity = current * pool.replica_rate * dt
        backlog_start[i] = backlog
        served = min(backlog + arrivals[i], capacity)
        backlog = backlog + arrivals[i] - served
        ready[i] = current
        booting[i] = sum(pending.values())
        standby[i] = spare + sum(refilling.values())
        backlog_end[i] = backlog
        seen = float(rate[i])

    paid = ready + booting + standby
    gpu_hours = float(paid.sum() * pool.gpus_per_replica * dt / 3600)
    capacity_rps = ready * pool.replica_rate
    short = ready < needed
    waits = fluid_waits(arrivals=arrivals, service_rps=capacity_rps,
                        backlog_start=backlog_start, step_seconds=dt)
    ttft = base_ttft_seconds + waits["mean"]
    total = float(arrivals.sum())
    p99 = base_ttft_seconds + waits["quantile"](0.99) if total > 0 else 0.0
    miss = waits["share_above"](ttft_slo_seconds - base_ttft_seconds) if total > 0 else 0.0
    return {
        "minute": demand["minute"], "rate": rate, "ready": ready, "booting": booting,
        "standby": standby, "paid": paid, "capacity": capacity_rps, "needed_replicas": needed,
        "backlog": backlog_end, "ttft": ttft,
        "gpu_hours": gpu_hours,
        "peak_paid_gpus": int(paid.max() * pool.gpus_per_replica) if steps else 0,
        "minutes_short": float(short.sum() * step_minutes),
        "minutes_queued": float((backlog_end > 1e-9).sum() * step_minutes),
        "p99_ttft": p99, "slo_miss_share": miss, "requests": total,
        "peak_backlog": float(backlog_end.max()) if steps else 0.0,
    }
