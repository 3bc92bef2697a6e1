"""Catalogs: every entry names its source; ids resolve; the demo model loads when shipped."""

import json
from pathlib import Path

import pytest

from problems.arithmetic import DTYPES, GPUS, MODELS, ArithmeticInputError, gpu_get, model_get
from problems.arithmetic.catalog import models_all
from problems.arithmetic.catalog.models import DEMO_MODEL_IDS, demo_model_load, safetensors_params
from problems.arithmetic.memory import params_count_model

MODEL_IDS = {
    "llama-2-7b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "mistral-7b",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "deepseek-v3",
}
GPU_IDS = {"a100-80gb-sxm", "h100-sxm", "h100-pcie", "h200", "b200", "l40s", "l4", "mi300x"}
DTYPE_IDS = {"fp32", "bf16", "fp16", "fp8", "fp8-e5m2", "int8", "int4", "nvfp4", "mxfp4"}


def test_ids_are_the_ones_the_issue_lists() -> None:
    assert set(MODELS) == MODEL_IDS
    assert set(GPUS) == GPU_IDS
    assert set(DTYPES) == DTYPE_IDS


def test_every_entry_names_a_source_with_a_url() -> None:
    for entry in [*MODELS.values(), *GPUS.values(), *DTYPES.values()]:
        assert entry.source, entry.id
    for entry in [*MODELS.values(), *GPUS.values()]:
        assert "https://" in entry.source, entry.id


def test_gpu_prices_are_marked_as_assumptions() -> None:
    for gpu in GPUS.values():
        assert gpu.price_per_hour_assumed > 0
        assert "Assumed" in gpu.price_note


def test_datasheet_dense_rates() -> None:
    # H100 SXM datasheet: FP8 3,958 TFLOPS with sparsity → 1,979 dense; BF16 1,979 → 989.5.
    h100 = GPUS["h100-sxm"]
    assert h100.fp8_flops == 3958e12 / 2
    assert h100.bf16_flops == 1979e12 / 2
    # L4 datasheet: 242 TFLOPS BF16 with sparsity → 121 dense; 300 GB/s.
    assert GPUS["l4"].bf16_flops == 121e12
    # MI300X data sheet: 1,307.4 TFLOPS FP16/BF16 dense; 5.3 TB/s; 192 GB.
    assert GPUS["mi300x"].bf16_flops == 1307.4e12
    assert GPUS["mi300x"].memory_bytes == 192e9


def test_gpu_memory_is_what_cuda_reports_where_on_record() -> None:
    """nvidia-smi on an idle H100 80GB: 81,559 MiB (85.5 GB), but CUDA reports 79.22 GiB, the
    total vLLM multiplies by gpu_memory_utilization: round(79.22 × 2³⁰) = 85,061,827,297 B.
    H200: 143,771 MiB; A100 80GB: 81,920 MiB; MI300X (ROCm): 196,592 MiB, each the driver's total
    where no CUDA figure is on record."""
    h100 = GPUS["h100-sxm"]
    assert h100.memory_total_bytes == 85_061_827_297
    assert h100.memory_reported_mib == 81_559
    assert "pull/12126" in h100.memory_cuda_source and "79.22" in h100.source
    assert GPUS["h200"].memory_reported_mib == 143_771
    assert GPUS["a100-80gb-sxm"].memory_total_bytes == 80 * 2**30
    assert GPUS["mi300x"].memory_reported_mib == 196_592
    for gpu in GPUS.values():
        assert "nvidia-smi" in gpu.source or "ROCm" in gpu.source


def test_llama_3_1_is_llama_3_with_a_128k_window() -> None:
    """meta-llama/Llama-3.1-8B and -70B config.json: the Llama 3 shapes, max_position_embeddings
    131,072 (RoPE scaling 'llama3' from an original 8,192)."""
    for size in ("8b", "70b"):
        old, new = MODELS[f"llama-3-{size}"], MODELS[f"llama-3.1-{size}"]
        assert (old.layers, old.hidden, old.kv_heads, old.vocab) == (
            new.layers, new.hidden, new.kv_heads, new.vocab)
        assert (old.context, new.context) == (8192, 131_072)


def test_kv_formats_are_the_ones_engines_offer() -> None:
    from problems.arithmetic.catalog import kv_dtypes

    assert {"bf16", "fp16", "fp8", "fp8-e5m2"} <= set(kv_dtypes())
    assert not {"int4", "mxfp4", "nvfp4"} & set(kv_dtypes())
    # The INT8 format is W8A8, sourced to SmoothQuant, not LLM.int8().
    assert "SmoothQuant" in DTYPES["int8"].source


def test_block_scaled_formats_count_their_scales() -> None:
    # NVFP4: an FP8 scale per 16 values → 4.5 bits; MXFP4: an 8-bit scale per 32 → 4.25.
    assert DTYPES["nvfp4"].bits == 4.5
    assert DTYPES["mxfp4"].bits == 4.25
    assert DTYPES["int4"].bits == 4 + 20 / 128
    assert DTYPES["bf16"].bytes == 2


def test_unknown_ids_name_the_field() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        model_get("llama-4")
    assert error.value.field == "model"
    with pytest.raises(ArithmeticInputError) as error:
        gpu_get("h800")
    assert error.value.field == "gpu"


def test_demo_model_loads_from_its_config(tmp_path: Path) -> None:
    config = {
        "hidden_size": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "intermediate_size": 768,
        "vocab_size": 4096,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": True,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = demo_model_load(path)
    assert model is not None
    assert (model.head_dim, model.attention, model.kv_heads) == (32, "GQA", 2)


def test_demo_model_absent_or_broken_is_none(tmp_path: Path) -> None:
    assert demo_model_load(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{}")
    assert demo_model_load(tmp_path / "bad.json") is None


def test_safetensors_params_reads_the_header_only(tmp_path: Path) -> None:
    header = json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "a": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]},
            "b": {"dtype": "F32", "shape": [5], "data_offsets": [48, 68]},
        }
    ).encode()
    (tmp_path / "model.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + bytes(68)
    )
    assert safetensors_params(tmp_path) == 12 + 5
    assert safetensors_params(tmp_path / "nowhere") is None


@pytest.mark.parametrize("model_id", DEMO_MODEL_IDS)
def test_shipped_demo_model_architecture_matches_its_weights(model_id: str) -> None:
    # Source: the model's own safetensors files, counted independently of the config.
    model = models_all().get(model_id)
    if model is None or model.params_published is None:
        pytest.skip(f"{model_id} is not shipped in this checkout")
    assert params_count_model(model)["total"] == model.params_published


def test_each_catalog_model_names_the_repository_its_config_is_read_from() -> None:
    """`repo` (the name a server started on it answers with) is the one its source links."""
    from problems.arithmetic.catalog import models_all
    from problems.arithmetic.catalog.models import DEMO_MODEL_IDS

    for model in models_all().values():
        if model.id in DEMO_MODEL_IDS:
            assert model.repo == "" and model.served_name == model.id
        else:
            assert model.repo and f"huggingface.co/{model.repo}/blob/main/config.json" in (
                model.source)


def test_each_known_l2_names_its_source_and_unknown_ones_stay_unknown() -> None:
    """L2 in binary megabytes as vendors state it: A100 40, H100 50, L4 48, B200 126.5 (the
    driver's), MI300X 32 (4 per XCD) behind a 256 MiB Infinity Cache; no public source found
    for the H200's or the L40S's, so None rather than a borrowed figure."""
    mib = 2**20
    expected = {"a100-80gb-sxm": 40 * mib, "h100-sxm": 50 * mib, "h100-pcie": 50 * mib,
                "l4": 48 * mib, "b200": round(126.5 * mib), "mi300x": 32 * mib,
                "h200": None, "l40s": None}
    for gid, size in expected.items():
        gpu = GPUS[gid]
        assert gpu.l2_bytes == size, gid
        assert ("https://" in gpu.l2_source) == (size is not None), gid
    mi300x = GPUS["mi300x"]
    assert mi300x.l2_dies == 8 and mi300x.reuse_cache == ("Infinity Cache", 256 * mib)
    assert "https://" in mi300x.shared_cache_source
    assert GPUS["h100-sxm"].reuse_cache == ("L2", 50 * mib)


def test_matrix_and_vector_units_carry_the_vendors_names() -> None:
    """NVIDIA: tensor cores and CUDA cores; AMD's MI300X: Matrix Cores and vector ALUs."""
    for gpu in GPUS.values():
        assert "https://" in gpu.units_source
        if gpu.vendor == "NVIDIA":
            assert (gpu.matrix_units, gpu.vector_units) == ("tensor cores", "CUDA cores")
    mi300x = GPUS["mi300x"]
    assert (mi300x.vendor, mi300x.matrix_units, mi300x.vector_units) == (
        "AMD", "Matrix Cores", "vector ALUs")


def test_the_model_declares_its_checkpoint_format_once():
    """A field declared twice in a dataclass silently keeps the first position and the last
    default: `Model` declared `checkpoint_dtype` as `str | None = None` and again as
    `str = ""`. One declaration, "" where the checkpoint is in the model's own format, and
    DeepSeek-V3's FP8 kept."""
    import ast
    import dataclasses
    import inspect

    from problems.arithmetic.catalog.models import Model

    tree = ast.parse(inspect.getsource(Model))
    declared = [node.target.id for node in tree.body[0].body
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)]
    assert declared.count("checkpoint_dtype") == 1
    field = next(f for f in dataclasses.fields(Model) if f.name == "checkpoint_dtype")
    assert field.default == ""
    assert model_get("deepseek-v3").checkpoint_dtype == "fp8"
    assert model_get("llama-3-8b").checkpoint_dtype == ""
