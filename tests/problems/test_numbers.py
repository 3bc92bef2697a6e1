"""The numbers sheet: each figure equals what the calculators' API gives for the same inputs,
and the page prints every section with its sources."""

import json

import pytest

from problems.arithmetic.catalog import GPUS, MODELS
from problems.arithmetic.catalog.links import LINKS
from problems.arithmetic.numbers import (
    STANDARD_GPU,
    STANDARD_PROMPT_TOKENS,
    floors_section,
    gpus_section,
    links_section,
    models_section,
    numbers_sheet,
)


def _api(client, slug: str, **query) -> dict:
    response = client.get(f"/api/calc/{slug}", query)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def test_ridge_points_equal_the_roofline_api(client):
    rows = dict(zip(GPUS, gpus_section().rows, strict=True))
    for gpu_id in ("h100-sxm", "b200", "l40s"):
        api = _api(client, "roofline", gpu=gpu_id)
        assert rows[gpu_id].values["ridge_bf16"] == pytest.approx(api["ridge_flops_per_byte"])
    # By hand: 989.5 TFLOP/s ÷ 3.35 TB/s = 295.4 FLOP/byte.
    assert rows["h100-sxm"].values["ridge_bf16"] == pytest.approx(295.37, abs=0.01)


def test_kv_per_token_equals_the_kv_cache_api(client):
    rows = dict(zip(MODELS, models_section().rows, strict=True))
    for model_id in ("llama-3-70b", "deepseek-v3", "qwen2.5-7b"):
        api = _api(client, "kv-cache", model=model_id, tokens=1000)
        assert rows[model_id].values["kv_bytes_per_token_bf16"] == api["bytes_per_token"]
    # By hand: 80 layers × 2 × 8 KV heads × 128 × 2 bytes = 327,680 B; DeepSeek-V3's MLA caches
    # 512 + 64 values per layer: 61 × 576 × 2 = 70,272 B.
    assert rows["llama-3-70b"].values["kv_bytes_per_token_bf16"] == 327_680
    assert rows["deepseek-v3"].values["kv_bytes_per_token_bf16"] == 70_272


def test_floors_equal_the_prefill_and_decode_apis(client):
    row = floors_section().rows[0]
    assert row.cells[0] == "Llama 3 8B" and row.values["gpus"] == 1
    prefill = _api(client, "prefill", model="llama-3-8b", gpu=STANDARD_GPU,
                   prompt_tokens=STANDARD_PROMPT_TOKENS, mfu=1, bandwidth_efficiency=1)
    decode = _api(client, "decode", model="llama-3-8b", gpu=STANDARD_GPU,
                  context_tokens=STANDARD_PROMPT_TOKENS, bandwidth_efficiency=1)
    assert row.values["prefill_seconds"] == pytest.approx(prefill["seconds"])
    assert row.values["decode_step_seconds"] == pytest.approx(decode["step_seconds"])
    # The COURSE example: about 16 GB of weights, a step of at least ~4.5-4.8 ms on an H100.
    assert 4.4e-3 < row.values["decode_step_seconds"] < 4.9e-3


def test_a_model_too_big_for_one_gpu_is_counted_on_enough_of_them():
    row = floors_section().rows[1]
    assert row.cells[0] == "Llama 3 70B"
    # 141 GB of BF16 weights cannot sit in one 80 GB H100; two hold 70.6 GB each beside the
    # reserve (85.5 GB × 0.9 − 3.3 GB = 73.7 GB each).
    assert row.values["weights_bytes"] > 140e9
    assert row.values["gpus"] == 2
    assert "2 × NVIDIA H100 SXM" in row.cells[1]


def test_links_are_one_direction():
    by_name = {r.cells[0]: r.values["bytes_per_second"] for r in links_section().rows}
    assert by_name["InfiniBand NDR (400 Gb/s port)"] == 50e9
    assert by_name["PCIe Gen5 x16"] == pytest.approx(63.0e9, rel=1e-3)
    assert by_name["NVLink 4 (NVIDIA H100 SXM)"] == 450e9
    assert all("NVLink" not in r.cells[0] or "no NVLink" not in r.cells[0]
               for r in links_section().rows)
    assert len(LINKS) == 4


def test_the_page_prints_every_section_with_sources(client):
    response = client.get("/numbers/")
    assert response.status_code == 200
    html = response.content.decode()
    for section in numbers_sheet():
        assert f'id="numbers-{section.slug}"' in html
        assert f'href="/problems/{section.problem}/"' in html
        for row in section.rows:
            assert row.cells[1] in html
    assert html.count('class="numbers-sources"') == len(numbers_sheet())
    assert "numbers.css" in html  # the print stylesheet


def test_memory_shows_the_datasheet_label_and_the_bytes_reported():
    rows = dict(zip(GPUS, gpus_section().rows, strict=True))
    # A learner knows the H100 as "80 GB"; CUDA reports 79.22 GiB (vLLM's log), which is
    # round(79.22 x 2^30) = 85,061,827,297 B = 85.1 GB: the figure an engine budgets from is
    # shown in the unit its source prints. The H200 has no CUDA figure on record, so the
    # driver's 143,771 MiB x 1,048,576 = 150,755,000,000 B = 151 GB stands.
    assert rows["h100-sxm"].cells[1] == "80 GB HBM3 (79.22 GiB as CUDA counts it = 85.1 GB)"
    assert rows["h200"].cells[1] == "141 GB HBM3e (143,771 MiB as the driver counts it = 151 GB)"


def test_a_pcie_card_link_is_the_same_figure_as_the_links_table():
    gpu_rows = dict(zip(GPUS, gpus_section().rows, strict=True))
    pcie4 = LINKS["pcie-gen4-x16"].bytes_per_second
    assert pcie4 == pytest.approx(31.5e9, rel=1e-3)  # 16 GT/s × 16 × 128/130 ÷ 8
    assert gpu_rows["l40s"].values["link_one_way_bytes_per_second"] == pcie4
    assert gpu_rows["l40s"].cells[-1].endswith("31.5 GB/s each way")
    assert gpu_rows["h100-sxm"].values["link_one_way_bytes_per_second"] == 450e9
    # 31.5 GB/s is not in the L40S datasheet (it prints 64 GB/s both ways): the row cites the
    # PCIe standard and the derivation it comes from; an NVLink GPU cites its datasheet alone.
    assert LINKS["pcie-gen4-x16"].source in gpu_rows["l40s"].source
    assert "128/130" in gpu_rows["l40s"].source
    assert gpu_rows["h100-sxm"].source == GPUS["h100-sxm"].source


def test_the_fit_check_counts_weights_kv_and_the_reserve():
    from problems.arithmetic.catalog import gpu_get
    from problems.arithmetic.memory import MEMORY_FRACTION_DEFAULT, RESERVE_GB_DEFAULT
    gpu = gpu_get(STANDARD_GPU)
    budget = gpu.memory_total_bytes * MEMORY_FRACTION_DEFAULT - RESERVE_GB_DEFAULT * 1e9
    for row in floors_section().rows:
        tp = row.values["gpus"]
        held = row.values["weights_bytes"] / tp
        assert held <= budget  # it fits on tp GPUs
        if tp > 1:
            assert row.values["weights_bytes"] / (tp // 2) > budget  # and not on fewer
    assert "floor" in floors_section().title.lower() and "reserve" in floors_section().note


def test_the_mi300x_link_gives_one_peer_apart_from_all_seven():
    """Review: the sheet gave the MI300X's Infinity Fabric as 448 GB/s each way, all 7 links
    together; a copy between two GPUs crosses one, 64 GB/s each way (AMD's ROCm blog)."""
    rows = dict(zip(GPUS, gpus_section().rows, strict=True))
    assert rows["mi300x"].cells[-1] == ("Infinity Fabric: 448 GB/s each way over all 7 links "
                                        "together, 64 GB/s to any one peer")
    link = next(r for r in links_section().rows if r.cells[0].startswith("Infinity Fabric"))
    assert link.cells[:2] == ("Infinity Fabric, one link between two GPUs (AMD Instinct MI300X)",
                              "64 GB/s")
    assert link.values["bytes_per_second"] == 64e9
    assert "rocm.blogs.amd.com" in link.source
