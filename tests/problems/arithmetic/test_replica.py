"""One replica's batch, step and cost (problems/arithmetic/replica.py), worked by hand.

Llama 3.1 70B: non-embedding parameters 68,452,360,192; embedding = head = 128,256 × 8,192 =
1,050,673,152; attention per (query, key) pair 80 × 64 × 2 × (128 + 128) = 2,621,440 FLOP; KV per
token 80 × 2 × 8 × 128 = 163,840 values (327,680 B in BF16; 81,920 B per GPU of four).

Baseline: BF16 on 4 × H100 SXM (85,520,809,984 B reported, × 0.9 − 5 GB = 71,968,728,985.6 B
usable); weights (68,452,360,192 + 2 × 1,050,673,152) × 2 ÷ 4 = 35,276,853,248 B per GPU; free
36,691,875,737.6 B. Context 2,000 + 400 ÷ 2 = 2,200 tokens, 180,224,000 B per sequence per GPU:
⌊203.59⌋ = 203 sequences. A step reads (68,452,360,192 + 1,050,673,152) × 2 ÷ 4 =
34,751,516,672 B of weights: within 50 ms at 2.68 TB/s leaves room for ⌊(0.05 × 2.68e12 −
34,751,516,672) ÷ 180,224,000⌋ = ⌊550.7⌋ = 550; the FLOPs per sequence, (2 × 69,503,033,344 +
2,621,440 × 2,200) ÷ 4 = 36,193,308,672, allow ⌊0.05 × 494.75e12 ÷ that⌋ = 683.
"""

import pytest

from problems.arithmetic.catalog import model_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.replica import (
    decode_batch_for_target,
    prefill_flops_per_uncached_token,
    prefill_pass_replica,
    replica_cost,
    speculative_gain_at_batch,
)

BASE = dict(model="llama-3.1-70b", gpu="h100-sxm", tp=4, batch_cap=64, utilisation=0.35,
            price_per_hour=2.5)


def test_prefill_flops_per_computed_token():
    """2 × 68,452,360,192 = 136,904,720,384, plus attention over the average positions: nothing
    cached, 2,000 tokens: 1,000.5 positions → 139,527,471,104; half cached: 2,000 − 500 + 0.5 =
    1,500.5 → 140,838,191,104; 1,750 tokens with 950 computed: 1,275.5 → 140,248,367,104."""
    m = model_get("llama-3.1-70b")
    assert prefill_flops_per_uncached_token(model=m, prompt_tokens=2000,
                                            uncached_tokens=2000) == 139_527_471_104
    assert prefill_flops_per_uncached_token(model=m, prompt_tokens=2000,
                                            uncached_tokens=1000) == 140_838_191_104
    assert prefill_flops_per_uncached_token(model=m, prompt_tokens=1750,
                                            uncached_tokens=950) == 140_248_367_104


def test_speculative_gain_at_a_batch():
    """E = (1 − 0.8³)/0.2 = 2.44 tokens per verification. Memory-bound verify step: 2.44 ÷
    (1 + 2 × 0.05) = 2.218. A compute-bound one costing 2.552 plain steps: 2.44 ÷ 2.652 = 0.920."""
    assert speculative_gain_at_batch(step_plain=1, step_verify=1, alpha=0.8, gamma=2,
                                     draft_cost=0.05) == pytest.approx(2.2182, abs=1e-4)
    assert speculative_gain_at_batch(step_plain=1, step_verify=2.552, alpha=0.8, gamma=2,
                                     draft_cost=0.05) == pytest.approx(0.9201, abs=1e-4)


def test_the_batch_for_a_target_is_the_largest_that_meets_it():
    assert decode_batch_for_target(step_at=lambda b: 0.01 + 0.001 * b,
                                   target_seconds=0.05) == 40
    assert decode_batch_for_target(step_at=lambda b: 1.0, target_seconds=0.05) == 0


def test_the_baseline_replica():
    """Memory: 0.9 × CUDA's 79.22 GiB − 5 GB = 71,555,644,567.3 B per H100, less 35,276,853,248 B
    of weights, ÷ 180,224,000 B a sequence = ⌊201.3⌋ = 201. Batch min(64 cap, 201 memory, 550
    target) = 64. Step: (34,751,516,672 + 64 × 180,224,000)
    ÷ 2.68e12 = 17.27 ms, memory-bound (FLOPs 64 × 36,193,308,672 ÷ 494.75e12 = 4.68 ms).
    64 ÷ 17.2708 ms = 3,705.7 tokens/s; output 4 × $2.50 ÷ 3,600 ÷ 3,705.7 ÷ 0.35 × 10⁶ = $2.1417;
    input 139,527,471,104 ÷ 494.75e12 = 282.0 µs × $2.50 ÷ 3,600 ÷ 0.35 × 10⁶ = $0.55956."""
    r = replica_cost(**BASE)
    assert (r["batch_memory"], r["batch_target"], r["batch"]) == (201, 550, 64)
    assert r["batch_limit"] == "engine cap"
    assert r["step_seconds"] == pytest.approx(17.2708e-3, rel=1e-4)
    assert r["bound"] == "memory"
    assert r["dollars_per_million_output"] == pytest.approx(2.1417, rel=1e-4)
    assert r["dollars_per_million_input"] == pytest.approx(0.55956, rel=1e-4)


def test_a_tight_target_binds_once_the_cap_is_lifted():
    """At 20 ms: ⌊(0.02 × 2.68e12 − 34,751,516,672) ÷ 180,224,000⌋ = ⌊104.6⌋ = 104 (the compute
    side allows 273), so with no engine cap the batch is 104, set by the target."""
    capped = replica_cost(**{**BASE, "tpot_target_ms": 20})
    assert capped["batch"] == 64 and capped["batch_target"] == 104
    free = replica_cost(**{**BASE, "tpot_target_ms": 20, "batch_cap": None})
    assert free["batch"] == 104 and free["batch_limit"] == "latency target"


def test_speculation_pays_at_the_baseline_batch():
    """64 sequences × 3 tokens: FLOPs 14.05 ms < memory 17.27 ms, so verifying costs one plain
    step: gain 2.44 ÷ 1.1 = 2.218, applied."""
    r = replica_cost(**BASE, spec_alpha=0.8, spec_gamma=2, spec_draft_cost=0.05)
    assert r["spec_gain"] == pytest.approx(2.2182, abs=1e-4) and r["spec_applied"]


@pytest.mark.parametrize(("changes", "field"), [
    ({"tp": 1}, "tp"),  # 141 GB of BF16 weights on one H100
    ({"tpot_target_ms": 5}, "tpot_target_ms"),  # one sequence's step alone is 13 ms
    ({"input_tokens": 131_000}, "output_tokens"),  # past the 131,072-token context
    ({"dtype": "fp3"}, "dtype"),  # no such format
])
def test_a_replica_that_cannot_serve_names_the_input(changes, field):
    with pytest.raises(ArithmeticInputError) as error:
        replica_cost(**{**BASE, **changes})
    assert error.value.field == field


def test_a_prompts_prefill_is_a_roofline_bound_with_its_bound_named():
    """Llama 3.1 70B in BF16 on 4 × H100 SXM, MFU 0.5, 80% of 3.35 TB/s. A 2,000-token prompt,
    all computed: 2,000 × 139,527,471,104 ÷ 4 = 69,763,735,552,000 FLOP per GPU ÷ 494.75 TFLOP/s
    = 0.141008 s, against (34,751,516,672 B of weights + 2,000 × 81,920 B of KV) ÷ 2.68 TB/s
    = 13.028 ms of reads: compute-bound, and 4 × 0.141008 ÷ 2,000 = 282.0 µs of GPU-time per
    token, the same as FLOPs ÷ (peak × MFU). The same prompt fully cached computes only its last
    token: (136,904,720,384 + 2,621,440 × 2,000.5) ÷ 4 ÷ 494.75e12 = 71.8 µs of compute against
    the same 13.028 ms of reads, so memory-bound at 4 × 13.028 ms = 52.1 ms per computed token."""
    from problems.arithmetic.catalog import dtype_get, gpu_get

    m, g, bf16 = model_get("llama-3.1-70b"), gpu_get("h100-sxm"), dtype_get("bf16")
    common = dict(model=m, gpu=g, tp=4, w=bf16, emb=bf16, kv=bf16, prompt_tokens=2000,
                  bandwidth_efficiency=0.8, mfu=0.5)
    full = prefill_pass_replica(uncached_tokens=2000, **common)
    assert full["bound"] == "compute"
    assert full["compute"] == pytest.approx(0.141008, rel=1e-5)
    assert full["memory"] == pytest.approx((34_751_516_672 + 2000 * 81_920) / 2.68e12)
    assert full["seconds"] == full["compute"]
    assert full["gpu_seconds_per_token"] == pytest.approx(139_527_471_104 / 494.75e12)
    cached = prefill_pass_replica(uncached_tokens=0, **common)
    assert cached["bound"] == "memory" and cached["computed"] == 1
    assert cached["compute"] == pytest.approx((136_904_720_384 + 2_621_440 * 2000.5) / 4
                                              / 494.75e12)
    assert cached["gpu_seconds_per_token"] == pytest.approx(4 * full["memory"])
