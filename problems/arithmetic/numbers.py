"""The numbers to know: one sheet of the figures an inference engineer is expected to know or
derive on the spot, each computed here from the catalogs (which name their sources), each tied to
the problem that uses it. Plain Python; the /numbers/ page renders it.

The standard cases use floors: 100% of peak compute and of peak bandwidth, so every time is the
least the hardware allows (a real engine reaches perhaps 40–60% of the compute peak and 70–90%
of the bandwidth).
"""

from dataclasses import dataclass

from problems.arithmetic.catalog import DTYPES, GPUS, MODELS, dtype_get, gpu_get, model_get
from problems.arithmetic.catalog.links import LINKS
from problems.arithmetic.compute import kv_bytes_per_token_model, prefill_times_model
from problems.arithmetic.decode import decode_step_model
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    params_count_model,
    weight_bytes_model,
)
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_short,
    flops_rate_format,
    number_format,
    ops_format,
    seconds_format,
)

# The standard cases: the course's worked example (problem 1) and its 70B sibling, on an H100,
# BF16, a 1,000-token prompt, decode at batch 1 with that prompt in the cache.
STANDARD_GPU = "h100-sxm"
STANDARD_MODELS = ("llama-3-8b", "llama-3-70b")
STANDARD_PROMPT_TOKENS = 1000
KB = 1000
TP_CHOICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Row:
    cells: tuple[str, ...]  # the first cell names the row
    source: str
    values: dict[str, float]  # the same figures as numbers (for tests and the JSON)


@dataclass(frozen=True)
class Section:
    slug: str
    title: str
    note: str
    problem: int  # the problem that uses these numbers
    headers: tuple[str, ...]
    rows: tuple[Row, ...]


def _rate(value: float | None, *, ops: bool = False) -> str:
    if value is None:
        return "—"
    return ops_format(value) if ops else flops_rate_format(value)


def _gpu_link(g):  # noqa: ANN001, ANN202
    """The links-table entry a PCIe card talks over, or None (the GPU's own link)."""
    return next((link for link in LINKS.values() if g.interconnect.startswith(link.name)), None)


def _gpu_link_one_way(g) -> float:  # noqa: ANN001
    """A GPU's link to its neighbour, one direction. A PCIe card talks over PCIe, whose rate the
    links table derives (after 128b/130b encoding): the same figure in both tables."""
    link = _gpu_link(g)
    return link.bytes_per_second if link else g.interconnect_one_way_bytes_per_second


def _gpu_source(g) -> str:  # noqa: ANN001
    """The GPU's datasheet, and for a PCIe card the standard its link figure is derived from
    (the datasheet prints the rounded total for both directions, not this figure)."""
    link = _gpu_link(g)
    if link is None:
        return g.source
    return f"{g.source}; link: {link.source} ({link.derivation})"


def _gpu_link_text(g) -> str:  # noqa: ANN001
    """A GPU's link, one direction; on a mesh (MI300X) the total over all its links beside
    what one peer gets, since a copy between two GPUs crosses only one."""
    text = f"{g.interconnect}: {bandwidth_format(_gpu_link_one_way(g))} each way"
    if g.mesh_links:
        text += (f" over all {g.mesh_links} links together, "
                 f"{bandwidth_format(g.peer_one_way_bytes_per_second)} to any one peer")
    return text


def gpus_section() -> Section:
    rows = []
    for g in GPUS.values():
        ridge = g.bf16_flops / g.bandwidth_bytes_per_second
        rows.append(Row(
            cells=(g.name, f"{g.memory_label} {g.memory_kind} "
                   f"({g.memory_total_text} = "
                   f"{number_format(g.memory_total_bytes / GB)} GB)",
                   bandwidth_format(g.bandwidth_bytes_per_second), _rate(g.bf16_flops),
                   _rate(g.fp8_flops), _rate(g.int8_ops, ops=True), _rate(g.fp4_flops),
                   f"{number_format(ridge)} FLOP/B", _gpu_link_text(g)),
            source=_gpu_source(g),
            values={"memory_bytes": g.memory_total_bytes,
                    "link_one_way_bytes_per_second": _gpu_link_one_way(g),
                    "bandwidth_bytes_per_second": g.bandwidth_bytes_per_second,
                    "bf16_flops": g.bf16_flops, "ridge_bf16": ridge},
        ))
    return Section(
        slug="gpus", title="GPUs: memory, bandwidth, dense compute, ridge point", problem=12,
        note=("Dense rates of the matrix units (NVIDIA's tensor cores, AMD's Matrix Cores; "
              "datasheets print twice these, with 2:4 sparsity). The "
              "ridge point is BF16 peak ÷ bandwidth: a kernel doing fewer FLOPs per byte than "
              "this is memory-bound. Memory: the datasheet's label, then what the driver "
              "reports, in MiB as nvidia-smi (ROCm for the MI300X) prints it and in decimal GB "
              "(what the fit checks on this sheet count): a datasheet's GB is a round label, "
              "and the driver's 2²⁰-byte MiB make the two differ."),
        headers=("GPU", "memory", "bandwidth", "BF16", "FP8", "INT8", "FP4", "BF16 ridge",
                 "GPU-to-GPU link"),
        rows=tuple(rows))


def formats_section() -> Section:
    rows = tuple(
        Row(cells=(d.name, f"{number_format(d.bits)} bits", f"{number_format(d.bytes)} B",
                   f"{number_format(1e9 * d.bytes / GB)} GB"),
            source=d.source, values={"bits": d.bits, "bytes": d.bytes})
        for d in DTYPES.values())
    return Section(
        slug="formats", title="Bytes per parameter, by number format", problem=11,
        note="Block-scaled formats include their scales' share of the bits.",
        headers=("format", "bits per value", "bytes per value", "a billion parameters"),
        rows=rows)


def models_section() -> Section:
    bf16 = dtype_get("bf16")
    rows = []
    for m in MODELS.values():
        per_token = kv_bytes_per_token_model(m, bf16)
        parts = params_count_model(m)
        weights = weight_bytes_model(model=m, dtype=bf16, embedding=bf16)["total"]
        rows.append(Row(
            cells=(m.name, f"{number_format(parts['total'] / 1e9)} B"
                   + (f" ({number_format(parts['active'] / 1e9)} B active)" if m.is_moe else ""),
                   bytes_short(weights), f"{number_format(per_token / KB)} kB",
                   bytes_short(per_token * m.context), f"{number_format(m.context)} tokens"),
            source=m.source,
            values={"params": parts["total"], "weights_bf16_bytes": weights,
                    "kv_bytes_per_token_bf16": per_token, "context": m.context}))
    return Section(
        slug="models", title="Models: weights and KV cache per token", problem=3,
        note=("BF16 weights and a BF16 KV cache: K and V, every layer. Halve the KV with FP8. "
              "A full-context sequence is one sequence at the model's whole context."),
        headers=("model", "parameters", "weights (BF16)", "KV per token", "KV, one full context",
                 "context"),
        rows=tuple(rows))


def floors_section() -> Section:
    gpu = gpu_get(STANDARD_GPU)
    bf16 = dtype_get("bf16")
    rows = []
    budget = gpu.memory_total_bytes * MEMORY_FRACTION_DEFAULT - RESERVE_GB_DEFAULT * GB
    for model_id in STANDARD_MODELS:
        m = model_get(model_id)
        kv_per_token = kv_bytes_per_token_model(m, bf16)
        prefill = prefill_times_model(model=m, gpu=gpu, tokens=STANDARD_PROMPT_TOKENS, dtype=bf16,
                                      embedding=bf16, kv_dtype=bf16, mfu=1.0,
                                      bandwidth_efficiency=1.0)
        step = decode_step_model(model=m, gpu=gpu, batch=1, context_tokens=STANDARD_PROMPT_TOKENS,
                                 weight_bytes_per_param=bf16.bytes,
                                 kv_bytes_per_token=kv_per_token, bandwidth_efficiency=1.0)
        # The fewest GPUs (tensor parallel, a power of two) whose share of the weights and KV
        # fits beside the reserve; the work splits evenly, so each floor divides by it (the
        # all-reduces between them are left out, which keeps it a floor).
        weights = weight_bytes_model(model=m, dtype=bf16, embedding=bf16)["total"]
        held = weights + kv_per_token * STANDARD_PROMPT_TOKENS  # every weight is held
        tp = next((t for t in TP_CHOICES if held / t <= budget), None)
        if tp is None:
            continue
        compute_s, memory_s = prefill["compute_seconds"] / tp, prefill["memory_seconds"] / tp
        prefill_s = max(compute_s, memory_s)
        prefill_bound = "compute" if compute_s >= memory_s else "memory"
        decode_s = step["seconds"] / tp
        rows.append(Row(
            cells=(m.name, f"{tp} × {gpu.name}" + (" (tensor parallel)" if tp > 1 else ""),
                   f"{seconds_format(prefill_s)} ({prefill_bound}-bound)",
                   f"{seconds_format(decode_s)} (memory-bound)",
                   f"{number_format(1 / decode_s)} tokens/s"),
            source=m.source + "; " + gpu.source,
            values={"gpus": tp, "prefill_seconds": prefill_s, "decode_step_seconds": decode_s,
                    "weights_bytes": weights, "weights_read_bytes": step["weights"]}))
    return Section(
        slug="floors",
        title=(f"Floors for the standard cases: {gpu.name}, BF16, a "
               f"{number_format(STANDARD_PROMPT_TOKENS)}-token prompt, batch 1"),
        problem=1,
        note=("Floors at 100% of peak compute and bandwidth. Prefill: the larger of FLOPs ÷ peak "
              "and bytes ÷ bandwidth. A decode step reads every weight (of the embedding table, "
              "only the token's row) and the sequence's KV once, so its floor is bytes ÷ "
              "bandwidth, and one stream's speed is at most its "
              "inverse. Each model runs on the fewest GPUs whose memory holds its weights and "
              f"this prompt's KV beside a {number_format(RESERVE_GB_DEFAULT)} GB reserve, within "
              f"{number_format(100 * MEMORY_FRACTION_DEFAULT)}% of each GPU's memory; with "
              "several, the floors divide among them and leave out their all-reduces."),
        headers=("model", "GPUs (the fewest that hold it)", "prefill floor", "decode step floor",
                 "one stream at most"),
        rows=tuple(rows))


def links_section() -> Section:
    rows = [Row(cells=(link.name, bandwidth_format(link.bytes_per_second), link.derivation),
                source=link.source, values={"bytes_per_second": link.bytes_per_second})
            for link in LINKS.values()]
    for g in GPUS.values():
        if g.mesh_links:
            rows.append(Row(
                cells=(f"{g.interconnect}, one link between two GPUs ({g.name})",
                       bandwidth_format(g.peer_one_way_bytes_per_second),
                       f"{bandwidth_format(g.peer_link_bytes_per_second)} per link, both "
                       f"directions: ÷ 2 (a GPU's {g.mesh_links} links, one to each peer, "
                       f"make its {bandwidth_format(g.interconnect_bytes_per_second)} "
                       "together)"),
                source=f"{g.peer_link_source}; {g.interconnect_source}",
                values={"bytes_per_second": g.peer_one_way_bytes_per_second}))
        if g.interconnect.startswith("NVLink"):
            rows.append(Row(
                cells=(f"{g.interconnect} ({g.name})",
                       bandwidth_format(g.interconnect_one_way_bytes_per_second),
                       f"the datasheet's {bandwidth_format(g.interconnect_bytes_per_second)} "
                       "counts both directions: ÷ 2"),
                source=g.source,
                values={"bytes_per_second": g.interconnect_one_way_bytes_per_second}))
    return Section(
        slug="links", title="Links, one direction, at line rate", problem=22,
        note="Achieved transfers run below line rate (protocol overhead); the problems apply an "
             "efficiency.",
        headers=("link", "bandwidth", "how"),
        rows=tuple(rows))


def numbers_sheet() -> tuple[Section, ...]:
    """Every section of the numbers sheet, in the order the page prints them."""
    return (gpus_section(), formats_section(), models_section(), floors_section(),
            links_section())
