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
