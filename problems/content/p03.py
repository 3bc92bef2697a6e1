"""Problem 3, sizing the KV cache for a 70B model at 32K context × 100 users: the calculator (KV
per token, per user and for all users against the weights; the GPUs it takes; the levers) and
every figure the prose quotes, from problems/arithmetic at render time."""

from django.http import HttpRequest

from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.kv_sizing import (
    GEMMA2_WINDOW,
    NODE_GPUS,
    PCIE_EFFICIENCY_DEFAULT,
    PCIE_GEN5_X16_ONE_WAY,
    RECOMPUTE_MFU_DEFAULT,
    SIZING_GPUS,
    kv_sizing,
    mha_bytes_per_token,
    node_layout,
)
from problems.arithmetic.memory import (
    MEMORY_FRACTION_DEFAULT,
    RESERVE_GB_DEFAULT,
    kv_cache,
    tp_sizes_model,
)
from problems.arithmetic.paging import VLLM_DEFAULT_BLOCK
from problems.arithmetic.units import (
    GB,
    bandwidth_format,
    bytes_short,
    count_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, list_phrase, ratio_phrase, times_phrase
from problems.calculators import (
    Calculator,
    calculator_inputs_result,
    calculator_register,
)
from problems.forms import (
    dtype_input,
    kv_dtype_input,
    memory_inputs,
    model_input,
    real_input,
    whole_input,
)
from problems.plots import Plot, Series, sweep_whole

SLUG = "kv-sizing"
PREFIX = "p03-kv"
TOKENS_MAX = 1_000_000
PLOT_MODELS = ("llama-3.1-8b", "llama-3.1-70b", "llama-2-7b", "qwen2.5-72b", "deepseek-v3")
PLOT_GPUS = ("h100-sxm", "h200", "b200")
# The tensor-parallel size the first follow-up asks about.
TP_FOLLOWUP = 16


def kv_context_plot(*, inputs: dict, result) -> Plot:
    """KV bytes for all users against context length, for several models, with GPU memory."""
    top = max(131_072, inputs["tokens"])
    xs = sweep_whole(1_024, top, count=16)
    kv_name = inputs["kv_dtype"] or None
    series = []
    for mid in dict.fromkeys((inputs["model"], *PLOT_MODELS)):
        m = model_get(mid)
        d = kv_dtype_get(kv_name, model=m)
        ys = tuple(
            float(kv_cache(model=mid, tokens=x, users=inputs["users"], dtype=d.id)["total_bytes"])
            / GB if x <= m.context else float("nan") for x in xs)
        series.append(Series(f"{m.name} ({m.attention})", tuple(xs), ys, markers=False))
    for gid in PLOT_GPUS:
        g = gpu_get(gid)
        memory = g.memory_total_bytes / GB
        series.append(Series(f"one {g.short_name}: {bytes_short(g.memory_total_bytes)}",
                             (xs[0], xs[-1]), (memory, memory), dash=True))
    node = gpu_get("b200").memory_total_bytes * NODE_GPUS / GB
    series.append(Series(f"{NODE_GPUS} × B200 node", (xs[0], xs[-1]), (node, node), dash=True))
    return Plot(title=f"KV cache of {count_format(inputs['users'], 'user')} against context length",
                x_title="Context per user (tokens)", y_title="KV cache (GB)",
                series=tuple(series), x_log=True, y_log=True)


INPUTS = (
    model_input(initial="llama-3.1-70b", api="llama-3.1-70b"),
    whole_input("tokens", "Context per user (the maximum)", unit="tokens", initial=32_768,
                api=32_768, maximum=TOKENS_MAX),
    whole_input("users", "Concurrent users", unit="users", initial=100, api=100,
                maximum=100_000),
    kv_dtype_input(),
    dtype_input(),
    whole_input("mean_tokens", "Mean context an active user holds", unit="tokens",
                initial=8_192, api=8_192, maximum=TOKENS_MAX,
                help="An assumption to replace with your own traffic: most conversations are "
                     "far shorter than the window."),
    whole_input("window_tokens", "Sliding window", unit="tokens", initial=4_096, api=4_096,
                maximum=10_000_000),
    real_input("window_share", "Share of layers with the window", unit="fraction",
               initial=0.5, api=0.5, minimum=0.0, maximum=1.0,
               help="Gemma 2 alternates local (4,096-token window) and global layers: 0.5."),
    real_input("pcie_efficiency", "PCIe efficiency", unit="fraction of the link",
               initial=PCIE_EFFICIENCY_DEFAULT, api=PCIE_EFFICIENCY_DEFAULT, minimum=0.01,
               maximum=1.0),
    *memory_inputs(),
)


def _compute(**k):
    # A blank cache format is the model's own precision (FP32 for the course's model), as
    # problems 4 and 7 read it; never a BF16 put in its place.
    return kv_sizing(**{**k, "kv_dtype": k["kv_dtype"] or None})


CALCULATOR = calculator_register(Calculator(
    slug=SLUG,
    title="KV cache for many long conversations",
    explanation=("Bytes per token from the config, per conversation and for every user, set "
                 "against the weights; the fewest H100s, H200s and B200s that seat every user; "
                 "and what each lever saves at the same context and users."),
    inputs=INPUTS,
    compute=_compute,
    plot=kv_context_plot,
    order=21,
    api_path="/kv-sizing",
    api_summary="KV cache of many users, the GPUs it takes, and the levers",
))


def _evaluated(request: HttpRequest) -> tuple[dict, object, bool]:
    return calculator_inputs_result(CALCULATOR, query=request.GET, prefix=PREFIX)


def context(*, request: HttpRequest) -> dict:
    """The figures problem 3's prose quotes, from the same inputs as its calculator."""
    inputs, r, valid = _evaluated(request)
    m = model_get(inputs["model"])
    kv_d = kv_dtype_get(inputs["kv_dtype"] or None, model=m)
    total = float(r["total_bytes"])
    gpus = []
    for row in r["gpus"]:
        gpus.append({
            "name": row["short_name"], "memory_text": bytes_short(row["memory_bytes"]),
            "label": gpu_get(row["gpu"]).memory_label,
            "fits": row["batch"] >= 1, "tp": row["tp"],
            "batch_text": count_format(row["batch"], "user"),
            "replicas_text": count_format(row["replicas"], "replica"),
            "gpus_text": count_format(row["gpus"], "GPU"),
            "node_users_text": count_format(row["node_users"], "user"),
            "node_layout_text": (f"{count_format(row['node_replicas'], 'replica')} of tensor "
                                 f"parallel {row['node_tp']}" if row["node_users"] else ""),
        })
    h100 = r["gpus"][0]
    l2_7 = model_get("llama-2-7b")
    # The working of bytes per token as the formula wrote it for this model: KV heads for MHA
    # and GQA, the latent and RoPE key for MLA.
    per_token_step = next(st for st in r.steps if st.label.startswith("KV bytes per token"))
    own = float(r["bytes_per_token"])
    mla_same = float(r["mla_same_layers_bytes_per_token"])
    own_gpu = float(r["own_per_gpu_tp_bytes_per_token"])
    # The released checkpoint's own weight format, when the form sizes it in another one
    # (DeepSeek-V3 ships FP8): what one 8-GPU H200 node then seats.
    checkpoint = (m.checkpoint_dtype
                  if m.checkpoint_dtype and m.checkpoint_dtype != inputs["dtype"] else None)
    checkpoint_node = (node_layout(model=m.id, gpu="h200", tokens=inputs["tokens"],
                                   dtype=checkpoint, kv_dtype=kv_d.id,
                                   memory_fraction=inputs["memory_fraction"],
                                   reserve_gb=inputs["reserve_gb"]) if checkpoint else None)
    # The follow-up's pipeline example starts where tensor parallelism stops dividing the
    # cache: at the KV-head count (8 for Llama 3.1 70B; 32 for Llama 2 7B, whose tp 16 still
    # splits heads), or at the node's 8 for MLA, whose latent no tp splits.
    tp_last = NODE_GPUS if m.attention == "MLA" else m.kv_heads
    tp_pp = float(kv_cache(model=m.id, tokens=1, dtype=kv_d.id,
                           tp=tp_last)["total_bytes_per_gpu"]) / 2
    return {
        "checkpoint_dtype_name": dtype_get(checkpoint).name if checkpoint else "",
        "checkpoint_node_text": (count_format(checkpoint_node["users"], "user")
                                 if checkpoint_node else ""),
        "checkpoint_node_fits": bool(checkpoint_node and checkpoint_node["users"]),
        "mla_same_layers_text": bytes_short(mla_same),
        "mla_layers": f"{model_get('deepseek-v3').layers:,}",
        "vllm_block_text": count_format(VLLM_DEFAULT_BLOCK, "token"),
        "mla_same_ratio_text": ratio_phrase(mla_same, own, more="more", less="less"),
        "own_per_gpu_text": bytes_short(own_gpu),
        "mla_per_gpu_vs_own": ratio_phrase(mla_same, own_gpu, more="more", less="less"),
        "mla_per_gpu_more": mla_same > own_gpu,
        # A model with few, small heads (course-lm: 4 KV heads of 32) caches less than MLA's
        # latent would at its layer count: then MLA saves nothing at all.
        "mla_saves": mla_same < own,
        "tp_pp_per_gpu_text": bytes_short(tp_pp),
        "tp_last": tp_last, "tp_last_double": tp_last * 2,
        "model_id": m.id, "attention": m.attention,
        "per_token_working": per_token_step.expression,
        "kv_exceeds_weights": float(r["kv_over_weights"]) > 1,
        "h100_fits": h100["batch"] >= 1,
        "mla_latent_per_layer": f"{(m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0):,}",
        "calculator_slug": SLUG, "calculator_prefix": PREFIX, "inputs_valid": valid,
        "model_name": m.name,
        # "course-lm's heads", not "course-lm (this course's demo model)'s heads".
        "model_possessive": f"{m.name.split(' (')[0]}'s",
        "layers": f"{m.layers:,}", "kv_heads": f"{m.kv_heads:,}",
        "heads": f"{m.heads:,}", "head_dim": f"{m.head_dim:,}",
        # The follow-up asks about a tensor-parallel size of 16: a model with 16 or more KV
        # heads still splits them there.
        "tp16_splits": m.attention != "MLA" and m.kv_heads >= 16 and m.kv_heads % 16 == 0,
        # Query heads must divide too: Qwen2.5 7B's 28 (and the course's small models) cannot
        # run at 16 at all.
        "tp16_allowed": TP_FOLLOWUP in tp_sizes_model(m, maximum=TP_FOLLOWUP),
        "tp_allowed_text": list_phrase([str(t) for t in tp_sizes_model(m, maximum=TP_FOLLOWUP)],
                                       conjunction="and"),
        "mla_tp": r["mla_compare_tp"],
        "kv_heads_per_gpu_at_16": count_format(m.kv_heads // 16, "KV head"),
        "context_window": f"{m.context:,}",
        # The format's short name for prose ("FP32", "INT8"), without the catalog's aside.
        "kv_name": (kv_d.kv_label.split(" (")[0].removesuffix(" KV cache") if kv_d.kv_name
                    else kv_d.kv_label),
        "kv_value_bytes": number_format(kv_d.bytes),
        # "a BF16 cache", "an FP8 cache": the article follows the letter's spoken name.
        "kv_article": "an" if kv_d.kv_label[:1] in "AEFHILMNORSX" else "a",
        "tokens": f"{inputs['tokens']:,}", "users": f"{inputs['users']:,}",
        "tokens_text": count_format(inputs["tokens"], "token"),
        "users_text": count_format(inputs["users"], "user"),
        "kv_value_bytes_text": count_format(kv_d.bytes, "byte"),
        "per_token_text": bytes_short(float(r["bytes_per_token"])),
        "per_token_exact": f"{int(r['bytes_per_token']):,}",
        # The short form only when it says more than the exact count (kB, MB, not "… B").
        "per_token_short": (bytes_short(float(r["bytes_per_token"]))
                            if not bytes_short(float(r["bytes_per_token"])).endswith(" B")
                            else ""),
        "per_seq_text": bytes_short(float(r["bytes_per_sequence"])),
        "total_text": bytes_short(total),
        "weights_text": bytes_short(float(r["weights_bytes"])),
        # "7.61 times the model", "17.2% of the model": never "0.172× the model".
        "kv_over_weights_text": times_phrase(float(r["total_bytes"]), float(r["weights_bytes"])),
        "many_users": inputs["users"] > 1,
        "gpus": gpus, "node_gpus": NODE_GPUS,
        "h100_node_users_text": count_format(h100["node_users"], "user"),
        "h100_gpus_text": count_format(h100["gpus"], "GPU"),
        "memory_fraction_percent": percent_format(inputs["memory_fraction"]),
        "memory_fraction_default_percent": percent_format(MEMORY_FRACTION_DEFAULT),
        "reserve_text": bytes_short(inputs["reserve_gb"] * GB),
        "reserve_default_text": bytes_short(RESERVE_GB_DEFAULT * GB),
        "fp8_total_text": bytes_short(float(r["fp8_total_bytes"])),
        "fp8_node_users_text": count_format(r["fp8_node_users_h100"], "user"),
        "fp8_node_fits": r["fp8_node_users_h100"] >= 1,
        # What an FP8 cache saves over the chosen one: nothing when it already takes one byte.
        "fp8_saves": kv_d.bytes > 1, "fp8_halves": kv_d.bytes == 2,
        "fp8_cut_text": f"{number_format(kv_d.bytes)}×",
        "mha_per_token_text": bytes_short(float(r["mha_bytes_per_token"])),
        "mha_total_text": bytes_short(float(r["mha_total_bytes"])),
        "mha_ratio_text": f"{number_format(r['mha_bytes_per_token'] / r['bytes_per_token'])}×",
        "mla_per_token_text": bytes_short(float(r["mla_bytes_per_token"])),
        "mla_total_text": bytes_short(float(r["mla_total_bytes"])),
        "mla_ratio_text": f"{number_format(r['bytes_per_token'] / r['mla_bytes_per_token'])}×",
        "l2_7b_per_token_text": bytes_short(float(
            kv_cache(model="llama-2-7b", tokens=1, dtype="bf16")["bytes_per_token"])),
        "l2_7b_name": l2_7.name, "l2_7b_window": f"{l2_7.context:,}",
        "mean_tokens": f"{inputs['mean_tokens']:,}",
        "mean_tokens_text": count_format(inputs["mean_tokens"], "token"),
        "mean_total_text": bytes_short(float(r["mean_total_bytes"])),
        "window_tokens": f"{inputs['window_tokens']:,}",
        "window_share_percent": percent_format(inputs["window_share"]),
        "window_total_text": bytes_short(float(r["window_total_bytes"])),
        "pcie_text": bandwidth_format(PCIE_GEN5_X16_ONE_WAY),
        "pcie_both_text": bandwidth_format(2 * PCIE_GEN5_X16_ONE_WAY),
        "pcie_efficiency_percent": percent_format(inputs["pcie_efficiency"]),
        # Offload and recompute are timed on one replica of the first node that holds the
        # model and one user (kv_sizing); where none does, the page says so.
        "offload_gpus_text": count_phrase(r["offload_tp"], gpu_get(r["offload_gpu"]).short_name),
        "sizing_gpus_text": list_phrase([f"{row['short_name']}s" for row in r["gpus"]],
                                        conjunction="or"),
        "offload_tp": r["offload_tp"],
        "offload_fits": r["offload_fits"],
        # A lever that saves nothing at these inputs says so instead of a cost.
        "mean_saves": inputs["mean_tokens"] < inputs["tokens"],
        "window_saves": inputs["window_share"] > 0 and inputs["window_tokens"] < inputs["tokens"],
        "h100_fewest_layout_text": (f"{count_format(h100['replicas'], 'replica')} of tensor "
                                    f"parallel {h100['tp']}" if h100["batch"] else ""),
        "reload_text": seconds_format(float(r["reload_seconds"])),
        "recompute_text": seconds_format(float(r["recompute_seconds"])),
        "recompute_bound": r["recompute_bound"],
        "reload_beats_recompute": float(r["reload_seconds"]) < float(r["recompute_seconds"]),
        "recompute_mfu_percent": percent_format(RECOMPUTE_MFU_DEFAULT),
        "decode_hbm_text": seconds_format(float(r["decode_read_hbm_seconds"])),
        "decode_pcie_text": seconds_format(float(r["decode_read_pcie_seconds"])),
        "sizing_gpu_count": len(SIZING_GPUS),
        "llama3_window": f"{model_get('llama-3-70b').context:,}",
        "llama3_name": model_get("llama-3-70b").name,
        "llama31_name": model_get("llama-3.1-70b").name,
        "llama31_window": f"{model_get('llama-3.1-70b').context:,}",
        # What counting attention heads overstates for a GQA model, when the chosen one is not.
        "gqa_example_ratio_text": number_format(
            mha_bytes_per_token(model_id="llama-3.1-70b", kv_dtype="bf16")[0]
            / float(kv_cache(model="llama-3.1-70b", tokens=1, dtype="bf16")["bytes_per_token"]))
        + "×",
        "mla_latent": f"{model_get('deepseek-v3').kv_lora_rank:,}",
        "mla_rope": f"{model_get('deepseek-v3').qk_rope_head_dim:,}",
        "gemma2_window": f"{GEMMA2_WINDOW:,}",
    }


SOURCES: list[tuple[str, str]] = [
    ("Meta Llama 3.1 70B config.json (80 layers, 64 query heads, 8 KV heads, head_dim 128, "
     "131,072-token context)", "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
    ("Meta Llama 3 model card (8,192-token context)",
     "https://github.com/meta-llama/llama-models/blob/main/models/llama3/MODEL_CARD.md"),
    ("Meta Llama 2 7B config.json (32 KV heads: multi-head attention)",
     "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json"),
    ("Ainslie et al., 'GQA: Training Generalized Multi-Query Transformer Models from Multi-Head "
     "Checkpoints'", "https://arxiv.org/abs/2305.13245"),
    ("DeepSeek-V3 inference config (kv_lora_rank 512, qk_rope_head_dim 64, 61 layers)",
     "https://github.com/deepseek-ai/DeepSeek-V3/blob/main/inference/configs/config_671B.json"),
    ("DeepSeek-AI, 'DeepSeek-V2' (multi-head latent attention)", "https://arxiv.org/abs/2405.04434"),
    ("Ray Serve LLM, 'Data parallel attention' (MLA's KV cache cannot be sharded along the head "
     "dimension, so attention is replicated per data-parallel rank, each with its own batch)",
     "https://docs.ray.io/en/latest/serve/llm/user-guides/data-parallel-attention.html"),
    ("Gemma Team, 'Gemma 2: Improving Open Language Models at a Practical Size' (local "
     "sliding-window attention of 4,096 tokens alternating with global attention)",
     "https://arxiv.org/abs/2408.00118"),
    ("vLLM engine arguments (--kv-cache-dtype fp8, gpu_memory_utilization 0.9)",
     "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    ("vLLM docs, Quantized KV Cache (without calibration every FP8 scale is 1.0, as the demo's "
     "note says)", "https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/"),
    ("vLLM pull request 10511 (the profiled runtime reserve behind the 3.3 GB default)",
     "https://github.com/vllm-project/vllm/pull/10511"),
    ("NVIDIA H100 Tensor Core GPU datasheet (HBM3 bandwidth; PCIe Gen5 host link)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("NVIDIA H200 Tensor Core GPU datasheet",
     "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"),
    ("NVIDIA HGX platform specifications (HGX B200)", "https://www.nvidia.com/en-us/data-center/hgx/"),
    ("Pope et al., 'Efficiently Scaling Transformer Inference' (KV cache memory and multiquery "
     "attention at long context; partitioning layouts for inference)",
     "https://arxiv.org/abs/2211.05102"),
    ("vLLM docs, Parallelism and Scaling (tensor and pipeline parallel sizes; pipeline "
     "parallelism splits the layers across GPUs)",
     "https://docs.vllm.ai/en/latest/serving/parallelism_scaling/"),
    ("vLLM docs, Automatic Prefix Caching design (full blocks hashed by their whole prefix and "
     "shared between requests)", "https://docs.vllm.ai/en/latest/design/prefix_caching/"),
    ("vLLM issue 11797 (the query heads must divide by the tensor-parallel size: Qwen2-7B, "
     "with 28 attention heads and 4 KV heads, cannot run on an 8-GPU node)",
     "https://github.com/vllm-project/vllm/issues/11797"),
    ("DeepSeek-V3 config.json on Hugging Face (quantization_config: fp8, e4m3, "
     "weight_block_size [128, 128]: the released weights are FP8)",
     "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"),
]
