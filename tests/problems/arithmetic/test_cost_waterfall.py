"""The cost waterfall of problem 24 (problems/arithmetic/cost.py), worked by hand.

The baseline is test_replica.py's: Llama 3.1 70B in BF16 on 4 × H100 SXM at $2.50 an hour, 35%
utilisation, 2,000 input and 400 output tokens: $2.1417 per million output and $0.55956 per
million input tokens, blended (2,000 × 0.55956 + 400 × 2.1417) ÷ 2,400 = $0.82325.
"""

import random

import pytest

from problems.arithmetic.cost import cost_levers, cost_levers_plan, cost_waterfall, waterfall_rows
from problems.arithmetic.errors import ArithmeticInputError


def rows_at(**inputs):
    baseline, levers = cost_levers_plan(**inputs)
    return {row["lever"]: row for row in waterfall_rows(baseline=baseline, levers=levers)}


def test_the_baseline_and_the_first_two_levers():
    """Batching lifts the cap: each H100 may use 0.9 × CUDA's 79.22 GiB − 5 GB =
    71,555,644,567.3 B, less 35,276,853,248 B of weights leaves 36,278,791,319.3 B, ⌊÷
    180,224,000⌋ = ⌊201.3⌋ = 201 sequences fit; the step reads 34,751,516,672 + 201 × 180,224,000
    = 70,976,540,672 B, 26.484 ms at 2.68 TB/s; 201 ÷ that = 7,589.5 tokens/s; output
    $0.0027778 ÷ 7,589.5 ÷ 0.35 × 10⁶ = $1.0457; blended (1,119.11 + 418.29) ÷ 2,400 = $0.64058,
    22.2% off. FP8 weights and KV: 18,163,763,200 B of weights per GPU leave 53,391,881,367.3 B,
    ⌊÷ (40,960 × 2,200)⌋ = 592 sequences; input at the FP8 rate halves to $0.27978."""
    rows = rows_at()
    assert rows["baseline"]["blended"] == pytest.approx(0.82325, rel=1e-4)
    batching = rows["batching"]
    assert batching["costs"]["big"]["batch"] == 201
    assert batching["costs"]["big"]["step_seconds"] == pytest.approx(26.484e-3, rel=1e-4)
    assert batching["blended"] == pytest.approx(0.64058, rel=1e-4)
    assert batching["cut"] == pytest.approx(0.2219, abs=1e-4)
    fp8 = rows["fp8"]
    assert fp8["costs"]["big"]["batch"] == 592
    assert fp8["in"] == pytest.approx(0.27978, rel=1e-4)


def test_the_whole_waterfall_reaches_the_target_at_prefix_caching():
    """After FP8 64.5% is off; prefix caching at 50% halves the computed input again and
    reaches 78.5%, past 70%: the target is first met at the third lever."""
    result = cost_levers()
    assert result["target_reached_at"] == 3
    assert result["target"] == pytest.approx(0.3 * 0.82325, rel=1e-4)
    cuts = [row["cut"] for row in result["rows"]]
    assert cuts[2] == pytest.approx(0.645, abs=1e-3) and cuts[3] == pytest.approx(0.785, abs=1e-3)
    assert result["final_blended"] == pytest.approx(0.044766, rel=1e-3)
    assert result["final_per_1000"] == pytest.approx(0.10328, rel=1e-3)
    # Each lever's change is its share of the baseline; together they add up to the cut.
    assert sum(row["delta"] for row in result["rows"]) == pytest.approx(-result["final_cut"])


def test_speculation_stays_off_at_a_full_batch_and_pays_without_fp8():
    """On 2 × B200 (8 TB/s each) with 730 sequences, verifying 3 tokens each is compute-bound:
    gain 0.87, so it is not applied. Without FP8 only 270 fit, the step has compute to spare:
    gain 1.16, applied."""
    rows = rows_at()
    assert not rows["spec"]["applied"]
    assert rows["spec"]["trial"]["big"]["spec_gain"] == pytest.approx(0.8706, abs=1e-3)
    assert rows["spec"]["blended"] == rows["gpu"]["blended"]
    no_fp8 = rows_at(fp8="off")
    assert no_fp8["spec"]["applied"]
    assert no_fp8["spec"]["costs"]["big"]["batch"] == 270
    assert no_fp8["spec"]["costs"]["big"]["spec_gain"] == pytest.approx(1.162, abs=1e-3)


def test_a_shorter_answer_moves_the_cost_per_request_not_per_token():
    rows = rows_at()
    cap = rows["cap_output"]
    assert abs(cap["delta"]) < 0.001
    assert cap["per_1000"] < rows["route"]["per_1000"] * 0.96


def test_the_end_state_does_not_depend_on_the_order_of_the_levers():
    baseline, levers = cost_levers_plan(spec="off")
    straight = cost_waterfall(baseline=baseline, levers=levers, target_cut=0.7)
    shuffled = list(levers)
    random.Random(4).shuffle(shuffled)
    other = cost_waterfall(baseline=baseline, levers=shuffled, target_cut=0.7)
    assert other["final_blended"] == pytest.approx(straight["final_blended"], rel=1e-12)
    assert [r["lever"] for r in other["rows"]] != [r["lever"] for r in straight["rows"]]


@pytest.mark.parametrize(("changes", "field"), [
    ({"fp8_dtype": "nvfp4", "right_gpu": "off"}, "fp8_dtype"),  # no FP4 on an H100
    ({"fp8_dtype": "int4"}, "fp8_dtype"),  # weight-only, not a tensor-core format
    ({"right_gpu_id": "l4", "right_gpu_tp": 1}, "right_gpu_id"),  # 73 GB on a 24 GB card
    ({"batching": "maybe"}, "batching"),
    ({"target_cut": 1.0}, "target_cut"),
])
def test_a_lever_that_cannot_be_served_is_refused_beside_its_input(changes, field):
    with pytest.raises(ArithmeticInputError) as error:
        cost_levers(**changes)
    assert error.value.field == field


def test_a_cap_above_the_mean_answer_is_skipped_not_applied_backwards():
    """Review E1, output_tokens=100: the cap aims at a 350-token mean, but answers already
    average 100, so the 'cap' would lengthen every answer (per request (2,000 × in + 350 × out)
    against (2,000 × in + 100 × out), 28% dearer on the page before). Skipped: the blended cost
    and the cost per request stay where the route lever left them."""
    rows = rows_at(output_tokens=100)
    cap = rows["cap_output"]
    assert cap["on"] and not cap["applied"]
    assert "already average 100 tokens" in cap["skip"]
    assert cap["blended"] == rows["route"]["blended"]
    assert cap["per_1000"] == rows["route"]["per_1000"]
    assert cap["state"]["output_tokens"] == 100


def test_autoscaling_to_a_lower_utilisation_is_skipped():
    """Review E2, utilisation=0.7: autoscaling reaches 60%, below the 70% the fleet already
    does, so applying it would raise the cost by 0.7 ÷ 0.6 = 1.167×. Skipped, with the two
    utilisations named; the cut so far does not go backwards."""
    rows = rows_at(utilisation=0.7)
    auto = rows["autoscale"]
    assert not auto["applied"] and "70%" in auto["skip"] and "60%" in auto["skip"]
    assert auto["cut"] == rows["spec"]["cut"]
    assert auto["state"]["utilisation"] == 0.7


def test_routing_a_model_to_itself_is_skipped():
    """Review E3, model=llama-3.1-8b, tp=1: the 'smaller model' is Llama 3.1 8B, the served
    model itself; routing 30% of requests to it saves nothing (it was 0.951% dearer before).
    A larger route model (405B from 70B) is skipped the same way instead of refused."""
    rows = rows_at(model="llama-3.1-8b", tp=1)
    assert not rows["route"]["applied"]
    assert "the served model itself" in rows["route"]["skip"]
    assert rows["route"]["blended"] == rows["commit"]["blended"]
    bigger = rows_at(route_model="llama-3.1-405b")["route"]
    assert not bigger["applied"] and "no smaller than Llama 3.1 70B" in bigger["skip"]


def test_the_right_gpu_lever_sizes_its_replica_from_the_model():
    """Review E4, DeepSeek-V3 in FP8 on 8 × H200: the lever's replica was hard-wired to
    2 × B200, where 673 GB of FP8 weights are 336 GB a GPU against 168 GB usable, so the whole
    waterfall was refused. Sized from the model: 4 × B200 still needs 168.2 GB a GPU, more
    than 168.0; 8 × B200 needs 84.1 GB and holds 1,085 sequences, at least the 602 the H200s
    ran, so the lever moves to 8 × B200.
    At the defaults (Llama 3.1 70B in FP8, 597 sequences on 4 × H100) it takes the fewest
    B200s whose replica runs at least 597: one holds (168.0 − 72.7) GB ÷ (163,840 B × 2,200
    tokens) = 264, two hold (168.0 − 36.3) GB ÷ (81,920 B × 2,200) = 730, so 2 × B200, as
    before. An 8B model moves to one B200."""
    rows = rows_at(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8")
    gpu = rows["gpu"]
    assert gpu["applied"] and gpu["state"]["tp"] == 8 and gpu["state"]["gpu"].id == "b200"
    assert gpu["blended"] < rows["prefix"]["blended"]
    assert rows_at()["gpu"]["state"]["tp"] == 2
    assert rows_at(model="llama-3.1-8b", tp=1)["gpu"]["state"]["tp"] == 1
    # A size the learner types is kept, and refused where it does not fit.
    with pytest.raises(ArithmeticInputError) as error:
        cost_levers(model="deepseek-v3", gpu="h200", tp=8, dtype="fp8", right_gpu_tp=2)
    assert error.value.field == "right_gpu_id"
