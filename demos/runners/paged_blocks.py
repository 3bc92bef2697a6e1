"""Demo `paged-blocks` (problem 4): a mixed workload on a deliberately small paged KV pool, the
pool drawn block by block as the steps advance, then the memory it really held against what
contiguous reservation at a maximum length would have needed for the same requests.

An experiment on an engine of its own (the experiments queue), built from the worker's model with
`pool_blocks` blocks of 16 tokens and no prefix caching (so every shared block is shared by
`SamplingParams.n`, never by a cache hit). The workload: `requests` prompts of random tokens and
lengths, each with an output length, the first asking for `samples` samples of its prompt. After
every step the runner reads the block manager: which sequence holds each physical block, and each
block's reference count.

Events, in order: started (the requests, their lengths, the pool); step (one per engine step:
the owner of each block, the blocks with more than one reference, each running
sequence's block table, the copy-on-writes and
preemptions of that step, blocks held, the token slots filled in them and what the same
sequences would hold with nothing shared); then the task publishes finished with the summary
(the comparison with reservation, plots included), or cancelled (with the blocks the abort
freed and whether every block came back).
"""

import random
import time

from demos.runners.base import RunCancelled, RunContext, RunOutcome, RunTimeLimit
from demos.schema import ParamSchema, ParamSpec

BLOCK_SIZE = 16
PROMPT_RANGE = (12, 100)
OUTPUT_RANGE = (8, 64)
SEED = 7

PARAMS = ParamSchema(
    specs=(
        ParamSpec("requests", "Requests", "whole", 8, minimum=2, maximum=12),
        ParamSpec("samples", "Samples of the first request's prompt (n)", "whole", 3,
                  minimum=1, maximum=4,
                  help="SamplingParams n: the samples share the prompt's blocks."),
        ParamSpec("pool_blocks", "Blocks in the pool", "whole", 40, minimum=16, maximum=64,
                  unit="blocks of 16 tokens",
                  help="Small on purpose: when it runs dry the newest sequence is preempted."),
        ParamSpec("max_len", "Maximum length a contiguous allocator reserves", "whole", 256,
                  minimum=176, maximum=1024, unit="tokens",
                  help="Prompt plus max_tokens that every request could reach."),
        ParamSpec("pace_ms", "Pause between steps, to watch", "whole", 40, minimum=0,
                  maximum=200, unit="ms"),
    ),
    work=lambda v: (v["requests"] + v["samples"]) * (PROMPT_RANGE[1] + OUTPUT_RANGE[1]),
)


def workload(params: dict, *, vocab: int) -> list[dict]:
    """The requests: prompt token ids, output length and samples (the first asks for n)."""
    rng = random.Random(SEED)
    found = []
    for i in range(int(params["requests"])):
        prompt = rng.randint(*PROMPT_RANGE)
        found.append({"prompt": [rng.randrange(3, vocab) for _ in range(prompt)],
                      "output": rng.randint(*OUTPUT_RANGE),
                      "samples": int(params["samples"]) if i == 0 else 1})
    return found


def pool_state(engine) -> dict:  # noqa: ANN001
    """Which sequence holds each block (None: free), blocks with more than one reference,
    each running sequence's block table, and what the running sequences hold: `tokens`
    counts each sequence's cached tokens (a shared prompt once per sample), `stored` the token
    slots really filled in the blocks held (a shared block's once), and `unshared_blocks` what
    the same sequences would hold if nothing were shared."""
    bm = engine.block_manager
    bs = bm.block_size
    owners: list[str | None] = [None] * bm.num_blocks
    filled: dict[int, int] = {}
    running = engine.scheduler.running
    for seq in running:
        for index, block in enumerate(seq.block_table):
            if owners[block] is None:
                owners[block] = seq.request_id
            # Slots of this block holding K/V; samples sharing it agree on the shared ones.
            slots = max(0, min(bs, seq.num_computed_tokens - index * bs))
            filled[block] = max(filled.get(block, 0), slots)
    shared = {str(b.block_id): b.ref_count for b in bm.blocks if b.ref_count > 1}
    return {"owners": owners, "shared": shared,
            # Each running sequence's block table: its logical blocks' physical ids, in order.
            "tables": {seq.request_id: list(seq.block_table) for seq in running},
            "tokens": sum(s.num_computed_tokens for s in running),
            "stored": sum(filled.values()),
            "unshared_blocks": sum(len(s.block_table) for s in running),
            "sequences": len(running), "waiting": len(engine.scheduler.waiting),
            "blocks_used": bm.num_blocks - bm.num_free_blocks}


def _check(ctx: RunContext) -> None:
    ctx.check_time()
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])


def paged_blocks_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    from worker.cpu_threads import one_thread

    with one_thread():
        return _paged_blocks_run(machine=machine, params=params, ctx=ctx,
                                 vocab=int(engine.config.vocab_size))


def _paged_blocks_run(*, machine: dict, params: dict, ctx: RunContext, vocab: int) -> RunOutcome:
    from worker.engine import Engine, SamplingParams

    pool = int(params["pool_blocks"])
    own = Engine.from_pretrained(machine["model_path"], device=str(machine.get("device", "cpu")),
                                 block_size=BLOCK_SIZE, num_kv_blocks=pool,
                                 enable_prefix_caching=False, max_num_batched_tokens=256,
                                 max_num_seqs=16)
    block_bytes = int(own.kv_block_bytes)
    requests = workload(params, vocab=vocab)
    ids = []
    for i, r in enumerate(requests):
        sp = SamplingParams(temperature=1.0, seed=i, max_tokens=r["output"], ignore_eos=True,
                            n=r["samples"])
        ids.append(own.add_request(r["prompt"], sp, request_id=f"r{i}"))
    ctx.publish("started", {
        "pool_blocks": pool, "block_size": BLOCK_SIZE, "block_bytes": block_bytes,
        "requests": [{"id": rid, "prompt": len(r["prompt"]), "output": r["output"],
                      "samples": r["samples"]} for rid, r in zip(ids, requests, strict=True)],
        "max_len": int(params["max_len"]), "at_ms": ctx.elapsed_ms()})
    pace = int(params["pace_ms"]) / 1000
    samples: list[dict] = []
    cows = preemptions = step_index = 0
    try:
        while own.has_unfinished():
            _check(ctx)
            events = own.step()
            state = pool_state(own)
            step_cows = [e for e in events if e["type"] == "copy_on_write"]
            step_preempted = [e["request_id"] for e in events if e["type"] == "preempted"]
            forks = [e["request_id"] for e in events if e["type"] == "forked"]
            cows += len(step_cows)
            preemptions += len(step_preempted)
            step_index += 1
            samples.append(state)
            ctx.publish("step", {"step": step_index, **state,
                                 "copy_on_write": [[e["request_id"], e["source_block"],
                                                    e["block"]] for e in step_cows],
                                 "preempted": step_preempted, "forked": forks,
                                 "finished": [e["request_id"] for e in events
                                              if e["type"] == "finished"]})
            if pace:
                time.sleep(pace)
    except (RunCancelled, RunTimeLimit) as stopped:
        # Abort everything (a request's samples with it) and say whether every block came back.
        free_before = own.block_manager.num_free_blocks
        for rid in ids:
            own.abort(rid)
        own.step()
        returned = own.stats()["kv_blocks_free"] == pool and not own.has_unfinished()
        if isinstance(stopped, RunCancelled):
            raise RunCancelled(stopped.reason, summary={
                "blocks_freed": own.block_manager.num_free_blocks - free_before,
                "all_blocks_returned": returned}) from None
        raise
    returned = own.stats()["kv_blocks_free"] == pool
    summary = paged_summary(samples=samples, requests=requests, params=params,
                            block_bytes=block_bytes)
    summary.update({"copy_on_writes": cows, "preemptions": preemptions, "steps": step_index,
                    "all_blocks_returned": returned})
    summary["note"] = paged_note(summary)
    return RunOutcome(state="finished", summary=summary)


def paged_summary(*, samples: list[dict], requests: list[dict], params: dict,
                  block_bytes: int) -> dict:
    """Measured: blocks and tokens held over the steps; against the arithmetic's paged
    prediction for the same requests and contiguous reservation at `max_len`."""
    from problems.arithmetic.paging import policies_model
    from problems.plots import BarPlot, BarSeries, Plot, Series, plot_figure, plot_table

    pool = int(params["pool_blocks"])
    max_len = int(params["max_len"])
    busy = [s for s in samples if s["sequences"]]
    seq_steps = sum(s["sequences"] for s in busy)
    mean_seqs = seq_steps / len(busy)
    blocks_held = sum(s["blocks_used"] for s in busy)
    held_per_seq = blocks_held * BLOCK_SIZE / seq_steps
    unshared_per_seq = sum(s["unshared_blocks"] for s in busy) * BLOCK_SIZE / seq_steps
    used_per_seq = sum(s["tokens"] for s in busy) / seq_steps
    # The share of the memory held that holds token states (a shared slot counts once), as
    # the vLLM paper's Fig. 2 counts it; never above 1.
    utilization = sum(s["stored"] for s in busy) / (blocks_held * BLOCK_SIZE)
    # The arithmetic, for the same requests (each sample a request of its own, no sharing).
    classes = [(float(r["samples"]), len(r["prompt"]), r["output"]) for r in requests]
    total = sum(c[0] for c in classes)
    rows = {p["id"]: p for p in policies_model([(s / total, p, o) for s, p, o in classes],
                                               max_len=max_len)}
    predicted_paged = rows[f"paged-{BLOCK_SIZE}"]["held"]
    seats_paged = pool * BLOCK_SIZE / held_per_seq
    seats_reserved = pool * BLOCK_SIZE // max_len
    peak = max(s["blocks_used"] for s in samples)
    peak_seqs = max(s["sequences"] for s in samples)
    reserved_needed_blocks = peak_seqs * -(-max_len // BLOCK_SIZE)

    steps = tuple(float(i + 1) for i in range(len(samples)))
    over_time = Plot(
        title="The pool over the run: blocks held, against what reservation would need",
        x_title="Engine step", y_title="Blocks of 16 tokens",
        series=(Series("blocks held (measured)", steps,
                       tuple(float(s["blocks_used"]) for s in samples)),
                Series("token slots filled ÷ 16 (measured; a shared slot once)", steps,
                       tuple(s["stored"] / BLOCK_SIZE for s in samples), dash=True),
                Series("the same sequences with nothing shared (measured)", steps,
                       tuple(float(s["unshared_blocks"]) for s in samples), dash=True),
                Series(f"contiguous: running sequences × {max_len:,} tokens", steps,
                       tuple(float(s["sequences"] * -(-max_len // BLOCK_SIZE)) for s in samples),
                       dash=True),
                Series("the pool", (steps[0], steps[-1]), (float(pool), float(pool)),
                       dash=True)))
    compare = BarPlot(
        title="Memory per running sequence: measured against the arithmetic",
        categories=("paged 16, measured", "paged 16 with nothing shared, measured",
                    "paged 16, predicted", "tokens per sequence, measured",
                    f"reserve {max_len:,}"),
        value_title="tokens' worth of KV memory",
        series=(BarSeries("per running sequence",
                          (held_per_seq, unshared_per_seq, predicted_paged, used_per_seq,
                           float(max_len))),),
        columns=(("how", ("blocks held × 16 ÷ sequences, mean over steps",
                          "each sequence's block table × 16, shared blocks once per holder",
                          "problems/arithmetic/paging.py, no sharing",
                          "each sequence's cached tokens (a shared prompt once per sample)",
                          "what a contiguous allocator reserves")),))
    return {
        "mean_sequences": mean_seqs, "held_per_sequence": held_per_seq,
        "unshared_per_sequence": unshared_per_seq,
        "sharing_saving": 1 - held_per_seq / unshared_per_seq,
        "used_per_sequence": used_per_seq, "predicted_held_per_sequence": predicted_paged,
        "utilization": utilization,
        "seats_paged": seats_paged, "seats_reserved": seats_reserved,
        "peak_blocks": peak, "peak_sequences": peak_seqs,
        "peak_bytes": peak * block_bytes,
        "reserved_bytes_at_peak": reserved_needed_blocks * block_bytes,
        "pool_blocks": pool, "max_len": max_len,
        "plots": [{"figure": plot_figure(p), "table": plot_table(p)} for p in (over_time, compare)],
    }


def paged_note(s: dict) -> str:
    from problems.arithmetic.units import bytes_short, number_format, percent_format

    text = (f"The pool held {number_format(s['held_per_sequence'])} tokens' worth of blocks per "
            f"running sequence, {percent_format(s['utilization'])} of it holding tokens (the "
            "rest is the empty end of each sequence's last block). ")
    if s["sharing_saving"] > 0:
        text += (f"With nothing shared the same sequences would have held "
                 f"{number_format(s['unshared_per_sequence'])}: the samples of the first request "
                 f"share their prompt's blocks, saving {percent_format(s['sharing_saving'])}. ")
    gap = s["unshared_per_sequence"] / s["predicted_held_per_sequence"] - 1
    text += (f"The arithmetic, which counts every sample as a request of its own, predicted "
             f"{number_format(s['predicted_held_per_sequence'])} per sequence, "
             f"{percent_format(abs(gap))} {'below' if gap > 0 else 'above'} the "
             + ("unshared " if s["sharing_saving"] > 0 else "")
             + "measurement. The arithmetic counts a sequence at prompt + 1 … prompt + output "
             "tokens; the run reads it after each step, at prompt … prompt + output − 1 (the "
             "last token is sampled, never cached), and also while a prompt is computed in "
             "chunks or a preempted sequence is recomputed. ")
    text += (f"At its peak the pool held {s['peak_sequences']} sequences in {s['peak_blocks']} "
             f"blocks ({bytes_short(s['peak_bytes'])}); reserving {s['max_len']:,} tokens each, "
             f"the same sequences would have needed {bytes_short(s['reserved_bytes_at_peak'])}, "
             f"and this pool could have seated only {s['seats_reserved']} at a time, against "
             f"about {number_format(s['seats_paged'])} at the measured mean.")
    if s.get("preemptions"):
        times = "once" if s["preemptions"] == 1 else f"{s['preemptions']} times"
        text += (f" The pool ran dry {times}: the newest sequence was preempted, its blocks "
                 "freed, and it was recomputed later.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("paged-blocks", paged_blocks_run, engine="own", params=PARAMS)
