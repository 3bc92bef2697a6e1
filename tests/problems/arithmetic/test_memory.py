"""Parameters, weight bytes, the KV cache and the largest batch, against published figures."""

import pytest

from problems.arithmetic import ArithmeticInputError, batch_max, kv_cache, weights_bytes
from problems.arithmetic.catalog import MODELS, Model, model_get
from problems.arithmetic.compute import kv_bytes_per_token_model
from problems.arithmetic.memory import kv_values_per_token_layer, params_count_model


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_parameters_from_the_architecture_match_the_model_card(model_id: str) -> None:
    # Source: each model's card / paper, recorded in its catalog entry's `source`.
    model = MODELS[model_id]
    counts = params_count_model(model)
    assert counts["total"] == pytest.approx(model.params_published, rel=0.005)
    if model.active_params_published:
        assert counts["active"] == pytest.approx(model.active_params_published, rel=0.02)


def test_moe_weights_count_every_expert_not_only_the_active_ones() -> None:
    # Mixtral paper (arXiv:2401.04088): 46.7B parameters in memory, 12.9B used per token.
    result = weights_bytes(model="mixtral-8x7b", dtype="bf16")
    assert result["params"] == pytest.approx(46.7e9, rel=0.005)
    assert result["bytes"] == pytest.approx(2 * 46.7e9, rel=0.005)


def test_llama_2_7b_kv_for_4096_tokens_is_about_2_gb() -> None:
    # NVIDIA Technical Blog, "Mastering LLM Techniques: Inference Optimization" (2023):
    # Llama 2 7B, batch 1, 4,096 tokens, FP16: 1 × 4096 × 2 × 32 × 4096 × 2 bytes ≈ 2 GB.
    result = kv_cache(model="llama-2-7b", tokens=4096, dtype="fp16")
    assert result["total_bytes"] == 1 * 4096 * 2 * 32 * 4096 * 2
    assert result["bytes_per_token"] == 512 * 1024


def test_gqa_uses_kv_heads_not_attention_heads() -> None:
    # Llama 3 70B config.json: 64 attention heads but 8 KV heads → 320 KiB per token in BF16.
    result = kv_cache(model="llama-3-70b", tokens=1, dtype="bf16")
    assert result["bytes_per_token"] == 80 * 2 * 8 * 128 * 2 == 320 * 1024
    assert result["bytes_per_token"] != 80 * 2 * 64 * 128 * 2  # the attention-heads mistake


def test_mla_caches_the_latent_and_rope_key() -> None:
    # DeepSeek-V2 paper (arXiv:2405.04434) Table 1: MLA caches (d_c + d_h^R) = 512 + 64 values
    # per token per layer; DeepSeek-V3 has 61 layers.
    result = kv_cache(model="deepseek-v3", tokens=1, dtype="bf16")
    assert result["bytes_per_token"] == 61 * (512 + 64) * 2 == 70_272
    # What a calculator treating it as 128-head MHA would report is ~57× larger.
    assert 61 * 2 * 128 * 128 * 2 / result["bytes_per_token"] > 50


def test_head_dim_is_read_from_the_config_not_hidden_over_heads() -> None:
    # google/gemma-7b config.json: hidden 3072, 16 heads, head_dim 256 (not 3072 / 16 = 192);
    # model card: 8.54B parameters (tied embeddings, vocab 256,000).
    gemma = Model(
        id="gemma-7b",
        name="Gemma 7B",
        layers=28,
        hidden=3072,
        heads=16,
        kv_heads=16,
        head_dim=256,
        intermediate=24576,
        vocab=256000,
        context=8192,
        attention="MHA",
        tied_embeddings=True,
    )
    values, _ = kv_values_per_token_layer(gemma)
    assert values == 2 * 16 * 256
    assert params_count_model(gemma)["total"] == pytest.approx(8.54e9, rel=0.005)


def test_tensor_parallel_splits_kv_heads_then_replicates_them() -> None:
    # Llama 3 70B has 8 KV heads: TP 4 gives 2 heads per GPU; TP 16 cannot split a head,
    # so each GPU keeps 1 (every head twice), i.e. 1/8 of the cache per GPU, not 1/16.
    full = kv_cache(model="llama-3-70b", tokens=1000)["total_bytes"]
    assert kv_cache(model="llama-3-70b", tokens=1000, tp=4)["total_bytes_per_gpu"] == full / 4
    assert kv_cache(model="llama-3-70b", tokens=1000, tp=8)["total_bytes_per_gpu"] == full / 8
    assert kv_cache(model="llama-3-70b", tokens=1000, tp=16)["total_bytes_per_gpu"] == full / 8


def test_tensor_parallel_must_divide_the_kv_heads() -> None:
    with pytest.raises(ArithmeticInputError) as error:
        kv_cache(model="llama-3-70b", tokens=1000, tp=3)
    assert error.value.field == "tp"


def test_mla_latent_is_whole_on_every_tensor_parallel_gpu() -> None:
    result = kv_cache(model="deepseek-v3", tokens=10, tp=8)
    assert result["total_bytes_per_gpu"] == result["total_bytes"]


def test_kv_steps_show_the_inputs_with_units() -> None:
    step = kv_cache(model="llama-3-8b", tokens=1300).steps[0]
    assert step.expression == ("32 layers × 2 (K and V) × 8 KV heads × 128 head_dim × 2 B per "
                               "BF16 value")
    assert step.display == "131,072 B = 128 KiB"


def test_largest_batch_on_one_h100() -> None:
    """CUDA reports 79.22 GiB = 85.06 GB on an H100 (nvidia-smi's 81,559 MiB is 85.52 GB); × 0.9
    = 76.56 GB usable; − 16.06 GB of weights − 3.3 GB reserve = 57.20 GB free; each 4,096-token
    sequence needs 4,096 × 131,072 B = 536.9 MB → ⌊106.5⌋ = 106 sequences."""
    result = batch_max(model="llama-3-8b", gpu="h100-sxm", context_tokens=4096)
    free = 85_061_827_297 * 0.9 - 8_030_261_248 * 2 - 3.3e9
    assert result["batch"] == int(free // (4096 * 131_072)) == 106


def test_int4_weights_keep_a_bf16_kv_cache() -> None:
    """INT4 (group 128) Llama 3 8B: 6,979,588,096 × 4.156 bits ÷ 8 = 3.63 GB of body + 2 ×
    525,336,576 × 2 B = 2.10 GB of embedding and head in BF16 = 5.73 GB. Free on an H100:
    76.56 − 5.73 − 3.3 = 67.53 GB; KV stays BF16, 8,192 × 131,072 B = 1.074 GB per sequence →
    ⌊62.9⌋ = 62 sequences. Were the cache 4-bit too (the old default), it would claim 243."""
    result = batch_max(model="llama-3-8b", gpu="h100-sxm", context_tokens=8192, dtype="int4")
    assert result["weights_bytes_per_gpu"] == pytest.approx(5.73e9, rel=0.001)
    assert result["kv_bytes_per_sequence"] == 8192 * 131_072
    assert result["batch"] == 62


def test_quantized_weights_keep_the_embedding_and_head_in_bf16() -> None:
    """Llama 3 8B in INT4 is about 5.7 GB that way, not the 4.17 GB of everything in INT4;
    asking for an INT4 embedding gives the 4.17 GB back."""
    kept = weights_bytes(model="llama-3-8b", dtype="int4")
    assert round(kept["bytes"] / 1e9, 1) == 5.7
    assert round(kept["bytes_all_in_dtype"] / 1e9, 2) == 4.17
    squeezed = weights_bytes(model="llama-3-8b", dtype="int4", embedding_dtype="int4")
    assert squeezed["bytes"] == pytest.approx(kept["bytes_all_in_dtype"])


def test_moe_fit_counts_every_expert() -> None:
    """Mixtral 8x7B in BF16: 46.7×10⁹ × 2 B = 93.4 GB > 76.56 GB usable on an H100: no batch
    fits. DeepSeek-V3 in FP8: 669.2×10⁹ body × 1 B + 1.85×10⁹ embedding and head × 2 B =
    672.9 GB > 183,359 MiB × 0.9 = 173 GB on a B200."""
    mixtral = batch_max(model="mixtral-8x7b", gpu="h100-sxm", context_tokens=1000)
    assert mixtral["weights_bytes_per_gpu"] == pytest.approx(93.4e9, rel=0.001)
    assert mixtral["batch"] == 0 and mixtral["fits"] is False
    deepseek = batch_max(model="deepseek-v3", gpu="b200", context_tokens=1000, dtype="fp8")
    assert deepseek["weights_bytes_per_gpu"] == pytest.approx(672.9e9, rel=0.001)
    assert deepseek["fits"] is False


def test_contexts_past_the_window_are_refused_and_llama_3_1_accepts_them() -> None:
    """Llama 3 70B's config.json: max_position_embeddings 8,192, so 32,768 tokens is refused;
    Llama 3.1 70B's is 131,072: 32,768 × 327,680 B = 10.7 GB of KV per user."""
    with pytest.raises(ArithmeticInputError) as error:
        kv_cache(model="llama-3-70b", tokens=32_768)
    assert error.value.field == "tokens" and "8,192" in error.value.message
    result = kv_cache(model="llama-3.1-70b", tokens=32_768)
    assert result["total_bytes"] == 32_768 * 327_680
    with pytest.raises(ArithmeticInputError) as error:
        batch_max(model="llama-3-8b", gpu="h100-sxm", context_tokens=100_000)
    assert error.value.field == "context_tokens"


def test_gpu_memory_is_cudas_total_in_both_units() -> None:
    """CUDA's 79.22 GiB = round(79.22 × 2³⁰) = 85,061,827,297 B: shown as 85.1 GB = 79.2 GiB,
    with nvidia-smi's 81,559 MiB and the datasheet's 80 GB named beside it."""
    step = batch_max(model="llama-3-8b", gpu="h100-sxm", context_tokens=1000).steps[0]
    assert step.value == 85_061_827_297
    assert step.display == "85.1 GB = 79.2 GiB"
    assert "79.22 GiB" in step.expression and "81,559 MiB" in step.expression
    assert "80 GB" in step.expression


def test_a_model_that_does_not_fit_gets_batch_zero() -> None:
    result = batch_max(model="llama-3-70b", gpu="h100-sxm", context_tokens=1000)
    assert result["batch"] == 0
    assert result["fits"] is False


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"model": "gpt-5", "tokens": 1}, "model"),
        ({"model": "llama-3-8b", "tokens": 0}, "tokens"),
        ({"model": "llama-3-8b", "tokens": -5}, "tokens"),
        ({"model": "llama-3-8b", "tokens": 10**12}, "tokens"),
        ({"model": "llama-3-8b", "tokens": 1.5}, "tokens"),
        ({"model": "llama-3-8b", "tokens": float("nan")}, "tokens"),
        ({"model": "llama-3-8b", "tokens": 1, "users": 0}, "users"),
        ({"model": "llama-3-8b", "tokens": 1, "dtype": "fp7"}, "dtype"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ArithmeticInputError) as error:
        kv_cache(**kwargs)
    assert error.value.field == field


def test_mqa_caches_a_single_kv_head() -> None:
    # tiiuae/falcon-7b config.json: 32 layers, 71 query heads sharing one KV head
    # (multi_query), head_dim 4544 / 71 = 64 → 32 × 2 × 1 × 64 × 2 B = 8,192 B per token.
    falcon = Model(
        id="falcon-7b",
        name="Falcon 7B",
        layers=32,
        hidden=4544,
        heads=71,
        kv_heads=1,
        head_dim=64,
        intermediate=18176,
        vocab=65024,
        context=2048,
        attention="MQA",
    )
    values, _ = kv_values_per_token_layer(falcon)
    assert falcon.layers * values * 2 == 8192


# Every calculator that takes a tensor-parallel size refuses one the query heads do not
# divide, naming the sizes the heads allow: vLLM refuses Qwen2.5 7B (28 query heads, 4 KV
# heads) at 8 GPUs, though its 4 KV heads copy evenly onto 8, and DeepSeek-V3 (MLA, 128
# query heads) at 3, where no KV head is split at all.
def _refused(call, **inputs):
    with pytest.raises(ArithmeticInputError) as refused:
        call(**inputs)
    return refused.value


QWEN_8 = "Qwen2.5 7B's 28 query heads do not split evenly over 8 GPUs"


@pytest.mark.parametrize("call, inputs", [
    ("memory.kv_cache", {"model": "qwen2.5-7b", "tokens": 1_000, "tp": 8}),
    ("memory.batch_max", {"model": "qwen2.5-7b", "gpu": "h100-sxm", "context_tokens": 1_000,
                          "tp": 8}),
    ("disagg.disagg_plan", {"model": "qwen2.5-7b", "gpu": "h100-sxm", "tp": 8,
                            "prompt_tokens": 2_000, "output_tokens": 200}),
    ("caching.prefix_routing", {"model": "qwen2.5-7b", "gpu": "h100-sxm", "tp": 8,
                                "system_tokens": 1_000, "user_tokens": 200,
                                "requests_per_minute": 60, "replicas": 2}),
    ("batching.chunked_prefill", {"model": "qwen2.5-7b", "gpu": "h100-sxm",
                                  "prompt_tokens": 1_000, "chunk_tokens": 512, "tp": 8}),
    ("batching.long_prompt", {"model": "qwen2.5-7b", "gpu": "h100-sxm", "tp": 8}),
])
def test_every_tp_calculator_refuses_a_size_the_query_heads_do_not_divide(call, inputs):
    import importlib

    module, name = call.split(".")
    function = getattr(importlib.import_module(f"problems.arithmetic.{module}"), name)
    error = _refused(function, **inputs)
    assert error.field == "tp"
    assert QWEN_8 in error.message and "its heads allow 1, 2, 4 or 28" in error.message
    # The sizes it names are accepted.
    for tp in (2, 4):
        function(**{**inputs, "tp": tp})


def test_mla_is_refused_a_size_its_query_heads_do_not_divide():
    from problems.arithmetic.disagg import disagg_plan

    for call in (lambda: kv_cache(model="deepseek-v3", tokens=1_000, tp=3),
                 lambda: disagg_plan(model="deepseek-v3", gpu="h200", tp=3, dtype="fp8",
                                     prompt_tokens=2_000, output_tokens=200)):
        with pytest.raises(ArithmeticInputError) as refused:
            call()
        assert "DeepSeek-V3's 128 query heads do not split evenly over 3 GPUs" in (
            refused.value.message)
        assert "1, 2, 4, 8, 16, 32, 64 or 128" in refused.value.message


def test_the_itl_levers_refuse_a_baseline_whose_doubled_size_the_heads_refuse():
    """Problem 9's tensor-parallel lever doubles the baseline: Qwen2.5 7B at 4 GPUs would be
    costed at 8, which its heads do not allow; the refusal says which baselines double
    within what they allow."""
    from problems.arithmetic.itl import itl_levers

    error = _refused(itl_levers, model="qwen2.5-7b", gpu="h100-sxm", tp=4)
    assert error.field == "tp" and QWEN_8 in error.message
    assert error.message.endswith("so the baseline here is 1 or 2")
    itl_levers(model="qwen2.5-7b", gpu="h100-sxm", tp=2)


def test_deployment_searches_skip_sizes_the_heads_refuse():
    """Problem 11's deployment search and problem 3's node layouts never pick a size vLLM
    refuses."""
    from problems.arithmetic.catalog import kv_dtype_get
    from problems.arithmetic.kv_sizing import node_layout
    from problems.arithmetic.quant import kv_per_token_gpu_model

    qwen = model_get("qwen2.5-7b")
    bf16 = kv_dtype_get("bf16", model=qwen)
    assert kv_per_token_gpu_model(model=qwen, kv_dtype=bf16, tp=8) is None
    assert kv_per_token_gpu_model(model=qwen, kv_dtype=bf16, tp=4) == pytest.approx(
        kv_bytes_per_token_model(qwen, bf16) / 4)
    layout = node_layout(model="qwen2.5-7b", gpu="h100-sxm", tokens=32_000, dtype="bf16",
                         kv_dtype="bf16", memory_fraction=0.9, reserve_gb=3.3)
    assert layout["tp"] in (1, 2, 4)


def test_the_moe_layout_refuses_an_attention_tp_the_query_heads_do_not_divide():
    """Mixtral 8x7B has 32 query heads and 8 KV heads: attention over 64 GPUs copies the KV
    heads evenly, but vLLM refuses the size."""
    from problems.arithmetic.parallel import moe_layout

    error = _refused(moe_layout, model="mixtral-8x7b", gpu="h100-sxm", nodes=8,
                     gpus_per_node=8, attn_tp=64, moe="tp")
    assert error.field == "attn_tp"
    assert "Mixtral 8x7B's 32 query heads do not split evenly over 64 GPUs" in error.message
