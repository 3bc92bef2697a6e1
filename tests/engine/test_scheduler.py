"""Scheduling: preemption keeps greedy output, static batches, max_num_seqs, tenant fairness."""

import torch

from worker.engine import Engine, SamplingParams

GREEDY = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)


def ids(n: int, seed: int) -> list[int]:
    return torch.randint(3, 320, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


PROMPTS = [ids(n, n) for n in (3, 20, 9, 33, 14, 1)]


def admitted_order(events: list[dict]) -> list[str]:
    return [e["request_id"] for e in events if e["type"] == "admitted"]


def run_all(engine: Engine) -> list[dict]:
    events = []
    while engine.has_unfinished():
        events.extend(engine.step())
    return events


def test_preemption_by_recompute_keeps_greedy_output(tiny_models):
    roomy = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=64)
    expected = [o.token_ids for o in roomy.generate(PROMPTS, GREEDY)]
    for caching in (True, False):
        tight = Engine.from_pretrained(tiny_models["qwen2"], num_kv_blocks=8, block_size=8,
                                       enable_prefix_caching=caching)
        outputs = tight.generate(PROMPTS, GREEDY)
        assert tight.stats()["num_preemptions"] > 0
        assert [o.token_ids for o in outputs] == expected


def test_preempted_event_and_newest_is_the_victim(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=6, block_size=8)
    for i, prompt in enumerate(PROMPTS[:4]):
        engine.add_request(prompt, GREEDY, request_id=f"r{i}")
    events = run_all(engine)
    preempted = [e for e in events if e["type"] == "preempted"]
    assert preempted
    first_step_events = events[: next(i for i, e in enumerate(events) if e["type"] == "preempted")]
    running_then = admitted_order(first_step_events)
    assert preempted[0]["request_id"] == running_then[-1]


def test_static_batches_admit_nothing_until_the_batch_is_done(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, scheduling="static",
                                    max_num_seqs=2)
    lengths = [2, 12, 5, 5]
    for i, n in enumerate(lengths):
        engine.add_request(ids(4, i), SamplingParams(temperature=0, max_tokens=n,
                                                     ignore_eos=True), request_id=f"r{i}")
    events = run_all(engine)
    position = {(e["type"], e["request_id"]): i for i, e in enumerate(events)
                if e["type"] in ("admitted", "finished")}
    # r2 and r3 wait for the whole first batch, although r0 finished long before r1.
    assert position[("admitted", "r2")] > position[("finished", "r1")]
    assert position[("admitted", "r3")] > position[("finished", "r1")]
    steps = [e for e in events if e["type"] == "step"]
    assert max(e["num_seqs"] for e in steps) == 2


def test_continuous_batching_fills_a_freed_seat_at_once(tiny_models):
    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, max_num_seqs=2)
    for i, n in enumerate([2, 12, 5]):
        engine.add_request(ids(4, i), SamplingParams(temperature=0, max_tokens=n,
                                                     ignore_eos=True), request_id=f"r{i}")
    events = run_all(engine)
    position = {(e["type"], e["request_id"]): i for i, e in enumerate(events)
                if e["type"] in ("admitted", "finished")}
    order = [position[k] for k in (("finished", "r0"), ("admitted", "r2"), ("finished", "r1"))]
    assert order == sorted(order)
    assert max(e["num_seqs"] for e in events if e["type"] == "step") == 2


def test_fair_policy_interleaves_tenants(tiny_models):
    def order(policy: str) -> list[str]:
        engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64, max_num_seqs=2,
                                        policy=policy)
        for i in range(4):
            engine.add_request(ids(5, i), GREEDY, request_id=f"big-{i}", tenant="big")
        engine.add_request(ids(5, 9), GREEDY, request_id="small-0", tenant="small")
        return admitted_order(run_all(engine))

    assert order("fcfs").index("small-0") == 4
    # With fair share, the small tenant gets the second seat right away.
    assert order("fair").index("small-0") == 1


def _heavy_then_light(model: str, policy: str, *, num_kv_blocks: int = 8
                      ) -> tuple[Engine, list[dict]]:
    """Three requests of tenant 'heavy' run first; one of tenant 'light' joins a step later,
    so it is the newest running sequence when the pool runs out."""
    engine = Engine.from_pretrained(model, num_kv_blocks=num_kv_blocks,
                                    block_size=8, policy=policy)
    for i in range(3):
        engine.add_request(ids(7, 20 + i), GREEDY, request_id=f"heavy-{i}", tenant="heavy")
    events = engine.step()
    engine.add_request(ids(7, 30), GREEDY, request_id="light-0", tenant="light")
    return engine, events + run_all(engine)


def test_fair_preemption_takes_the_heavy_tenants_newest(tiny_models):
    _, fcfs = _heavy_then_light(tiny_models["llama"], "fcfs")
    fcfs_victims = [e["request_id"] for e in fcfs if e["type"] == "preempted"]
    assert fcfs_victims and fcfs_victims[0] == "light-0"  # FCFS: the newest, whoever owns it
    engine, fair = _heavy_then_light(tiny_models["llama"], "fair")
    fair_victims = [e["request_id"] for e in fair if e["type"] == "preempted"]
    assert fair_victims and fair_victims[0] == "heavy-2"  # fair: the heavy tenant's newest
    assert "light-0" not in fair_victims
    assert engine.stats()["num_preemptions"] == len(fair_victims)


def test_fair_preemption_keeps_greedy_output(tiny_models):
    roomy, roomy_events = _heavy_then_light(tiny_models["llama"], "fair", num_kv_blocks=64)
    assert not [e for e in roomy_events if e["type"] == "preempted"]
    tight, tight_events = _heavy_then_light(tiny_models["llama"], "fair")
    assert [e for e in tight_events if e["type"] == "preempted"]

    def tokens(events: list[dict]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for e in events:
            if e["type"] == "token":
                out.setdefault(e["request_id"], []).append(e["token_id"])
        return out

    assert tokens(tight_events) == tokens(roomy_events)


def test_queue_bound_per_tenant_refuses_and_reports(tiny_models):
    from worker.engine import QueueFullError

    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=64,
                                    max_queued_per_tenant=2)
    engine.add_request(ids(5, 0), GREEDY, request_id="a-0", tenant="a")
    engine.add_request(ids(5, 1), GREEDY, request_id="a-1", tenant="a")
    try:
        engine.add_request(ids(5, 2), GREEDY, request_id="a-2", tenant="a")
    except QueueFullError as refused:
        assert (refused.scope, refused.queued, refused.limit, refused.tenant) == (
            "tenant", 2, 2, "a")
    else:
        raise AssertionError("a third queued request of tenant a was accepted")
    engine.add_request(ids(5, 3), GREEDY, request_id="b-0", tenant="b")  # another tenant's room
    events = engine.step()
    refused = [e for e in events if e["type"] == "refused"]
    assert refused == [{"type": "refused", "request_id": "a-2", "tenant": "a",
                        "scope": "tenant", "queued": 2, "limit": 2}]
    assert "a-2" not in {e["request_id"] for e in events if e["type"] == "admitted"}
    # Once admitted, the requests have left the queue: tenant a may queue again.
    engine.add_request(ids(5, 4), GREEDY, request_id="a-3", tenant="a")
    finished = {e["request_id"] for e in events + run_all(engine) if e["type"] == "finished"}
    assert finished == {"a-0", "a-1", "b-0", "a-3"}
    assert engine.stats()["num_refused"] == 1


def test_global_queue_bound_and_preempted_requests_are_never_refused(tiny_models):
    from worker.engine import QueueFullError

    engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=6, block_size=8,
                                    max_queued=4)
    for i, prompt in enumerate(PROMPTS[:4]):
        engine.add_request(prompt, GREEDY, request_id=f"r{i}", tenant=f"t{i}")
    for tenant in ("t0", "new"):
        try:
            engine.add_request(ids(3, 9), GREEDY, tenant=tenant)
        except QueueFullError as refused:
            assert (refused.scope, refused.queued, refused.limit) == ("global", 4, 4)
        else:
            raise AssertionError("a fifth request joined a queue bounded at four")
    events = run_all(engine)  # the tight pool preempts; victims go back to the queue
    assert [e for e in events if e["type"] == "preempted"]
    assert {e["request_id"] for e in events if e["type"] == "finished"} == {"r0", "r1", "r2",
                                                                           "r3"}
    assert engine.stats()["num_refused"] == 2


def test_queue_bounds_are_checked(tiny_models):
    import pytest

    for name in ("max_queued", "max_queued_per_tenant"):
        with pytest.raises(ValueError, match=name):
            Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=8, **{name: 0})
