"""Number formats: bits per stored value, including the block-scale overhead of the
block-quantized formats, and which tensor-core rate their matmuls run at."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    """A number format.

    `bits` is the average storage per value, scales included (bits/value); `bytes` is bits / 8.
    `compute` names the GPU rate its matmuls use (a `Gpu` field: "bf16", "fp8", "int8", "fp4",
    "fp32"); weight-only formats dequantize to BF16 before the multiply, so they use "bf16".
    """

    id: str
    name: str
    value_bits: int
    scale_bits: float
    block_size: int | None
    compute: str
    note: str
    source: str

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
        ),
        Dtype(
            id="bf16",
            name="BF16",
            value_bits=16,
            scale_bits=0,
            block_size=None,
            compute="bf16",
            note="8 exponent bits like FP32, 7 mantissa bits; the usual serving format.",
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
        ),
        Dtype(
            id="fp8",
            name="FP8 (E4M3)",
            value_bits=8,
            scale_bits=0,
            block_size=None,
            compute="fp8",
            note="One FP32 scale per tensor or channel: negligible per value, so counted as 0.",
            source="Micikevicius et al., 'FP8 Formats for Deep Learning' (https://arxiv.org/abs/2209.05433)",
        ),
        Dtype(
            id="int8",
            name="INT8",
            value_bits=8,
            scale_bits=0,
            block_size=None,
            compute="int8",
            note="Per-channel scales are negligible per value, so counted as 0.",
            source="Dettmers et al., 'LLM.int8()' (https://arxiv.org/abs/2208.07339)",
        ),
        Dtype(
            id="int4",
            name="INT4 (group 128)",
            value_bits=4,
            scale_bits=16 + 4,
            block_size=128,
            compute="bf16",
            note="Weight-only, as GPTQ/AWQ store it: an FP16 scale and a 4-bit zero point per "
            "group of 128 weights; dequantized to BF16 for the matmul.",
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
            "scale per tensor, negligible).",
            source="NVIDIA Technical Blog, 'Introducing NVFP4 for Efficient and Accurate "
            "Low-Precision Inference' (https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/)",
        ),
        Dtype(
            id="mxfp4",
            name="MXFP4",
            value_bits=4,
            scale_bits=8,
            block_size=32,
            compute="fp4",
            note="FP4 (E2M1) values with one 8-bit power-of-two (E8M0) scale per 32 values.",
            source="Open Compute Project, 'OCP Microscaling Formats (MX) v1.0 Specification' "
            "(https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf)",
        ),
    )
}
