"""Problem 9 on page 05, through Django's test client: every section written, the worked
figures equal to the JSON API's, inputs that move them, no typed figures, sources."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import count_format, rate_format, seconds_format
from problems.content import p09
from tests.problems.content.helpers import typed_figures
from tests.problems.content.page05 import (
    api_get,
    calculator_query,
    page_checks,
    section_text,
)

pytestmark = pytest.mark.django_db

TEMPLATE = Path(p09.__file__).with_suffix(".html")


def test_all_sections_hints_svg_and_lists(client) -> None:
    page_checks(client, 9, TEMPLATE.read_text())


def test_the_worked_answer_equals_the_api(client) -> None:
    worked = section_text(client, 9, "worked")
    r = api_get(client, "itl-levers")
    assert f"TPOT is {seconds_format(r['tpot_seconds'])}" in worked
    assert f"throughput {rate_format(r['tokens_per_second'], 'tokens/s')} per GPU" in worked
    assert (f"the largest batch within {seconds_format(0.015)} is "
            f"{count_format(r['batch_at_target'], 'sequence')}") in worked
    for lever in r["levers"][1:]:
        assert lever["name"] in worked
        assert seconds_format(lever["tpot_seconds"]) in worked
    assert seconds_format(r["spike_unchunked_seconds"]) in worked
    assert seconds_format(r["spike_chunked_seconds"]) in worked


def test_changing_the_inputs_moves_the_figures(client) -> None:
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, model="llama-3-70b", dtype="fp8",
                             tp="4", batch=32)
    worked = section_text(client, 9, "worked", query)
    r = api_get(client, "itl-levers", model="llama-3-70b", dtype="fp8", tp="4", batch=32)
    assert "Llama 3 70B decoding on 4 ×" in worked
    assert f"TPOT is {seconds_format(r['tpot_seconds'])}" in worked
    assert "Tensor parallel × 8" in worked


def test_bad_input_is_refused_naming_the_field(client) -> None:
    response = client.get("/api/calc/itl-levers", {"tp": "3"})
    assert response.status_code in (400, 422)
    assert "tp" in response.content.decode()
    worked = section_text(client, 9, "worked",
                          calculator_query(p09.CALCULATOR, p09.PREFIX, context_tokens=10**6))
    assert "Take Llama 3 8B" in worked  # the prose keeps the defaults


def test_no_typed_figures_and_sources() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []
    assert len(p09.SOURCES) >= 6
    for title, url in p09.SOURCES:
        assert title and url.startswith("https://")


def test_speculation_lever_names_its_cost_and_its_bursts(client) -> None:
    """Review: speculation cuts TPOT by tokens per pass ÷ the pass's cost, not by the tokens
    alone, and makes token arrival bursty."""
    concepts = section_text(client, 9, "concepts")
    assert "divided by what the pass costs in plain steps" in concepts
    assert "must hold for the whole pass, not for the pass divided by" in concepts


def test_tensor_parallel_per_gpu_is_compared_at_the_target(client) -> None:
    """Review: 'TP usually lowers tokens/s per GPU' contradicted the page's own table, where at
    the 15 ms target TP×2 gives more per GPU (251 sequences on two GPUs) than one GPU (108)."""
    r = api_get(client, "itl-levers")
    tp = next(x for x in r["levers"] if x["id"] == "tp")
    base = r["levers"][0]
    assert tp["tokens_per_second_per_gpu"] < base["tokens_per_second_per_gpu"]
    assert tp["per_gpu_at_target"] > base["per_gpu_at_target"]
    tradeoffs = section_text(client, 9, "tradeoffs")
    assert (f"the bigger batch it allows gives {rate_format(tp['per_gpu_at_target'], 'tokens/s')}"
            f" per GPU against {rate_format(base['per_gpu_at_target'], 'tokens/s')}") in tradeoffs


def test_tensor_parallel_trade_off_at_a_target_neither_meets(client) -> None:
    """Dr2: at a 1 ms target neither one GPU nor two meet the target even at batch 1, and the
    trade-off read 'it also gives less per GPU (0 tokens/s against 0 tokens/s)'. With 300 µs
    all-reduces TP misses the 15 ms target while one GPU holds 108 sequences: that is less."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, tpot_target_ms=1)
    tradeoffs = section_text(client, 9, "tradeoffs", query)
    assert "neither meets it, even with one sequence per step" in tradeoffs
    assert "also gives less per GPU" not in tradeoffs
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, allreduce_latency_us=300)
    r = api_get(client, "itl-levers", allreduce_latency_us=300)
    tp = next(x for x in r["levers"] if x["id"] == "tp")
    assert (tp["batch_at_target"], r["levers"][0]["batch_at_target"]) == (0, 108)
    tradeoffs = section_text(client, 9, "tradeoffs", query)
    assert "also gives less per GPU (none against 7,233 tokens/s)" in tradeoffs


def test_tensor_parallel_more_than_doubles_the_batch_for_the_reason_given(client) -> None:
    """Dr2: the batch within the target more than doubles (108 → 251) because each GPU reads
    half the weights and half of each sequence's KV (Llama 3 8B's 8 KV heads split over two),
    not because it holds more KV: both are target-limited, below memory (219 and 500)."""
    r = api_get(client, "itl-levers")
    tp = next(x for x in r["levers"] if x["id"] == "tp")
    base = r["levers"][0]
    assert (base["batch_at_target"], tp["batch_at_target"]) == (108, 251)
    assert base["limit_at_target"] == tp["limit_at_target"] == "target"
    concepts = section_text(client, 9, "concepts")
    assert "with the KV heads split too, of each sequence's KV" in concepts
    assert "holds more KV" not in concepts


def test_the_bytes_read_say_why_they_are_below_the_weights_stored(client) -> None:
    """The step reads 15 GB of Llama 3 8B's 16.1 GB: the page must say the embedding is gathered."""
    worked = section_text(client, 9, "worked")
    r = api_get(client, "itl-levers")
    assert r["weights_bytes"] < 16e9  # the stored BF16 weights are 16.1 GB
    assert "the embedding table is only gathered, a row per token" in " ".join(worked.split())


def test_under_tensor_parallelism_the_gpu_step_names_its_all_reduces(client) -> None:
    """At tp 4 the step is max(read, compute) plus all-reduces; the page must not pass the sum
    off as the bound alone."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, model="llama-3-70b", tp="4", batch=32)
    worked = " ".join(section_text(client, 9, "worked", query).split())
    r = api_get(client, "itl-levers", model="llama-3-70b", tp="4", batch=32)
    assert r["allreduce_seconds"] > 0
    assert r["gpu_step_seconds"] > max(r["memory_seconds"], r["compute_seconds"])
    assert (f"the all-reduces over the 4 GPUs add {seconds_format(r['allreduce_seconds'])}: "
            f"{seconds_format(r['gpu_step_seconds'])}") in worked
    default = " ".join(section_text(client, 9, "worked").split())
    assert "all-reduces over the" not in default


def test_a_lever_the_baseline_already_has_is_not_said_to_move_the_curve(client) -> None:
    """Baseline weights already FP8: the FP8-weights lever changes nothing and must say so."""
    r = api_get(client, "itl-levers", dtype="fp8")
    rows = {x["id"]: x for x in r["levers"]}
    assert rows["weights"]["tpot_seconds"] == rows["baseline"]["tpot_seconds"]
    assert rows["weights"]["effect"].startswith("no gain")
    assert rows["kv"]["effect"].startswith("moves the curve: ")
    worked = " ".join(section_text(
        client, 9, "worked", calculator_query(p09.CALCULATOR, p09.PREFIX, dtype="fp8")).split())
    assert "no gain: not fewer bits than the baseline's weights" in worked
    default = api_get(client, "itl-levers")
    assert all(not x["effect"].startswith("no gain") for x in default["levers"])


def test_chunked_prefill_adds_less_step_time_than_one_whole_prefill(client) -> None:
    """Review: 'the same prefill work (252 ms of extra step time) is paid once or spread out'.
    In 512-token chunks the chunks' steps add 141 ms in all, not 252 ms: each chunk's compute
    runs partly under the decoders' memory-bound step."""
    r = api_get(client, "itl-levers")
    whole, chunked = r["prefill_stall_total_seconds"], r["prefill_stall_chunked_total_seconds"]
    assert chunked == pytest.approx(0.141, abs=0.001) and whole == pytest.approx(0.252, abs=0.001)
    worked = " ".join(section_text(client, 9, "worked").split())
    assert "is paid once or spread out" not in worked
    assert (f"the prefill adds {seconds_format(whole)} of step time in one step, or "
            f"{seconds_format(chunked)} over the chunks (less, because") in worked
    # One chunk holding the whole prompt adds what one whole prefill does, and says no more.
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, chunk_tokens=8_000)
    worked = " ".join(section_text(client, 9, "worked", query).split())
    r = api_get(client, "itl-levers", chunk_tokens=8_000)
    assert r["prefill_stall_chunked_total_seconds"] == pytest.approx(
        r["prefill_stall_total_seconds"])
    assert "(less, because" not in worked


def test_a_batch_of_one_reads_in_the_singular(client) -> None:
    """Review: batch 1 read '1 sequences each holding', 'every one of the 1 decoding users' and
    'Batch 1 buys 1× the throughput of batch one for 1× the TPOT'."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, batch=1)
    worked = " ".join(section_text(client, 9, "worked", query).split())
    assert "1 sequence holding 2,000 tokens" in worked
    assert "the one decoding user sees one gap" in worked
    assert not re.search(r"(?<![\d,.])1 sequences", worked)
    assert "Batch 1 buys" not in worked
    r = api_get(client, "itl-levers", batch=2)
    assert f"At batch 2: {seconds_format(r['tpot_seconds'])}" in worked
    default = " ".join(section_text(client, 9, "worked").split())
    assert "64 sequences each holding" in default
    assert "every one of the 64 decoding users" in default


def test_no_batch_within_the_target_is_not_quoted_as_a_point(client) -> None:
    """Review: at a 1 ms target the page read 'the largest batch within 1 ms is 0 sequences ...
    giving 0 tokens/s per GPU. That is the throughput a lever must beat', the scheduler capped
    the batch at '0 sequences' and the model answer set the cap to '0 sequences here'."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, tpot_target_ms=1)
    assert api_get(client, "itl-levers", tpot_target_ms=1)["batch_at_target"] == 0
    worked = " ".join(section_text(client, 9, "worked", query).split())
    answer = " ".join(section_text(client, 9, "answer", query).split())
    assert "not even one sequence: a lever must move the curve" in worked
    assert "is 0 sequences" not in worked and "step 5, 0 sequences" not in worked
    assert "0 sequences here" not in answer and "once a lever lets some batch meet it" in answer
    # Llama 3 70B in BF16 on one H100 holds no sequence at all: memory, not the target.
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, model="llama-3-70b")
    r = api_get(client, "itl-levers", model="llama-3-70b")
    assert (r["batch_max_memory"], r["levers"][0]["limit_at_target"]) == (0, "memory")
    worked = " ".join(section_text(client, 9, "worked", query).split())
    tradeoffs = " ".join(section_text(client, 9, "tradeoffs", query).split())
    # Its 141 GB of weights alone exceed the 73.3 GB usable: the weights are the reason.
    assert "the weights alone exceed the memory" in worked
    assert "cannot even hold its weights" in tradeoffs
    assert "even with one sequence per step" not in tradeoffs
    default = " ".join(section_text(client, 9, "answer").split())
    assert f"{count_format(api_get(client, 'itl-levers')['batch_at_target'], 'sequence')} here" \
        in default


def test_prefill_share_tp_costs_and_missing_levers_are_in_the_prose(client) -> None:
    """Review P9-E4, P9-M4 and P9-K4. At the defaults every request bringing an 8,000-token
    prompt for a 500-token answer makes the mean TPOT 43.8 ms, not 11.5; TP's per-GPU loss is
    named as host time (2 ms, 26.8% of the 7.46 ms TP step) and all-reduces (0.715 ms), the GPU
    work alone splitting about evenly; Flash-Decoding and MoE decode are levers."""
    why = " ".join(section_text(client, 9, "why").split())
    assert "without changing the average much" not in why
    worked = " ".join(section_text(client, 9, "worked").split())
    assert "moves little either way" not in worked
    assert "43.8 ms, 3.81 times the decode-only figure" in worked
    assert "2.81 prefill GPUs per decode GPU" in worked
    tradeoffs = " ".join(section_text(client, 9, "tradeoffs").split())
    assert "the host's 2 ms, now 26.8% of the TP step, and the all-reduces, 715 µs" in tradeoffs
    assert "about the same per GPU without fixed costs" in tradeoffs
    listens = " ".join(section_text(client, 9, "listens").split())
    assert "fix the p99 ITL, not the mean" not in listens
    concepts = " ".join(section_text(client, 9, "concepts").split())
    assert "Flash-Decoding" in concepts and "Mixture-of-experts decode" in concepts
    assert "W8A8" in concepts and "almost always on the memory side" not in concepts
    assert any("flashdecoding" in url for _, url in p09.SOURCES)


def test_a_lever_within_five_percent_is_not_said_to_move_the_curve(client) -> None:
    """Fresh read, course-lm in FP32 on a B200, 500-token contexts: the FP8 KV cache gives
    2,342,219 tokens/s per GPU at the target against the baseline's 2,256,474, 1.038× (within
    the phrasing helper's 5%), and the table read 'moves the curve: about the same'; tensor
    parallelism's 2,159,107 (0.957×) read 'lowers … (about the same)'. Verdict and ratio now
    use one threshold."""
    query = ("?p09-itl-model=course-lm&p09-itl-gpu=b200&p09-itl-dtype=fp32"
             "&p09-itl-context_tokens=500&p09-itl-prompt_tokens=500&p09-itl-chunk_tokens=128")
    worked = section_text(client, 9, "worked", query)
    assert "moves the curve: about the same" not in worked
    assert "(about the same)" not in worked
    assert "2,342,219 tokens/s about the same tokens/s per GPU at the target" in worked
    assert "2,159,107 tokens/s about the same tokens/s per GPU at the target" in worked
    # A gain past 5% still moves it: hiding the 2 ms host time gives 1.15×.
    assert "moves the curve: 1.15× more tokens/s per GPU at the target" in worked


def test_the_tp_mistake_does_not_say_per_gpu_throughput_usually_drops(client) -> None:
    """Fresh read: Common mistakes said TP's throughput per GPU 'usually drops', while the page's
    own table at the 15 ms target gives TP × 2 8,370 tokens/s per GPU (251 sequences ÷ 15 ms ÷
    2 GPUs) against one GPU's 7,233 (108 ÷ 14.9 ms). It drops at the same batch (4,290 against
    5,571); at the target it wins that back."""
    mistakes = " ".join(section_text(client, 9, "mistakes").split())
    assert "usually drops" not in mistakes
    assert ("at the same batch throughput per GPU, the cost metric, drops, though at this "
            "page's target the larger batch TP allows wins it back (8,370 tokens/s against "
            "7,233 tokens/s)") in mistakes
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, tpot_target_ms=1)
    mistakes = " ".join(section_text(client, 9, "mistakes", query).split())
    assert "the cost metric, drops." in mistakes and "wins it back" not in mistakes


def test_a_chunk_as_long_as_the_prompt_is_no_chunking(client) -> None:
    """Fresh read, a 10,000-token chunk against the 8,000-token prompt: ⌈8,000 ÷ 10,000⌉ = 1
    chunk, and the page said 'the worst step is 264 ms, repeated over 1 chunk' and 'In chunks
    it is 43.8 ms, no lower'. One chunk is the whole prefill: it still adds 264 ms − 11.5 ms
    = 252 ms to one step (the step with the prefill in it against a plain one)."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, chunk_tokens=10_000)
    worked = " ".join(section_text(client, 9, "worked", query).split())
    assert ("A 10,000-token chunk holds the whole prompt, so chunking at that size changes "
            "nothing: the prefill still adds 252 ms to one step") in worked
    assert "repeated over 1 chunk" not in worked and "In chunks it is" not in worked
    assert "Disaggregated, the decode GPUs never run a prefill" in worked


@pytest.mark.parametrize("tp, lever_links", [("2", 3), ("4", 7)])
def test_mi300x_all_reduces_use_the_links_of_the_group(client, tp, lever_links) -> None:
    """Review: an MI300X pair all-reduced at 448 GB/s, half the 896 GB/s of all 7 of a GPU's
    Infinity Fabric links together; two GPUs share one link (64 GB/s each way), and the
    lever's doubled group reaches its other GPUs over one link each."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, model="llama-3-70b", gpu="mi300x",
                             tp=tp)
    worked = section_text(client, 9, "worked", query)
    r = api_get(client, "itl-levers", model="llama-3-70b", gpu="mi300x", tp=tp)
    assert seconds_format(r["allreduce_seconds"]) in worked
    if tp == "2":
        assert "over Infinity Fabric, the one link between the two GPUs, at 64 GB/s" in worked
    else:
        assert "over Infinity Fabric, 3 links a GPU, one to each other GPU of the group" in worked
    # The lever's group of 2 × tp at the default batch of 64 and 10 µs a collective: each
    # GPU's links to the others, 64 GB/s each way apiece.
    from problems.arithmetic.gpus import tp_allreduce_bytes

    sent = tp_allreduce_bytes(layers=80, hidden=8192, tokens=64, group=2 * int(tp))
    assert r["tp_allreduce_seconds"] == pytest.approx(sent / (lever_links * 64e9)
                                                      + 2 * 80 * 10e-6)


def test_a_baseline_whose_doubled_tp_the_heads_refuse_is_announced(client) -> None:
    """Qwen2.5 7B's 28 query heads allow 1, 2, 4 or 28 GPUs: a baseline of 4 doubles to 8,
    which vLLM refuses, so the page says so above the working and keeps the defaults."""
    query = calculator_query(p09.CALCULATOR, p09.PREFIX, model="qwen2.5-7b", tp="4")
    worked = section_text(client, 9, "worked", query)
    assert "28 query heads do not split evenly over 8 GPUs" in worked
    assert "so the baseline here is 1 or 2" in worked
    assert "Take Llama 3 8B" in worked
    fine = section_text(client, 9, "worked", calculator_query(
        p09.CALCULATOR, p09.PREFIX, model="qwen2.5-7b", tp="2"))
    assert "Qwen2.5 7B decoding on 2 ×" in fine
