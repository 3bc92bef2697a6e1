"""The runners of page 07 (profile, utilization, triton-rmsnorm) on engines of their own, in
this process, with tiny workloads: events in order, summaries that add up, every block back."""

import dataclasses
from pathlib import Path

import pytest

from demos.runners import RunCancelled, runner_get
from demos.runners.triton_rmsnorm import kernel_notes_missing, kernel_source_annotated
from demos.runners.utilization import CACHE_BLOCK_TOKENS, lean_prefill_tokens
from tests.demos.runners.conftest import MODEL, Recorder


@pytest.fixture(scope="module")
def own():
    """An engine of the run's own and the machine's measured rates, as the task builds them."""
    from worker.demo_engine import engine_build, machine_measure, model_facts

    engine = engine_build(str(MODEL))
    machine = {**machine_measure(), **model_facts(engine), "model_path": str(MODEL),
               "device": "cpu"}
    return engine, machine


def run(slug: str, own, recorder: Recorder, **params):
    engine, machine = own
    runner = runner_get(slug)
    outcome = runner.run(engine=engine, machine=machine,
                         params=runner.params.parse(params).as_dict(),
                         ctx=dataclasses.replace(recorder.context(),
                                                 keep_file=lambda name, data: f"/kept/{name}"))
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]  # every block back
    return outcome


def test_triton_rmsnorm_checks_parity_in_the_interpreter(own, recorder) -> None:
    outcome = run("triton-rmsnorm", own, recorder, tokens=8, hidden=96, dtype="bf16",
                  residual=True)
    assert recorder.types() == ["started", "parity"]
    summary = outcome.summary
    assert summary["mode"] == "interpreter" and summary["parity"]["passed"]
    assert summary["timing"] is None and "NumPy" in summary["timing_absent_reason"]
    assert summary["parity"]["kernel_vs_engine"]["max_ulps"] <= summary["parity"][
        "tolerance_ulps"]
    assert [p["figure"]["layout"]["title"]["text"] for p in summary["plots"]] == [
        "Largest error in ulps of BF16, against the tests' tolerance"]
    assert "Timing is left out" in summary["note"]


def test_every_kernel_note_points_at_a_line_of_the_kernel() -> None:
    assert kernel_notes_missing() == []
    lines = kernel_source_annotated()
    assert lines[0]["code"].startswith("@triton.jit")
    assert sum(1 for line in lines if line["note"]) >= 15


def test_utilization_measures_each_batch_size_in_order(own, recorder) -> None:
    outcome = run("utilization", own, recorder, prompt_tokens=8, steps=4)
    assert recorder.types() == ["started"] + ["batch"] * 6
    rows = outcome.summary["batches"]
    assert [r["batch"] for r in rows] == [1, 2, 4, 8, 16, 32]
    for r in rows:
        assert r["step_ms"] >= r["model_ms"] > 0 and r["host_ms"] >= 0
        assert r["device_busy"] is None and 0 < r["forward_share"] <= 1
        assert r["predicted_floor_ms"] > 0 and r["mfu_wall"] <= r["mfu_model"]
    # Twice the batch, twice the FLOPs of the weights: the arithmetic's count grows with it.
    assert rows[-1]["flops"] > 30 * rows[0]["flops"] / 1.1
    assert len(outcome.summary["plots"]) == 2 and outcome.summary["note"]
    # Without the lever nothing is measured twice, and the note says what the lever does.
    assert not any("lean" in row for row in rows)
    assert "tick the lean host" in outcome.summary["note"]


def test_utilization_can_be_cancelled_and_frees_its_blocks(own, recorder) -> None:
    recorder.cancel_after = ("batch", None, "all", "cancelled")
    with pytest.raises(RunCancelled):
        run("utilization", own, recorder, prompt_tokens=8, steps=4)


def test_the_lean_host_lever_runs(own, recorder) -> None:
    """Each batch size measured with the usual host and then the lean one (greedy, no text).
    The lean pass finds its 24-token prompts' first block in the prefix cache and computes the
    other 8 tokens again: 63 sequences × 16 tokens = 1,008 hits, as its work counts."""
    hits_before = own[0].stats()["prefix_cache_hits"]
    outcome = run("utilization", own, recorder, prompt_tokens=24, steps=4, lean_host=True)
    assert own[0].stats()["prefix_cache_hits"] - hits_before == 63 * 16
    assert lean_prefill_tokens(24) == 8
    assert recorder.types() == ["started"] + ["batch"] * 6
    assert outcome.summary["lean_host"]
    for row in outcome.summary["batches"]:
        lean = row["lean"]
        assert lean["batch"] == row["batch"] and lean["flops"] == row["flops"]
        assert lean["step_ms"] >= lean["model_ms"] > 0 and lean["host_ms"] >= 0
    names = [s["name"] for s in outcome.summary["plots"][0]["figure"]["data"]]
    assert "host with the lean host, measured" in names
    note = outcome.summary["note"]
    first, last = outcome.summary["batches"][0], outcome.summary["batches"][-1]
    assert f"{first['lean']['host_ms']:.3g} ms instead of {first['host_ms']:.3g} ms" in note
    assert f"{last['lean']['host_ms']:.3g} ms instead of {last['host_ms']:.3g} ms" in note


def test_the_lean_pass_counts_the_demo_engines_block() -> None:
    """The utilization demo's work counts the block the lean pass recomputes, at the size the
    demos' engine uses."""
    from worker.demo_engine import BLOCK_SIZE

    assert CACHE_BLOCK_TOKENS == BLOCK_SIZE

def test_profile_reports_steps_operators_and_the_estimate(own, recorder) -> None:
    outcome = run("profile", own, recorder, num_sequences=2, prompt_tokens=16,
                  profile_steps=2)
    assert recorder.types() == ["started", "step", "step", "profile", "estimate"]
    summary = outcome.summary
    steps = summary["profile"]["steps"]
    assert len(steps) == 2 and all(s["operators"] > 10 for s in steps)
    assert summary["profile"]["top_ops"][0]["name"].startswith(("aten::", "cpu_fused::"))
    assert summary["profile"]["trace"]["url"] == "/kept/trace.json.gz"
    estimate = summary["estimate"]["steps"]
    assert [r["kind"] for r in estimate] == ["prefill", "decode"]
    assert all(r["predicted_forward_ms"] > 0 and r["ratio"] > 0 for r in estimate)
    assert len(summary["plots"]) == 2 and "floor" in summary["note"]
    # The engine's own CPU kernels are in the profile, as cpu_fused:: operators, and the note
    # names them.
    from worker.engine.kernels.cpu import cpu_kernels

    fused = cpu_kernels() is not None
    assert ("cpu_fused::" in summary["note"]) == fused
    top = summary["profile"]["top_ops"]
    assert any(op["name"] == "cpu_fused::gemm_packed" for op in top) == fused


def test_the_profile_note_names_the_engines_own_kernels() -> None:
    from demos.runners.profile import _note

    timeline = [{"index": 0, "operators": 150, "ranges": []}]
    estimate = {"steps": [{"index": 0, "kind": "decode", "ratio": 2.0, "host_ms": 0.2,
                           "step_ms": 0.8}]}
    fused = _note(timeline=timeline, estimate=estimate, on_gpu=False, own_kernels=True)
    assert "the engine's own CPU kernels (`cpu_fused::`" in fused
    # A layer's calls: five fused ones in a step with one attention group, more with several
    # (decodes from their slots beside prefill chunks), never "four or five".
    assert ("four matrix multiplies and four other fused calls a layer, plus one attention "
            "call for each group of sequences that attend together") in fused
    assert "each of the 150 or so operators a step ran pays a fixed cost" in fused
    # The engine's packed matmul nears the timed rate at a few dozen rows, and below that the
    # floor is the weights' reads: the matmuls' size is not the gap's reason on this path.
    assert "matmuls are far smaller" not in fused
    plain = _note(timeline=timeline, estimate=estimate, on_gpu=False)
    assert "each of its 150 or so operators per step pays a fixed cost" in plain
    assert "CPU kernels" not in plain


def _event(name: str, start: float, end: float, parent=None):  # noqa: ANN001, ANN202
    from types import SimpleNamespace

    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end),
                           cpu_parent=parent, device_type=SimpleNamespace(name="CPU"))


def test_the_timeline_counts_each_operator_once() -> None:
    """A top-level aten op counts once (its aten children do not), a cpu_fused:: range counts
    once, and an op inside a cpu_fused:: range would not count again; ranges outside the step
    do not count."""
    from demos.runners.profile import profile_timeline

    step = _event("demo.step", 0.0, 1000.0)
    forward = _event("engine.forward", 10.0, 900.0, step)
    linear = _event("aten::linear", 20.0, 100.0, forward)
    fused = _event("cpu_fused::gemm_packed", 200.0, 300.0, forward)
    events = [step, forward, linear, _event("aten::addmm", 30.0, 90.0, linear), fused,
              _event("aten::empty", 210.0, 220.0, fused),
              _event("cpu_fused::silu_mul", 400.0, 450.0, forward),
              _event("cpu_fused::silu_mul", 1100.0, 1150.0)]
    [timeline] = profile_timeline(events)
    assert timeline["operators"] == 3  # aten::linear, gemm_packed, silu_mul


def test_the_profile_shows_the_kernels_as_leaf_operators(own, monkeypatch) -> None:
    """In a real profile of the engine's steps (a prefill with paged attention, then decodes
    from their slots), each kernel call is one cpu_fused:: range inside the engine's forward
    pass with no operator inside it, so its self time is its whole time and the timeline
    counts it once."""
    from demos.runners import profile
    from worker.engine import SamplingParams
    from worker.engine.kernels.cpu import cpu_kernels
    from worker.engine.profiling import profiler_activities, profiler_range, profiler_start

    if cpu_kernels() is None:
        pytest.skip("no C compiler: the engine runs PyTorch's ops")
    engine, _ = own
    ids = [engine.add_request(list(range(5, 5 + n)), SamplingParams(temperature=0, max_tokens=3,
                                                                    ignore_eos=True))
           for n in (20, 7)]
    with profiler_start(profiler_activities(cuda=False)) as prof:
        for _ in range(2):
            with profiler_range(profile.STEP_RANGE):
                engine.step()
    for request_id in ids:
        engine.abort(request_id)
    engine.step()
    events = prof.events()
    fused = [e for e in events if e.name.startswith("cpu_fused::")]
    names = {e.name.removeprefix("cpu_fused::") for e in fused}
    assert {"gemm_packed", "add_rmsnorm", "rope_store", "paged_attention", "decode_attention",
            "silu_mul"} <= names
    for e in fused:
        assert not e.cpu_children
        assert e.self_cpu_time_total == e.cpu_time_total > 0
        assert e.cpu_parent is not None and e.cpu_parent.name.startswith("engine.")
    counted = [s["operators"] for s in profile.profile_timeline(events)]
    steps = sorted((e for e in events if e.name == profile.STEP_RANGE),
                   key=lambda e: e.time_range.start)
    in_step = [sum(1 for e in fused if s.time_range.start <= e.time_range.start
                   and e.time_range.end <= s.time_range.end) for s in steps]
    monkeypatch.setattr(profile, "OPERATOR_PREFIXES", ("aten::",))
    aten_only = [s["operators"] for s in profile.profile_timeline(events)]
    assert all(n > 0 for n in in_step)
    assert counted == [a + n for a, n in zip(aten_only, in_step, strict=True)]


def test_profile_splits_each_step_into_the_engines_ranges(own, recorder) -> None:
    outcome = run("profile", own, recorder, num_sequences=2, prompt_tokens=16,
                  profile_steps=2)
    layers = own[0].runner.config.num_layers
    for step in outcome.summary["profile"]["steps"]:
        names = [r["name"] for r in step["ranges"]]
        assert names == ["schedule", "prepare_inputs", "forward", "attention", "sample",
                         "detokenize"]
        attention = next(r for r in step["ranges"] if r["name"] == "attention")
        assert attention["count"] == layers
        forward = next(r for r in step["ranges"] if r["name"] == "forward")
        assert forward["dur_ms"] <= step["step_ms"] and attention["dur_ms"] <= forward["dur_ms"]
    # The note names the host ranges of the decode step (the second), largest first.
    decode = outcome.summary["profile"]["steps"][1]
    host = sorted((r for r in decode["ranges"] if r["name"] != "forward"
                   and r["name"] != "attention"), key=lambda r: r["dur_ms"], reverse=True)
    said = ", ".join(f"{r['name'].replace('_', ' ')} {r['dur_ms']:.3g} ms" for r in host)
    assert f"(by the engine's ranges, per decode step: {said})" in outcome.summary["note"]


def test_the_model_is_the_shipped_one() -> None:
    assert Path(MODEL).exists()


def test_on_a_gpu_the_busy_time_comes_from_a_second_profiled_pass(own, recorder,
                                                                  monkeypatch) -> None:
    """The profiler slows the host, so on a GPU the timed steps run unprofiled and the kernels'
    busy time is read from as many steps again under the profiler (a stand-in profiler here,
    reporting one 2 ms kernel: this machine has no GPU)."""
    import statistics
    from types import SimpleNamespace

    import torch.profiler

    from demos.runners import utilization
    from worker.engine import SamplingParams

    engine, _ = own
    seconds: list[float] = []
    step = engine.step

    def step_recorded():
        events = step()
        seconds.extend(e["seconds"] for e in events if e["type"] == "step")
        return events

    class StandInProfile:
        def __init__(self, activities) -> None:  # noqa: ANN001
            assert [a.name for a in activities] == ["CUDA"]

        def __enter__(self):
            self.first = len(seconds)
            return self

        def __exit__(self, *exc) -> None:  # noqa: ANN002
            self.steps = len(seconds) - self.first

        def events(self):
            kernel = SimpleNamespace(device_type=SimpleNamespace(name="CUDA"),
                                     time_range=SimpleNamespace(start=0.0, end=2000.0))
            return [kernel]

    monkeypatch.setattr(engine, "step", step_recorded)
    monkeypatch.setattr(torch.profiler, "profile", StandInProfile)
    measured = utilization._measure_batch(
        engine, prompts=[[5, 6, 7, 8], [9, 10, 11, 12]],
        sampling=SamplingParams(temperature=0, ignore_eos=True, max_tokens=2 * 4 + 2),
        steps=4, on_gpu=True, ctx=recorder.context())
    # One prefill step, four timed decode steps, four profiled ones, then the aborts' step.
    assert len(seconds) == 1 + 4 + 4 + 1
    assert measured["wall_s"] == statistics.median(seconds[1:5])
    assert measured["wall_total_s"] == pytest.approx(sum(seconds[5:9]))
    assert measured["busy_s"] == pytest.approx(0.002)
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"]
