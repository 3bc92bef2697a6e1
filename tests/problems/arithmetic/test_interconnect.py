"""Links between GPUs: a copy between two GPUs against a collective over a group.

AMD's MI300X has no switch: each GPU has one Infinity Fabric link to each of its 7 peers,
128 GB/s both ways (64 GB/s each way, AMD's ROCm blog on xGMI), and its 896 GB/s is all 7
together. The problems once moved KV between two MI300Xs at 448 GB/s (half the total) and ran
a TP-2 all-reduce at the same; a copy between two GPUs gets one link, a collective over n GPUs
n − 1 links at best. NVIDIA's GPUs reach any peer at their whole NVLink figure through
NVSwitch, so their figures do not move.
"""

import pytest

from problems.arithmetic.catalog import GPUS, gpu_get, model_get
from problems.arithmetic.disagg import disagg_plan, kv_handoff_links, kv_transfer
from problems.arithmetic.gpus import tp_allreduce_bytes
from problems.arithmetic.interconnect import collective_links, interconnect_summary, peer_link
from problems.arithmetic.itl import itl_levers
from problems.arithmetic.parallel import allreduce_bytes, moe_layout
from problems.arithmetic.quant import COLLECTIVE_SECONDS, tp_comm_seconds

GB = 1e9


def test_the_catalog_gives_the_mi300x_one_link_per_peer_beside_the_total_each_sourced():
    g = gpu_get("mi300x")
    assert g.interconnect_bytes_per_second == 896 * GB
    assert g.peer_link_bytes_per_second == 128 * GB and g.mesh_links == 7
    assert g.peer_one_way_bytes_per_second == 64 * GB
    assert "rocm.blogs.amd.com" in g.peer_link_source and "64 GB/s" in g.peer_link_source
    assert "seven links" in g.interconnect_source and "896 GB/s" in g.interconnect_source
    # A collective over n GPUs of the node: n − 1 links at best, all 7 only over 8 GPUs.
    assert [g.collective_one_way_bytes_per_second(n) / GB for n in (2, 4, 8)] == [64, 192, 448]


@pytest.mark.parametrize("gpu", sorted(set(GPUS) - {"mi300x"}))
def test_a_switched_or_pcie_gpu_reaches_any_peer_at_its_whole_figure(gpu):
    g = gpu_get(gpu)
    assert g.mesh_links == 0 and g.peer_link_bytes_per_second is None
    assert g.peer_one_way_bytes_per_second == g.interconnect_one_way_bytes_per_second
    for n in (2, 4, 8):
        assert g.collective_one_way_bytes_per_second(n) == g.interconnect_one_way_bytes_per_second


def test_the_working_says_which_links_carry_the_traffic():
    mi, h100 = gpu_get("mi300x"), gpu_get("h100-sxm")
    assert peer_link(h100) == (450 * GB, "NVLink 4: 900 GB/s both ways ÷ 2")
    rate, how = peer_link(mi)
    assert rate == 64 * GB and "the one link between the two GPUs, 128 GB/s both ways ÷ 2" in how
    assert collective_links(mi, 2) == (
        64 * GB, "Infinity Fabric, the one link between the two GPUs, at 64 GB/s each way")
    rate, how = collective_links(mi, 8)
    assert rate == 448 * GB and "7 links a GPU, one to each other GPU of the group" in how
    assert "= 448 GB/s at best" in how and "(" not in how
    assert collective_links(h100, 8) == (450 * GB, "NVLink 4 at 450 GB/s each way")
    assert interconnect_summary(mi) == ("Infinity Fabric, 896 GB/s both directions over 7 "
                                        "links, 128 GB/s to any one peer")


def test_problem_22s_kv_handoff_between_two_mi300x_crosses_one_link():
    """Llama 3 70B, 4,000 tokens: 1.31 GB of KV at 64 GB/s = 20.5 ms, not 2.9 ms at 448."""
    r = kv_transfer(model="llama-3-70b", prompt_tokens=4_000, gpu="mi300x")
    assert r["link_bytes_per_second"] == 64 * GB
    assert r["seconds"] == pytest.approx(4_000 * 327_680 / 64e9)
    assert "one link between the two GPUs" in r.steps[1].expression
    h100 = kv_transfer(model="llama-3-70b", prompt_tokens=4_000, gpu="h100-sxm")
    assert h100["link_bytes_per_second"] == 450 * GB
    assert kv_handoff_links(nbytes=1e6, gpu="mi300x")[0]["bytes_per_second"] == 64 * GB


@pytest.mark.parametrize("tp, links", [(2, 1), (4, 3), (8, 7)])
def test_problem_22s_plan_on_mi300x_moves_kv_over_one_link_and_all_reduces_over_n_minus_1(
        tp, links):
    inputs = dict(model="llama-3.1-70b", gpu="mi300x", tp=tp, dtype="bf16",
                  prompt_tokens=8_192, output_tokens=512, link_efficiency=0.8)
    r = disagg_plan(**inputs)
    m = model_get("llama-3.1-70b")
    node = r["links"][0]
    # Each prefill GPU sends its share to its decode GPU: one link, whatever the tp.
    assert node["line_rate"] == 64 * GB and node["applies"] == (2 * tp <= 8)
    assert "one link between each pair of GPUs" in node["name"]
    # The prefill's all-reduces: 2 a layer, 2(n − 1)/n of every token's activations per GPU,
    # over the n − 1 links a GPU has to the rest of the replica.
    sent = 2 * m.layers * 2 * (tp - 1) / tp * 8_192 * m.hidden * 2
    assert r["allreduce_bytes"] == pytest.approx(sent)
    assert r["allreduce_seconds"] == pytest.approx(sent / (links * 64e9 * 0.8))
    step = next(s for s in r.steps if s.label.startswith("Tensor-parallel all-reduces"))
    assert "Infinity Fabric" in step.expression
    h200 = disagg_plan(**{**inputs, "gpu": "h200"})
    assert h200["links"][0]["line_rate"] == 450 * GB
    assert h200["allreduce_seconds"] == pytest.approx(sent / (450e9 * 0.8))


@pytest.mark.parametrize("tp, links", [(2, 1), (8, 7)])
def test_tensor_parallel_all_reduces_on_mi300x_use_the_links_of_the_group(tp, links):
    """Problems 11 and 12 (`tp_comm_seconds`) and 9 (`itl_levers`)."""
    m = model_get("llama-3.1-70b")
    mi = gpu_get("mi300x")
    message = 64 * m.hidden * 2
    per = 2 * (tp - 1) / tp * message / (links * 64e9)
    assert tp_comm_seconds(model=m, gpu=mi, tp=tp, tokens=64) == pytest.approx(
        2 * m.layers * (per + COLLECTIVE_SECONDS))
    baseline = tp // 2 if tp == 8 else tp
    r = itl_levers(model="llama-3.1-70b", gpu="mi300x", tp=baseline, batch=64,
                   allreduce_latency_us=0.0)
    sent = tp_allreduce_bytes(layers=m.layers, hidden=m.hidden, tokens=64, group=tp)
    got = r["allreduce_seconds"] if baseline == tp else r["tp_allreduce_seconds"]
    assert got == pytest.approx(sent / (links * 64e9))
    if baseline == tp:
        step = next(s for s in r.steps if s.label.startswith("GPU step"))
        assert "the one link between the two GPUs, at 64 GB/s each way" in step.expression


def test_problem_23s_layouts_on_mi300x_use_the_links_each_exchange_crosses():
    """DeepSeek-V3 on one node of 8 MI300X: TP8's all-reduces reach the other 7 GPUs over 7
    links (448 GB/s), TP2 groups over 1 (64 GB/s), and a pipeline stage hands its
    activations to one GPU (64 GB/s)."""
    common = dict(model="deepseek-v3", gpu="mi300x", batch=64, context_tokens=4_000,
                  link_efficiency=1.0, collective_us=0.0)
    h = model_get("deepseek-v3").hidden

    tp8 = moe_layout(**common, attn_tp=8, moe="tp")
    nvl, _ = allreduce_bytes(message_bytes=64 * h * 2, group=8, per_node=8)
    reductions = 2 * 61
    assert tp8["comm_seconds"] == pytest.approx(reductions * nvl / 448e9)
    # Four attention groups of 2 GPUs, 16 sequences each; an all-reduce after each of the 61
    # layers' attention and each of the 3 dense FFNs.
    tp2 = moe_layout(**common, attn_tp=2, moe="ep")
    nvl2, _ = allreduce_bytes(message_bytes=16 * h * 2, group=2, per_node=8)
    ar = next(s for s in tp2.steps if s.label == "All-reduces per stage-step")
    assert ar.value == pytest.approx(64 * nvl2 / 64e9)
    assert "the one link between the two GPUs" in ar.expression
    ep8 = moe_layout(**common, attn_tp=1, moe="ep")
    a2a = next(s for s in ep8.steps if s.label == "Dispatch and combine per stage-step")
    assert "the rest over Infinity Fabric, 7 links a GPU" in a2a.expression
    pp2 = moe_layout(**common, pp=2, attn_tp=4, moe="tp")
    send = next(s for s in pp2.steps if s.label == "Pipeline send per stage-step")
    assert send.value == pytest.approx(32 / 4 * h * 2 / 64e9)
    assert "NVLink" not in " ".join(s.expression for s in (*tp8.steps, *tp2.steps, *ep8.steps,
                                                            *pp2.steps))


def test_problem_11s_deployments_on_mi300x_name_the_links_of_their_group():
    """Llama 3.1 405B on MI300X: BF16 needs TP 8 (7 links a GPU, 448 GB/s at best), INT4
    TP 2 (the one link between the two GPUs, 64 GB/s); a single GPU has no all-reduce."""
    from problems.arithmetic.quant import quantization_formats

    steps = {s.label: s.expression for s in quantization_formats(
        model="llama-3.1-405b", gpu="mi300x").steps}
    assert "7 links a GPU, one to each other GPU of the group, × 64 GB/s each way = 448 GB/s" \
        in steps["Smallest deployment in BF16: TP 8"]
    assert "Infinity Fabric, the one link between the two GPUs, at 64 GB/s each way" in steps[
        "Smallest deployment in INT4 (group 128): TP 2"]
    one = {s.label: s.expression for s in quantization_formats(
        model="llama-3.1-70b", gpu="mi300x").steps}
    assert one["Smallest deployment in FP8 (E4M3): TP 1"].endswith(
        "on the one GPU, with no all-reduce")
