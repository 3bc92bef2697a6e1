"""The notes of page 05's speculation demos (itl, speculative): their claims about verification
follow this machine's arithmetic, not a fixed story about CPUs."""

from demos.runners import itl, speculative
from tests.demos.runners.conftest import MODEL


def machine(flops: float, bandwidth: float) -> dict:
    return {"matmul_flops_per_s": flops, "memory_bytes_per_s": bandwidth,
            "model_path": str(MODEL), "dtype": "float32"}


def test_verifying_rides_on_the_weight_reads_at_batch_one_and_costs_compute_at_32() -> None:
    m = machine(240e9, 86e9)
    one = itl.verify_floor_ratio(machine=m, batch=1, context_tokens=40, gamma=2)
    big = itl.verify_floor_ratio(machine=m, batch=32, context_tokens=40, gamma=2)
    assert 1.0 <= one < itl.VERIFY_NEARLY_FREE
    assert big > 2.5  # three positions' compute, nearly


def row(batch: int, tpot: float, floor: float, ratio: float) -> dict:
    return {"batch": batch, "tpot_ms": tpot, "tokens_per_s": batch / tpot * 1e3,
            "floor_ms": floor, "verify_floor_ratio": ratio}


def test_the_itl_note_says_where_verification_is_nearly_free_from_the_ratios() -> None:
    plain = [row(1, 0.9, 0.25, 1.02), row(8, 1.2, 0.4, 2.9), row(32, 3.0, 1.5, 3.0)]
    levered = [row(1, 0.8, 0.25, 1.0), row(8, 1.4, 0.4, 1.0), row(32, 4.0, 1.5, 1.0)]
    text = itl._note(plain, levered, lever="speculation", alpha=0.6)
    assert "lowered TPOT at 1 of 3 batch sizes" in text
    assert "1.02× a plain step's floor at batch 1 and 3× at batch 32" in text
    assert "nearly free at batch 1," in text and "the draft model's own steps" in text
    assert "mostly arithmetic" not in text
    every = itl._note([row(1, 0.9, 0.25, 1.1), row(32, 3.0, 1.5, 1.2)], levered[:2],
                      lever="ngram", alpha=0.5)
    assert "nearly free at every batch here" in every and "prompt lookup" in every
    none = itl._note([row(1, 0.9, 0.25, 2.9), row(32, 3.0, 1.5, 3.0)], levered[:2],
                     lever="ngram", alpha=0.5)
    assert "nearly free" not in none and "since the matmuls set the floor" in none


def test_the_speculative_note_sets_the_measured_step_beside_the_arithmetic() -> None:
    speeds = [{"k": 4, "spec_step_ms_one": 2.0, "plain_step_ms_one": 1.0,
               "predicted_one": 2.1, "alpha_one": 0.6, "predicted_large": 2.0,
               "speedup_one": 0.9, "speedup_large": 0.5}]
    common = {"alpha": 0.6, "speeds": speeds, "large": 8, "compare": [], "identical": True}
    text = speculative._note(c=0.4, drafter="model", verify_floor={"one": 1.1, "large": 4.6},
                             **common)
    assert "took 2× a plain one at batch 1, the draft model alone 0.4 of a target step" in text
    assert "verifying 5 positions at 1.1× a plain step's floor at batch 1 (the weights'" in text
    assert "4.6× at batch 8, where the matmuls' compute grows" in text
    assert "each of the draft model's steps" in text and "largely arithmetic" not in text
    bound = speculative._note(c=0.0, drafter="ngram", verify_floor={"one": 3.0, "large": 4.9},
                              **common)
    assert "(the matmuls' compute sets it)" in bound and "lookup's own host work" in bound
    assert "draft model" not in bound
    assert "arithmetic puts" not in speculative._note(c=0.0, drafter="ngram", verify_floor={},
                                                      **common)
