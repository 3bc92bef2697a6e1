"""Page 05 (problems 9, 10 and 17) at inputs the earlier reviews did not try: levers that
cost throughput for a stated reason, no host time, a model no GPU of the form can hold, load
near one and far below it, and seats nobody waits for."""

import pytest

from problems.content import p09
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


def test_problem_9_no_host_time_is_said_in_words(client) -> None:
    """Host time set to zero read '0 s of host time per step that the GPU waits for' and
    'with 0 s of host time a TPOT of 9.49 ms'."""
    worked = text(client, 9, "worked", p09, host_ms=0)
    answer = text(client, 9, "answer", p09, host_ms=0)
    assert "0 s of host time" not in worked + answer
    assert "no host time per step for the GPU to wait for" in worked
    assert "With no host time to add, TPOT is 9.49 ms" in worked
    assert "with the host's work hidden a TPOT of 9.49 ms" in answer
