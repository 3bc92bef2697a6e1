"""Problem 23 on page 10, through Django's test client: every section written, the layout figures
equal to the arithmetic and to the JSON API's, inputs that change them, a bad layout named beside
its field, hints hidden, an accessible SVG, the routing simulator embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_in, number_format, seconds_format
from problems.content import p23
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures
from tests.problems.content.page10 import api_get, calculator_query, page_get

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p23.__file__).with_suffix(".html")


def worked_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 23), 23, "worked"))


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 23)
    for slug, heading in SECTIONS:
        section = section_html(problem, 23, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_figures_equal_the_api(client) -> None:
    """The DP8 + EP8 layout on 8 × H200 (test_parallel.py works it by hand): 101 GB of weights
    per GPU, 680 sequences, a step of 29 to 30.7 ms, 8,347 to 8,828 tokens/s; TP8 holds 132."""
    worked = worked_text(client)
    dp = api_get(client, "moe-layout", model="deepseek-v3", gpu="h200")
    tp = api_get(client, "moe-layout", model="deepseek-v3", gpu="h200", attn_tp=8, moe="tp")
    assert "each GPU holds the replicated" in worked
    assert f": {bytes_in(dp['weights_per_gpu_bytes'], 'GB')}. That leaves" in worked
    assert f"{dp['max_sequences']:,} sequences of 5,000 tokens" in worked
    assert (f"a step takes at least {seconds_format(dp['tpot_low_seconds'])}; with no overlap, "
            f"at least {seconds_format(dp['tpot_high_seconds'])}. Both are floors") in worked
    assert (f"That is at most {number_format(round(dp['tokens_per_second_high']))} output "
            f"tokens per second for the node with perfect overlap, and "
            f"{number_format(round(dp['tokens_per_second_low']))} with none") in worked
    assert "at most 30.7 ms" not in worked
    assert f"{tp['max_sequences']:,} sequences. TP cannot run the batch of 256" in worked
    assert (dp["max_sequences"], tp["max_sequences"]) == (680, 132)


def test_the_layout_table_lists_both_clusters(client) -> None:
    worked = worked_text(client)
    for name in ("8 × H200 SXM DP8 attention + EP8", "16 × H100 SXM TP8 × PP2 (experts by TP)",
                 "16 × H100 SXM DP16 attention + EP16"):
        assert name in worked
    assert "132 sequences (batch cut to 132)" in worked


def test_changing_inputs_changes_the_figures(client) -> None:
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=128, context_tokens=8000)
    worked = worked_text(client, query)
    r = api_get(client, "moe-layout", model="deepseek-v3", gpu="h200", batch=128,
                context_tokens=8000)
    assert "decoding 128 sequences that each hold about 8,000 tokens" in worked
    assert f"a step takes at least {seconds_format(r['tpot_low_seconds'])}" in worked
    assert "stays at its defaults" not in worked and "were refused" not in worked


def test_a_non_mla_model_leaves_the_prose_at_its_defaults(client) -> None:
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, model="mixtral-8x7b")
    worked = worked_text(client, query)
    assert ("The calculator works your inputs, but the working below stays at its defaults, "
            "because it follows an MLA model on two clusters and Mixtral 8x7B caches keys and "
            "values per head, not an MLA latent.") in worked
    assert worked.count("stays at") == 1  # one announcement, not the shared one as well
    assert "DeepSeek-V3 with FP8 (E4M3) weights" in worked


def test_a_bad_layout_is_an_error_beside_its_field(client) -> None:
    content = page_get(client, calculator_query(p23.CALCULATOR, p23.PREFIX, attn_tp=3))
    error = re.search(r'id="id_p23-moe-attn_tp_error"[^>]*>(.*?)<', content, re.S)
    assert error and "must divide" in error.group(1)
    response = client.get("/api/calc/moe-layout", {"model": "deepseek-v3", "gpu": "h200",
                                                   "attn_tp": 3})
    assert response.status_code == 400 and response.json()["field"] == "attn_tp"


def test_the_routing_simulator_is_the_demo(client) -> None:
    demo = section_html(problem_html(page_get(client), 23), 23, "demo")
    assert 'data-calculator="moe-routing"' in demo
    assert demo.count('class="plot"') == 3
    assert "the busiest GPU carries" in text_of(demo)
    body = api_get(client, "moe-routing", model="deepseek-v3", gpu="h200", tokens=512, steps=1)
    assert body["ratio_plain"][0] >= 1 and len(body["skews"]) == 5


def test_follow_up_hints_are_hidden_until_asked_for(client) -> None:
    followups = section_html(problem_html(page_get(client), 23), 23, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)


def test_the_layouts_diagram_is_an_accessible_svg(client) -> None:
    concepts = section_html(problem_html(page_get(client), 23), 23, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]+</title>", svg) and re.search(r"<desc[^>]*>[^<]+</desc>",
                                                                       svg)


def test_at_least_four_mistakes() -> None:
    source = TEMPLATE.read_text()
    mistakes = source[source.index("{% block mistakes %}"):source.index("{% block demo %}")]
    assert mistakes.count("<li>") >= 4


def test_the_template_types_no_figures() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p23.SOURCES) >= 8
    for title, url in p23.SOURCES:
        assert title and url.startswith("https://")


def followups_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 23), 23, "followups"))


def test_the_one_node_of_h100s_hint_counts_weights_kv_and_the_reserve(client) -> None:
    """DP8 attention + EP8 on one node of 8 H100s at the same share and reserve: in FP8 each GPU
    would hold 18,970,991,616 + 653,908,770,816 ÷ 8 = 100.7 GB of weights against 72 GB usable,
    so it fails before any KV. With INT4 expert weights the layout arithmetic (weights, the KV of
    5,000-token sequences and the reserve) says how many sequences the node holds."""
    text = followups_text(client)
    assert "so it does not fit before any KV cache" in text
    assert "each GPU would hold 101 GB of weights alone" in text
    int4 = api_get(client, "moe-layout", model="deepseek-v3", gpu="h100-sxm", dtype="int4")
    text = followups_text(client, calculator_query(p23.CALCULATOR, p23.PREFIX, dtype="int4"))
    assert (f"the KV room left holds {int4['max_sequences']:,} sequences of 5,000 tokens"
            in text)
    assert f"weights take {bytes_in(int4['weights_per_gpu_bytes'], 'GB')} per GPU" in text
    assert "does not fit" not in text


def test_the_one_node_hint_says_when_the_weights_fit_but_no_sequence_does(client) -> None:
    """INT4 experts, a 15 GB reserve and 131,072-token sequences: each H100 can give
    CUDA's 85.06 GB × 0.9 − 15 GB = 61.56 GB, the weights take 54.1 GB of it, and the 7.46 GB
    left is less than one sequence's 131,072 × 70,272 B = 9.21 GB of KV. The weights fit; the
    hint must not say they do not."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, dtype="int4", reserve_gb=15,
                             context_tokens=131_072)
    text = followups_text(client, query)
    assert ("the weights take 54.1 GB per GPU, but what is left cannot hold the KV of one "
            "sequence of 131,072 tokens") in text
    assert "does not fit before any KV cache" not in text
    assert "(61.6 GB each at the same share and reserve)" in text


def test_node_limited_routing_and_the_h800_links_are_named(client) -> None:
    concepts = text_of(section_html(problem_html(page_get(client), 23), 23, "concepts"))
    assert "it first keeps the best 4 of 8 groups of experts" in concepts
    assert ("the report gives NVLink in its H800 cluster 160 GB/s against 50 GB/s for "
            "InfiniBand, 3.2 times as fast") in concepts
    # §3.2.2 states the figures ("NVLink offers a bandwidth of 160 GB/s"); it does not call
    # them measured.
    assert "measured" not in concepts.split("Its router also limits")[1].split("Memory per GPU")[0]
    sources = " ".join(title for title, _ in p23.SOURCES)
    assert "measured on H800" not in sources and "at most 4 nodes (also §4.2)" in sources


def test_a_context_neither_layout_holds_is_not_claimed_for_dp_attention(client) -> None:
    """At 20,000 tokens DP attention + EP8 on the H200 node holds 168 sequences, not the 256 asked
    for: the worked answer must not say it can run them, must compare the wire bytes of both at the
    full batch, and must say which batch its step bounds are worked at."""
    inputs = {**p23.CALCULATOR.defaults(), "context_tokens": 20_000}
    f = p23.figures(inputs)
    assert not f["a_tp_fits"] and not f["a_dp_fits"]
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, context_tokens=20_000)
    worked = text_of(section_html(problem_html(page_get(client, query), 23), 23, "worked"))
    assert "DP attention can." not in worked
    assert "Neither holds the batch of 256 at this context" in worked
    assert "(as if both layouts had the memory for them)" in worked
    assert f"carrying {f['a_dp_full_comm_bytes_text']}" in worked
    assert f["a_dp_full_comm_bytes_text"] != f["a_dp_comm_bytes_text"]
    assert f"at the {f['a_dp_max_seq']} sequences it holds:" in worked
    answer = text_of(section_html(problem_html(page_get(client, query), 23), 23, "answer"))
    assert f"at the {f['a_dp_max_seq']} sequences the node holds nearly every expert" in answer


def test_the_model_answer_names_the_weight_format_it_sizes(client) -> None:
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, dtype="int4")
    answer = text_of(section_html(problem_html(page_get(client, query), 23), 23, "answer"))
    assert "in INT4 (group 128) with the embeddings in BF16" in answer
    assert "in FP8 with" not in answer


def test_the_cross_node_paragraph_uses_cluster_bs_own_nvlink(client) -> None:
    """Review E5, B200 and NVFP4: the H100 cluster's paragraph divided the B200's NVLink5
    (900 GB/s one way) by 50 GB/s of InfiniBand, "about 18 times slower". The H100's NVLink is
    450 GB/s one way: 450 ÷ 50 = 9."""
    worked = worked_text(client, calculator_query(p23.CALCULATOR, p23.PREFIX, gpu="b200",
                                                  dtype="nvfp4"))
    assert "about 9 times slower than its NVLink (450 GB/s one way)" in worked
    assert "18 times" not in worked


def test_nvfp4_is_not_worked_natively_on_the_hopper_cluster(client) -> None:
    """Review M7: Hopper has no FP4 tensor cores, so with NVFP4 chosen for the B200s the H100
    cluster is worked in FP8 and says so; its DP16 + EP16 row then holds (0.9 × CUDA's 79.22 GiB
    = 76.56 GB, − 5 GB) − 59.8 GB of FP8 weights = 11.7 GB of KV a GPU, as at the FP8 defaults."""
    worked = worked_text(client, calculator_query(p23.CALCULATOR, p23.PREFIX, gpu="b200",
                                                  dtype="nvfp4"))
    assert ("This GPU has no tensor cores for NVFP4 (it would run weight-only there, "
            "dequantised to BF16, with other kernels and costs), so this cluster is worked with "
            "FP8 (E4M3) weights") in worked
    assert "puts 59.8 GB on each GPU and leaves 11.7 GB for KV" in worked


def test_batch_one_works_the_busiest_gpu_and_recommends_tp(client) -> None:
    """Review E10 and M6, batch 1: one GPU holds the one sequence (not 0.125 of it each), the
    other 7 send empty dispatches; at this load TP8's floor (1.31 ms) is below DP attention's
    (5.21 ms, the busiest GPU reading the attention weights and the whole sequence's KV), 3.97×,
    so the prose and the model answer recommend TP."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1)
    worked = worked_text(client, query)
    assert "0.125" not in worked
    assert "at most 1 token: with 1 sequence over 8 GPUs, 7 GPUs hold no sequence" in worked
    assert "plain TP8 has the lower floor, 1.31 ms to 2.54 ms" in worked
    assert "1 sequences" not in worked
    answer = text_of(section_html(problem_html(page_get(client, query), 23), 23, "answer"))
    assert "so at this load I'd run TP8" in answer
    assert "throughput below" in answer


def answer_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 23), 23, "answer"))


def concepts_text(client, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 23), 23, "concepts"))


def test_batch_one_reads_only_its_tokens_experts_and_is_one_sequence(client) -> None:
    """At batch 1 the 8 experts read are the one token's own (256 × (1 − (1 − 8/256)¹) = 8),
    not "little more than the active part"; and one sequence "holds", not "each hold"."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1)
    assert ("its one token's own, so a single sequence's step reads only the active part"
            in concepts_text(client, query))
    assert "decoding 1 sequence that holds about 5,000 tokens" in worked_text(client, query)
    assert "that each hold" in worked_text(client)


def test_batch_one_at_a_long_context_is_attention_arithmetic_not_weights(client) -> None:
    """On 8 × A100 with INT4 experts at 131,072 tokens, one sequence's DP attention is
    compute-bound (MLA multiplies the cached latent by every head): 82% of the 17.6 ms of GPU
    work. The answer said "Most of the step is reading weights" at every input."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1, gpu="a100-80gb-sxm",
                             dtype="int4", context_tokens=131_072)
    worked = worked_text(client, query)
    assert "is compute-bound at" in worked
    answer = answer_text(client, query)
    assert "Most of the step is reading weights" not in answer
    assert ("Under DP attention at this load, by comparison, most of the step is attention's "
            "arithmetic: at 131,072 tokens of context it is compute-bound and takes 82% of the "
            "GPU work") in answer
    assert "so at this load I'd run TP8" in answer


def test_tp_is_not_recommended_for_a_batch_it_cannot_hold(client) -> None:
    """At 680 sequences of 5,000 tokens TP8's copied cache holds 132: its floor (33.6 ms) was
    worked at those 132 and set against DP attention's at 680 (39.3 ms), so the page said TP
    was the better layout and 'at 680 sequences that is no constraint'."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=680)
    worked = worked_text(client, query)
    assert "plain TP8 has the lower floor" not in worked
    answer = answer_text(client, query)
    assert "that is no constraint" not in answer and "I'd run TP8" not in answer
    assert "So I'd run attention data-parallel" in answer


def test_a_middling_batch_is_neither_the_active_part_nor_all_experts(client) -> None:
    """At 64 sequences 256 × (1 − (248/256)⁶⁴) = 222 experts (86.9%) are read: not "little more
    than the active part", and not "only"; TP8 holds the 64 but DP attention's floor (23.7 ms)
    is about the same as TP's (24.9 ms) and it holds 680 sequences to TP's 132."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=64)
    concepts = concepts_text(client, query)
    assert "little more than the active part" not in concepts
    assert "86.9% of the routed experts, far more than the active part" in concepts
    answer = answer_text(client, query)
    assert "only 86.9%" not in answer and "at 64 sequences 86.9% of the experts" in answer
    assert ("That holds the 64 sequences, but DP attention's step floor, 23.7 ms, is about the "
            "same as TP's 24.9 ms, and it holds up to 680 sequences against TP's 132") in answer
    worked = worked_text(client, query)
    assert "the layout that splits each token's work widest wins" not in worked


def test_a_cache_heavy_step_is_said_to_read_the_cache(client) -> None:
    """2 × 8 H100 PCIe, INT4 experts, 256 sequences of 32,768 tokens: the busiest GPU reads
    more KV than weights (54.3% of the GPU work)."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, gpu="h100-pcie", nodes=2,
                             dtype="int4", context_tokens=32_768)
    answer = answer_text(client, query)
    assert "Most of the step is reading the sequences' cache (54.3% of the GPU work)" in answer


def test_the_routing_note_names_the_selected_gpus_matrix_units(client) -> None:
    """Memory-bound experts leave the matrix units idle: on the MI300X those are Matrix Cores,
    on the default H200 tensor cores."""
    mi300x = text_of(section_html(problem_html(page_get(client, "?p23-routing-gpu=mi300x"), 23),
                                  23, "demo"))
    assert "too few tokens per expert to use the Matrix Cores" in mi300x
    assert "tensor core" not in mi300x
    h200 = text_of(section_html(problem_html(page_get(client), 23), 23, "demo"))
    assert "too few tokens per expert to use the tensor cores" in h200


def test_dp_attention_catches_up_before_tps_cache_is_full(client) -> None:
    """Review: at 1 or 16 sequences of 5,000 tokens on 8 × H200 the page said DP attention
    'pays once the batch outgrows what TP's copied cache holds' (132 sequences) and the answer
    would switch only 'as the batch grows past what the copied cache holds'; DP attention's
    floor catches TP's at 37 sequences (TP 17.1 ms against DP 18.4 ms at 32, 21.6 against 21.7
    at 48). 'The copied cache costs nothing' was said at 16 sequences, where TP's copy makes
    each GPU read 15 sequences' cache more than DP's busiest GPU (2 sequences): 4.92 GB."""
    one = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1)
    worked = worked_text(client, one)
    assert "outgrows what TP's copied cache holds" not in worked
    assert ("DP attention catches up at about 37 sequences, before the batch outgrows the 132 "
            "TP's copied cache holds") in worked
    assert "with one sequence TP's copied cache costs nothing extra" in worked
    answer = answer_text(client, one)
    assert "As the batch grows past what the copied cache holds" not in answer
    assert ("so at this load I'd run TP8: a step of at least 1.31 ms to 2.54 ms, at most about "
            "393 to 761 tokens per second for the node. From about 37 sequences, before the "
            "copied cache is full, I'd switch") in answer
    assert "at most about 156 to 192 tokens per second for the node, against TP's 393 to 761" in (
        answer)
    sixteen = worked_text(client, calculator_query(p23.CALCULATOR, p23.PREFIX, batch=16))
    assert "costs nothing" not in sixteen
    assert ("TP's copied cache makes each GPU read 4.92 GB more of the cache per step than DP "
            "attention's busiest GPU") in sixteen
    full = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1, gpu="a100-80gb-sxm",
                            dtype="int4", context_tokens=131_072)
    assert ("DP attention catches up at about 3 sequences, the most TP's copied cache holds."
            in worked_text(client, full))
    assert "From about 3 sequences, the most the copied cache holds, I'd switch" in (
        answer_text(client, full))


def test_a_cluster_of_two_nodes_is_not_called_the_node(client) -> None:
    """Review: at 2 nodes of H200 the page said 'across the node', 'the node holds', 'all
    inside the node' for an all-to-all with 4.07 MB of its 7.63 MB over InfiniBand, 'over
    NVLink', and gave the two nodes' throughput 'for the node'."""
    query = calculator_query(p23.CALCULATOR, p23.PREFIX, batch=1, nodes=2)
    worked = worked_text(client, query)
    assert "across the node:" not in worked and "all inside the node" not in worked
    assert "16,129,109 across the 2 nodes" in worked
    assert ("about 1.26 ms, over NVLink 4 and InfiniBand (4.07 MB of it over InfiniBand)"
            in worked)
    assert "output tokens per second for the 2 nodes with perfect overlap" in worked
    answer = answer_text(client, query)
    assert "the node holds" not in answer and "for the node" not in answer
    assert "(its all-reduces cross InfiniBand, so that floor rests on the 10 µs" in answer


def test_an_mi300x_cluster_names_its_own_link_and_times_its_links(client) -> None:
    """Review: an MI300X cluster's all-reduces were said to go "over NVLink" and were timed at
    half the 896 GB/s of all 7 of a GPU's Infinity Fabric links together. On one node of 8,
    TP8 and EP8 reach the other 7 GPUs over 7 links at 64 GB/s each way, 448 GB/s at best,
    which is what the API's layout gives."""
    page = page_get(client, calculator_query(p23.CALCULATOR, p23.PREFIX, gpu="mi300x"))
    worked = text_of(section_html(problem_html(page, 23), 23, "worked"))
    answer = text_of(section_html(problem_html(page, 23), 23, "answer"))
    assert "over NVLink." not in worked and "over NVLink. DP" not in worked
    assert "with Infinity Fabric inside a node of the first and NVLink 4 inside a node of the " \
           "second" in worked
    f = p23.figures({**p23.CALCULATOR.defaults(), "gpu": "mi300x"})
    assert f"about {f['a_tp_comm_time_text']} over Infinity Fabric. DP attention" in worked
    assert f"about {f['a_dp_comm_time_text']} over Infinity Fabric." in answer
    assert "over NVLink." not in answer
