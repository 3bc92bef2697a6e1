"""Page 05 (problems 9, 10 and 17) at inputs the earlier reviews did not try: levers that
cost throughput for a stated reason, no host time, a model no GPU of the form can hold, load
near one and far below it, and seats nobody waits for."""

import pytest

from problems.content import p09, p10, p17
from tests.problems.content.page05 import api_get, calculator_query, section_text

pytestmark = pytest.mark.django_db


def text(client, number: int, slug: str, module, **values) -> str:
    query = calculator_query(module.CALCULATOR, module.PREFIX, **values)
    return " ".join(section_text(client, number, slug, query).split())


def test_problem_9_a_lever_that_costs_throughput_is_not_labelled_no_gain(client) -> None:
    """Drafts never kept (α = 0): speculation gives 4,535 tokens/s at the target against the
    baseline's 8,953, 1.97× less, but the row said 'no gain: no draft is ever accepted'. BF16
    weights and KV as 'levers' on an FP8 baseline lose 1.25× and 2× and said 'no gain: not
    fewer bits'."""
    r = api_get(client, "itl-levers", acceptance=0, host_ms=0)
    rows = {x["id"]: x for x in r["levers"]}
    assert rows["speculative"]["effect"] == (
        "lowers tokens/s per GPU at the target (1.97× less): no draft is ever accepted")
    assert rows["overlap"]["effect"] == "no gain: no host time to hide"
    r = api_get(client, "itl-levers", dtype="fp8", kv_dtype="fp8", lever_dtype="bf16",
                lever_kv_dtype="bf16")
    rows = {x["id"]: x for x in r["levers"]}
    assert rows["weights"]["effect"] == ("lowers tokens/s per GPU at the target (1.25× less): "
                                         "more bits than the baseline's weights")
    assert rows["kv"]["effect"] == ("lowers tokens/s per GPU at the target (2× less): more "
                                    "bits than the baseline's KV cache")
    worked = text(client, 9, "worked", p09, acceptance=0, host_ms=0)
    assert "1.97× less): no draft is ever accepted" in worked


def test_problem_9_a_lever_that_leaves_no_batch_within_the_target_is_not_no_gain(client) -> None:
    """At a 9 ms target the BF16 baseline keeps 32 sequences within it (3,562 tokens/s per
    GPU), FP32 weights none: the row said 'no gain: more bits than the baseline's weights'."""
    r = api_get(client, "itl-levers", lever_dtype="fp32", lever_kv_dtype="fp32",
                tpot_target_ms=9)
    rows = {x["id"]: x for x in r["levers"]}
    assert rows["weights"]["effect"] == ("no batch meets the target: more bits than the "
                                         "baseline's weights")
    assert rows["kv"]["effect"].startswith("lowers tokens/s per GPU at the target")
    # The same bits as the baseline: the same batch, so still no gain.
    r = api_get(client, "itl-levers", lever_dtype="bf16", tpot_target_ms=9)
    assert {x["id"]: x for x in r["levers"]}["weights"]["effect"] == (
        "no gain: not fewer bits than the baseline's weights")


def test_problem_9_no_host_time_is_said_in_words(client) -> None:
    """Host time set to zero read '0 s of host time per step that the GPU waits for' and
    'with 0 s of host time a TPOT of 9.49 ms'."""
    worked = text(client, 9, "worked", p09, host_ms=0)
    answer = text(client, 9, "answer", p09, host_ms=0)
    assert "0 s of host time" not in worked + answer
    assert "no host time per step for the GPU to wait for" in worked
    assert "With no host time to add, TPOT is 9.49 ms" in worked
    assert "with the host's work hidden a TPOT of 9.49 ms" in answer


def test_problem_10_a_model_no_gpu_holds_has_no_batch_to_search(client) -> None:
    """Llama 3.1 405B on one L4 (816 GB needed against 21.7 GB usable): the page said
    verification 'never costs more than 1.1 plain steps at the batches tried' and speculation
    'stays faster than plain decoding at every batch tried' when no batch was tried, and the
    trees note read 'stops being nearly free at no batch memory holds'."""
    worked = text(client, 10, "worked", p10, model="llama-3.1-405b", gpu="l4")
    concepts = text(client, 10, "concepts", p10, model="llama-3.1-405b", gpu="l4")
    answer = text(client, 10, "answer", p10, model="llama-3.1-405b", gpu="l4")
    assert "batches tried" not in worked and "every batch tried" not in worked
    assert "not even one sequence fits, since the target's weights, its KV and the reserve " \
           "need 816 GB against 21.7 GB usable on one NVIDIA L4" in worked
    assert "at no batch memory holds" not in concepts
    assert "not even one sequence fits one NVIDIA L4" in concepts
    assert "the calculator tries" not in answer
    assert "here not even one sequence fits one NVIDIA L4 at all" in answer
    # Where memory holds a few sequences, the tree note still gives its batches.
    fits = text(client, 10, "concepts", p10, model="llama-3.1-70b", gpu="h200", dtype="fp8",
                context_tokens=8000)
    assert "a 64-node tree stops being nearly free from 2 sequences and loses to plain " \
           "decoding from 5 sequences" in fits


def test_problem_10_no_guess_kept_is_not_said_to_fall_geometrically(client) -> None:
    worked = text(client, 10, "worked", p10, acceptance=0)
    assert "falls geometrically" not in worked
    assert "no guess is ever kept (α = 0), so a pass yields only the target's own token" \
        in worked


def test_problem_17_many_seats_sentence_follows_the_load(client) -> None:
    """At 99.9% the 16-seat median is 2.94 min, 44× the 4 s service, but the page said 'many
    seats keep the median near the service time'; at 1 ms service on 100,000 seats nobody
    waits and it said they 'push the waits into the tail'."""
    full = text(client, 17, "worked", p17, utilization=0.999)
    assert "Many seats keep the median near the service time" not in full
    assert "even many seats cannot keep the median near the service time: the median " \
           "response is 44× the mean service" in full
    idle = text(client, 17, "worked", p17, mean_service_seconds=0.001, servers=100000)
    assert "push the waits into the tail" not in idle
    assert "So few arrivals wait that not even the 99th percentile does" in idle
    default = text(client, 17, "worked", p17)
    assert "Many seats keep the median near the service time and push the waits into the " \
           "tail." in default


def test_problem_17_answer_quotes_queueing_at_a_load_that_queues(client) -> None:
    """At 1% load the answer said 'we are near saturation: ... p99 response at 1% load is
    18.4 s against a median of 2.77 s', which is the service time's spread, not queueing."""
    low = text(client, 17, "answer", p17, utilization=0.01)
    assert "at 1% load" not in low
    assert "p99 response at 95% load is 28.9 s against a median of 6.38 s" in low
    default = text(client, 17, "answer", p17)
    assert "p99 response at 90% load is 21.1 s against a median of 4.31 s" in default
    wide = text(client, 17, "answer", p17, mean_service_seconds=0.001, servers=100000)
    assert "even 95% load queues almost nobody" in wide


def test_problem_9_weights_larger_than_the_gpu_are_said_to_be_the_reason(client) -> None:
    """Llama 3.1 70B in BF16 on one H100: 141 GB of weights against 73.3 GB usable. The page
    said 'beside the weights there is no room for one sequence's KV at this context', as if the
    weights fitted and the context were to blame."""
    worked = text(client, 9, "worked", p09, model="llama-3.1-70b", tp="1")
    assert "beside the weights there is no room" not in worked
    assert "The weights alone take 141 GB against 73.3 GB usable, so not even one sequence " \
           "fits" in worked
    assert "Memory holds no sequences: the weights alone exceed the memory" in worked
    # Where the weights fit but the batch does not (TP 2), the old sentence stands; where they
    # fit and one sequence's KV does not (FP8 weights, 128K of context), the context is blamed.
    pair = text(client, 9, "worked", p09, model="llama-3.1-70b", tp="2")
    assert "This batch does not fit in memory beside the weights" in pair
    long = text(client, 9, "worked", p09, model="llama-3.1-70b", tp="1", dtype="fp8",
                context_tokens=128000)
    assert "beside the weights there is no room for one sequence's KV at this context" in long
