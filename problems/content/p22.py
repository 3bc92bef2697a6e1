"""Problem 22, splitting prefill and decode and moving the KV cache: the "disagg-plan" calculator
(the KV one prompt hands over, its transfer over NVLink, 400 Gb/s InfiniBand and 100 GbE against
the prefill, and the prefill-to-decode replica ratio) and every figure the prose quotes, computed
at render time by problems/arithmetic.
"""

from django.http import HttpRequest

from problems import arithmetic as a
from problems.arithmetic.catalog import dtype_get, gpu_get, kv_dtype_get, model_get
from problems.arithmetic.catalog.links import LINKS, NODE_GPUS
from problems.arithmetic.disagg import KV_BLOCK_TOKENS
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_in,
    bytes_short,
    count_format,
    number_format,
    percent_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase, ratio_phrase, times_phrase
from problems.calculators import calculator_evaluate, calculator_get
from problems.forms import inputs_normalise

SLUG = "disagg-plan"
PREFIX = "p22-disagg"
DEMO_SLUG = "disagg"
# Published results the prose quotes, each from an entry in SOURCES.
DISTSERVE = (7.4, 12.6)  # DistServe: up to 7.4× more requests or 12.6× tighter SLO
SPLITWISE = (1.4, 0.2, 2.35)  # Splitwise: 1.4× throughput at 20% lower cost; 2.35× same budget
SHORT_PROMPT = 256  # a short prompt, to show where the transfer stops hiding behind prefill

CALCULATOR = calculator_get(SLUG)


def short_verdict(share_ratio: float, *, short_share: float = 0.0,
                  asked_share: float = 0.0) -> str:
    """How a short prompt's transfer hides behind its prefill, against the asked prompt's, from
    the ratio of their shares of the prefill (within a quarter either way: about as well). A
    transfer that outlasts its prefill (share ≥ 1) is not hidden at all, however it compares."""
    if short_share >= 1:
        return ("cannot hide its transfer either" if asked_share >= 1
                else "cannot hide its transfer")
    if share_ratio > 1.25:
        return "hides its transfer less well"
    if share_ratio < 0.8:
        return "hides its transfer better"
    return "hides its transfer about as well"


def figures(inputs: dict) -> dict:
    """Every figure problem 22's prose quotes, for the calculator's inputs."""
    r = a.disagg_plan(**inputs)
    m = model_get(inputs["model"])
    g = gpu_get(inputs["gpu"])
    nv, ib, eth = r["links"]
    short = a.disagg_plan(**{**inputs, "prompt_tokens": SHORT_PROMPT})
    short_eth = short["links"][2]
    return {
        "dtype_name": dtype_get(inputs["dtype"]).name,
        "kv_name": kv_dtype_get(inputs.get("kv_dtype"), model=m).kv_label,
        "interconnect": g.interconnect,
        "ib_rate_text": bandwidth_format(LINKS["ib-ndr"].bytes_per_second),
        "eth_rate_text": bandwidth_format(LINKS["eth-100g"].bytes_per_second),
        "nvlink_both_text": bandwidth_format(g.interconnect_bytes_per_second),
        "nvlink_one_text": bandwidth_format(g.interconnect_one_way_bytes_per_second),
        # A mesh (MI300X): the total is every link of a GPU together, and a copy between two
        # GPUs crosses one of them.
        "mesh_links_text": count_phrase(g.mesh_links, "link") if g.mesh_links else "",
        "peer_one_text": bandwidth_format(g.peer_one_way_bytes_per_second),
        # The all-reduce's link: on a mesh, the links a GPU has to the rest of its group.
        "allreduce_over_text": (
            f"{g.interconnect} ({count_phrase(min(inputs['tp'] - 1, g.mesh_links), 'link')} "
            f"a GPU, {bandwidth_format(g.peer_one_way_bytes_per_second)} each way)"
            if g.mesh_links and inputs["tp"] > 1 else g.interconnect),
        "heads": m.heads, "kv_heads": m.kv_heads,
        "gqa_ratio": (number_format(m.heads / m.kv_heads)
                      if m.attention != "MLA" and m.kv_heads and m.heads > m.kv_heads else ""),
        "model_name": m.name, "gpu_name": g.name, "tp": inputs["tp"], "layers": m.layers,
        "mla": m.attention == "MLA",
        "prompt_tokens": f"{inputs['prompt_tokens']:,}",
        "output_tokens": f"{inputs['output_tokens']:,}",
        "rps": number_format(inputs["requests_per_second"]),
        "rps_text": count_format(inputs["requests_per_second"], "request"),
        "prompt_tokens_text": count_format(inputs["prompt_tokens"], "token"),
        "output_tokens_text": count_format(inputs["output_tokens"], "token"),
        "link_eff_text": percent_format(inputs["link_efficiency"]),
        "mfu_text": percent_format(inputs["mfu_prefill"]),
        "kv_text": bytes_short(r["kv_bytes"]),  # "576 MB", not "0.576 GB"
        "kv_gpu_text": bytes_short(r["kv_bytes_per_gpu"]),
        "prefill_text": seconds_format(r["prefill_seconds"]),
        "prefill_bound": r["prefill_bound"],
        "links": [{"name": x["name"], "seconds_text": seconds_format(x["seconds"]),
                   "ratio_text": percent_format(x["ratio"]),
                   "layered_text": seconds_format(x["exposed_layered"]),
                   "rate_text": bandwidth_format(x["line_rate"])}
                  for x in r["links"] if x["applies"]],
        "outlasting_links": [{"name": x["name"],
                              "layered_text": seconds_format(x["exposed_layered"])}
                             for x in r["links"] if x["ratio"] > 1 and x["applies"]],
        "in_node": r["in_node"], "spans_nodes": r["spans_nodes"],
        "node_gpus": NODE_GPUS, "dgx_like": inputs["gpu"] in ("h100-sxm", "h200"),
        "ib_capped": r["ib_capped"], "host_link": r["host_link"],
        "allreduce_text": seconds_format(r["allreduce_seconds"]),
        # A share above one is a multiple ("6.6 times the prefill"), never a clamped 100%.
        "allreduce_share_text": times_phrase(r["allreduce_seconds"], r["prefill_seconds"]),
        "allreduce_bytes_text": bytes_short(r["allreduce_bytes"]),
        "allreduce_exceeds": r["allreduce_seconds"] > r["prefill_seconds"],
        "prefill_batched_text": seconds_format(r["prefill_busy"]),
        "prefill_busy_bound": r["prefill_busy_bound"],
        "prompts_per_pass": r["prompts_per_pass"],
        "prompts_per_pass_text": count_phrase(r["prompts_per_pass"], "prompt"),
        "passes_per_prompt_text": count_phrase(r["passes_per_prompt"], "pass"),
        "budget_text": f"{r['prefill_token_budget']:,}",
        "budget_n": count_phrase(r["prefill_token_budget"], "token"),
        "batched_differs": abs(r["prefill_busy"] - r["prefill_seconds"])
        > 0.01 * r["prefill_seconds"],
        "kv_regions_text": f"{r['kv_regions']:,}",
        "kv_region_text": bytes_in(r["kv_region_bytes"], "KiB"),
        "kv_block": KV_BLOCK_TOKENS,
        "colocated_rate_text": number_format(r["colocated_rate"]),
        "colocated_batch": f"{r['colocated_batch']:,}",
        "colocated_share_text": percent_format(r["colocated_share"]),
        "colocated_step_text": seconds_format(r["colocated_step"]),
        "colocated_tpot_text": seconds_format(r["colocated_tpot"]),
        "colocated_binds": r["colocated_binds"],
        "colocated_smaller_batch": r["colocated_batch"] < r["batch"],
        "tpot_target_text": seconds_format(inputs["tpot_target_ms"] / 1000),
        "colocated_replicas_text": count_phrase(r["colocated_replicas"], "replica"),
        "split_replicas_text": count_phrase(r["prefill_replicas"] + r["decode_replicas"],
                                            "replica"),
        "colocated_gpus_text": count_phrase(r["colocated_replicas"] * inputs["tp"], "GPU"),
        "split_gpus_text": count_phrase(
            (r["prefill_replicas"] + r["decode_replicas"]) * inputs["tp"], "GPU"),
        "goodput_split_text": number_format(r["goodput_split"]),
        "goodput_colocated_text": number_format(r["goodput_colocated"]),
        "goodput_phrase": ratio_phrase(r["goodput_split"], r["goodput_colocated"],
                                       more="higher", less="lower"),
        "split_pays": r["goodput_split"] > r["goodput_colocated"] * 1.05,
        "fewer_gpus_split": r["prefill_replicas"] + r["decode_replicas"]
        < r["colocated_replicas"],
        "more_gpus_split": r["prefill_replicas"] + r["decode_replicas"]
        > r["colocated_replicas"],
        "gpu_gap_text": count_phrase(abs(r["prefill_replicas"] + r["decode_replicas"]
                                         - r["colocated_replicas"]) * inputs["tp"], "GPU"),
        "nv_text": seconds_format(nv["seconds"]), "ib_text": seconds_format(ib["seconds"]),
        "eth_text": seconds_format(eth["seconds"]),
        "eth_ratio_text": percent_format(eth["ratio"]),
        "eth_shared_text": seconds_format(eth["whole_seconds"]),
        "eth_shared_factor_text": number_format(eth["whole_seconds"] / eth["seconds"]),
        "eth_shared_longer": eth["whole_seconds"] > eth["seconds"] * (1 + 1e-9),
        "eth_layered_text": seconds_format(eth["exposed_layered"]),
        "ib_ratio_text": percent_format(ib["ratio"]),
        "memory_fraction_text": percent_format(r["memory_fraction"]),
        "reserve_text": bytes_in(r["reserve_bytes"], "GB"),
        "decode_usable_text": bytes_in(r["decode_usable_gpu"], "GB"),
        "decode_weights_text": bytes_in(r["decode_weights_gpu"], "GB"),
        "decode_free_text": bytes_in(r["decode_free_gpu"], "GB"),
        "decode_sequence_text": bytes_short(r["decode_kv_sequence_gpu"]),
        "step_text": seconds_format(r["step_seconds"]), "batch": f"{r['batch']:,}",
        "batch_limit": r["batch_limit"],
        "decode_busy_text": seconds_format(r["decode_busy"]),
        "ratio_text": number_format(r["ratio"]),
        "prefill_replicas": r["prefill_replicas"], "decode_replicas": r["decode_replicas"],
        "prefill_busy_text": percent_format(
            inputs["requests_per_second"] * r["prefill_busy"] / r["prefill_replicas"]),
        "decode_pool_busy_text": percent_format(
            inputs["requests_per_second"] * r["decode_busy"] / r["decode_replicas"]),
        "short_tokens": f"{SHORT_PROMPT:,}",
        "short_shorter": inputs["prompt_tokens"] > SHORT_PROMPT,
        "short_verdict": short_verdict(short_eth["ratio"] / eth["ratio"],
                                       short_share=short_eth["ratio"],
                                       asked_share=eth["ratio"]),
        # 100 GbE slower than the prefill: layer by layer cannot hide what outlasts the compute.
        "eth_outruns": eth["ratio"] >= 1,
        "short_memory_bound": short["prefill_bound"] == "memory",
        "short_more_decode": short["ratio"] < r["ratio"],
        "short_prefill_text": seconds_format(short["prefill_seconds"]),
        "short_eth_text": seconds_format(short_eth["seconds"]),
        "short_eth_ratio_text": percent_format(short_eth["ratio"]),
        "short_ratio_text": number_format(short["ratio"]),
        "short_busy_text": seconds_format(short["prefill_busy"]),
        "short_per_pass": f"{short['prompts_per_pass']:,}",
        "short_batched_differs": short["prefill_busy"] < short["prefill_seconds"] * 0.99,
        "distserve_rate_text": f"{DISTSERVE[0]}×", "distserve_slo_text": f"{DISTSERVE[1]}×",
        "splitwise_tp_text": f"{SPLITWISE[0]}×",
        "splitwise_cost_text": percent_format(SPLITWISE[1]),
        "splitwise_budget_text": f"{SPLITWISE[2]}×",
    }


def context(*, request: HttpRequest) -> dict:
    """The figures problem 22's prose quotes, from the same inputs as its calculator."""
    state = calculator_evaluate(CALCULATOR, query=request.GET, prefix=PREFIX)
    if state.result is not None:
        inputs = inputs_normalise(CALCULATOR.inputs, dict(state.form.cleaned_data))
    else:
        inputs = CALCULATOR.defaults()  # bad input shows beside its field; prose keeps defaults
    return {**figures(inputs), "calculator_slug": SLUG, "calculator_prefix": PREFIX,
            "demo_slug": DEMO_SLUG, "inputs_valid": state.result is not None}


SOURCES: list[tuple[str, str]] = [
    ("Zhong et al., 'DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large "
     "Language Model Serving' (OSDI'24: up to 7.4× more requests or 12.6× tighter SLO)",
     "https://arxiv.org/abs/2401.09670"),
    ("Patel et al., 'Splitwise: Efficient Generative LLM Inference Using Phase Splitting' "
     "(ISCA'24: up to 1.4× throughput at 20% lower cost; 2.35× under the same power and cost; "
     "section 4: layer-wise KV transfer needs per-layer synchronisation that can raise TTFT for "
     "small prompts, so it sends small prompts' KV after prefill and picks per batch)",
     "https://arxiv.org/abs/2311.18677"),
    ("Qin et al., 'Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving'",
     "https://arxiv.org/abs/2407.00079"),
    ("DeepSeek, 'Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview' (prefill and "
     "decode disaggregated in production)",
     "https://github.com/deepseek-ai/open-infra-index/blob/main/202502OpenSourceWeek/"
     "day_6_one_more_thing_deepseekV3R1_inference_system_overview.md"),
    ("Agrawal et al., 'Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve' "
     "(chunked prefill, the colocated alternative)", "https://arxiv.org/abs/2403.02310"),
    ("NVIDIA NIXL, the Inference Xfer Library (KV transfers between GPUs over NVLink and RDMA)",
     "https://github.com/ai-dynamo/nixl"),
    ("vLLM's NixlConnector (the decode side pulls the prompt's KV blocks after prefill "
     "finishes, with no layer-by-layer saving, while the prefill side holds them until read or "
     "until VLLM_NIXL_ABORT_REQUEST_TIMEOUT; it uses the HND KV layout for better transfer "
     "performance; on a partial prefix-cache hit the decode side reads only the blocks it has "
     "not computed)",
     "https://github.com/vllm-project/vllm/blob/main/vllm/distributed/kv_transfer/kv_connector/"
     "v1/nixl_connector.py"),
    ("Llama 3.1 70B config.json (80 layers, 8 KV heads of 128)",
     "https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
    ("NVIDIA H100 Tensor Core GPU datasheet (dense BF16 rate, HBM3 bandwidth, NVLink bandwidth "
     "in both directions)",
     "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"),
    ("NVIDIA ConnectX-7 / Quantum-2 InfiniBand datasheets (NDR, 400 Gb/s per port)",
     "https://www.nvidia.com/en-us/networking/infiniband-adapters/"),
    ("NVIDIA DGX BasePOD reference architecture, 'Core Components' (DGX H100 and H200: eight "
     "GPUs, eight single-port ConnectX-7 adapters at up to 400 Gb/s for the compute fabric)",
     "https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-foundation-"
     "enterprise-ai/latest/core-components.html"),
    ("IEEE 802.3 Ethernet (100GBASE: 100 Gb/s)", "https://standards.ieee.org/ieee/802.3/"),
    ("vLLM documentation, 'Optimization and Tuning' (chunked prefill; max_num_batched_tokens, "
     "the tokens one engine step takes; preemption by recomputation in V1)",
     "https://docs.vllm.ai/en/latest/configuration/optimization.html"),
    ("NVIDIA Dynamo, disaggregated serving (conditional disaggregation: a request is prefilled "
     "remotely only when its prompt is long enough and the prefill queue short enough, else "
     "locally on the decode worker)",
     "https://github.com/ai-dynamo/dynamo/blob/main/docs/architecture/disagg_serving.md"),
    ("NVIDIA A100 and H100 datasheets (host link: PCIe Gen4 64 GB/s; PCIe Gen5 128 GB/s, both "
     "directions) and L40S datasheet (PCIe Gen4 x16), the ceiling on GPUDirect RDMA",
     "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
     "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"),
]
