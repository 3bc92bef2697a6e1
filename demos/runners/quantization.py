"""Demo `quantization` (problem 11): the shipped model's weights quantized for real, each
format's bytes, weight error and loss of quality measured against the FP32 model.

An experiment on an engine of its own (the experiments queue). For each format it quantizes a
copy of the model (worker/quantization.py: codes and scales as the format defines them, stored
packed, read back to compute) and scores it on held-out text against the FP32 original
(worker/evaluation.py). Events, in order: started; format_quantized (one per format: bytes
stored and predicted, bits per weight, each layer's weight error measured and predicted by the
rounding-noise model); evaluation_progress (after each batch of documents); format_evaluated
(FP32 first, then one per format: bits per byte, agreement, mean KL); plot (the figures and
their tables); then the task publishes finished with the summary.

The parameter schema (demos/schema.py) is declared here, beside the runner; importing this
module imports no torch.
"""


from demos.runners.base import RunCancelled, RunContext, RunOutcome
from demos.schema import ParamSchema, ParamSpec
from problems.arithmetic.formats import INT4_GROUP_SIZES
from problems.arithmetic.units import number_format, percent_format
from problems.plots import Plot, Series, plot_figure, plot_table

FORMATS_OFFERED = ("bf16", "int8", "fp8", "int4", "nvfp4", "mxfp4")
DOCUMENTS_MIN, DOCUMENTS_MAX, DOCUMENTS_DEFAULT = 4, 32, 24
# About what one held-out document costs the queue: their mean is about 114 tokens.
TOKENS_PER_DOCUMENT = 128
FOUR_BIT = ("int4", "nvfp4", "mxfp4")
# Where each format's label sits on the closing plots: the 4-bit formats lie within half a bit
# of each other, and INT8 and FP8 at the same bits.
LABEL_POSITIONS = {"bf16": "top center", "int8": "bottom center", "fp8": "top center",
                   "int4": "bottom center", "nvfp4": "middle right", "mxfp4": "top center"}


def format_name(format: str, *, group_size: int) -> str:
    """How the demo names a format."""
    return {"fp32": "FP32 (as shipped)", "bf16": "BF16", "int8": "INT8 per channel",
            "fp8": "FP8 E4M3 per channel", "int4": f"INT4 group {group_size}",
            "nvfp4": "NVFP4", "mxfp4": "MXFP4"}[format]


PARAMS = ParamSchema(
    specs=(
        ParamSpec("formats", "Formats to quantize to (the FP32 model as shipped is always the "
                  "reference)", "choices", list(FORMATS_OFFERED),
                  choices=(("bf16", "BF16"), ("int8", "INT8 per channel"),
                           ("fp8", "FP8 E4M3 per channel"),
                           ("int4", "INT4 (groups and zero points)"), ("nvfp4", "NVFP4"),
                           ("mxfp4", "MXFP4"))),
        ParamSpec("int4_group_size", "INT4 group size", "choice", "128",
                  choices=tuple((str(g), str(g)) for g in INT4_GROUP_SIZES),
                  unit="weights per scale"),
        ParamSpec("documents", "Held-out documents to score", "whole", DOCUMENTS_DEFAULT,
                  minimum=DOCUMENTS_MIN, maximum=DOCUMENTS_MAX,
                  help="Each about a hundred tokens of text the model never trained on."),
        ParamSpec("quantize_embedding", "Quantize the embedding too (in this model it is also "
                  "the output head)", "bool", False),
    ),
    work=lambda values: values["documents"] * TOKENS_PER_DOCUMENT,
)


def _stop_check(ctx: RunContext, done: dict) -> None:
    ctx.check_time()
    cancels = ctx.cancels()
    if "all" in cancels:
        raise RunCancelled(cancels["all"], summary=done)


def quantization_plots(*, rows: list[dict], scores: dict[str, dict]) -> list[dict]:
    """The two closing figures and their tables: weight error measured against the
    rounding-noise prediction, and the loss of quality, both against bits per weight."""
    quantized = [r for r in rows if r["format"] != "bf16" or r["rel_error"] > 0]
    names = tuple(r["name"] for r in quantized)
    bits = tuple(r["bits_per_weight"] for r in quantized)
    error = Plot(
        title="Weight error, measured and predicted",
        x_title="Bits per weight (scales included)", y_title="Relative weight error (all layers)",
        x_log=True, y_log=True,
        series=(Series("measured", bits, tuple(r["rel_error"] for r in quantized),
                       lines=False, labels=names,
                       label_positions=tuple(LABEL_POSITIONS[r["format"]] for r in quantized)),
                Series("rounding-noise prediction", bits,
                       tuple(r["predicted_rel_error"] for r in quantized), lines=False,
                       hollow=True)))
    error_table = {
        "headers": ["format", "bits per weight", "bytes stored", "bytes predicted",
                    "error measured", "error predicted", "measured ÷ predicted"],
        "rows": [[r["name"], number_format(r["bits_per_weight"], digits=4),
                  f"{r['linear_bytes']:,}", f"{r['predicted_bytes']:,}",
                  number_format(r["rel_error"], digits=3),
                  number_format(r["predicted_rel_error"], digits=3),
                  number_format(r["rel_error"] / r["predicted_rel_error"], digits=3)
                  if r["predicted_rel_error"] else "–"] for r in quantized],
    }
    scored = [r for r in rows if scores.get(r["format"], {}).get("kl_mean", 0) > 0]
    quality = Plot(
        title="Quality lost against bits per weight",
        x_title="Bits per weight (scales included)",
        y_title="Mean KL divergence from FP32 (nats per token)", x_log=True, y_log=True,
        series=(Series("mean KL from FP32", tuple(r["bits_per_weight"] for r in scored),
                       tuple(scores[r["format"]]["kl_mean"] for r in scored), lines=False,
                       labels=tuple(r["name"] for r in scored),
                       label_positions=tuple(LABEL_POSITIONS[r["format"]] for r in scored)),))
    fp32 = scores["fp32"]
    quality_table = {
        "headers": ["format", "bytes of weights", "bits per weight", "bits per byte",
                    "Δ bits per byte", "greedy agreement", "mean KL (nats)"],
        "rows": [["FP32 (as shipped)", f"{rows[0]['fp32_model_bytes']:,}", "32",
                  number_format(fp32["bpb"], digits=4), "0", "100%", "0"]] + [
            [r["name"], f"{r['model_bytes']:,}", number_format(r["bits_per_weight"], digits=4),
             number_format(scores[r["format"]]["bpb"], digits=4),
             number_format(scores[r["format"]]["bpb"] - fp32["bpb"], digits=2),
             percent_format(scores[r["format"]]["agreement"]),
             number_format(scores[r["format"]]["kl_mean"], digits=3)] for r in rows],
    }
    return [
        {"figure": plot_figure(error), "table": error_table, "fallback": plot_table(error),
         "note": "The bytes match the arithmetic exactly: they are the codes and scales each "
                 "format defines, counted one by one. The prediction treats each weight's "
                 "rounding error as spread evenly across the step between its two grid "
                 "neighbours (step² ÷ 12). It fits the 8-bit formats, whose steps are fine "
                 "next to the weights. At 4 bits it is only approximate: each group's or "
                 "block's largest value sits on (or next to) the top of the grid by "
                 "construction and carries almost no error, one value in 16 for NVFP4 but one "
                 "in 128 for INT4, and scales and zero points are themselves rounded."},
        {"figure": plot_figure(quality), "table": quality_table,
         "note": "No formula predicts this one: how much an error hurts depends on which "
                 "layer it is in and what the activations multiply it by, so it is measured. "
                 "This model is tiny, and every weight does a lot of work: expect far larger "
                 "losses than published results for 8B–70B models."},
    ]


def bpb_note(*, scores: dict[str, dict], names: dict[str, str], tokens: int) -> str:
    """Why a quantized format can score a better bits per byte than FP32 on this run's text,
    when one does (empty otherwise): rounding cannot make the model better on average, so the
    gain is the evaluation's noise, and KL from FP32 measures the damage directly."""
    base = scores["fp32"]["bpb"]
    better = [f for f in scores if f != "fp32" and scores[f]["bpb"] < base]
    if not better:
        return ""
    from problems.arithmetic.wording import list_phrase

    parts = [f"{names.get(f, f)} ({base - scores[f]['bpb']:.2g} bits per byte below FP32, "
             f"mean KL {scores[f]['kl_mean']:.2g} nats)" for f in better]
    return (f"{list_phrase(parts)} scored better than FP32 on these {tokens:,} tokens. "
            "Rounding the weights adds noise to every prediction and cannot make the model "
            "better on average: a gain this small is the evaluation's own noise, which tokens "
            "a few documents happen to hold deciding differences of a few hundredths. The mean "
            "KL from FP32 beside it measures the change directly, and it is above zero for "
            "every quantized format; score more documents to shrink the noise.")


def quantization_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    """Quantize a copy of the engine's model to each format and score it against FP32."""
    from worker.cpu_threads import one_thread

    with one_thread():
        return _quantization_run(engine=engine, machine=machine, params=params, ctx=ctx)


def _quantization_run(*, engine, machine: dict, params: dict, ctx: RunContext) -> RunOutcome:
    from worker.evaluation import documents_encode, heldout_texts, quality_compare
    from worker.quantization import model_quantize

    group = int(params["int4_group_size"])
    formats = list(params["formats"])
    texts = heldout_texts(limit=params["documents"])
    documents = documents_encode(engine.tokenizer, texts)
    reference = engine.runner.model
    parameters = sum(p.numel() for p in reference.parameters())
    fp32 = model_quantize(reference, format="fp32")
    ctx.publish("started", {
        "formats": formats, "names": [format_name(f, group_size=group) for f in formats],
        "documents": len(documents),
        "tokens": sum(len(d.token_ids) - 1 for d in documents),
        "bytes": sum(d.text_bytes for d in documents), "int4_group_size": group,
        "quantize_embedding": params["quantize_embedding"], "parameters": parameters,
        "linear_weights": fp32.linear_weights, "matrices": len(fp32.tensors),
        "fp32_model_bytes": fp32.model_bytes, "at_ms": ctx.elapsed_ms(),
    })
    models, rows = {}, []
    for f in formats:
        _stop_check(ctx, {"quantized": [r["format"] for r in rows]})
        q = model_quantize(reference, format=f, group_size=group,
                           quantize_embedding=params["quantize_embedding"])
        models[f] = q.model
        row = {"format": f, "name": format_name(f, group_size=group),
               "linear_bytes": q.linear_bytes, "predicted_bytes": q.predicted_bytes,
               "embedding_bytes": q.embedding_bytes, "norm_bytes": q.norm_bytes,
               "model_bytes": q.model_bytes, "fp32_model_bytes": fp32.model_bytes,
               "bits_per_weight": q.bits_per_weight, "rel_error": q.error,
               "predicted_rel_error": q.predicted_error, "layers": q.layer_errors,
               "worst": q.worst, "at_ms": ctx.elapsed_ms()}
        rows.append(row)
        ctx.publish("format_quantized", row)

    def progress(done: int, of: int) -> None:
        ctx.publish("evaluation_progress", {"document": done, "of": of,
                                            "at_ms": ctx.elapsed_ms()})
        _stop_check(ctx, {"quantized": formats, "documents_scored": done})

    scores = quality_compare(reference=reference, candidates=models, config=engine.config,
                             documents=documents, on_document=progress, reference_name="fp32")
    for f in ["fp32", *formats]:
        s = scores[f]
        ctx.publish("format_evaluated", {
            "format": f, "name": format_name(f, group_size=group), "bpb": s["bpb"],
            "bpb_delta": s["bpb"] - scores["fp32"]["bpb"], "agreement": s["agreement"],
            "kl_mean": s["kl_mean"], "positions": s["positions"], "at_ms": ctx.elapsed_ms()})
    plots = quantization_plots(rows=rows, scores=scores)
    ctx.publish("plot", {"figures": plots, "at_ms": ctx.elapsed_ms()})
    four_bit = [f for f in formats if f in FOUR_BIT]
    best = min(four_bit, key=lambda f: scores[f]["kl_mean"]) if four_bit else None
    return RunOutcome(state="finished", summary={
        "formats": formats,
        "best_4bit": best,
        "bytes": {r["format"]: r["linear_bytes"] for r in rows},
        "bytes_match": all(r["linear_bytes"] == r["predicted_bytes"] for r in rows),
        "scores": {f: {k: scores[f][k] for k in ("bpb", "agreement", "kl_mean")}
                   for f in scores},
        "positions": scores["fp32"]["positions"],
        "device": machine.get("device", "cpu"),
        "bpb_note": bpb_note(scores=scores,
                             names={f: format_name(f, group_size=group) for f in formats},
                             tokens=sum(len(d.token_ids) - 1 for d in documents)),
    })


from demos.runners import runner_register  # noqa: E402

runner_register("quantization", quantization_run, engine="own", params=PARAMS)
