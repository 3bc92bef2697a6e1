"""Whatever mix of arrivals, steps and aborts, every KV block comes back and no count drifts."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.engine import Engine, SamplingParams

actions = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 40), st.integers(1, 12)),
        st.tuples(st.just("step"), st.integers(1, 4)),
        st.tuples(st.just("abort"), st.integers(0, 20)),
    ),
    min_size=1, max_size=25,
)


@pytest.fixture(scope="module")
def engine_path(tiny_models):
    return tiny_models["llama"]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=actions, caching=st.booleans())
def test_blocks_balance_after_any_mix(engine_path, plan, caching):
    engine = Engine.from_pretrained(engine_path, num_kv_blocks=7, block_size=8,
                                    max_num_batched_tokens=24, enable_prefix_caching=caching)
    bm = engine.block_manager
    added: list[str] = []
    for action in plan:
        if action[0] == "add":
            prompt = [3 + (i * 7) % 50 for i in range(action[1])]  # shared prefixes recur
            added.append(engine.add_request(
                prompt, SamplingParams(temperature=0, max_tokens=action[2], ignore_eos=True)))
        elif action[0] == "step":
            for _ in range(action[1]):
                engine.step()
        elif added:
            engine.abort(added[action[1] % len(added)])
        # Invariants at every point: a block is free exactly when nobody references it, and
        # every reference belongs to a live sequence's block table.
        held = [b for s in engine.scheduler.running for b in s.block_table]
        assert all(bm.blocks[b].ref_count == held.count(b) for b in range(bm.num_blocks))
        assert set(bm.free) == {b for b in range(bm.num_blocks) if b not in held}
    while engine.has_unfinished():
        engine.step()
    stats = engine.stats()
    assert stats["kv_blocks_free"] == stats["kv_blocks_total"] == 7
    assert stats["num_requests_running"] == stats["num_requests_waiting"] == 0
