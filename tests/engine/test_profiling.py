"""The engine's named ranges (worker/engine/profiling.py) and `SamplingParams.detokenize`."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from worker.engine import Engine, SamplingParams
from worker.engine.profiling import PHASES, phase


def _ranges(prof) -> list:  # noqa: ANN001
    return [e for e in prof.events() if e.name.startswith("engine.")]


def test_every_phase_is_a_named_range_once_per_step_and_attention_once_per_layer(
        tiny_text_model):
    engine = Engine.from_pretrained(tiny_text_model, num_kv_blocks=32)
    layers = engine.runner.config.num_layers
    engine.add_request("What is a KV cache?", SamplingParams(temperature=0.8, seed=1,
                                                              max_tokens=4, ignore_eos=True))
    engine.step()  # the prefill step
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        engine.step()  # one decode step
    names = [e.name for e in _ranges(prof)]
    assert sorted(set(names)) == sorted(f"engine.{p}" for p in PHASES)
    assert names.count("engine.attention") == layers
    for name in ("schedule", "prepare_inputs", "forward", "sample", "detokenize"):
        assert names.count(f"engine.{name}") == 1, name
    by_name = {e.name: e for e in _ranges(prof)}
    forward = by_name["engine.forward"].time_range
    # Attention runs inside the forward pass; sampling and detokenizing after it.
    for e in _ranges(prof):
        if e.name == "engine.attention":
            assert forward.start <= e.time_range.start and e.time_range.end <= forward.end
    assert by_name["engine.prepare_inputs"].time_range.end <= forward.start
    assert forward.end <= by_name["engine.sample"].time_range.start
    assert by_name["engine.sample"].time_range.end <= by_name["engine.detokenize"].time_range.start


def test_no_range_is_recorded_outside_a_profile_and_ranges_nest():
    with phase("schedule"):
        pass  # nothing listens: a shared do-nothing context
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with phase("forward"), phase("attention"):
            torch.ones(4).sum()
    events = {e.name: e for e in prof.events()}
    outer, inner = events["engine.forward"], events["engine.attention"]
    assert outer.time_range.start <= inner.time_range.start <= inner.time_range.end \
        <= outer.time_range.end


def test_detokenize_false_gives_the_same_tokens_and_no_text(tiny_text_model):
    engine = Engine.from_pretrained(tiny_text_model, num_kv_blocks=32)
    base = dict(temperature=0, max_tokens=6, ignore_eos=True)
    with_text = engine.generate(["Why is decode memory bound?"], SamplingParams(**base))[0]
    rid = engine.add_request("Why is decode memory bound?",
                             SamplingParams(**base, detokenize=False))
    events = []
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        while engine.has_unfinished():
            events.extend(e for e in engine.step() if e.get("request_id") == rid)
    tokens = [e for e in events if e["type"] == "token"]
    assert [e["token_id"] for e in tokens] == with_text.token_ids
    assert with_text.text and all(e["text"] == "" for e in tokens)
    assert not any(e.name == "engine.detokenize" for e in prof.events())
    assert events[-1]["type"] == "finished" and events[-1]["finish_reason"] == "length"
    out = engine.generate(["Why?"], SamplingParams(**base, detokenize=False))[0]
    assert out.text == "" and len(out.token_ids) == 6


@pytest.mark.parametrize("bad", [dict(detokenize="no"), dict(detokenize=False, stop=["."])])
def test_detokenize_must_be_a_bool_and_stop_strings_need_it(bad):
    with pytest.raises(ValueError, match="detokenize"):
        SamplingParams(**bad)


@pytest.mark.parametrize("batch", [1, 3])
def test_the_usual_host_samples_and_detokenizes_each_sequence_the_lean_one_does_neither(
        tiny_text_model, batch):
    """What page 07's demos say grows with the batch: a decode step of `batch` seeded top-p
    requests draws each one's noise from its own generator (one exponential draw per sequence,
    plus the batch's own) and detokenizes each one; greedy with detokenize=False does neither.
    Counted as operators under the profiler, not timed."""
    def decode_step(params: SamplingParams) -> list[str]:
        engine = Engine.from_pretrained(tiny_text_model, num_kv_blocks=32)
        for i in range(batch):
            engine.add_request(f"Request {i} about caches", params)
        while any(s.num_output_tokens == 0 for s in engine.scheduler.running) \
                or engine.scheduler.waiting:
            engine.step()  # prefill: every request has its first token
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            engine.step()
        return [e.name for e in prof.events()]

    usual = decode_step(SamplingParams(temperature=0.8, top_p=0.95, seed=0, max_tokens=8,
                                       ignore_eos=True))
    assert usual.count("aten::exponential_") == batch + 1
    assert usual.count("engine.detokenize") == batch
    lean = decode_step(SamplingParams(temperature=0, detokenize=False, max_tokens=8,
                                      ignore_eos=True))
    assert lean.count("aten::exponential_") == 0
    assert lean.count("engine.detokenize") == 0
