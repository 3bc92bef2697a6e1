"""Page 05's demo predictions as pure functions: problem 17's batching engine modelled as
M/M/c with the measured seats and service time, and a replay of measured service times."""

import pytest

from demos.runners.tail_latency import replay_queue, seats_measured
from problems.arithmetic.queueing import queue


def test_a_batching_engine_is_many_seats_each_held_for_the_measured_service() -> None:
    """Review P17-D2. A burst of 12 finishing at 2.4 requests/s, each in service 2.5 s on
    average, means about 2.4 × 2.5 = 6 requests in service at once: 6 seats of rate 1/2.5.
    At 80% of capacity (1.92/s) M/M/6's p50 response is at least ln 2 × 2.5 s = 1.73 s (the
    service alone), where M/M/1 at rate 2.4/s predicted 1/(2.4 − 1.92) × ln 2 = 1.44 s, below
    an unloaded request's own median."""
    seats = seats_measured(capacity=2.4, mean_service=2.5, arrival_rate=1.92)
    assert seats == 6
    mmc = queue(arrival_rate=1.92, service_rate=1 / 2.5, servers=seats)
    mm1 = queue(arrival_rate=1.92, service_rate=2.4, servers=1)
    assert mmc["p50_response_seconds"] >= 2.5 * 0.693
    assert mm1["p50_response_seconds"] == pytest.approx(0.693 / 0.48, rel=1e-3)
    assert mm1["p50_response_seconds"] < 2.5 * 0.693
    # Arrivals that need more seats than the burst showed still get a stable queue.
    assert seats_measured(capacity=1.0, mean_service=2.0, arrival_rate=1.5) == 4


def test_replay_serves_first_come_on_the_earliest_free_seat() -> None:
    """Three arrivals at 0 s, 1 s each, on 2 seats: 1, 1 and 2 s; a fourth at 5 s finds a
    free seat: 1 s."""
    assert replay_queue(arrivals=[0, 0, 0, 5], services=[1, 1, 1, 1], seats=2) == [1, 1, 2, 1]
