"""Problem 12's arithmetic: one workload on four GPUs, against figures worked by hand.

Llama 3.1 8B in FP8: weights 6,979,588,096 × 1 + 2 × 525,336,576 × 2 = 9,080,934,400 B; a
decode step reads 8,030,261,248 B; KV 131,072 B a token, 1,073,741,824 B for 8,192 tokens;
decode FLOPs per sequence 19,304,816,640. Modal's example prices: H100 $3.9492/h, H200
$4.5396/h, B200 $6.2496/h, L40S $1.9512/h. The hand figures use a 3 GB reserve.
"""

import pytest

from problems.arithmetic.catalog.prices import PRICE_EXAMPLES
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.gpus import (
    gpu_compare,
    gpu_rooflines,
    roofline_points,
    tp_allreduce_bytes,
)

HAND = dict(reserve_gb=3.0)


def _gpus(**changes) -> dict:
    return {p["gpu"]: p for p in gpu_compare(**{**HAND, **changes})["gpus"]}


def test_example_prices_carry_their_date_and_source():
    """Per second × 3,600: $0.001097 → $3.9492; $0.001261 → $4.5396; $0.001736 → $6.2496;
    $0.000542 → $1.9512."""
    hourly = {g: round(p.dollars_per_hour, 4) for g, p in PRICE_EXAMPLES.items()}
    assert hourly == {"h100-sxm": 3.9492, "h200": 4.5396, "b200": 6.2496, "l40s": 1.9512}
    assert all(p.as_of and p.source.startswith("https://") for p in PRICE_EXAMPLES.values())


def test_largest_batch_step_and_rates_at_the_defaults():
    """Free memory ÷ 1,073,741,824: H100 64,887,794,585.6 → 60; H200 → 115; B200 → 149; L40S →
    29. Steps at min(64, that): H100 72,454,770,688 B ÷ 3.35e12 = 21.6283 ms (2,774.14
    tokens/s); H200 76,749,737,984 ÷ 4.8e12 = 15.9895 ms; B200 ÷ 8e12 = 9.59372 ms (6,671.03
    tokens/s); L40S 39,168,774,144 ÷ 864e9 = 45.3342 ms (639.69 tokens/s). All memory-bound."""
    gpus = _gpus()
    for gid, batch_max, batch, ms, rate in (("h100-sxm", 60, 60, 21.6283, 2774.14),
                                            ("h200", 115, 64, 15.9895, 4002.62),
                                            ("b200", 149, 64, 9.59372, 6671.03),
                                            ("l40s", 29, 29, 45.3342, 639.69)):
        p = gpus[gid]
        assert (p["batch_max"], p["batch"]) == (batch_max, batch)
        assert p["decode_seconds"] * 1e3 == pytest.approx(ms, rel=1e-5)
        assert p["tokens_per_second"] == pytest.approx(rate, rel=1e-5)
        assert p["decode_bound"] == "memory"
    assert gpus["h100-sxm"]["capped"] and not gpus["h200"]["capped"]


def test_prefill_cost_and_power():
    """Prefill of 8,192 tokens: linear 114,354,622,038,016 FLOP ÷ (989.5e12 × 0.5) ... H100
    151.130 ms; H200 the same; B200 66.4637 ms; L40S 409.211 ms. $ per million output tokens:
    3.9492 ÷ (2,774.14 × 3,600) × 10⁶ = $0.39544; H200 $0.31504; B200 6.2496 ÷ (6,671.03 × 3,600)
    × 10⁶ = $0.26023; L40S $0.84728. Tokens/s per kW: 3,963; 5,718; 6,671; 1,828."""
    gpus = _gpus()
    for gid, ms, dollars, per_kw in (("h100-sxm", 151.130, 0.39544, 3963),
                                     ("h200", 151.130, 0.31504, 5718),
                                     ("b200", 66.4637, 0.26023, 6671),
                                     ("l40s", 409.211, 0.84728, 1828)):
        p = gpus[gid]
        assert p["prefill_seconds"] * 1e3 == pytest.approx(ms, rel=1e-5)
        assert p["prefill_bound"] == "compute"
        assert p["dollars_per_million"] == pytest.approx(dollars, rel=1e-4)
        assert round(p["tokens_per_second_per_kw"]) == per_kw


def test_intensity_ridge_and_the_roofline_points():
    """H100: 60 × 19,304,816,640 ÷ 72,454,770,688 = 15.986 FLOP/B against a ridge of 1.979e15 ÷
    3.35e12 = 590.75; achieved 53.55 TFLOP/s. Prefill intensity 131,948,955,566,080 ÷
    9,171,111,936 = 14,387.45 FLOP/B, achieved 873.08 TFLOP/s on the H100."""
    result = gpu_rooflines(**HAND)
    gpus = {p["gpu"]: p for p in result["gpus"]}
    h100 = gpus["h100-sxm"]
    assert h100["intensity"] == pytest.approx(15.986, rel=1e-4)
    assert h100["ridge"] == pytest.approx(590.75, rel=1e-4)
    assert h100["achieved_flops"] / 1e12 == pytest.approx(53.55, rel=1e-3)
    assert result["prefill_intensity"] == pytest.approx(14_387.45, rel=1e-5)
    assert h100["prefill_flops_per_second"] / 1e12 == pytest.approx(873.08, rel=1e-4)
    assert gpus["b200"]["prefill_flops_per_second"] / 1e12 == pytest.approx(1985.28, rel=1e-4)
    xs, ys = roofline_points(peak=1.979e15, bandwidth=3.35e12)
    assert ys[0] == pytest.approx(0.1 * 3.35e12) and ys[-1] == 1.979e15
    assert 1.979e15 / 3.35e12 in xs  # the corner itself is on the line


def test_seventy_billion_in_fp8():
    """Review P0607-10: Llama 3.1 70B in FP8, 3 GB reserve. One H100 leaves 76,555,644,567.3 −
    72,655,052,800 − 3e9 = 900,591,767.3 B, less than one 8,192-token sequence (2,684,354,560 B),
    so the replica is 2 H100s (TP 2): each holds 36,327,526,400 B of weights and 8,192 × 163,840
    = 1,342,177,280 B a sequence, ⌊37,228,118,167.3 ÷ that⌋ = 27; step (70,553,706,496 ÷ 2 + 27 ×
    1,342,177,280) ÷ 3.35e12 = 21.3479 ms + 160 all-reduces of 27 × 8,192 × 2 B (442,368 B ÷
    450 GB/s + 10 µs each) = 1.75729 ms: 23.105 ms, and the replica costs 2 × $3.9492 an hour.
    Two L40S: 43,475,219,251.2 − 36,327,526,400 − 3e9 = 4,147,692,851.2 B → 3 sequences;
    (35,276,853,248 + 3 × 1,342,177,280) ÷ 864e9 = 45.490 ms + 160 × (49,152 B ÷ 32 GB/s + 10 µs)
    = 1.84576 ms over PCIe: 47.336 ms. H200 (one GPU): 60,024,285,286.4 ÷ 2,684,354,560 → 22,
    step (70,553,706,496 + 22 × 2,684,354,560) ÷ 4.8e12 = 27.002 ms; B200: 36,
    (70,553,706,496 + 36 × 2,684,354,560) ÷ 8e12 = 20.899 ms."""
    gpus = _gpus(model="llama-3.1-70b")
    h100 = gpus["h100-sxm"]
    assert h100["tp"] == 2 and h100["batch"] == 27
    assert h100["decode_seconds"] * 1e3 == pytest.approx(23.105, rel=1e-4)
    assert h100["replica_price_per_hour"] == pytest.approx(2 * 3.9492)
    assert h100["tokens_per_second_per_user"] == pytest.approx(1 / 23.105e-3, rel=1e-4)
    l40s = gpus["l40s"]
    assert not l40s["weights_fit"] and l40s["tp"] == 2 and l40s["batch"] == 3
    assert l40s["decode_seconds"] * 1e3 == pytest.approx(47.336, rel=1e-4)
    assert gpus["h200"]["tp"] == gpus["b200"]["tp"] == 1
    assert gpus["h200"]["batch"] == 22
    assert gpus["h200"]["decode_seconds"] * 1e3 == pytest.approx(27.002, rel=1e-4)
    assert gpus["b200"]["batch"] == 36
    assert gpus["b200"]["decode_seconds"] * 1e3 == pytest.approx(20.899, rel=1e-4)


def test_nvfp4_runs_weight_only_off_blackwell():
    """H100: 114,354,622,038,016 ÷ 494.75e12 + 17,594,333,528,064 ÷ 494.75e12 = 266.698 ms;
    B200 at its FP4 rate: ÷ 4.5e15 + ÷ 1.125e15 = 41.051 ms. The H200 prefills in the H100's
    time in every format."""
    gpus = _gpus(dtype="nvfp4")
    assert gpus["h100-sxm"]["prefill_seconds"] * 1e3 == pytest.approx(266.698, rel=1e-5)
    assert gpus["b200"]["prefill_seconds"] * 1e3 == pytest.approx(41.051, rel=1e-4)
    for dtype in ("bf16", "fp8", "int8", "int4", "nvfp4"):
        gpus = _gpus(dtype=dtype)
        assert gpus["h200"]["prefill_seconds"] == gpus["h100-sxm"]["prefill_seconds"]


def test_tokens_per_dollar_as_concurrency_grows():
    """Concurrency 1, H100: (8,030,261,248 + 1,073,741,824) ÷ 3.35e12 = 2.71761 ms → 367.97
    tokens/s → 0.33543 million per dollar; H200 0.41811; B200 1 ÷ (9,104,003,072 ÷ 8e12) =
    878.73 tokens/s → 0.50618; L40S 0.17510. At 256 the
    H200 runs 115: 27.3980 ms → 3.32861 million per dollar."""
    gpus = _gpus(concurrency=1)
    for gid, millions in (("h100-sxm", 0.33543), ("h200", 0.41811), ("b200", 0.50618),
                          ("l40s", 0.17510)):
        assert gpus[gid]["tokens_per_dollar"] / 1e6 == pytest.approx(millions, rel=1e-4)
    gpus = _gpus(concurrency=256)
    assert gpus["h200"]["tokens_per_dollar"] / 1e6 == pytest.approx(3.32861, rel=1e-4)
    assert gpus["h100-sxm"]["tokens_per_dollar"] / 1e6 == pytest.approx(2.52885, rel=1e-4)


def test_the_cheapest_gpu_follows_the_prices():
    """At $20/h the B200 costs 20 ÷ (6,671.03 × 3,600) × 10⁶ = $0.83279 per million, more than
    the H200's $0.31504."""
    gpus = _gpus(price_b200=20.0)
    assert gpus["b200"]["dollars_per_million"] == pytest.approx(0.83279, rel=1e-4)
    cheapest = min(gpus.values(), key=lambda p: p["dollars_per_million"])
    assert cheapest["gpu"] == "h200"


def test_tensor_parallel_all_reduce_bytes():
    """2 all-reduces × layers × 2(n − 1)/n × tokens × hidden × 2 B: (32, 4,096, 64 tokens, 2 GPUs)
    → 33,554,432 B; (80, 8,192, 16, 4) → 2 × 80 × 1.5 × 262,144 = 62,914,560 B."""
    assert tp_allreduce_bytes(layers=32, hidden=4096, tokens=64, group=2) == 33_554_432
    assert tp_allreduce_bytes(layers=80, hidden=8192, tokens=16, group=4) == 62_914_560


def test_a_time_per_token_target_caps_the_batch():
    """Review P0607-11: with a 15 ms target the H100's batch (Llama 3.1 8B in FP8, 8,192 tokens)
    stops at ⌊(0.015 × 3.35e12 − 8,030,261,248) ÷ 1,073,741,824⌋ = ⌊39.32⌋ = 39, a step of
    (8,030,261,248 + 39 × 1,073,741,824) ÷ 3.35e12 = 14.897 ms, 67.1 tokens/s a user; the B200's
    64 already step in 9.59 ms and are not capped."""
    gpus = _gpus(tpot_ms=15)
    assert gpus["h100-sxm"]["batch"] == 39 and gpus["h100-sxm"]["tpot_capped"]
    assert gpus["h100-sxm"]["decode_seconds"] * 1e3 == pytest.approx(14.897, rel=1e-4)
    assert gpus["h100-sxm"]["tokens_per_second_per_user"] == pytest.approx(67.126, rel=1e-4)
    assert gpus["b200"]["batch"] == 64 and not gpus["b200"]["tpot_capped"]
    with pytest.raises(ArithmeticInputError) as error:
        gpu_compare(tpot_ms=0)
    assert error.value.field == "tpot_ms"
