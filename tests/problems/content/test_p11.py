"""Problem 11 on page 06, through Django's test client: every section written, the figures equal
to the JSON API's, inputs that change them, a refused input beside its field, the worked NVFP4
block, hints hidden, accessible SVGs, the live demo embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_short, count_format, number_format, seconds_format
from problems.content import p11
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/06/"
TEMPLATE = Path(p11.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def api_get(client, path: str, **params) -> dict:
    response = client.get(f"/api/calc/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def section_text(client, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 11), 11, slug))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 11)
    for slug, heading in SECTIONS:
        section = section_html(problem, 11, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_worked_figures_equal_the_api(client) -> None:
    """Llama 3 70B on an H100 at the defaults: BF16 141 GB, FP8 72.7 GB, INT4 39.8 GB; decode
    41.6, 21.2 and 11.3 ms, memory-bound; FP8 prefill 70.5 ms (1.98×), INT4's 1×."""
    worked = section_text(client, "worked")
    body = api_get(client, "quantization-formats", model="llama-3-70b", gpu="h100-sxm",
                   prompt_tokens=1000, batch=1)
    rows = {f["dtype"]: f for f in body["formats"]}
    for d in ("bf16", "fp8", "int4", "nvfp4", "mxfp4"):
        row = rows[d]
        assert bytes_short(row["weights_bytes"]) in worked
        assert f"{seconds_format(row['decode_seconds'])} ({row['decode_bound']})" in worked
        assert f"{seconds_format(row['prefill_seconds'])} ({row['prefill_bound']})" in worked
    assert "141 GB" in worked and "72.7 GB" in worked and "39.8 GB" in worked
    assert f"FP8 gains {number_format(rows['fp8']['prefill_speedup'])}×" in worked
    assert "INT4, being weight-only, stays at 1×" in worked
    fp8_room = count_format(rows["fp8"]["kv_room_tokens"], "token")
    # Review P0607-02: 1,832 tokens of room is under Llama 3 70B's 8,192-token context, so vLLM
    # starts only with --max-model-len cut to it.
    assert f"starts only with --max-model-len ≤ {fp8_room}" in worked
    assert f"fits; {fp8_room} of KV room" not in worked
    assert "In BF16 the model fits the NVIDIA B200 only; in FP8 or INT8," in worked


def test_the_concepts_show_the_formats_and_the_worked_nvfp4_block(client) -> None:
    """Tensor scale 2.625 ÷ (6 × 448) = 2⁻¹⁰ ≈ 0.0009766; block scale 1 ÷ 6 ÷ 2⁻¹⁰ = 170.7, which
    rounds in E4M3 to 176 (0 1110 011); −0.9 reads back as −1.031; 0.05 as 0.08594."""
    concepts = section_text(client, "concepts")
    assert "2.625 ÷ (6 × 448) = 0.0009766" in concepts
    assert "170.7, which E4M3 cannot hold exactly: it rounds to 176 (bits 0 1110 011)" in concepts
    assert "−0.9, which reads back as −1.031" in concepts
    assert "0.05 reads back as 0.08594" in concepts
    for bits in ("16 bits", "8 bits", "4.16 bits", "4.5 bits", "4.25 bits"):
        assert bits in concepts
    assert "6,717,440 scales, 26.9 MB, or 0.0393%" in concepts


def test_changing_the_gpu_changes_the_figures(client) -> None:
    """On the B200 NVFP4 multiplies on FP4 tensor cores: prefill 3.89× over BF16."""
    worked = section_text(client, "worked", "?p11-formats-gpu=b200")
    body = api_get(client, "quantization-formats", model="llama-3-70b", gpu="b200")
    nvfp4 = next(f for f in body["formats"] if f["dtype"] == "nvfp4")
    assert nvfp4["native"]
    assert (f"NVFP4 gains {number_format(nvfp4['prefill_speedup'])}× on the NVIDIA B200's FP4 "
            "tensor cores") in worked
    assert "3.89×" in worked


def test_a_prompt_past_the_context_is_refused_beside_its_field(client) -> None:
    content = page_get(client, "?p11-formats-prompt_tokens=8193")
    worked = section_html(problem_html(content, 11), 11, "worked")
    error = re.search(r'id="id_p11-formats-prompt_tokens_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "context window of 8,192 tokens" in error.group(1)
    assert "41.6 ms (memory)" in text_of(worked)  # the prose keeps the defaults


def test_the_api_refuses_bad_input_naming_the_field(client) -> None:
    response = client.get("/api/calc/quantization-formats", {"model": "llama-3-70b",
                                                             "gpu": "h100-sxm", "batch": 0})
    assert response.status_code == 400 and response.json()["field"] == "batch"


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 11), 11, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)
    outside = re.sub(r"<details>.*?</details>", "", followups, flags=re.S)
    assert "Marlin" not in outside and "second-order" in followups


def test_mistakes_and_listens_are_lists_of_at_least_four(client) -> None:
    problem = problem_html(page_get(client), 11)
    assert section_html(problem, 11, "mistakes").count("<li>") >= 4
    assert section_html(problem, 11, "listens").count("<li>") >= 4


def test_the_diagrams_are_accessible_svgs(client) -> None:
    concepts = section_html(problem_html(page_get(client), 11), 11, "concepts")
    svgs = re.findall(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S)
    assert len(svgs) == 2
    for svg in svgs:
        assert 'role="img"' in svg
        assert re.search(r"<title[^>]*>[^<]+</title>", svg)
        assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)


def test_the_live_demo_and_the_calculator_are_embedded(client) -> None:
    problem = problem_html(page_get(client), 11)
    demo = section_html(problem, 11, "demo")
    assert 'data-demo="quantization"' in demo and 'name="formats"' in demo
    assert "js/demos/quantization.js" in demo
    assert 'data-calculator="quantization-formats"' in section_html(problem, 11, "worked")
    assert section_html(problem, 11, "worked").count('class="plot"') == 2


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p11.SOURCES) >= 10
    for title, url in p11.SOURCES:
        assert title and url.startswith("https://")


def test_the_speedup_plot_marks_the_batch_and_draws_int8_dashed() -> None:
    """Review P0607-03/04: the plot sets each format on its smallest deployment against BF16 on
    its own, not against one H100 that cannot hold BF16. Hand points (H100, 1,000 tokens, BF16
    KV, floors, 3 GB reserve, budget 0.9 × 85,061,827,297 − 3e9 = 73,555,644,567.3 B a GPU) at
    batch 64, whose KV is 64,000 × 327,680 = 20,971,520,000 B:
    BF16 needs TP 4 (at TP 2 each GPU's 70,553,706,496 B of weights leave 2.0 GB, under its
    10.5 GB of KV): reads 139,006,066,688 ÷ 4 + 20,971,520,000 ÷ 4 = 39,994,396,672 B in
    11.93863 ms, plus 160 all-reduces of 64 × 8,192 × 2 B, each 2 × 3/4 × 1,048,576 B ÷ 450 GB/s
    + 10 µs = 13.4953 µs: 2.15924 ms; 14.09787 ms in all.
    FP8 needs TP 2 (one GPU leaves 0.9 GB for 21 GB of KV): (70,553,706,496 + 20,971,520,000)
    ÷ 2 ÷ 3.35e12 = 13.66053 ms + 160 × (1,048,576 ÷ 450e9 + 10 µs) = 1.97283 ms: 15.63336 ms,
    so 14.09787 ÷ 15.63336 = 0.90178: at this batch FP8's token is slower, on half the GPUs.
    INT4 runs on 1 GPU: (35,563,140,256 + 2,101,346,304 + 20,971,520,000) ÷ 3.35e12 =
    17.50329 ms, 0.80544×."""
    inputs = {**p11.CALCULATOR.defaults(), "reserve_gb": 3.0}
    result = p11.CALCULATOR.compute(**inputs)
    plot = p11.speedup_plot(inputs=inputs, result=result)
    series = {s.name: s for s in plot.series}
    at64 = series["FP8 (E4M3)"].x.index(64)
    assert series["FP8 (E4M3)"].y[at64] == pytest.approx(0.90178, rel=1e-4)
    assert series["INT4 (group 128)"].y[at64] == pytest.approx(0.80544, rel=1e-4)
    assert "BF16" not in series  # the baseline is 1 by definition
    assert series["INT8 (W8A8)"].dash
    assert [m.label for m in plot.marks] == ["your batch", "largest FP8 batch on one GPU"]
    size = p11.size_plot(inputs=inputs, result=result)
    room = {s.name: s.y[0] for s in size.series if s.name.endswith("room for weights")}
    # 0.9 × CUDA's 79.22 GiB (85,061,827,297 B) − 3 GB − 327,680,000 B of KV = 73.228 GB.
    assert room["H100 SXM (your GPU): room for weights"] == pytest.approx(73.228, rel=1e-4)


def test_the_e2m1_diagram_draws_the_fifteen_e2m1_values(client) -> None:
    """The grid diagram's E2M1 row (y = 95) spans −6 at x = 140 to 6 at x = 840: its dots must
    sit at the 15 distinct E2M1 values, ±1.5 included and no ±0.25."""
    from problems.arithmetic.formats import E2M1_VALUES

    concepts = section_html(problem_html(page_get(client), 11), 11, "concepts")
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)" cy="95" r="5"/>', concepts)]
    drawn = sorted(round((x - 490) / (700 / 12), 2) for x in xs)
    assert drawn == sorted({v for e in E2M1_VALUES for v in (e, -e)})


def test_the_answer_names_the_bound_the_calculator_finds(client) -> None:
    """Llama 3 8B on an H100 at 256 sequences of 100 tokens: INT4's decode is compute-bound (its
    BF16 matmuls), BF16's still memory-bound; the model answer must not call every step
    memory-bound then, and it names the formats whose step is compute-bound, and only those."""
    query = ("?p11-formats-model=llama-3-8b&p11-formats-batch=256"
             "&p11-formats-prompt_tokens=100")
    body = api_get(client, "quantization-formats", model="llama-3-8b", batch=256,
                   prompt_tokens=100)
    bounds = {f["dtype"]: f["decode_bound"] for f in body["formats"]}
    assert bounds["int4"] == "compute" and bounds["bf16"] == "memory"
    answer = section_text(client, "answer", query)
    assert "some formats' steps are compute-bound" in answer
    assert "Decode is memory-bound at this batch" in section_text(client, "answer")
    named = answer.split("some formats' steps are compute-bound (", 1)[1].split(")", 1)[0]
    short = {"bf16": "BF16", "fp8": "FP8", "int8": "INT8", "int4": "INT4", "nvfp4": "NVFP4",
             "mxfp4": "MXFP4"}
    words = set(re.findall(r"[A-Z0-9]+", named))
    for dtype, bound in bounds.items():
        assert (short[dtype] in words) == (bound == "compute"), (dtype, named)


def test_the_answer_does_not_call_a_short_prompts_prefill_compute_bound(client) -> None:
    """At 100 tokens Llama 3 8B's prefill reads its weights for few FLOPs: some formats are
    memory-bound there, and the answer says so instead of calling prefill compute-bound."""
    query = ("?p11-formats-model=llama-3-8b&p11-formats-batch=256"
             "&p11-formats-prompt_tokens=100")
    body = api_get(client, "quantization-formats", model="llama-3-8b", batch=256,
                   prompt_tokens=100)
    assert any(f["prefill_bound"] == "memory" for f in body["formats"])
    answer = section_text(client, "answer", query)
    assert "Prefill is compute-bound once prompts are long (a prompt of 100 tokens" in answer
    assert "Prefill is compute-bound, and then it only speeds up" in section_text(client,
                                                                                  "answer")


def test_the_three_passes_follow_the_bounds_the_calculator_finds(client) -> None:
    """Llama 3.1 8B on an H100 at 4,096 sequences of 64 tokens: decode steps are compute-bound
    and a 64-token prefill memory-bound in some formats, so the worked answer's passes must not
    say every format decodes faster by its bytes, nor that weight-only INT4 'stays at' a gain."""
    query = ("?p11-formats-model=llama-3.1-8b&p11-formats-batch=4096"
             "&p11-formats-prompt_tokens=64")
    body = api_get(client, "quantization-formats", model="llama-3.1-8b", batch=4096,
                   prompt_tokens=64)
    assert any(f["decode_bound"] == "compute" for f in body["formats"])
    assert any(f["prefill_bound"] == "memory" for f in body["formats"])
    worked = section_text(client, "worked", query)
    assert "every step is memory-bound at this batch" not in worked
    assert "weight-only, stays at" not in worked
    assert "are compute-bound here and gain only what their tensor cores gain" in worked
    assert "is still memory-bound in some formats" in worked
    default = section_text(client, "worked")
    assert "every step is memory-bound at this batch" in default
    assert "only formats whose multiplications run natively get faster" in default


def test_mxfp4_scale_is_not_said_to_suit_powers_of_two(client) -> None:
    """An E8M0 scale of 2^(floor(log2 max) - 2) puts a block's maximum at 4 to 8 times the scale;
    a power-of-two maximum lands on 4, leaving 4 to 6 unused, so the concepts must not imply a
    power-of-two maximum is the case that avoids saturation or waste."""
    concepts = section_text(client, "concepts")
    assert "not a power of two has it saturate" not in concepts
    assert "lands anywhere from 4 to just under 8 times the scale" in concepts


def test_the_int4_prefill_hint_holds_when_a_short_prompt_is_memory_bound(client) -> None:
    """A 64-token prompt leaves INT4's prefill memory-bound, with a gain from bytes: the hint
    must not present that gain as the compute-bound prefill speedup it explains away."""
    query = ("?p11-formats-model=llama-3.1-8b&p11-formats-batch=1"
             "&p11-formats-prompt_tokens=64")
    body = api_get(client, "quantization-formats", model="llama-3.1-8b", batch=1,
                   prompt_tokens=64)
    int4 = next(f for f in body["formats"] if f["dtype"] == "int4")
    assert int4["prefill_bound"] == "memory"
    followups = section_text(client, "followups", query)
    assert "In the worked example INT4's prefill speedup is" not in followups
    assert "short enough to be memory-bound in some formats" in followups
    assert "In the worked example INT4's prefill speedup is 1×" in section_text(client,
                                                                               "followups")


def test_the_embedding_hint_does_not_call_a_large_share_small(client) -> None:
    """Llama 3.1 8B's embedding and head are about an eighth of its parameters: the hint must
    not call that 'a small share'; Llama 3 70B's (about 3%) it may."""
    small = section_text(client, "followups", "?p11-formats-model=llama-3.1-8b")
    assert "Both are a small share of a model this size" not in small
    assert "of Llama 3.1 8B's parameters, a share that stays at full size" in small
    assert "Both are a small share of a model this size" in section_text(client, "followups")


def test_a_one_token_prompt_reads_in_the_singular(client) -> None:
    """A prompt of 1 token (the form's minimum) is memory-bound in prefill: every sentence that
    names the prompt says "1 token", never "1 tokens"."""
    query = "?p11-formats-prompt_tokens=1"
    text = " ".join(section_text(client, slug, query)
                    for slug in ("worked", "answer", "followups"))
    assert not re.search(r"(?<![\d,.])1 tokens", text)
    assert "a prompt of 1 token, then decode steps" in text
    assert "A prompt of 1 token costs" in text
    assert "a prompt of 1 token is still memory-bound in some formats" in text


def test_a_mixture_of_experts_model_is_not_said_to_multiply_every_layer_weight(client) -> None:
    """DeepSeek-V3 routes each token to a few experts: its layer weights are not all multiplied
    by every token, as a dense model's are."""
    moe = section_text(client, "worked", "?p11-formats-model=deepseek-v3&p11-formats-gpu=b200")
    assert "the weights every token multiplies" not in moe
    assert "each token multiplies only the experts routed to it" in moe
    assert "the weights every token multiplies" in section_text(client, "worked")


def test_nvfp4_is_called_behind_int4_only_where_the_speedups_shown_differ(client) -> None:
    """Llama 3 8B on an L40S at 4,096 sequences of 1,000 tokens: the KV cache is 4,096,000 ×
    131,072 B = 537 GB, more than 8 L40S hold (8 × 41.5 GB usable), so no format deploys and
    the page says that instead of ranking INT4 against NVFP4."""
    query = ("?p11-formats-model=llama-3-8b&p11-formats-gpu=l40s&p11-formats-batch=4096"
             "&p11-formats-mfu=0.5&p11-formats-bandwidth_efficiency=0.7")
    worked = section_text(client, "worked", query)
    body = api_get(client, "quantization-formats", model="llama-3-8b", gpu="l40s", batch=4096,
                   mfu=0.5, bandwidth_efficiency=0.7)
    rows = {f["dtype"]: f for f in body["formats"]}
    assert all(f["deploy_tp"] is None for f in rows.values())
    assert "no format has a deployment within 8 NVIDIA L40S GPUs" in worked
    assert "its share of this batch's cache (537 GB in all)" in worked
    assert "NVFP4 is a little behind INT4" not in worked


def test_the_answer_recommends_only_a_deployment_that_fits(client) -> None:
    """Review P0607-04 at ?p11-formats-batch=64: FP8 cannot hold 64 × 1,000 tokens of BF16 KV on
    one H100 (21 GB against 0.6 GB of room), so the answer recommends FP8 on its smallest
    deployment, TP 2, and marks the one-GPU rows that do not fit as hypothetical."""
    worked = section_text(client, "worked", "?p11-formats-batch=64")
    answer = section_text(client, "answer", "?p11-formats-batch=64")
    assert "My default on the NVIDIA H100 SXM would be FP8 (E4M3) weights on 2 GPUs (TP 2)" \
        in answer
    assert "21.2 ms (memory), would not fit" not in worked  # batch 1's figure
    assert "(memory), would not fit" in worked
    assert 'rows marked "would not fit" are floors' in worked
    assert "its row shows what the step would take if it did" not in worked


def test_the_size_plot_always_draws_the_learners_gpu_marked() -> None:
    """Calculator review: with an A100 picked, the plot drew only the four comparison GPUs. The
    A100 80GB has no CUDA total on record, so its room is the driver's 81,920 MiB = 85,899,345,920
    B × 0.9 − 3.3 GB reserve − 327,680,000 B of KV = 73,681,731,328 B = 73.68 GB, drawn solid
    and named as the learner's; an H100 pick is marked among the four."""
    inputs = {**p11.CALCULATOR.defaults(), "gpu": "a100-80gb-sxm"}
    result = p11.CALCULATOR.compute(**inputs)
    series = {s.name: s for s in p11.size_plot(inputs=inputs, result=result).series}
    mine = series["A100 (your GPU): room for weights"]
    assert mine.y[0] == pytest.approx(73.6817, rel=1e-5) and not mine.dash
    inputs = p11.CALCULATOR.defaults()
    result = p11.CALCULATOR.compute(**inputs)
    names = [s.name for s in p11.size_plot(inputs=inputs, result=result).series]
    assert "H100 SXM (your GPU): room for weights" in names and len(names) == 5


def test_the_concepts_name_what_kernels_scales_and_checkpoints_change(client) -> None:
    """Review P0607-05 to 08: prefill is faster only from native formats when it is
    compute-bound; Marlin's gain holds to batches of 16–32; FP8 KV scales default to 1.0 without
    calibration; DeepSeek-V3 and gpt-oss ship narrow checkpoints."""
    concepts = section_text(client, "concepts")
    tradeoffs = section_text(client, "tradeoffs")
    assert "only way quantization speeds up a compute-bound prefill" in concepts
    assert "This is the only way quantization makes prefill faster" not in concepts
    assert "a scale of 1.0 for every key and value" in concepts
    assert "calculate_kv_scales" in concepts and "llm-compressor" in concepts
    assert "up to batches of 16 to 32 tokens" in tradeoffs and "Machete" in tradeoffs
    assert "gpt-oss ships its MoE weights in MXFP4" in tradeoffs
    assert "4.25 bits a parameter" in tradeoffs
    followups = section_text(client, "followups")
    assert "without calibration vLLM uses 1.0 for every scale" in followups


def test_the_mi300xs_matrix_units_are_named_as_amd_names_them(client) -> None:
    """Every sentence about the selected GPU's matrix units uses its vendor's name: on the
    MI300X, Matrix Cores (the worked answer, its table's paths, its working's peaks)."""
    worked = section_text(client, "worked", "?p11-formats-gpu=mi300x")
    assert ("The linear layers run at the rate of the Matrix Cores that multiply this format "
            "on the AMD Instinct MI300X") in worked
    assert "FP8 Matrix Cores" in worked and "dense BF16 Matrix Core peak" in worked
    assert "has no FP4 Matrix Cores and runs it weight-only" in worked
    assert "only where the Matrix Cores speak the format" in worked
    for phrase in ("BF16 tensor cores", "FP8 tensor cores", "FP4 tensor cores",
                   "tensor-core peak", "their tensor cores", "the tensor cores"):
        assert phrase not in worked, phrase
    answer = section_text(client, "answer", "?p11-formats-gpu=mi300x")
    assert "when the Matrix Cores multiply in that format" in answer
    assert "FP8 tensor cores" in section_text(client, "worked")
