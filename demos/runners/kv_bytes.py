"""Demo `kv-bytes` (problem 3): the bytes a real KV pool holds, per cache precision, against the
formula, and what each precision does to the model's next-token choices.

An experiment on engines of its own (the experiments queue). For each precision chosen, the
worker builds the shipped model with `kv_cache_dtype` set (worker/engine/layers/kv_dtype.py),
admits `sequences` prompts of `prompt_tokens` to `prompt_tokens` + 15 × (sequences − 1) random
tokens, steps until every prompt is in the cache, and reads what the pool holds: the blocks
allocated times the bytes of one block measured on the pool's own tensors (K and V of every
layer). Beside it, the course's formula (problems/arithmetic/memory.kv_cache) for the same
tokens, and for the same tokens in whole blocks. Then the model reads held-out text through a
pool of that precision (teacher forcing) and its next-token choices are compared with the FP32
pool's: top-1 agreement and mean KL divergence.

Events, in order: started; precision (one per precision, in order); then the task publishes
finished with the summary (plots included), or cancelled.
"""

import random

from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec

# Engine name of each precision -> the course's catalog id (problems/arithmetic/catalog).
PRECISIONS = (("float32", "fp32", "FP32"), ("bfloat16", "bf16", "BF16"),
              ("float16", "fp16", "FP16"), ("float8_e4m3fn", "fp8", "FP8 E4M3"))
CATALOG_ID = {engine: cid for engine, cid, _ in PRECISIONS}
NAMES = {engine: name for engine, _, name in PRECISIONS}
BLOCK_SIZE = 16
LENGTH_STEP = 15  # each further sequence is this much longer, so their last blocks differ

PARAMS = ParamSchema(
    specs=(
        ParamSpec("precisions", "KV cache precisions", "choices",
                  [engine for engine, _, _ in PRECISIONS],
                  choices=tuple((engine, name) for engine, _, name in PRECISIONS)),
        ParamSpec("sequences", "Sequences admitted", "whole", 4, minimum=1, maximum=8),
        ParamSpec("prompt_tokens", "Tokens in the first sequence", "whole", 200, minimum=8,
                  maximum=600, unit="tokens",
                  help="Each further sequence is 15 tokens longer, so their last blocks fill "
                       "differently."),
        ParamSpec("documents", "Held-out documents for the drift", "whole", 8, minimum=2,
                  maximum=16, help="About a hundred tokens each, never seen in training."),
    ),
    work=lambda v: len(v["precisions"]) * (v["sequences"] * (v["prompt_tokens"] + 60)
                                          + v["documents"] * 128),
)


def lengths_of(params: dict) -> list[int]:
    first, count = int(params["prompt_tokens"]), int(params["sequences"])
    return [first + LENGTH_STEP * i for i in range(count)]


def _check(ctx: RunContext) -> None:
    ctx.check_time()
    if "all" in ctx.cancels():
        raise RunCancelled(ctx.cancels()["all"])


def pool_held(engine) -> dict:  # noqa: ANN001
    """What the pool holds now, read from its tensors: blocks in use × bytes of one block
    (K and V of every layer, element size of the pool's own dtype)."""
    per_block = sum(t[0].numel() * t.element_size()
                    for pair in engine.runner.kv_caches for t in pair)
    used = engine.block_manager.num_blocks - engine.block_manager.num_free_blocks
    return {"blocks": used, "block_bytes": per_block, "bytes": used * per_block,
            "pool_bytes": sum(t.numel() * t.element_size()
                              for pair in engine.runner.kv_caches for t in pair)}


def kv_bytes_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.cpu_threads import one_thread

    with one_thread():
        return _kv_bytes_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _kv_bytes_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:  # noqa: ANN001
    from problems.arithmetic.catalog.models import DEMO_MODEL_ID
    from problems.arithmetic.memory import kv_cache
    from worker.engine import Engine, SamplingParams
    from worker.engine.layers.kv_dtype import KV_CACHE_DTYPES
    from worker.evaluation import (
        TeacherForced,
        documents_encode,
        heldout_texts,
        logits_agreement,
    )

    precisions = list(params["precisions"])
    lengths = lengths_of(params)
    path, device = machine["model_path"], str(machine.get("device", "cpu"))
    rng = random.Random(0)
    vocab = int(engine.config.vocab_size)
    prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]
    blocks_needed = sum(-(-(n + 1) // BLOCK_SIZE) for n in lengths)
    docs = [d.token_ids for d in documents_encode(engine.tokenizer,
                                                  heldout_texts(limit=int(params["documents"])))]
    positions = sum(len(d) for d in docs)
    ctx.publish("started", {"precisions": precisions, "names": [NAMES[p] for p in precisions],
                            "lengths": lengths, "tokens": sum(lengths), "documents": len(docs),
                            "positions": positions, "block_size": BLOCK_SIZE,
                            "at_ms": ctx.elapsed_ms()})
    room = positions + BLOCK_SIZE * len(docs)
    reference = TeacherForced(engine.runner.model, engine.config, tokens_max=room,
                              device=device).logits(docs)
    rows = []
    for name in precisions:
        _check(ctx)
        # A token budget that takes every prompt in one step: then each holds exactly its
        # prompt when measured.
        own = Engine.from_pretrained(path, device=device, block_size=BLOCK_SIZE,
                                     num_kv_blocks=blocks_needed + 4, kv_cache_dtype=name,
                                     enable_prefix_caching=False,
                                     max_num_batched_tokens=sum(lengths))
        ids = [own.add_request(p, SamplingParams(temperature=0, max_tokens=2, ignore_eos=True))
               for p in prompts]
        first: set[str] = set()
        while len(first) < len(ids):
            _check(ctx)
            first.update(e["request_id"] for e in own.step() if e["type"] == "token")
        # Every prompt is in the cache now (the first sampled token is not, yet).
        computed = [s.num_computed_tokens for s in own.scheduler.running]
        cached = sum(computed)
        held = pool_held(own)
        for rid in ids:
            own.abort(rid)
        own.step()
        # The formula per sequence, summed: the sequences together may hold more tokens than
        # the model's context window, which the formula refuses for one sequence.
        formula = [kv_cache(model=DEMO_MODEL_ID, tokens=n, dtype=CATALOG_ID[name])
                   for n in computed]
        formula_blocks = sum(float(kv_cache(model=DEMO_MODEL_ID,
                                            tokens=-(-n // BLOCK_SIZE) * BLOCK_SIZE,
                                            dtype=CATALOG_ID[name])["total_bytes"])
                             for n in computed)
        got = TeacherForced(engine.runner.model, engine.config, tokens_max=room, device=device,
                            kv_cache_dtype=KV_CACHE_DTYPES[name]).logits(docs)
        agree, kl = logits_agreement(reference, got)
        row = {"precision": name, "name": NAMES[name],
               "element_bytes": own.runner.kv_caches[0][0].element_size(),
               "tokens": cached, "blocks": held["blocks"], "block_bytes": held["block_bytes"],
               "bytes_measured": held["bytes"], "pool_bytes": held["pool_bytes"],
               "bytes_formula": sum(float(f["total_bytes"]) for f in formula),
               "bytes_per_token": float(formula[0]["bytes_per_token"]),
               "bytes_formula_blocks": formula_blocks,
               "blocks_freed": own.stats()["kv_blocks_free"] == own.stats()["kv_blocks_total"],
               "agreement": agree, "kl_mean": max(kl, 0.0), "at_ms": ctx.elapsed_ms()}
        rows.append(row)
        ctx.publish("precision", row)
    from worker.engine.model_runner import DECODE_SLOTS_MAX_BYTES

    return RunOutcome(state="finished", summary={
        "precisions": precisions, "rows": rows, "lengths": lengths,
        "block_size": BLOCK_SIZE, "positions": positions,
        "plots": kv_bytes_plots(rows),
        "note": kv_bytes_note(rows, decode_slots_max_bytes=DECODE_SLOTS_MAX_BYTES,
                              layers=int(engine.config.num_layers)),
        "device": device,
    })


def kv_bytes_plots(rows: list[dict]) -> list[dict]:
    """Bytes measured against the formula per precision, and drift per precision."""
    from problems.arithmetic.units import bytes_short, number_format, percent_format
    from problems.plots import BarPlot, BarSeries, plot_figure, plot_table

    names = tuple(r["name"] for r in rows)
    mb = 1e6
    size = BarPlot(
        title="KV bytes the pool holds, measured against the formula",
        categories=names, value_title="MB (10⁶ bytes)",
        series=(BarSeries("measured: blocks in use × bytes per block",
                          tuple(r["bytes_measured"] / mb for r in rows),
                          labels=tuple(bytes_short(r["bytes_measured"]) for r in rows)),
                BarSeries("formula, whole blocks", tuple(r["bytes_formula_blocks"] / mb
                                                         for r in rows), outline=True),
                BarSeries("formula, exact tokens", tuple(r["bytes_formula"] / mb for r in rows),
                          outline=True)),
        columns=(("bytes per token", tuple(bytes_short(r["bytes_per_token"]) for r in rows)),
                 ("blocks", tuple(f"{r['blocks']:,}" for r in rows))))
    drift = BarPlot(
        title="Next-token agreement with the FP32 cache on held-out text",
        categories=names, value_title="top-1 agreement (%)",
        series=(BarSeries("agreement", tuple(100 * r["agreement"] for r in rows),
                          labels=tuple(percent_format(r["agreement"]) for r in rows)),),
        columns=(("mean KL (nats)", tuple(number_format(r["kl_mean"], digits=3)
                                          for r in rows)),))
    return [{"figure": plot_figure(p), "table": plot_table(p)} for p in (size, drift)]


def kv_bytes_note(rows: list[dict], *, decode_slots_max_bytes: int, layers: int) -> str:
    """Why measured and predicted differ, in this run's numbers."""
    from problems.arithmetic.units import bytes_short, percent_format

    first = rows[0]
    slack = first["bytes_measured"] - first["bytes_formula"]
    exact = all(r["bytes_measured"] == r["bytes_formula_blocks"] for r in rows)
    text = (f"The pool holds {bytes_short(first['bytes_measured'])} in {first['name']} where the "
            f"formula gives {bytes_short(first['bytes_formula'])} for the "
            f"{first['tokens']:,} tokens: {bytes_short(slack)} more, because each sequence's "
            f"last block of {BLOCK_SIZE} tokens is only partly filled. ")
    text += ("Counted in whole blocks the formula matches the pool to the byte for every "
             "precision, and each halving of the element size halves it. " if exact else
             "Counted in whole blocks the formula should match the pool exactly; here it does "
             "not, which points at a block accounting error. ")
    text += ("The pool is what shrinks: this engine's decode path (its own CPU kernels or "
             "PyTorch's ops) also keeps each decoding sequence's context in the model's own "
             "precision beside the pool (its "
             f"decode slots, at most {bytes_short(decode_slots_max_bytes)}), which a GPU "
             "engine's attention kernel, reading the narrow blocks directly, does without. ")
    worst = min(rows, key=lambda r: r["agreement"])
    text += (f"The formula has nothing to say about quality: that is measured. The lowest "
             f"agreement, {percent_format(worst['agreement'])} for {worst['name']}, comes from "
             "rounding every stored key and value (FP8 E4M3 keeps three mantissa bits, with a "
             "scale of 1 as vLLM uses when none is calibrated); a model of "
             f"{layers} layers is no guide to a 70B model's drift, so measure yours on your own "
             "evaluations.")
    return text


from demos.runners import runner_register  # noqa: E402

runner_register("kv-bytes", kv_bytes_run, engine="own", params=PARAMS)
