"""Problem 12 on page 06, through Django's test client: every section written, the figures equal
to the JSON API's, prices that move the ranking, a model that does not fit, hints hidden, the
rooflines demo embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.catalog import model_get
from problems.arithmetic.compute import prefill_flops_model
from problems.arithmetic.gpus import gpu_compare
from problems.arithmetic.units import count_format, flops_format, money_format, seconds_format
from problems.content import p12
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/06/"
TEMPLATE = Path(p12.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 12), 12, slug))


def api_gpus(client, **params) -> dict:
    response = client.get("/api/calc/gpu-compare", params)
    assert response.status_code == 200, response.content
    return {p["gpu"]: p for p in response.json()["gpus"]}


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 12)
    for slug, heading in SECTIONS:
        section = section_html(problem, 12, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_worked_figures_equal_the_api(client) -> None:
    """Llama 3.1 8B in FP8, 64 conversations of 8,192 tokens: the H100's budget is 0.9 × CUDA's
    79.22 GiB = 76,555,644,567.3 B; less 9,080,934,400 B of weights and 3.3 GB of reserve it
    holds ⌊64,174,710,167.3 ÷ (8,192 × 131,072 = 1,073,741,824)⌋ = ⌊59.8⌋ = 59 (60 with
    nvidia-smi's total, review P0607-01) and steps in (8,030,261,248 read + 59 × 1,073,741,824)
    ÷ 3.35 TB/s = 71,381,028,864 ÷ 3.35e12 = 21.3 ms; the B200 runs all 64 in 9.59 ms
    (8 TB/s); the H200 prefills in the H100's 151 ms."""
    worked = section_text(client, "worked")
    gpus = api_gpus(client)
    for p in gpus.values():
        assert count_format(p["batch_max"], "sequence") in worked
        assert seconds_format(p["decode_seconds"]) in worked
        assert money_format(p["dollars_per_million"], significant=3) in worked
    assert gpus["h100-sxm"]["batch"] == 59 and "21.3 ms (memory-bound, floor)" in worked
    assert "9.59 ms (memory-bound, floor)" in worked
    assert gpus["h200"]["prefill_seconds"] == gpus["h100-sxm"]["prefill_seconds"]
    assert "The H200 prefills in exactly the H100's time (151 ms)" in worked
    assert "the NVIDIA B200 gives the most output tokens per dollar" in worked


def test_prices_move_the_ranking(client) -> None:
    """At $20/h the B200 costs $0.833 per million output tokens; the H200 becomes cheapest."""
    worked = section_text(client, "worked", "?p12-gpus-price_b200=20")
    assert "the NVIDIA H200 SXM gives the most output tokens per dollar" in worked
    assert api_gpus(client, price_b200=20)["b200"]["dollars_per_million"] == pytest.approx(
        20 / (api_gpus(client)["b200"]["tokens_per_second"] * 3600) * 1e6)


def test_a_model_one_gpu_cannot_hold_runs_on_a_replica_of_several(client) -> None:
    """Review P0607-10 at ?p12-gpus-model=llama-3.1-70b: the page wrote off the H100 ("cannot run
    it (no room for one sequence's KV)") and the L40S. A replica of 2 H100s (TP 2) holds 27
    sequences and steps in 23.1 ms (test_gpus.py works it at a 3 GB reserve; at the page's 3.3
    GB the batch is ⌊36,928,118,167.3 ÷ 1,342,177,280⌋ = 27 too) for 2 × $3.95 = $7.90 an hour;
    2 L40S over PCIe hold 2. The KV share is each GPU's own: 27 × 1,342,177,280 ÷ 71,515,639,808
    = 50.7%, not more than the whole step."""
    query = "?p12-gpus-model=llama-3.1-70b"
    worked = section_text(client, "worked", query)
    answer = section_text(client, "answer", query)
    gpus = api_gpus(client, model="llama-3.1-70b")
    assert gpus["h100-sxm"]["tp"] == 2 and gpus["h100-sxm"]["batch"] == 27
    assert gpus["l40s"]["tp"] == 2 and gpus["l40s"]["batch"] == 2
    assert "the H100 SXM takes 2 GPUs (TP 2) and the L40S takes 2 GPUs (TP 2)" in worked
    assert "23.1 ms on the H100 SXM" in answer and "$7.90" in worked
    assert "the KV reads are 50.7% of the bytes of the H100 SXM's step" in worked
    assert "cannot run it" not in answer and "cannot serve it at all" not in worked
    assert "At the same batch the H200's step" not in worked  # one H200 against two H100s
    impossible = "?p12-gpus-model=llama-3.1-405b&p12-gpus-dtype=fp32"
    assert "None of the four serves it, even eight to a replica." in section_text(
        client, "worked", impossible)
    assert "lean to none of them" in section_text(client, "answer", impossible)


def test_bad_input_is_a_field_error_and_the_prose_keeps_the_defaults(client) -> None:
    content = page_get(client, "?p12-gpus-context_tokens=200000")
    worked = section_html(problem_html(content, 12), 12, "worked")
    error = re.search(r'id="id_p12-gpus-context_tokens_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "context window" in error.group(1)
    assert "21.3 ms (memory-bound, floor)" in text_of(worked)


def test_the_concepts_table_and_the_interconnect_figures(client) -> None:
    """NVLink 900 GB/s ÷ PCIe 64 GB/s = 14.1×; at TP 2, 64 sequences send 33.6 MB per GPU per
    step: 74.6 µs at 450 GB/s and 1.05 ms at 32 GB/s."""
    concepts = section_text(client, "concepts")
    for text in ("Hopper", "Blackwell", "Ada Lovelace", "79.22 GiB as CUDA reports it", "14.1×",
                 "33.6 MB per GPU", "74.6 µs", "1.05 ms", "as listed in May 2026"):
        assert text in concepts, text


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 12), 12, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def test_the_roofline_diagram_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 12), 12, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg and re.search(r"<desc[^>]*>[^<]+</desc>", svg)


def test_the_rooflines_demo_is_embedded(client) -> None:
    demo = section_html(problem_html(page_get(client), 12), 12, "demo")
    assert 'data-calculator="gpu-rooflines"' in demo
    assert 'data-hardware-url="/demos/hardware"' in demo and "js/demos/gpus.js" in demo
    assert "Measure this worker" in demo


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p12.SOURCES) >= 10
    for title, url in p12.SOURCES:
        assert title and url.startswith("https://")


def test_the_roofline_plot_draws_four_roofs_and_the_workload() -> None:
    inputs = p12.ROOFLINE_CALCULATOR.defaults()
    result = p12.ROOFLINE_CALCULATOR.compute(**inputs)
    plot = p12.roofline_plot(inputs=inputs, result=result)
    roofs = [s for s in plot.series if s.lines]
    assert [s.name for s in roofs] == ["H100 SXM", "H200", "B200", "L40S"]
    # Each roof: up the slope from 0.1 FLOP/B, the ridge, flat to 10⁵.
    assert [len(s.x) for s in roofs] == [3, 3, 3, 3]
    workload = [s for s in plot.series if s.name.endswith("this workload")]
    assert len(workload) == 4
    assert workload[-1].labels == ("decode at each GPU's batch", "one prefill")
    assert all(s.x[0] < 100 < s.x[1] for s in workload)


def test_the_b200_is_stated_for_a_named_product_and_source(client) -> None:
    """The catalog's B200 is NVIDIA's datasheet figure (DGX B200: 64 TB/s over eight GPUs = 8
    TB/s); the driver's 7,680-bit bus at 3,996 MHz, both edges, moves 7,680 ÷ 8 × 3.996e9 × 2 =
    7.672e12 B/s."""
    assert p12.b200_driver_bandwidth() == pytest.approx(7.67232e12)
    concepts = section_text(client, "concepts")
    assert "180 GB, 8 TB/s" in concepts
    assert ("7,680-bit memory bus at 3,996 MHz, and at two transfers a clock that is a peak of "
            "7.67 TB/s") in concepts
    assert "the DGX B200 datasheet's figures" in concepts
    # Review P0607-12: NVIDIA's HGX page gives 7.7 TB/s, so 8 TB/s overstates by 8 ÷ 7.7 − 1 =
    # 3.9%, and the entry is no longer labelled "HGX B200".
    assert "the HGX specification page gives 7.7 TB/s a GPU, which agrees with the driver" \
        in concepts
    # Review rev5: the memory-bound times, not "every decode time", move with it; 8 ÷ 7.7 − 1 =
    # 3.9% longer at 7.7 TB/s.
    assert "at 7.7 TB/s every memory-bound B200 time on this page would be 3.9% longer" \
        in concepts
    assert "(HGX B200)" not in concepts


def test_the_b200s_other_figures_come_from_the_catalog(client, monkeypatch) -> None:
    """The announcement's memory, the HGX page's bandwidth and the driver's bus and clock are
    fields of the catalog's B200, each with its source, not constants of problem 12: change
    them there and the page follows. At 7.5 TB/s the catalog's 8 TB/s flatters by 8 ÷ 7.5 − 1 =
    6.67%; a 5,120-bit bus at 4,000 MHz peaks at 5,120 ÷ 8 × 4e9 × 2 = 5.12 TB/s."""
    from dataclasses import replace

    from problems.arithmetic.catalog import GPUS

    b200 = GPUS["b200"]
    for source in (b200.memory_announced_source, b200.bandwidth_other_source,
                   b200.driver_memory_source):
        assert "https://" in source
    assert b200.driver_bandwidth_bytes_per_second == pytest.approx(7.67232e12)
    monkeypatch.setitem(GPUS, "b200", replace(
        b200, memory_announced_bytes=200 * 10**9, bandwidth_other_bytes_per_second=7.5e12,
        driver_memory_bus_bits=5_120, driver_memory_clock_hz=4_000e6))
    concepts = section_text(client, "concepts")
    assert "the announcement gave 200 GB" in concepts
    assert "5,120-bit memory bus at 4,000 MHz" in concepts
    assert "a peak of 5.12 TB/s" in concepts
    assert "gives 7.5 TB/s a GPU while the DGX" in concepts
    # 7.5 TB/s is not the driver's 5.12 TB/s: the page no longer says the two agree.
    assert "agrees with the driver" not in concepts
    assert "would be 6.67% longer" in concepts


def test_the_roofline_diagram_is_drawn_to_the_catalogs_scale(client) -> None:
    """The concepts' diagram says "to scale": 110 px per factor of 10 on both axes, the H100's
    BF16 ridge (989.5e12 ÷ 3.35e12 = 295.4 FLOP/B) at (371.7, 150.5). Each roof's corner must sit
    where the catalog puts it, within half a pixel, and each slope rise at 45°."""
    import math

    from problems.arithmetic.catalog import gpu_get

    concepts = section_html(problem_html(page_get(client), 12), 12, "concepts")
    lines = re.findall(r'<polyline points="([\d.,\s]+)" stroke="(#\w+)"', concepts)
    colours = {"#0072B2": "h100-sxm", "#009E73": "h200", "#D55E00": "b200", "#CC79A7": "l40s"}
    h100 = gpu_get("h100-sxm")
    ridge0 = h100.bf16_flops / h100.bandwidth_bytes_per_second
    assert len(lines) == 4
    for points, colour in lines:
        (x0, y0), (xr, yr), _ = [tuple(map(float, p.split(","))) for p in points.split()]
        g = gpu_get(colours[colour])
        ridge = g.bf16_flops / g.bandwidth_bytes_per_second
        assert xr == pytest.approx(371.7 + 110 * math.log10(ridge / ridge0), abs=0.5), g.id
        assert yr == pytest.approx(150.5 - 110 * math.log10(g.bf16_flops / h100.bf16_flops),
                                   abs=0.5), g.id
        assert xr - x0 == pytest.approx(y0 - yr, abs=0.5), g.id


def test_the_rooflines_demo_equals_its_api(client) -> None:
    """The demo's working (ridges, achieved FLOP/s) is the same declaration as
    /api/calc/gpu-rooflines: at the defaults the B200's FP8 ridge is 4.5e15 ÷ 8e12 = 562.5
    FLOP/B."""
    response = client.get("/api/calc/gpu-rooflines", {"dtype": "fp8"})
    assert response.status_code == 200
    gpus = {p["gpu"]: p for p in response.json()["gpus"]}
    assert gpus["b200"]["ridge"] == pytest.approx(562.5)
    demo = section_text(client, "demo")
    assert "562 FLOP/B" in demo
    for p in gpus.values():
        assert f"{p['batch']} sequences" in demo or f"{p['batch']} sequence" in demo
    bad = client.get("/api/calc/gpu-rooflines", {"concurrency": 0})
    assert bad.status_code == 400 and bad.json()["field"] == "concurrency"


def test_a_short_prompt_is_not_said_to_prefill_compute_bound(client) -> None:
    """At 64 tokens of context, prefilling one prompt of Llama 3.1 8B in FP8 reads its 8.04 GB
    of weights for 9×10¹¹ FLOP: memory-bound on every GPU, 8.04 GB ÷ 3.35 TB/s = 2.4 ms on the
    H100 against 8.04 GB ÷ 4.8 TB/s = 1.67 ms on the H200. The prose must not call that prefill
    compute-bound, nor the two times equal."""
    query = "?p12-gpus-context_tokens=64"
    gpus = api_gpus(client, context_tokens=64)
    h100, h200 = gpus["h100-sxm"], gpus["h200"]
    assert h100["prefill_bound"] == "memory" and h200["prefill_bound"] == "memory"
    assert h200["prefill_seconds"] < h100["prefill_seconds"]
    worked = section_text(client, "worked", query)
    answer = section_text(client, "answer", query)
    assert "Compute decides prefill" not in worked
    assert "prefills in exactly the H100's time" not in worked
    assert "short prompt's prefill is still memory-bound" in worked
    assert "prefill, which is compute-bound:" not in answer
    assert "both take the same time" not in answer
    assert "a prompt this short is still memory-bound on some of them" in answer
    for p in (h100, h200):
        assert seconds_format(p["prefill_seconds"]) in answer
    default = section_text(client, "answer")
    assert "prefill, which is compute-bound:" in default
    assert "both take the same time" in default


def test_bf16_weights_do_not_fall_back_to_bf16(client) -> None:
    """With BF16 weights the prefill step names the BF16 rate once, without the weight-only
    fallback aside that only makes sense for a narrower format."""
    html = client.get("/pages/06/?p12-gpus-dtype=bf16").content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "the linear layers run at the BF16 rate, attention" in text
    default = " ".join(re.sub(r"<[^>]+>", " ", client.get("/pages/06/").content.decode()).split())
    assert "(or BF16 where that format is weight-only)" in default


def test_the_answer_calls_board_power_a_rating_not_a_draw(client) -> None:
    """TDP is the board's power limit (the worked table says 'not measured draw'), so the model
    answer must not say the B200 'draws' it."""
    html = client.get("/pages/06/").content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "board draws" not in text
    assert "the B200's board is rated for up to" in text


def test_one_conversation_is_not_all_1_conversations(client) -> None:
    html = client.get("/pages/06/?p12-gpus-context_tokens=32&p12-gpus-concurrency=1")
    text = " ".join(re.sub(r"<[^>]+>", " ", html.content.decode()).split())
    assert "all 1 conversations" not in text
    assert "Every GPU holds the one conversation in memory." in text


def test_a_model_no_gpu_holds_still_has_its_prefill_flops_counted(client) -> None:
    """Llama 3.1 405B in FP32 (1.62 TB) fits no replica of up to 8 of any of the four, but one
    8,192-token prompt still costs what the model's arithmetic says (about 6.9×10¹⁵ FLOP),
    not 0."""
    result = gpu_compare(model="llama-3.1-405b", dtype="fp32")
    assert not any(p["fits"] for p in result["gpus"])
    flops = prefill_flops_model(model_get("llama-3.1-405b"), 8192)["total"]
    assert result["prefill_flops"] == flops > 0
    worked = section_text(client, "worked", "?p12-gpus-model=llama-3.1-405b&p12-gpus-dtype=fp32")
    assert f"One 8,192-token prompt costs {flops_format(flops)};" in worked
    assert "costs 0 FLOP" not in worked


def test_one_conversation_of_one_token_reads_in_the_singular(client) -> None:
    """At the form's minimums (1 conversation, 1 token of context) every count keeps its noun
    in the singular."""
    query = "?p12-gpus-concurrency=1&p12-gpus-context_tokens=1"
    text = " ".join(section_text(client, slug, query)
                    for slug in ("concepts", "worked", "answer"))
    for wrong in ("1 tokens", "1 conversations", "1 sequences"):
        assert not re.search(rf"(?<![\d,.]){wrong}", text), wrong
    assert "serving 1 conversation at once, each holding 1 token of context" in text
    assert "with 1 conversation at 1 token of context" in text
    assert "one prompt of 1 token takes" in text
    assert "a decode step of 1 sequence makes" in text


def test_the_answer_does_not_say_capacity_splits_gpus_that_all_hold_none(client) -> None:
    """Llama 3.1 405B in FP32: no replica of up to 8 GPUs holds a sequence, so capacity rules
    them all out rather than splitting them."""
    answer = section_text(client, "answer", "?p12-gpus-model=llama-3.1-405b&p12-gpus-dtype=fp32")
    assert ("the L40S none at that context. So capacity rules out every one of them, even eight "
            "to a replica.") in answer
    assert "capacity already splits them" not in answer
    assert "So capacity already splits them." in section_text(client, "answer")


def test_light_traffic_is_priced_by_the_hour_not_at_full_batch(client) -> None:
    """Review P0607-09 at ?p12-gpus-dtype=nvfp4&p12-gpus-context_tokens=1000&
    p12-gpus-concurrency=1: one conversation is a batch of 1 against 512 to 1,249 possible, so
    "at full batch all hour" was false and the B200 (best tokens per dollar) was the wrong pick.
    Every replica is one GPU here; the cheapest an hour is the L40S at Modal's $0.000542 a second
    × 3,600 = $1.95, against the B200's $6.25."""
    query = "?p12-gpus-dtype=nvfp4&p12-gpus-context_tokens=1000&p12-gpus-concurrency=1"
    answer = section_text(client, "answer", query)
    worked = section_text(client, "worked", query)
    assert "at full batch" not in answer
    assert "lean to the NVIDIA L40S: with traffic that fills no GPU" in answer
    assert "$1.95/h" in answer and "$6.25 an hour for the B200" in answer
    assert "the bill is the hourly price of the smallest replica" in worked
    assert "capacity is not what decides this" in answer
    default = section_text(client, "answer")
    assert "lean to the NVIDIA B200, the most tokens per dollar at the batch it runs" in default


def test_each_gpu_reports_the_speed_one_user_sees(client) -> None:
    """Review P0607-11: at the defaults the H100 steps in 21.3 ms, so each user sees 1 ÷ 21.31 ms
    = 46.9 tokens/s; the L40S's 44.1 ms gives 22.7 tokens/s. With a 15 ms target the H100's batch
    falls to 39 (test_gpus.py)."""
    worked = section_text(client, "worked")
    assert "46.9 tokens/s on the H100 SXM" in worked and "22.7 tokens/s on the L40S" in worked
    capped = api_gpus(client, tpot_ms=15)
    assert capped["h100-sxm"]["batch"] == 39
    assert "within your 15 ms target" in section_text(client, "worked", "?p12-gpus-tpot_ms=15")


def test_the_plots_say_why_a_gpu_or_all_of_them_are_missing() -> None:
    """Calculator review: DeepSeek-V3 in NVFP4 drew empty axes with no message. Now the H100,
    H200 and B200 run it as replicas of 8, 4 and 4, and the L40S's absence is explained; where
    nothing runs (Llama 3.1 405B in FP32, 1.62 TB) the note says so instead of empty axes."""
    inputs = {**p12.CALCULATOR.defaults(), "model": "deepseek-v3", "dtype": "nvfp4"}
    note = p12.compare_note(inputs=inputs, result=p12.CALCULATOR.compute(**inputs))
    assert note == ("Left out of the plots: the L40S: the weights and one sequence's KV do not "
                    "fit 8 of them.")
    inputs = {**p12.CALCULATOR.defaults(), "model": "llama-3.1-405b", "dtype": "fp32"}
    note = p12.compare_note(inputs=inputs, result=p12.CALCULATOR.compute(**inputs))
    assert note.startswith("Nothing to draw at these inputs, because no GPU runs this workload")
    inputs = p12.CALCULATOR.defaults()
    assert p12.compare_note(inputs=inputs, result=p12.CALCULATOR.compute(**inputs)) == ""


def test_the_b200_bandwidth_gap_is_read_on_its_own_decode_step(client) -> None:
    """Review rev5: "the catalog's figure flatters every B200 decode time here by about 3.9%"
    was false where the B200's step is compute-bound (FP8, 128 tokens of context, 1,024
    conversations: intensity 612 FLOP/B against a ridge of 4.5 PFLOP/s × 0.5 ÷ 8 TB/s = 281).
    Memory-bound at the defaults, its step at 7.7 TB/s takes 8 ÷ 7.7 of the catalog's."""
    from problems.arithmetic.gpus import gpu_compare

    inputs = p12.CALCULATOR.defaults()
    b200 = next(p for p in gpu_compare(**inputs)["gpus"] if p["gpu"] == "b200")
    text = p12.b200_bandwidth_context(b200)
    assert text["b200_decode_state"] == "memory"
    assert text["b200_decode_other_text"] == p12.seconds_format(
        b200["decode_seconds"] * 8 / 7.7)
    concepts = section_text(client, "concepts")
    assert f"its decode step here, {text['b200_decode_text']}, would take " \
        f"{text['b200_decode_other_text']}" in concepts
    busy = section_text(client, "concepts",
                        "?p12-gpus-context_tokens=128&p12-gpus-concurrency=1024")
    assert "its decode step here is compute-bound, so the bandwidth does not change it" in busy
    assert "would take" not in busy


def test_decode_steps_that_are_compute_bound_are_not_called_memory_bound(client) -> None:
    """Review rev5 at 128 tokens of context and 1,024 conversations in FP8: every GPU's step is
    compute-bound (intensity 612 FLOP/B against the H100's 1,979 ÷ 3.35 × 0.5 = 295), yet the
    worked answer was headed "Bandwidth decides the step" and the model answer said "mostly
    memory-bound, though some steps turn compute-bound". And the ridge quoted beside the
    intensity is the one at the MFU assumed, not the datasheet's 591."""
    query = "?p12-gpus-context_tokens=128&p12-gpus-concurrency=1024"
    worked = section_text(client, "worked", query)
    assert "Compute decides the step at this batch." in worked
    assert "Bandwidth decides the step." not in worked
    assert "Some steps are compute-bound" not in worked
    assert "against a ridge of 295 FLOP/B at 50% MFU on the H100 SXM" in worked
    assert "step takes as long as the H100's: compute-bound on both" in worked
    answer = section_text(client, "answer", query)
    assert "every GPU's step is compute-bound" in answer
    assert "mostly memory-bound" not in answer
    # Mixed: Llama 3.1 70B at 64 tokens and 2,048 conversations, the H100 (TP 2, 28 sequences)
    # memory-bound, the other three compute-bound.
    mixed = "?p12-gpus-model=llama-3.1-70b&p12-gpus-context_tokens=64&p12-gpus-concurrency=2048"
    answer = section_text(client, "answer", mixed)
    assert ("memory-bound on the H100 SXM, but at this batch compute-bound on the H200, the "
            "B200 and the L40S") in answer
    assert "Bandwidth or compute decides the step." in section_text(client, "worked", mixed)
    defaults = section_text(client, "worked")
    assert "Bandwidth decides the step." in defaults
    assert "far left of its ridge (intensity 16 FLOP/B against a ridge of 295 FLOP/B at 50% " \
        "MFU on the H100 SXM)" in defaults
