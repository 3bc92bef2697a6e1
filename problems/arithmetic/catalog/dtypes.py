"""Number formats: bits per stored value, including the block-scale overhead of the
block-quantized formats, which tensor-core rate their matmuls run at, and whether engines offer
them for the KV cache."""

from dataclasses import dataclass

from problems.arithmetic.units import number_format


@dataclass(frozen=True)
class Dtype:
    """A number format.

    `bits` is the average storage per value, scales included (bits/value); `bytes` is bits / 8.
    `compute` names the GPU rate its matmuls use (a `Gpu` field: "bf16", "fp8", "int8", "fp4",
    "fp32"); weight-only formats dequantize to BF16 before the multiply, so they use "bf16".
    `weight_only_on` is the rate a format falls back to, weight-only, on a GPU without tensor
    cores of its own kind ("" = no fallback: such a GPU cannot run it). `kv` says which engines
    offer the format for the KV cache ("" = none of the common ones do).
    """

    id: str
    name: str
    value_bits: int
    scale_bits: float
    block_size: int | None
    compute: str
    note: str
    source: str
    weight_only_on: str = ""
    kv: str = ""
    # The format's name as a KV-cache format where it differs from `name` ("INT8", not the
    # weights' "INT8 (W8A8)"), and a note on who keeps such a cache, written to stand in
    # parentheses on its own: never inside the name, which working steps already bracket.
    kv_name: str = ""
    kv_note: str = ""

    @property
    def kv_label(self) -> str:
        """The format's name as a KV-cache format ("INT8", not the weights' "INT8 (W8A8)")."""
        return self.kv_name or self.name

    @property
    def kv_choice_label(self) -> str:
        """The KV format as a form offers it: its name, bits per value and note, one bracket:
        "FP32 (32 bits; a cache only the course's CPU demo model keeps)"."""
        note = f"; {self.kv_note}" if self.kv_note else ""
        return f"{self.kv_label} ({number_format(self.bits)} bits{note})"

    @property
    def weight_only(self) -> bool:
        """True when the weights are stored narrow but multiplied at BF16 (activation) precision."""
        return self.compute == "bf16" and self.value_bits < 16

    @property
    def bits(self) -> float:
        return self.value_bits + (self.scale_bits / self.block_size if self.block_size else 0.0)

    @property
    def bytes(self) -> float:
        return self.bits / 8


DTYPES: dict[str, Dtype] = {
    d.id: d
    for d in (
        Dtype(
            id="fp32",
            name="FP32",
            value_bits=32,
            scale_bits=0,
            block_size=None,
            compute="fp32",
            note="IEEE 754 single precision; runs on the non-tensor FP32 units.",
            source="IEEE 754-2019 binary32",
            kv="an FP32 cache is possible (this course's CPU demo model keeps one) but no GPU "
            "serving engine uses it",
            kv_name="FP32",
            kv_note="a cache only the course's CPU demo model keeps",
        ),
        Dtype(
            id="bf16",
            name="BF16",
            value_bits=16,
            scale_bits=0,
            block_size=None,
            compute="bf16",
            note="8 exponent bits like FP32, 7 mantissa bits; the usual serving format.",
            kv="the default of every engine for a BF16 model",
            source="Google Cloud, 'BFloat16: the secret to high performance on Cloud TPUs' "
            "(https://cloud.google.com/blog/products/ai-machine-learning/bfloat16-the-secret-to-high-performance-on-cloud-tpus)",
        ),
        Dtype(
            id="fp16",
            name="FP16",
            value_bits=16,
            scale_bits=0,
            block_size=None,
            compute="bf16",
            note="IEEE half precision; same tensor-core rate as BF16 on these GPUs.",
            source="IEEE 754-2019 binary16",
            kv="the default of every engine for an FP16 model",
        ),
        Dtype(
            id="fp8",
            name="FP8 (E4M3)",
            value_bits=8,
            scale_bits=0,
            block_size=None,
            compute="fp8",
            note="One FP32 scale per tensor or channel: negligible per value, so counted as 0. "
            "On GPUs without FP8 tensor cores (Ampere) engines run it weight-only (W8A16), "
            "dequantized to BF16.",
            source="Micikevicius et al., 'FP8 Formats for Deep Learning' (https://arxiv.org/abs/2209.05433); "  # noqa: E501
            "the weight-only fallback: vLLM, 'FP8 W8A8' (W8A16 through FP8 Marlin below "
            "compute capability 8.9, https://docs.vllm.ai/en/stable/features/quantization/fp8/)",
            weight_only_on="bf16",
            kv="vLLM --kv-cache-dtype fp8 / fp8_e4m3; SGLang and TensorRT-LLM offer it too",
        ),
        Dtype(
            id="fp8-e5m2",
            name="FP8 (E5M2)",
            value_bits=8,
            scale_bits=0,
            block_size=None,
            compute="fp8",
            note="Five exponent bits, two mantissa bits: more range, less precision than E4M3; "
            "used for KV caches that need no scale.",
            source="Micikevicius et al., 'FP8 Formats for Deep Learning' "
            "(https://arxiv.org/abs/2209.05433); vLLM engine arguments, --kv-cache-dtype "
            "(https://docs.vllm.ai/en/latest/configuration/engine_args.html)",
            # No weight-only fallback: vLLM's FP8 Marlin, which runs FP8 checkpoints on Ampere,
            # decodes E4M3 codes only (its exponent-bias fix assumes four exponent bits).
            kv="vLLM --kv-cache-dtype fp8_e5m2",
        ),
        Dtype(
            id="int8",
            name="INT8 (W8A8)",
            value_bits=8,
            scale_bits=0,
            block_size=None,
            compute="int8",
            note="Weights and activations both in INT8, so the matmuls run on the integer tensor "
            "cores (rated in OPS, not FLOPS). Per-channel scales are negligible per value.",
            source="Xiao et al., 'SmoothQuant: Accurate and Efficient Post-Training Quantization "
            "for Large Language Models' (https://arxiv.org/abs/2211.10438)",
            kv="TensorRT-LLM's INT8 KV cache; vLLM offers FP8 instead",
            kv_name="INT8",
            kv_note="TensorRT-LLM's KV cache format",
        ),
        Dtype(
            id="int4",
            name="INT4 (group 128)",
            value_bits=4,
            scale_bits=16 + 4,
            block_size=128,
            compute="bf16",
            note="Weight-only, as GPTQ/AWQ store it: an FP16 scale and a 4-bit zero point per "
            "group of 128 weights; dequantized to BF16 for the matmul, so compute runs at the "
            "BF16 rate.",
            source="Frantar et al., 'GPTQ' (https://arxiv.org/abs/2210.17323); Lin et al., "
            "'AWQ' (https://arxiv.org/abs/2306.00978)",
        ),
        Dtype(
            id="nvfp4",
            name="NVFP4",
            value_bits=4,
            scale_bits=8,
            block_size=16,
            compute="fp4",
            note="FP4 (E2M1) values with one FP8 (E4M3) scale per 16 values (plus one FP32 "
            "scale per tensor, negligible). FP4 tensor cores exist on Blackwell only; on Hopper "
            "and Ada engines run it weight-only (W4A16), dequantized to BF16.",
            source="NVIDIA Technical Blog, 'Introducing NVFP4 for Efficient and Accurate "
            "Low-Precision Inference' (https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/); "  # noqa: E501
            "the weight-only fallback: vLLM pull request 18000, 'Use NVFP4 Marlin for "
            "CompressedTensorsW4A16Fp4' (https://github.com/vllm-project/vllm/pull/18000)",
            weight_only_on="bf16",
        ),
        Dtype(
            id="mxfp4",
            name="MXFP4",
            value_bits=4,
            scale_bits=8,
            block_size=32,
            compute="fp4",
            note="FP4 (E2M1) values with one 8-bit power-of-two (E8M0) scale per 32 values. On "
            "GPUs without FP4 tensor cores engines run it weight-only, dequantized to BF16.",
            source="Open Compute Project, 'OCP Microscaling Formats (MX) v1.0 Specification' "
            "(https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf)",
            weight_only_on="bf16",
        ),
    )
}


def kv_dtypes() -> dict[str, Dtype]:
    """The formats an engine offers for the KV cache (those with a `kv` note)."""
    return {d.id: d for d in DTYPES.values() if d.kv}
