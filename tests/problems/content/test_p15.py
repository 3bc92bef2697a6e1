"""Problem 15 on page 07, through Django's test client: every section written, the figures
equal to the JSON API's, inputs that move them, a format the kernel does not take named beside
its field, hints hidden, an accessible SVG, the triton-rmsnorm demo with the kernel's source."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_short, seconds_format
from problems.content import p15
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures
from tests.problems.content.page07 import (
    api_get,
    calculator_query,
    hints_hidden,
    mistakes_at_least_four,
    page_get,
    section_text,
    sections_written,
    svg_accessible,
)

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p15.__file__).with_suffix(".html")


def test_all_nine_sections_are_written(client) -> None:
    sections_written(client, 15)


def test_the_worked_answer_equals_the_api(client) -> None:
    """4,096 tokens × 4,096 in BF16 (test_fusion.py works it by hand): 604 MB eager against 67.1
    MB fused (9×), 180 µs against 20 µs; 11.1 ms saved per 32-layer pass."""
    worked = section_text(client, 15, "worked")
    r = api_get(client, "rmsnorm-fusion")
    assert f"{bytes_short(r['norm_eager_bytes'])}." in worked
    assert f"{bytes_short(r['norm_fused_bytes'])}, 9× fewer bytes" in worked
    assert (f"eager RMSNorm {seconds_format(r['norm_eager_seconds'])}, fused "
            f"{seconds_format(r['norm_fused_seconds'])}") in worked
    assert f"saved: {seconds_format(r['pass_saved_seconds'])}" in worked
    assert "(as in Llama 3 8B)" in worked


def test_fp32_has_no_casts_in_the_prose(client) -> None:
    query = calculator_query(p15.CALCULATOR, p15.PREFIX, dtype="fp32", tokens=1)
    worked = section_text(client, 15, "worked", query)
    r = api_get(client, "rmsnorm-fusion", dtype="fp32", tokens=1)
    assert "6 kernels; 28 bytes moved per element," in worked
    assert seconds_format(r["norm_eager_seconds"]) in worked and "ns" in worked


def test_the_model_answer_counts_the_eager_kernels_for_the_format(client) -> None:
    """In FP32 Hugging Face's casts are no-ops, so eager runs 6 kernels, not 8: the model
    answer names the count and lists no cast; in BF16 it lists both casts among 8."""
    fp32 = section_text(client, 15, "answer",
                        calculator_query(p15.CALCULATOR, p15.PREFIX, dtype="fp32"))
    assert "runs 6 kernels, square, mean, add ε, rsqrt, multiply, multiply by the weight" in fp32
    assert "cast" not in fp32.split("multiply by the weight")[0]
    bf16 = section_text(client, 15, "answer")
    assert ("runs 8 kernels, cast, square, mean, add ε, rsqrt, multiply, cast back, multiply "
            "by the weight") in bf16


def test_a_format_the_kernel_does_not_take_is_named_beside_its_field(client) -> None:
    content = page_get(client, calculator_query(p15.CALCULATOR, p15.PREFIX, dtype="int4"))
    error = re.search(r'id="id_p15-rmsnorm-dtype_error"[^>]*>(.*?)<', content, re.S)
    assert error and error.group(1).strip()
    response = client.get("/api/calc/rmsnorm-fusion", {"dtype": "int4"})
    assert response.status_code == 400 and response.json()["field"] == "dtype"


def test_hints_svg_mistakes_and_no_typed_figures(client) -> None:
    hints_hidden(client, 15)
    svg_accessible(client, 15)
    source = TEMPLATE.read_text()
    mistakes_at_least_four(source)
    assert typed_figures(source) == []


def test_the_demo_shows_the_kernels_source_explained(client) -> None:
    demo = section_html(problem_html(page_get(client), 15), 15, "demo")
    assert 'data-demo="triton-rmsnorm"' in demo
    assert "tl.program_id(0)" in demo and "which row this program handles" in demo
    assert demo.count("<tr><td><code>") >= 20


def test_sources_are_titled_links() -> None:
    assert len(p15.SOURCES) >= 8
    for title, url in p15.SOURCES:
        assert title and url.startswith("https://")


def test_the_one_token_floors_are_computed_for_the_learners_inputs(client) -> None:
    """The decode-of-one-sequence remark quotes the floors of the add and norm whose launches it
    counts, at one token of the learner's hidden size: 4,096 in BF16 on an H100 is
    (36 × 4,096 + 24 + 8,192) + 3 × 2 × 4,096 B = 180,248 B ÷ 3.35 TB/s ≈ 53.8 ns eager and
    (4 × 2 × 4,096 + 8,192) B = 40,960 B ÷ 3.35 TB/s ≈ 12.2 ns fused, 9 launches against one.
    FP32 at 65,536 on an L4 is microseconds (2,883,608 B ÷ 300 GB/s ≈ 9.61 µs eager, 1,310,720 B
    ≈ 4.37 µs fused), where fusion saves bytes too."""
    worked = section_text(client, 15, "worked")
    one = api_get(client, "rmsnorm-fusion", tokens=1)
    eager, fused = (seconds_format(one["add_eager_seconds"]),
                    seconds_format(one["add_fused_seconds"]))
    assert (eager, fused) == (seconds_format(180_248 / 3.35e12), seconds_format(40_960 / 3.35e12))
    assert (f"one sequence the add and norm's floors here are {eager} eager and {fused} fused, "
            "well under one launch, so what fusion saves is the kernel count: 9 launches down "
            "to one, per add and norm") in worked
    query = calculator_query(p15.CALCULATOR, p15.PREFIX, dtype="fp32", hidden_size=65_536,
                             gpu="l4")
    wide = section_text(client, 15, "worked", query)
    one = api_get(client, "rmsnorm-fusion", tokens=1, dtype="fp32", hidden_size=65_536,
                  gpu="l4")
    eager, fused = (seconds_format(one["add_eager_seconds"]),
                    seconds_format(one["add_fused_seconds"]))
    assert (eager, fused) == (seconds_format(2_883_608 / 300e9), seconds_format(1_310_720 / 300e9))
    assert (f"floors here are {eager} eager and {fused} fused, so fusion saves bytes there too, "
            "and the kernel count: 7 launches down to one") in wide
    assert "well under one launch" not in wide


def test_the_model_answer_ties_the_saving_to_the_learners_token_count(client) -> None:
    """At one token the pass saves nanoseconds: the answer states the saving for the tokens set
    ("1 token", the proofread sweep flagged "1 tokens"),
    not as what prefill and large batches save."""
    r = api_get(client, "rmsnorm-fusion", tokens=1)
    answer = section_text(client, 15, "answer",
                          calculator_query(p15.CALCULATOR, p15.PREFIX, tokens=1))
    saved = seconds_format(r["pass_saved_seconds"])
    assert f"A forward pass of 1 token saves {saved}." in answer
    assert "where a forward pass saves" not in answer


def test_the_residual_fusion_is_measured_against_a_fused_norm(client) -> None:
    """Review P0607-18/19: the page said fusing the residual add "doubles the win"; against a
    fused norm after an eager add it is 1.25× on the pair and 6.25% more saving
    (test_fusion.py), and the engine's GPU path now uses it."""
    text = text_of(page_get(client))
    assert "doubles the win" not in text
    assert "eager add then fused norm 50.1 µs, both fused 40.1 µs" in text
    assert "makes the pair 1.25× faster than the middle case" in text
    assert "makes the total saving 6.25% larger" in text
    assert "each decoder layer hands the pending residual to the norm" in text


def cache_sentence(client, **inputs) -> str:
    worked = section_text(client, 15, "worked", calculator_query(p15.CALCULATOR, p15.PREFIX,
                                                                  **inputs))
    start = worked.index("When the intermediate FP32 tensor")
    return worked[start:worked.index("And at small token counts", start)]


def test_the_l2_sentence_names_the_selected_gpus_own_cache(client) -> None:
    """The eager intermediate is tokens × hidden × 4 bytes, compared with the selected GPU's own
    cache from the catalog, not always the H100's. Each eager kernel reads one such tensor while
    it writes the next, so the pair is what must fit. 4,096 × 4,096 × 4 = 64 MiB, a pair of 128
    MiB: over the H100's 50 MiB of L2 even alone. At 1,536 tokens, 24 MiB and a pair of 48:
    within the H100's 50 MiB, over the A100's 40 MiB though one alone fits."""
    h100 = cache_sentence(client)
    assert "(the NVIDIA H100 SXM's L2, 50 MiB)" in h100
    assert "here one is 64 MiB and the pair 128 MiB, and even one is more than that L2 holds" \
        in h100
    assert "within that L2" in cache_sentence(client, tokens=1536)
    a100 = cache_sentence(client, gpu="a100-80gb-sxm", tokens=1536)
    assert "(the NVIDIA A100 80GB SXM's L2, 40 MiB)" in a100
    assert ("here one is 24 MiB and the pair 48 MiB, more than that L2 holds though one alone "
            "would fit") in a100


def test_a_tensor_that_fits_alone_but_not_beside_the_next_is_not_said_to_stay(client) -> None:
    """Review rev5: at the defaults on a B200 the page said the 64 MiB intermediate was "small
    enough for that L2" (126.5 MiB). But the kernel that writes it reads another of the same
    size, 128 MiB together, more than the L2: with least-recently-used eviction the oldest part
    of what it wrote, the part the next kernel reads first, is gone. At 2,048 tokens the pair is
    64 MiB and fits. On an A100 at 2,560 tokens one tensor is exactly its 40 MiB of L2."""
    b200 = cache_sentence(client, gpu="b200")
    assert "(the NVIDIA B200's L2, 126.5 MiB)" in b200
    assert "small enough for that L2" not in b200
    assert ("here one is 64 MiB and the pair 128 MiB, more than that L2 holds though one alone "
            "would fit, so part of each is evicted before the next kernel reads it") in b200
    assert "H100" not in b200
    assert "the pair 64 MiB, within that L2" in cache_sentence(client, gpu="b200", tokens=2048)
    a100 = cache_sentence(client, gpu="a100-80gb-sxm", tokens=2560)
    assert "here one is 40 MiB and the pair 80 MiB, more than that L2 holds" in a100


def test_the_mi300x_is_compared_with_its_infinity_cache(client) -> None:
    """The MI300X's L2 is 4 MiB on each of its 8 XCDs, private to that die (ROCm), so a tensor
    passed between kernels stays in the 256 MiB Infinity Cache or nowhere: 64 MiB fits it;
    1,048,576 tokens × 4,096 × 4 = 16 GiB does not. Its matrix units are Matrix Cores."""
    mi300x = cache_sentence(client, gpu="mi300x")
    assert "the 256 MiB Infinity Cache in front of its HBM3" in mi300x
    assert "its L2, 4 MiB on each die, serves only that die's compute units" in mi300x
    assert "here one is 64 MiB and the pair 128 MiB, within that Infinity Cache" in mi300x
    assert "more than that Infinity Cache holds" in cache_sentence(client, gpu="mi300x",
                                                                   tokens=1_048_576)
    worked = section_text(client, 15, "worked",
                          calculator_query(p15.CALCULATOR, p15.PREFIX, gpu="mi300x"))
    assert "A norm uses no Matrix Cores" in worked and "tensor core" not in worked
    assert "vector ALUs; no Matrix Cores in a norm" in worked


def test_a_gpu_whose_l2_is_unsourced_is_not_given_one(client) -> None:
    """No public source found states the H200's or the L40S's L2: the sentence says so and
    decides nothing."""
    for gpu, name in (("h200", "NVIDIA H200 SXM"), ("l40s", "NVIDIA L40S")):
        text = cache_sentence(client, gpu=gpu)
        assert f"no public source we found states the {name}'s L2 size" in text
        verdict = text.split("here one is")[1]
        assert "within" not in verdict and "more than" not in verdict
        assert "MiB" not in text


def test_cache_sizes_print_unequal_when_they_differ() -> None:
    """50 MiB + 4 B against 50 MiB must not print as "50 MiB, more than that L2 (50 MiB)"."""
    size, cache = p15.mib_pair(50 * 2**20 + 4, 50 * 2**20)
    assert size != cache and cache == "50 MiB"
    assert p15.mib_pair(50 * 2**20, 50 * 2**20) == ("50 MiB", "50 MiB")


def test_a_step_larger_than_the_gpus_memory_is_said_not_to_fit(client) -> None:
    """Review rev5: at 1,048,576 tokens of hidden size 65,536 on an L4 the page worked eager and
    fused floors for a step whose BF16 input alone is 137 GB against the L4's 24.2 GB. Even
    the fused kernel's input and output, 2 × 2 × 6.87e10 = 275 GB, do not fit. At 1,048,576 ×
    8,192 in BF16 on an H100 (85.1 GB), fused needs 34.4 GB and eager (2 + 8) × 8.59e9 = 85.9
    GB: only eager runs out."""
    neither = section_text(client, 15, "worked", calculator_query(
        p15.CALCULATOR, p15.PREFIX, gpu="l4", tokens=1_048_576, hidden_size=65_536))
    assert ("cannot run in one piece on it: even the fused kernel's input and output, 275 GB, "
            "are more than its 24.2 GB of memory") in neither
    eager = section_text(client, 15, "worked", calculator_query(
        p15.CALCULATOR, p15.PREFIX, tokens=1_048_576, hidden_size=8_192))
    assert ("eager PyTorch would run out of memory: its input and two live FP32 intermediates "
            "come to 85.9 GB, more than the GPU's 85.1 GB") in eager
    assert "cannot run in one piece" not in eager
    defaults = section_text(client, 15, "worked", "")
    assert "run out of memory" not in defaults and "cannot run in one piece" not in defaults


def test_a_wide_row_at_decode_batch_1_is_not_said_to_take_nanoseconds(client) -> None:
    """Review rev5: hidden size 65,536 in FP32 on an L4, one token: an eager add and norm moves
    (28 + 12) × 65,536 B plus the row and weight terms, 9.61 µs at 300 GB/s, yet the model
    answer said "the bytes take nanoseconds and the win is launches" and the trade-offs "saves
    launches, not bytes". At the defaults (53.8 ns eager) both stay."""
    query = calculator_query(p15.CALCULATOR, p15.PREFIX, gpu="l4", dtype="fp32",
                             hidden_size=65_536, tokens=1)
    answer = section_text(client, 15, "answer", query)
    assert "take nanoseconds" not in answer
    assert ("Even at decode batch 1 a row this wide takes 9.61 µs for an eager add and norm "
            "against 4.37 µs fused here") in answer
    tradeoffs = section_text(client, 15, "tradeoffs", query)
    assert "saves launches, not bytes" not in tradeoffs
    assert "so the fused kernel saves both there" in tradeoffs
    assert "(not for a row as wide as this one)" in section_text(client, 15, "mistakes", query)
    default = section_text(client, 15, "answer", "")
    assert "the bytes take nanoseconds (53.8 ns for an eager add and norm here)" in default
    assert "saves launches, not bytes" in section_text(client, 15, "tradeoffs", "")
