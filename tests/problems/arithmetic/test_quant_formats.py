"""Problem 11's arithmetic: every weight format on one GPU, against figures worked by hand.

Llama 3 70B: 68,452,360,192 non-embedding parameters; embedding and head 1,050,673,152 each,
kept in BF16 below 16 bits. H100 SXM: 3.35 TB/s, BF16 989.5 TFLOP/s, FP8 and INT8 1,979 T;
81,559 MiB reported, × 0.9 = 76,968,728,985.6 B usable. KV 327,680 B per token in BF16. The
hand figures below use a 3 GB reserve; the page's default is 3.3 GB (vLLM's measured 3.05 GiB).
"""

import dataclasses

import pytest

from problems.arithmetic.catalog import DTYPES, kv_dtype_get, model_get
from problems.arithmetic.catalog.gpus import GPUS
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.quant import (
    NO_PATH,
    format_row_model,
    linear_rows_model,
    path_describe,
    quantization_formats,
)

HAND = dict(model="llama-3-70b", gpu="h100-sxm", prompt_tokens=1000, batch=1, reserve_gb=3.0)


def _rows(**changes) -> dict:
    result = quantization_formats(**{**HAND, **changes})
    return {f["dtype"]: f for f in result["formats"]}


def test_weights_of_each_format():
    """Layers × bits ÷ 8 + 2,101,346,304 × 2 B: BF16 141,107,412,992; FP8 and INT8
    72,655,052,800; INT4 (4 + 20/128 bits) 39,765,832,864; NVFP4 (4.5) 42,707,145,216; MXFP4
    (4.25) 40,568,008,960. INT4 is 3.5485× smaller than BF16, not 4×."""
    rows = _rows()
    expected = {"bf16": 141_107_412_992, "fp8": 72_655_052_800, "int8": 72_655_052_800,
                "int4": 39_765_832_864, "nvfp4": 42_707_145_216, "mxfp4": 40_568_008_960}
    for d, weights in expected.items():
        assert rows[d]["weights_bytes"] == pytest.approx(weights, rel=1e-12)
    assert rows["int4"]["size_ratio"] == pytest.approx(3.5485, rel=1e-4)


def test_decode_step_floors_and_speedups():
    """(read + 327,680,000 KV) ÷ 3.35e12: BF16 139,333,746,688 → 41.5922 ms; FP8 70,881,386,496
    → 21.1586 ms (1.96573×); INT4 37,992,166,560 → 11.3409 ms (3.66743×); NVFP4 40,933,478,912
    → 12.2189 ms (3.40391×); MXFP4 → 11.5804 ms (3.59160×); all memory-bound."""
    rows = _rows()
    for d, ms, speedup in (("bf16", 41.5922, 1.0), ("fp8", 21.1586, 1.96573),
                           ("int4", 11.3409, 3.66743), ("nvfp4", 12.2189, 3.40391),
                           ("mxfp4", 11.5804, 3.59160)):
        assert rows[d]["decode_seconds"] * 1e3 == pytest.approx(ms, rel=1e-4)
        assert rows[d]["decode_speedup"] == pytest.approx(speedup, rel=1e-5)
        assert rows[d]["decode_bound"] == "memory"


def test_prefill_is_faster_only_where_the_tensor_cores_take_the_format():
    """BF16: 138,218,852,450,304 FLOP ÷ 989.5e12 = 139.686 ms. FP8: linear and head
    136,906,821,730,304 ÷ 1.979e15 = 69.18 ms + attention 1,312,030,720,000 ÷ 989.5e12 =
    1.326 ms → 70.506 ms, 1.98119×. INT4, NVFP4 and MXFP4 run weight-only on an H100: 1×."""
    rows = _rows()
    assert rows["bf16"]["prefill_seconds"] == pytest.approx(0.1396856, rel=1e-5)
    assert rows["fp8"]["prefill_seconds"] == pytest.approx(0.0705058, rel=1e-5)
    assert rows["fp8"]["prefill_speedup"] == pytest.approx(1.98119, rel=1e-5)
    assert rows["int8"]["prefill_seconds"] == rows["fp8"]["prefill_seconds"]
    for d in ("int4", "nvfp4", "mxfp4"):
        assert rows[d]["prefill_speedup"] == pytest.approx(1.0)
        assert not rows[d]["native"] and rows[d]["path"]
        assert "weight-only" in rows[d]["path_text"]
    assert rows["fp8"]["native"] and rows["int8"]["path_text"] == "INT8 tensor cores (TOPS)"


def test_nvfp4_is_native_on_the_b200_only():
    """B200: NVFP4 linear 136,906,821,730,304 ÷ 9e15 = 15.212 ms + attention ÷ 2.25e15 = 0.583 ms
    → 15.795 ms against BF16's 138,218,852,450,304 ÷ 2.25e15 = 61.43 ms: 3.889×. INT4 stays 1×;
    on the L40S FP8 gains 2.005×."""
    b200 = _rows(gpu="b200")
    assert b200["nvfp4"]["native"]
    assert b200["nvfp4"]["prefill_speedup"] == pytest.approx(3.889, rel=1e-3)
    assert b200["int4"]["prefill_speedup"] == pytest.approx(1.0)
    assert _rows(gpu="l40s")["fp8"]["prefill_speedup"] == pytest.approx(2.005, rel=1e-3)


def test_fit_and_kv_room_on_the_h100():
    """The budget is 0.9 × CUDA's 79.22 GiB = 0.9 × 85,061,827,297 = 76,555,644,567.3 B. BF16
    needs 141,107,412,992 + 327,680,000 + 3e9 > that: no. FP8 leaves 76,555,644,567.3 −
    72,655,052,800 − 3e9 = 900,591,767.3 B ÷ 327,680 = ⌊2,748.4⌋ = 2,748 tokens; INT4 (−
    39,765,832,864) 103,118; NVFP4 (− 42,707,145,216) 94,142; MXFP4 (− 40,568,008,960) 100,670."""
    rows = _rows()
    assert not rows["bf16"]["fits"] and rows["bf16"]["kv_room_tokens"] == 0
    for d, tokens in (("fp8", 2_748), ("int4", 103_118), ("nvfp4", 94_142),
                      ("mxfp4", 100_670)):
        assert rows[d]["fits"] and rows[d]["kv_room_tokens"] == tokens


def test_fit_matrix_over_four_gpus():
    """H200 usable 135,679,338,086.4: BF16 −8,428,074,905.6 (no), FP8 183,179 tokens; B200
    173,039,262,105.6: BF16 88,292 tokens, INT4 397,562; L40S 43,475,219,251.2: only INT4 fits
    (709,386,387.2 B → 2,164 tokens), MXFP4 misses by 92,789,708.8 B."""
    result = quantization_formats(**HAND)
    cells = {(row["dtype"], c["gpu"]): c for row in result["fit"] for c in row["cells"]}
    assert not cells[("bf16", "h200")]["fits"]
    assert cells[("fp8", "h200")]["kv_room_tokens"] == 183_179
    assert cells[("bf16", "b200")]["kv_room_tokens"] == 88_292
    assert cells[("int4", "b200")]["kv_room_tokens"] == 397_562
    assert cells[("int4", "l40s")]["fits"] and cells[("int4", "l40s")]["kv_room_tokens"] == 2_164
    assert not cells[("mxfp4", "l40s")]["fits"]
    assert cells[("mxfp4", "l40s")]["free_bytes"] == pytest.approx(-92_789_708.8, abs=1e-3)


def test_the_default_reserve_moves_the_kv_room():
    """With the page's 3.3 GB reserve, FP8 on the H100 leaves 76,555,644,567.3 − 72,655,052,800 −
    3.3e9 = 600,591,767.3 B ÷ 327,680 = ⌊1,832.9⌋ = 1,832 tokens (review P0607-01 quoted 3,093,
    taken from nvidia-smi's 81,559 MiB instead of CUDA's 79.22 GiB)."""
    result = quantization_formats(model="llama-3-70b", gpu="h100-sxm")
    fp8 = next(f for f in result["formats"] if f["dtype"] == "fp8")
    assert fp8["kv_room_tokens"] == 1_832


def test_large_batches_turn_weight_only_int4_compute_bound():
    """Batch 256: INT4's compute 256 × 139,006,066,688 ÷ 989.5e12 + 256 × 2,621,440,000 ÷
    989.5e12 = 36.641 ms beats its memory 36.284 ms, so it is compute-bound and gains only
    1.81584× over BF16's 66.535 ms (still memory-bound); FP8 gains 1.44323×. Batch 64: FP8
    1.74791×, INT4 2.72832×."""
    rows = _rows(batch=256)
    assert rows["int4"]["decode_bound"] == "compute" and rows["bf16"]["decode_bound"] == "memory"
    assert rows["int4"]["decode_speedup"] == pytest.approx(1.81584, rel=1e-4)
    assert rows["fp8"]["decode_speedup"] == pytest.approx(1.44323, rel=1e-4)
    assert rows["nvfp4"]["decode_speedup"] == pytest.approx(1.79042, rel=1e-4)
    rows = _rows(batch=64)
    assert rows["fp8"]["decode_speedup"] == pytest.approx(1.74791, rel=1e-4)
    assert rows["int4"]["decode_speedup"] == pytest.approx(2.72832, rel=1e-4)


def test_channel_scales_and_fp8_weight_only_on_an_a100():
    """Output rows: 80 × (8,192 + 2 × 1,024 + 8,192 + 2 × 28,672 + 8,192) = 6,717,440 FP32
    scales for Llama 3 70B. FP8 on an A100 (no FP8 tensor cores) runs weight-only, W8A16 as
    vLLM's FP8 Marlin does: decode reads FP8's bytes, (70,553,706,496 + 327,680,000) ÷
    2,039e9 = 34.7628 ms, while prefill stays at the BF16 rate (1×)."""
    assert linear_rows_model(model_get("llama-3-70b")) == 6_717_440
    a100 = _rows(gpu="a100-80gb-sxm")
    fp8 = a100["fp8"]
    assert fp8["path"] and not fp8["native"] and "weight-only" in fp8["path_text"]
    assert fp8["decode_seconds"] * 1e3 == pytest.approx(34.7628, rel=1e-5)
    assert fp8["prefill_speedup"] == pytest.approx(1.0)
    assert a100["int8"]["native"] and a100["int8"]["prefill_speedup"] > 1.9


def test_a_format_with_no_kernel_path_is_sized_but_not_timed():
    """On a GPU with neither the format's tensor cores nor a weight-only fallback (an A100
    stripped of its INT8 rate), INT8 is sized and fit-checked, but has no times."""
    gpu = dataclasses.replace(GPUS["a100-80gb-sxm"], int8_ops=None)
    model = model_get("llama-3-70b")
    row = format_row_model(model=model, gpu=gpu, dtype=DTYPES["int8"],
                           kv_dtype=kv_dtype_get(None, model=model), tokens=1000, batch=1,
                           mfu=1.0, bandwidth_efficiency=1.0, memory_fraction=0.9,
                           reserve_gb=3.0)
    assert not row["path"] and row["decode"]["seconds"] is None
    assert row["prefill"]["seconds"] is None
    assert row["weights"] == pytest.approx(72_655_052_800)
    assert path_describe(gpu=gpu, dtype=DTYPES["int8"]) == NO_PATH


def test_a_prompt_past_the_context_is_refused_on_its_field():
    with pytest.raises(ArithmeticInputError) as error:
        quantization_formats(model="llama-3-70b", prompt_tokens=8193)
    assert error.value.field == "prompt_tokens"


def test_fp8_on_one_h100_starts_only_with_a_shorter_max_model_len():
    """Review P0607-02: FP8 leaves 1,832 tokens of KV room on one H100 (test above), under
    Llama 3 70B's 8,192-token context, so vLLM refuses to start at the default max_model_len;
    it fits only with --max-model-len ≤ 1,832. INT4's 102,202 tokens hold the whole context."""
    rows = {f["dtype"]: f for f in quantization_formats(model="llama-3-70b",
                                                        gpu="h100-sxm")["formats"]}
    assert rows["fp8"]["fits"] and not rows["fp8"]["full_context"]
    assert rows["fp8"]["max_model_len"] == 1_832
    assert rows["int4"]["full_context"] and rows["int4"]["max_model_len"] == 8_192


def test_speedups_are_taken_against_the_smallest_bf16_deployment():
    """Review P0607-03, defaults (batch 1, 1,000 tokens, 3.3 GB reserve). BF16 cannot start on
    one H100, so its smallest deployment is TP 2: each GPU holds 70,553,706,496 B of weights and
    has 76,555,644,567.3 − 70,553,706,496 − 3.3e9 = 2,701,938,071.3 B left, enough for one
    8,192-token sequence at 163,840 B a token per GPU (1,342,177,280 B). Its step reads
    (139,006,066,688 + 327,680,000) ÷ 2 = 69,666,873,344 B a GPU: 20.7961 ms at 3.35 TB/s, plus
    2 × 80 all-reduces of 8,192 × 2 B, each 16,384 B ÷ 450 GB/s + 10 µs: 1.60583 ms; 22.4019 ms.
    FP8 also needs TP 2 (one GPU cannot hold a full-context sequence): (70,553,706,496 +
    327,680,000) ÷ 2 ÷ 3.35e12 + 1.60583 ms = 12.1851 ms, 1.838× faster on the same GPUs. INT4
    on one GPU: (35,563,140,256 + 2,101,346,304 + 327,680,000) ÷ 3.35e12 = 11.3409 ms, 1.975×
    faster on half the GPUs. (Against the one H100 that cannot hold BF16 the page said 1.97×
    and 3.67×.)"""
    rows = {f["dtype"]: f for f in quantization_formats(model="llama-3-70b",
                                                        gpu="h100-sxm")["formats"]}
    assert [rows[d]["deploy_tp"] for d in ("bf16", "fp8", "int4")] == [2, 2, 1]
    assert rows["bf16"]["deploy_decode_seconds"] == pytest.approx(22.4019e-3, rel=1e-5)
    assert rows["fp8"]["deploy_decode_seconds"] == pytest.approx(12.1851e-3, rel=1e-5)
    assert rows["int4"]["deploy_decode_seconds"] == pytest.approx(11.3409e-3, rel=1e-5)
    assert rows["fp8"]["deploy_decode_speedup"] == pytest.approx(1.8385, rel=1e-4)
    assert rows["fp8"]["deploy_gpu_ratio"] == 1
    assert rows["int4"]["deploy_decode_speedup"] == pytest.approx(1.9753, rel=1e-4)
    assert rows["int4"]["deploy_gpu_ratio"] == 2


def test_deepseek_v3_is_compared_against_its_published_fp8():
    """Review P0607-08: DeepSeek-V3 ships FP8 weights (128 × 128 block scales), so FP8, not an
    up-cast BF16, is the baseline. On 8 B200s each GPU's 173,039,262,105.6 B budget less
    1,342,052,808,704 ÷ 8 of BF16 weights and 3.3 GB leaves 1,982,661,017.6 B, under one
    131,072-token sequence's latent cache (131,072 × 70,272 = 9,210,691,584 B, whole on every
    GPU): no BF16 deployment within the node. FP8 (672,879,762,432 B) on 4 GPUs leaves
    1.52 GB, too little, and on 8 leaves 85.6 GB: TP 8. INT4 fits TP 4, half FP8's GPUs."""
    result = quantization_formats(model="deepseek-v3", gpu="b200")
    rows = {f["dtype"]: f for f in result["formats"]}
    assert result["baseline_dtype"] == "fp8"
    assert rows["bf16"]["deploy_tp"] is None and rows["fp8"]["deploy_tp"] == 8
    assert rows["fp8"]["deploy_decode_speedup"] == 1
    assert rows["int4"]["deploy_gpu_ratio"] == 2


def test_the_mi300xs_paths_are_matrix_cores_not_tensor_cores():
    """AMD's MI300X multiplies on Matrix Cores (AMD's name), not tensor cores (NVIDIA's); its
    plain FP32 units are vector ALUs; it has no FP4 matrix path, so NVFP4 runs weight-only."""
    mi300x, h100 = GPUS["mi300x"], GPUS["h100-sxm"]
    assert path_describe(gpu=mi300x, dtype=DTYPES["fp8"]) == "FP8 Matrix Cores"
    assert path_describe(gpu=mi300x, dtype=DTYPES["int8"]) == "INT8 Matrix Cores (TOPS)"
    assert path_describe(gpu=mi300x, dtype=DTYPES["nvfp4"]) == (
        "BF16 Matrix Cores, weights unpacked first (weight-only)")
    assert path_describe(gpu=mi300x, dtype=DTYPES["fp32"]) == "FP32 vector ALUs (no Matrix Cores)"
    assert path_describe(gpu=h100, dtype=DTYPES["fp8"]) == "FP8 tensor cores"
    assert path_describe(gpu=h100, dtype=DTYPES["fp32"]) == "FP32 CUDA cores (no tensor cores)"
