"""Problem 5 on page 02, through Django's test client: every section written, the figures equal
to the JSON API's, inputs that change them, a refused input beside its field, the demo's real
source shown, no typed figures, the live demo embedded."""

import html
import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_short
from problems.content import p05
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/02/"
TEMPLATE = Path(p05.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 5), 5, slug))


def api(client, **params) -> dict:
    response = client.get("/api/calc/attention-io", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 5)
    for slug, heading in SECTIONS:
        section = section_html(problem, 5, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_worked_figures_equal_the_api(client) -> None:
    """Llama 3.1 70B at 32,768 tokens, 64 heads, BF16: S is 128 GiB = 137 GB, S and P 275 GB,
    more than an H100 holds."""
    worked = section_text(client, "worked")
    body = api(client)
    assert bytes_short(body["scores_bytes"]) == "137 GB" and "137 GB" in worked
    for key in ("intermediate_bytes", "standard_bytes", "fused_min_bytes", "fused_tiles_bytes"):
        assert bytes_short(body[key]) in worked
    assert "it does not fit" in worked


def test_a_short_sequence_fits_and_changes_the_working(client) -> None:
    worked = section_text(client, "worked", "?p05-attn-tokens=2048&p05-attn-model=llama-3-8b")
    body = api(client, tokens=2048, model="llama-3-8b")
    assert bytes_short(body["standard_bytes"]) in worked
    assert "it does not fit" not in worked


def test_a_refused_input_shows_beside_its_field(client) -> None:
    content = page_get(client, "?p05-attn-model=deepseek-v3")
    worked = section_html(problem_html(content, 5), 5, "worked")
    error = re.search(r'id="id_p05-attn-model_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "MHA or GQA" in error.group(1)


def test_the_demo_and_its_real_source_are_shown(client) -> None:
    demo = section_html(problem_html(page_get(client), 5), 5, "demo")
    assert 'id="demo-attention-kernels"' in demo
    listing = re.search(r'<pre class="code-listing"><code>(.*?)</code></pre>', demo, re.S)
    assert html.unescape(listing.group(1)) == p05.tiled_source()
    assert "def attention_tiled(" in listing.group(1)


def test_hints_are_hidden(client) -> None:
    problem = problem_html(page_get(client), 5)
    assert section_html(problem, 5, "followups").count("<details>") >= 4
    assert section_html(problem, 5, "mistakes").count("<li>") >= 4


def test_no_figure_is_typed_into_the_template() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p05.SOURCES) >= 8
    for title, url in p05.SOURCES:
        assert title and url.startswith("https://")


def test_on_chip_and_hbm_sizes_read_as_their_sources_write_them(client) -> None:
    """The H100's L2 is the whitepaper's 50 MB and its HBM the datasheet's 80 GB, not the same
    bytes printed in decimal units (52.4 MB) or the driver's 85.5 GB."""
    text = section_text(client, "concepts")
    assert "50 MB L2" in text
    assert "52.4 MB" not in text
    assert "80 GB of HBM" in text
    assert "85.5 GB" not in text and "85.9 GB" not in text
    # 80 GB ÷ (108 × 192 KiB) = 3,768× and 19 TB/s ÷ 2.039 TB/s = 9.32×, computed, not typed.
    assert "3,768× smaller than HBM on the A100" in text and "9.32× faster" in text
    # The 19 TB/s estimate is the A100's: the ratio must not read as the H100's too.
    assert "on the A100 by the paper's estimate, 9.32× faster" in text


def test_causal_flops_and_the_worst_case_traffic_are_stated(client) -> None:
    """Prefill is causal: the worked answer says a fused kernel does about half the counted FLOPs,
    and the model answer does not promise orders of magnitude less traffic without the re-read
    worst case beside it."""
    worked = section_text(client, "worked")
    assert "causal" in worked and "about half" in worked
    answer = section_text(client, "answer")
    assert "re-reads K and V" in answer and "causal" in answer


def test_the_tile_hint_computes_its_sizes(client) -> None:
    """Tiles of 64 and 128 rows at head_dim 128 in BF16 with an FP32 accumulator: 80 and
    160 KiB, and a smaller head_dim shrinks them (the words follow the inputs)."""
    follow = section_text(client, "followups")
    assert "64 rows take 80 KiB and tiles of 128 rows 160 KiB" in follow
    small = section_text(client, "followups", "?p05-attn-model=course-lm&p05-attn-dtype=fp32"
                         "&p05-attn-tokens=1024")
    assert "80 KiB" not in small


def test_small_tiles_are_not_called_a_win(client) -> None:
    """Tiles of 32 query rows at head_dim 128 re-read K and V 1,024 times at 32,768 tokens: the
    worst case moves about 2× the standard path's bytes, so the page must not say 'moves 0.501×
    the bytes' or '0.501× to 4.63× faster'."""
    query = "?p05-attn-tile_rows=32"
    worked = section_text(client, "worked", query)
    assert "0.501×" not in worked and "1.99× the standard path's bytes" in worked
    assert "between 1.99× slower" in worked and "4.63× faster" in worked
    answer = section_text(client, "answer", query)
    assert "0.501×" not in answer and "orders of magnitude" not in answer
    assert "257× less" in section_text(client, "answer")


def test_the_paged_hint_matches_what_engines_do(client) -> None:
    """FlashAttention-2's paged path wants blocks of a multiple of 256 tokens, while vLLM runs
    16-token blocks: the hint must not say a block should hold a whole tile."""
    follow = section_text(client, "followups")
    assert "multiple of 256 tokens" in follow and "blocks of 16" in follow
    assert "at least one tile's worth" not in follow
    # The 256 rule is upstream FlashAttention-2's; vLLM's 16-token blocks are read by its own fork
    # of FlashAttention (multiples of 16), not by kernels that have nothing to do with it.
    assert "Upstream FlashAttention-2" in follow and "kernels written to gather" not in follow
    assert "its own fork, which relaxes that rule to multiples of 16" in follow
    sources = text_of(page_get(client))
    assert "vllm-project/flash-attention" in sources and "hopper/flash_api.cpp" in sources
    # The 64- and 128-row tiles and the A100's 2,039 GB/s behind 9.32× are sourced too.
    assert "{64, 128} × {64, 128}" in sources and "2,039 GB/s" in sources


def test_counts_read_in_the_singular_and_plural(client) -> None:
    """Four sequences are "4 sequences" (the page said "4 sequence of 256 tokens"), and a tile
    of one query row is not "1 query rows" or "tiles of 1 rows"."""
    worked = section_text(client, "worked", "?p05-attn-batch=4&p05-attn-tokens=256")
    assert "prefilling 4 sequences of 256 tokens" in worked
    query = "?p05-attn-tile_rows=1"
    worked = section_text(client, "worked", query)
    answer = section_text(client, "answer", query)
    assert "every tile of 1 query row and" in worked and "1 query rows" not in worked
    assert "tiles of 1 row would move" in answer
    assert "prefilling 1 sequence of 32,768 tokens" in section_text(client, "worked")


def test_fp32_attention_runs_at_the_fp32_rate_and_the_words_follow(client) -> None:
    """FP32 attention on an H100 runs at its 67 TFLOP/s FP32 rate (the page used the BF16
    tensor-core peak, 989 TFLOP/s): a ridge of 67 ÷ 3.35 = 20 FLOP per byte, which the
    standard path's 31.9 FLOP per byte passes, so both paths are compute-bound and the fused
    kernel is no faster by the floors. The prose must not say the kernels wait on memory or
    that tiling turns attention compute-bound there."""
    body = api(client, dtype="fp32")
    assert round(body["ridge"]) == 20 and body["standard_bound"] == "compute"
    query = "?p05-attn-dtype=fp32"
    worked = section_text(client, "worked", query)
    assert "The fused kernel is no faster by these floors" in worked
    answer = section_text(client, "answer", query)
    assert "so the kernels wait on memory" not in answer and "wait on arithmetic" in answer
    assert "attention becomes compute-bound" not in answer and "no faster here" in answer
    assert "even the standard path waits on arithmetic" in section_text(client, "concepts",
                                                                         query)
    default = section_text(client, "answer")
    assert "so the kernels wait on memory" in default
    assert "attention becomes compute-bound: by my floors 2× to 4.63× faster" in default


def test_a_short_sequence_is_not_said_to_turn_compute_bound(client) -> None:
    """At 256 tokens on an A100 even the fused kernel's best floor is memory-bound, so the
    answer does not say tiling makes attention compute-bound."""
    query = "?p05-attn-tokens=256&p05-attn-gpu=a100-80gb-sxm"
    body = api(client, tokens=256, gpu="a100-80gb-sxm")
    assert body["fused_min_bound"] == "memory"
    assert "attention becomes compute-bound" not in section_text(client, "answer", query)


def test_decode_reads_each_kv_head_once_only_when_the_kernel_packs_gqa(client) -> None:
    """The strict review's M6: 'each step reads the KV cache once, whatever the kernel' is
    false under GQA. Llama 3.1 70B has 64 ÷ 8 = 8 query heads per KV head. By hand, per cached
    position and KV head: 2 × 128 values loaded; each query head does 2 × 128 (q·k) + 2 × 128
    (p·v) FLOPs. Unpacked: 512 FLOPs ÷ (256 × 2 B) = 1 FLOP/B; packed, 8 heads per load:
    8 FLOP/B."""
    from problems.arithmetic.attention_io import decode_attention_intensity

    assert decode_attention_intensity(heads=64, kv_heads=8, value_bytes=2, packed=False) == 1
    assert decode_attention_intensity(heads=64, kv_heads=8, value_bytes=2, packed=True) == 8
    text = " ".join(section_text(client, slug) for slug in ("tradeoffs", "followups",
                                                            "mistakes"))
    assert "whatever the kernel" not in text and "regardless" not in text
    assert "PackGQA" in text and "loads every KV head 8 times per step" in text
    assert "at about 8 FLOP per byte" in text
    # Llama 2 7B has one KV head per query head: no packing to speak of.
    mha = section_text(client, "tradeoffs", "?p05-attn-model=llama-2-7b&p05-attn-tokens=4096")
    assert "one KV head per query head, so each is loaded once per step by any kernel" in mha


def test_the_fa3_hint_names_the_exponential_bottleneck(client) -> None:
    """The strict review's X5: the FA3 paper's §3 gives the H100 SXM5 989 TFLOPS of FP16
    matmul against 3.9 TFLOPS of special functions: 989 ÷ 3.9 = 254× less for exp."""
    followups = section_text(client, "followups")
    assert "989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of exponentials" in followups
    assert "(254× less)" in followups and "two warpgroups take turns" in followups


def test_the_learners_own_length_is_always_on_the_plots() -> None:
    """The calculator review's dead end: at 128 tokens the plots began at 512, so the
    learner's own point was off the chart. Now both start at min(512, 128) = 128, hold 128
    itself, and mark it; a length between sweep points (1,000) is added and marked too."""
    inputs = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tokens": 128, "batch": 1,
              "dtype": "bf16", "tile_rows": 128, "mfu": 1.0}
    for plot in (p05.traffic_plot(inputs=inputs, result=None),
                 p05.time_plot(inputs=inputs, result=None)):
        assert plot.series[0].x[0] == 128
        assert [m.x for m in plot.marks] == [128] and "your 128 tokens" in plot.marks[0].label
    plot = p05.time_plot(inputs={**inputs, "tokens": 1_000}, result=None)
    assert 1_000 in plot.series[0].x and plot.marks[0].x == 1_000


def test_one_tile_and_a_tiny_sequence_read_right(client) -> None:
    """Found on the fresh review: at 64 tokens of course-lm with tiles of 128 rows the page said
    the fused intensity is "far higher when each tensor moves once", though one tile reads K and
    V once either way (131,072 B both, 4.2×10⁶ FLOP ÷ 131,072 B = 32 FLOP/B both); at one token
    it said the standard path moves "1.01× the bytes" (66,048 ÷ 65,536). At the defaults the
    each-once intensity is now given: 3.5×10¹³ FLOP ÷ 2.15 GB = N ÷ 2 = 16,384 FLOP/B."""
    small = section_text(client, "worked", "?p05-attn-model=course-lm&p05-attn-gpu=b200"
                         "&p05-attn-tokens=64")
    assert "far higher" not in small
    assert "the whole sequence is one tile of queries" in small
    one = section_text(client, "worked", "?p05-attn-tokens=1&p05-attn-tile_rows=1")
    assert "moves about the same bytes as the tiled kernel here (1.01×)" in one
    assert "16,384 when each tensor moves once" in section_text(client, "worked")


def test_a_prefill_past_the_models_window_is_refused(client) -> None:
    """Found on the fresh review: Llama 3.1 405B "prefilling 64 sequences of 1,000,000 tokens"
    was worked through, though its window is 131,072 tokens; the form now refuses it beside
    the field, as problem 3 does, and the plots stop at the model's window."""
    body = client.get("/api/calc/attention-io", {"model": "llama-3.1-405b", "tokens": 1_000_000})
    assert body.status_code == 400 and b"context window of 131,072 tokens" in body.content
    worked = section_text(client, "worked",
                          "?p05-attn-model=llama-3.1-405b&p05-attn-tokens=1000000")
    assert "were refused" in worked and "1,000,000 tokens exceeds" in worked
    # Llama 2 7B's plots end at its 4,096-token window.
    text = section_text(client, "worked", "?p05-attn-model=llama-2-7b&p05-attn-tokens=512")
    assert "| 4,096 |" in text or "4,096" in text
    assert "131,072" not in text


def test_a_one_token_prefill_is_not_called_faster_or_lighter(client) -> None:
    """Found on the fresh review: at one token the standard path moves 66,048 B against the
    fused kernel's 65,536 B (1.01×), and the page said the fused kernel is "1.01× faster" and
    moves "1.01× less traffic", a difference no floor can show."""
    query = "?p05-attn-tokens=1&p05-attn-tile_rows=1"
    worked = section_text(client, "worked", query)
    assert "1.01× faster" not in worked and "The fused kernel is no faster" in worked
    answer = section_text(client, "answer", query)
    assert "1.01× less" not in answer
    assert "about the same traffic as the standard path at this length" in answer
    assert "where the scores are too small to matter" in answer
    assert "257× less traffic" in section_text(client, "answer")


def test_the_prefill_regime_sentences_follow_the_roofline(client) -> None:
    """Found on the strict re-review: the trade-offs said "in prefill, tiling turns attention
    from memory-bound into compute-bound" and the mistakes said the standard path "is bound by
    its N² bytes of traffic ... the roofline shows it" at every input. In FP32 on an A100 the
    worked answer itself gives the standard path 1.8 s compute-bound (ridge 9.56 FLOP per byte
    against its 31.9), and at 512 tokens on an H100 the fused kernel stays memory-bound (256
    FLOP per byte against a ridge of 295)."""
    fp32 = "?p05-attn-dtype=fp32&p05-attn-gpu=a100-80gb-sxm"
    assert "1.8 s (compute-bound)" in section_text(client, "worked", fp32)
    tradeoffs = section_text(client, "tradeoffs", fp32)
    assert "In prefill, tiling turns attention" not in tradeoffs
    assert "the standard path is compute-bound already" in tradeoffs
    mistakes = section_text(client, "mistakes", fp32)
    assert "the roofline shows it" not in mistakes
    assert "its ridge is only 9.56 FLOP per byte, below the standard path's 31.9" in mistakes
    short = section_text(client, "tradeoffs", "?p05-attn-tokens=512")
    assert "even the fused kernel moving each tensor once stays memory-bound here" in short
    assert "256 FLOP per byte against a ridge of 295" in short
    default = section_text(client, "tradeoffs")
    assert "the standard path takes 165 ms (memory-bound), the fused kernel 35.6 ms" in default
    assert "63.8 FLOP per byte against a ridge of 295" in section_text(client, "mistakes")


def test_fp32_on_the_mi300x_gains_nothing_from_its_matrix_cores(client) -> None:
    """FP32 attention on the MI300X: 163.4 TFLOP/s ÷ 5.3 TB/s = a ridge of 30.8 FLOP per byte.
    Review rev5: the page said FP32 "runs without Matrix Cores", but the MI300X's Matrix Cores
    do take FP32, at 163.4 TFLOP/s, the same as its vector ALUs (ROCm's MI300 peak table); what
    is true of every GPU here is that they offer FP32 no faster path. The trade-offs and
    mistakes said "tensor cores" on an AMD GPU."""
    query = "?p05-attn-gpu=mi300x&p05-attn-dtype=fp32"
    concepts = section_text(client, "concepts", query)
    assert ("(FP32, for which the MI300X's Matrix Cores offer no faster path) the AMD Instinct "
            "MI300X's ridge is only 30.8 FLOP per byte") in concepts
    assert "runs without" not in concepts
    for slug in ("tradeoffs", "mistakes"):
        text = section_text(client, slug, query)
        assert "tensor cores" not in text
        assert "for which the Matrix Cores offer no faster path" in text
    assert "for which the H100 SXM's tensor cores offer no faster path" in section_text(
        client, "concepts", "?p05-attn-dtype=fp32")
    assert any("rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300" in url
               for _, url in p05.SOURCES)


def test_a_gddr_gpu_is_not_said_to_move_hbm(client) -> None:
    """Review rev5: on an L4 (GDDR6) the worked answer counted "HBM traffic" and the plot was
    titled "HBM traffic"; the memory is named from the catalog."""
    worked = section_text(client, "worked", "?p05-attn-gpu=l4")
    assert "GDDR6 traffic. Standard:" in worked
    assert "Standard: GDDR6 traffic" in worked
    assert "HBM traffic" not in worked and "held in HBM" not in worked
    assert "to GDDR6" in section_text(client, "answer", "?p05-attn-gpu=l4")
    assert "the L4 worked below has GDDR6 in its place" in section_text(
        client, "concepts", "?p05-attn-gpu=l4")
    assert "HBM traffic. Standard:" in section_text(client, "worked")
    assert "in its place" not in section_text(client, "concepts")


def test_the_length_where_the_scores_fit_in_cache_is_computed(client) -> None:
    """Review rev5: "at a few hundred tokens it fits in cache" held for one sequence on an H100
    (S and P = 2 × N² × 2 B × 64 heads ≤ 50 MiB below N = √204,800 = 452) but not at 64
    sequences on an L4 (48 MiB ÷ (2 × 2 × 64 × 64) = 3,072, √ = 55 tokens). The MI300X's is
    its 256 MiB Infinity Cache (FP32: 256 MiB ÷ (2 × 4 × 64) = 524,288, √ = 724); the H200's
    L2 is not sourced."""
    worked = section_text(client, "worked")
    assert "Below about 452 tokens (1 sequence, 64 query heads, BF16) S and P fit together in " \
        "the H100 SXM's L2 (50 MiB)" in worked
    assert "a few hundred" not in worked
    assert "Below about 55 tokens (64 sequences" in section_text(
        client, "worked", "?p05-attn-gpu=l4&p05-attn-batch=64")
    assert "Below about 724 tokens (1 sequence, 64 query heads, FP32) S and P fit together in " \
        "the MI300X's Infinity Cache (256 MiB)" in section_text(
            client, "worked", "?p05-attn-gpu=mi300x&p05-attn-dtype=fp32")
    assert "no public source we found gives the H200's size" in section_text(
        client, "worked", "?p05-attn-gpu=h200")
    g = p05.gpu_get("h100-sxm")
    for tokens in (452, 453):
        fits = 2 * tokens**2 * 2 * 64 <= 50 * 2**20
        assert fits == (tokens == 452)
    assert p05.scores_cache_context(gpu=g, intermediate=2 * 32_768**2 * 2 * 64,
                                    tokens=32_768)["tokens"] == 452


def test_a_compute_bound_time_below_the_peak_is_not_called_a_floor(client) -> None:
    """Review rev5: at 50% MFU a compute-bound time is an estimate at that MFU, not a floor;
    a memory-bound one (peak bandwidth) stays a floor. FP32 on an H100 at 0.5: 3.5e13 FLOP ÷
    33.5 TFLOP/s = 1.05 s."""
    from problems.arithmetic.attention_io import attention_io

    steps = {s.label: s.display for s in attention_io(dtype="fp32", mfu=0.5).steps}
    assert steps["Standard: time"].endswith("(compute-bound, at 50% MFU)")
    steps = {s.label: s.display for s in attention_io(mfu=0.5).steps}
    assert steps["Standard: time"].endswith("(memory-bound, floor)")
    steps = {s.label: s.display for s in attention_io(dtype="fp32").steps}
    assert steps["Standard: time"].endswith("(compute-bound, floor)")


def test_a_length_where_fusion_gains_nothing_is_not_called_a_win(client) -> None:
    """Review rev5 at one token: the trade-offs said the fused kernel "wins by moving fewer
    bytes" where the floors make it no faster (both paths move about the same bytes); and the
    model answer called the standard path's intensity "far below" the ridge at 25% MFU, where
    63.8 FLOP/B sits just under the H100's 989.5 × 0.25 ÷ 3.35 = 73.8."""
    one = section_text(client, "tradeoffs", "?p05-attn-tokens=1")
    assert "it is no faster: the scores are too small to be much of the traffic" in one
    assert "it wins by moving fewer bytes" not in one
    assert "it wins by moving fewer bytes" in section_text(client, "tradeoffs",
                                                           "?p05-attn-tokens=512")
    answer = section_text(client, "answer", "?p05-attn-mfu=0.25")
    assert "per value moved, below the GPU's ridge point" in answer
    assert "far below" not in answer
    assert "per value moved, far below the GPU's ridge point" in section_text(client, "answer")
