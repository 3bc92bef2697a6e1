"""The runners of page 02 (kv-bytes, paged-blocks) on engines of their own, in this process,
with tiny workloads: events in order, bytes that match the formula, every block back."""

import dataclasses

import pytest

from demos.runners import RunCancelled, runner_get
from tests.demos.runners.conftest import MODEL, Recorder


@pytest.fixture(scope="module")
def own():
    from worker.demo_engine import engine_build

    engine = engine_build(str(MODEL))
    return engine, {"model_path": str(MODEL), "device": "cpu"}


def run(slug: str, own, recorder: Recorder, **params):
    engine, machine = own
    runner = runner_get(slug)
    return runner.run(engine=engine, machine=machine,
                      params=runner.params.parse(params).as_dict(),
                      ctx=dataclasses.replace(recorder.context()))


def test_kv_bytes_measures_the_pool_against_the_formula(own, recorder) -> None:
    out = run("kv-bytes", own, recorder, precisions=["float32", "float8_e4m3fn"], sequences=2,
              prompt_tokens=20, documents=2)
    assert recorder.types() == ["started", "precision", "precision"]
    rows = out.summary["rows"]
    # Two sequences of 20 and 35 tokens: 2 + 3 blocks of 16.
    assert [r["blocks"] for r in rows] == [5, 5] and rows[0]["tokens"] == 55
    fp32, fp8 = rows
    # course-lm: 6 layers × 2 × 4 KV heads × 32 head_dim = 1,536 values per token.
    assert fp32["bytes_per_token"] == 1536 * 4 and fp8["bytes_per_token"] == 1536
    assert fp32["bytes_formula"] == 55 * 1536 * 4
    for r in rows:
        assert r["bytes_measured"] == r["bytes_formula_blocks"] == 5 * 16 * r["bytes_per_token"]
        assert r["blocks_freed"]
    assert fp32["agreement"] == 1.0 and 0.5 < fp8["agreement"] <= 1.0
    assert len(out.summary["plots"]) == 2 and "partly filled" in out.summary["note"]
    # The words say what the pool's bytes leave out (the decode path's full-precision copies).
    assert "decode slots" in out.summary["note"] and "6 layers" in out.summary["note"]


def test_kv_bytes_sequences_past_the_context_window_together(own, recorder) -> None:
    """600 + 615 tokens: more than the model's 1,024-token window in all, each within it; the
    formula is summed per sequence (38 + 39 blocks of 16 tokens, 1,536 B per token in FP8)."""
    out = run("kv-bytes", own, recorder, precisions=["float8_e4m3fn"], sequences=2,
              prompt_tokens=600, documents=2)
    row = out.summary["rows"][0]
    assert row["tokens"] == 1215 and row["blocks"] == 38 + 39
    assert row["bytes_formula"] == 1215 * 1536
    assert row["bytes_measured"] == row["bytes_formula_blocks"] == 77 * 16 * 1536


def test_paged_blocks_shows_sharing_copy_on_write_and_returns_every_block(own, recorder):
    out = run("paged-blocks", own, recorder, requests=3, samples=3, pool_blocks=24, pace_ms=0)
    types = recorder.types()
    assert types[0] == "started" and set(types[1:]) == {"step"}
    steps = [d for t, _, d in recorder.events if t == "step"]
    assert steps[0]["forked"] == ["r0:1", "r0:2"]
    # Right after the fork the prompt's blocks are held three times.
    assert steps[0]["shared"] and set(steps[0]["shared"].values()) == {3}
    cows = [c for s in steps for c in s["copy_on_write"]]
    started = recorder.events[0][2]
    first_prompt = started["requests"][0]["prompt"]
    assert len(cows) == (2 if first_prompt % 16 else 0)
    # Right after the fork, the samples' tables list the shared blocks once each: with
    # nothing shared they would hold (n - 1) × the shared blocks more.
    first = steps[0]
    assert first["unshared_blocks"] - first["blocks_used"] == 2 * len(first["shared"])
    assert first["tables"]["r0"] == first["tables"]["r0:1"] == first["tables"]["r0:2"]
    for d in steps:
        # The grid is the block manager: a colour on exactly the blocks in use, and the
        # filled slots (a shared one once) within them.
        assert sum(o is not None for o in d["owners"]) == d["blocks_used"]
        # Every block in use is in some table, and a block's references are the tables
        # listing it.
        listed = [b for table in d["tables"].values() for b in table]
        assert len(set(listed)) == d["blocks_used"]
        assert d["shared"] == {str(b): listed.count(b) for b in set(listed)
                               if listed.count(b) > 1}
        assert set(d["shared"]) <= {str(i) for i, o in enumerate(d["owners"]) if o}
        assert d["stored"] <= d["blocks_used"] * 16 and d["stored"] <= d["tokens"]
        assert d["unshared_blocks"] >= d["blocks_used"]
    s = out.summary
    assert s["all_blocks_returned"] and steps[-1]["blocks_used"] == 0
    assert not any(steps[-1]["owners"])
    assert s["copy_on_writes"] == len(cows)
    assert s["seats_reserved"] == 24 * 16 // 256
    # Sharing saved blocks, and the utilization counts each filled slot once: never above 1.
    assert s["held_per_sequence"] < s["unshared_per_sequence"] and 0 < s["utilization"] <= 1
    assert len(s["plots"]) == 2 and s["note"]


def test_paged_blocks_can_be_cancelled_and_returns_every_block(own, recorder) -> None:
    recorder.cancel_after = ("step", None, "all", "cancelled by the test")
    with pytest.raises(RunCancelled) as stopped:
        run("paged-blocks", own, recorder, requests=4, samples=2, pool_blocks=24, pace_ms=0)
    held = [d for t, _, d in recorder.events if t == "step"][-1]["blocks_used"]
    assert held > 0
    assert stopped.value.summary["all_blocks_returned"]
    assert stopped.value.summary["blocks_freed"] == held


def test_bad_parameters_name_the_field() -> None:
    from demos.schema import ParamError

    with pytest.raises(ParamError) as e:
        runner_get("paged-blocks").params.parse({"pool_blocks": 4})
    assert e.value.field == "pool_blocks"
    with pytest.raises(ParamError) as e:
        runner_get("kv-bytes").params.parse({"precisions": ["int3"]})
    assert e.value.field == "precisions"


def test_attention_kernels_agree_and_compare_with_the_prediction(recorder, monkeypatch) -> None:
    import torch

    import worker.demo_engine
    from worker.demo_engine import machine_measure

    machine = {**machine_measure(), "device": "cpu"}
    # The floors divide by peaks measured on the one thread the run uses, not the worker's.
    measured = []

    def on_one_thread(**kwargs):  # noqa: ANN003, ANN202
        measured.append({**machine_measure(**kwargs), "threads": torch.get_num_threads()})
        return measured[-1]

    monkeypatch.setattr(worker.demo_engine, "machine_measure", on_one_thread)
    runner = runner_get("attention-kernels")
    out = runner.run(engine=None, machine=machine,
                     params=runner.params.parse({"lengths": ["128", "256"], "heads": 2,
                                                 "head_dim": "32", "tile": "32",
                                                 "repeats": 1}).as_dict(),
                     ctx=recorder.context())
    assert recorder.types() == ["started", "length", "length"]
    assert [m["threads"] for m in measured] == [1]
    assert recorder.events[0][2]["machine"]["matmul_flops_per_s"] == measured[0][
        "matmul_flops_per_s"]
    rows = out.summary["rows"]
    assert [r["tokens"] for r in rows] == [128, 256]
    assert out.summary["agree"] and out.summary["max_error"] < 1e-4
    for r in rows:
        naive = r["kernels"]["naive"]
        # The naive memory is exactly the prediction: S and P in FP32 and the mask.
        assert naive["intermediate_bytes"] == naive["predicted_intermediate_bytes"]
        assert r["kernels"]["tiled"]["intermediate_bytes"] < naive["intermediate_bytes"]
        assert all(c["seconds"] > 0 and c["predicted_seconds"] > 0
                   for c in r["kernels"].values())
    assert len(out.summary["plots"]) == 2 and "float64" in out.summary["note"]
    # The tiled version's temporaries put it above its tiles' prediction; the words say why.
    tiled = rows[-1]["kernels"]["tiled"]
    assert tiled["intermediate_bytes"] > tiled["predicted_intermediate_bytes"]
    assert "its tiles need" in out.summary["note"]
