"""worker/replicas.py with real engines of a tiny random model: clocks advance by measured steps,
requests land at their times, and a KV handoff between two engines continues the answer."""

import pytest

from demos.runners.prefix_cache import route
from worker.engine import Engine, SamplingParams
from worker.replicas import Cluster, Replica, handoff_move


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.engine.conftest import tiny_model_save

    return tiny_model_save("llama_tied", tmp_path_factory.mktemp("tiny"))


def _engine(path, **kw):
    return Engine.from_pretrained(path, num_kv_blocks=64, block_size=16, **kw)


def test_routes_by_policy() -> None:
    assert [route("round-robin", app=0, loads=[0, 0, 0], counter=c, limit=2)
            for c in range(4)] == [0, 1, 2, 0]
    assert route("affine", app=4, loads=[0, 9, 0], counter=0, limit=2) == 1
    assert route("affine-limit", app=4, loads=[0, 2, 1], counter=0, limit=2) == 0
    assert route("affine-limit", app=4, loads=[0, 1, 1], counter=0, limit=2) == 1


def test_a_late_arrival_moves_an_idle_clock_and_ttft_is_on_the_engine_clock(model_dir) -> None:
    cluster = Cluster([Replica(_engine(model_dir), name="a")])
    params = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    got = {}
    cluster.at(5.0, lambda now: got.setdefault("t", cluster.submit(
        0, [5, 6, 7, 8, 9], params, now=now, tag={})))
    cluster.run()
    t = got["t"]
    assert t.arrival == 5.0 and len(t.token_times) == 3
    assert 5.0 < t.token_times[0] < t.token_times[1] < t.token_times[2] == t.finished
    assert cluster.replicas[0].outstanding == 0 and cluster.replicas[0].served == 1


def test_prefix_hits_are_whole_blocks(model_dir) -> None:
    cluster = Cluster([Replica(_engine(model_dir), name="a")])
    params = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    shared = list(range(10, 50))  # 40 tokens: two whole blocks of 16
    first = cluster.submit(0, shared + [60, 61], params, now=0.0, tag={})
    cluster.run()
    second = cluster.submit(0, shared + [70, 71], params, now=cluster.replicas[0].clock, tag={})
    cluster.run()
    assert (first.cached_tokens, second.cached_tokens) == (0, 32)


def test_a_moved_handoff_continues_token_for_token(model_dir) -> None:
    prompt = [5 + i % 50 for i in range(40)]
    whole = _engine(model_dir).generate(
        [prompt], SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))[0]
    prefill, decode = _engine(model_dir), _engine(model_dir)
    rid = prefill.add_request(prompt, SamplingParams(temperature=0, max_tokens=1,
                                                     ignore_eos=True), export_kv=True)
    while prefill.has_unfinished():
        prefill.step()
    moved, seconds = handoff_move(prefill.kv_take(rid))
    assert seconds > 0 and moved.num_computed_tokens == 40
    rid = decode.add_request(None, SamplingParams(temperature=0, max_tokens=5, ignore_eos=True),
                             kv=moved)
    tokens = []
    while decode.has_unfinished():
        tokens += [e["token_id"] for e in decode.step() if e["type"] == "token"]
    assert [moved.token_ids[-1], *tokens] == whole.token_ids
