"""Page 04's demo predictions, as pure functions: what problem 8's fleet demo predicts for a
short run (cold misses counted), and what problem 22's demo compares."""

from demos.runners.prefix_cache import cold_misses


def test_cold_misses_cap_a_short_runs_hit_rate() -> None:
    """Review P8-D4. Thirty requests, four applications cycling 0, 1, 2, 3, …, three replicas.
    Affinity sends application a to replica a mod 3: four first visits, so at most 26 of 30
    hit (86.7%), not the steady state's 100%. Round-robin sends request k to replica k mod 3;
    with the applications cycling over four, each application meets all three replicas within
    its first three visits: 4 × 3 = 12 cold misses."""
    apps = [k % 4 for k in range(30)]
    assert cold_misses("affine", apps=apps, replicas=3) == 4
    assert cold_misses("round-robin", apps=apps, replicas=3) == 12
    assert cold_misses("affine-limit", apps=apps, replicas=3) is None
    assert (30 - cold_misses("affine", apps=apps, replicas=3)) / 30 == 26 / 30
