"""Accelerators: memory, bandwidth and dense tensor rates from the vendors' datasheets.

NVIDIA's datasheets print tensor rates "with sparsity" (2:4 structured sparsity doubles them);
every rate here is the dense figure, half the starred one, because model weights are not 2:4
sparse. INT8 rates are integer operations per second (OPS), not FLOPS. Interconnect figures are
the datasheets' totals for both directions together; one direction gets half
(`interconnect_one_way_bytes_per_second`).

Links between GPUs: through NVIDIA's NVSwitch every GPU reaches any peer at its whole NVLink
figure, and a PCIe card has one link. AMD's MI300X has no switch: each GPU has one Infinity
Fabric link to each of its 7 peers, and its 896 GB/s is all 7 together, so a copy between two
GPUs crosses one link (`peer_link_bytes_per_second`, 128 GB/s both ways, 64 GB/s each way) and
only a collective over the whole node uses all 7 at once
(`collective_one_way_bytes_per_second`).

Memory: a datasheet's "80GB" is a round label, not what a program can allocate. The course's one
definition of a GPU's memory is the total CUDA reports to a program (`cudaMemGetInfo`, which
PyTorch's `torch.cuda.mem_get_info` returns and vLLM multiplies by gpu_memory_utilization):
`memory_cuda_gib` where a public log records it, with its source in `memory_cuda_source`. It is a
little under nvidia-smi's total (`memory_reported_mib`, in MiB = 2²⁰ bytes): on an H100 80GB,
79.22 GiB against 81,559 MiB = 79.65 GiB. Where no CUDA figure is on record the catalog falls back
to nvidia-smi's total and says so (`memory_total_basis`), an overstatement of a few hundred MiB.
`memory_total_bytes` is whichever applies, in bytes. The datasheet label is kept beside them
(`memory_bytes`, read as decimal GB) for reference only.

Caches: vendors give cache sizes in binary megabytes (NVIDIA's "50 MB" of L2 on an H100 is the
52,428,800 bytes CUDA reports, 50 × 2²⁰), so `l2_bytes` is stored in bytes from that reading and
shown in MiB. Where no public source states a GPU's L2, it is None and pages say so rather than
borrow another GPU's figure. A GPU whose L2 is private to each compute die also names the cache
that every die shares in front of its memory (`shared_cache_*`: the MI300X's Infinity Cache).

Units: the matrix units (`matrix_units`) and the plain vector units (`vector_units`) carry each
vendor's own name: NVIDIA's tensor cores and CUDA cores, AMD's Matrix Cores and vector ALUs.
"""

from dataclasses import dataclass

TERA = 10**12
GIGA = 10**9

MIB = 2**20
GIB = 2**30
HBM_EDGES = 2  # HBM transfers data on both edges of its clock
MEMORY_SOURCE = ("memory: the total nvidia-smi reports on an idle GPU (for the MI300X, the "
                 "total ROCm reports to PyTorch), as printed in public logs")

H100_CUDA_SOURCE = (
    "the total CUDA reports, from vLLM's startup log on an H100 80GB: 'total_gpu_memory "
    "(79.22GiB) x gpu_memory_utilization (0.90) = 71.29GiB' "
    "(https://github.com/vllm-project/vllm/pull/12126; the same 79.22 GiB in "
    "https://github.com/vllm-project/vllm/pull/10511)")

NVIDIA_UNITS = ("tensor cores", "CUDA cores")
NVIDIA_UNITS_SOURCE = ("NVIDIA's datasheets name the matrix units Tensor Cores and the FP32 "
                       "units CUDA cores (e.g. https://resources.nvidia.com/en-us-tensor-core/"
                       "nvidia-tensor-core-gpu-datasheet)")

PRICE_NOTE = (
    "Assumed on-demand cloud price per GPU-hour, a round figure for the exercise, not a quote: "
    "prices vary by provider, region and commitment, so change it to your own."
)


@dataclass(frozen=True)
class Gpu:
    """One accelerator. Units: bytes, bytes/s, FLOP/s (or OP/s for INT8), watts, dollars/hour.

    A rate of None means the chip has no matrix-unit (tensor-core, Matrix Core) path for that
    format.
    """

    id: str
    name: str
    memory_bytes: int
    memory_reported_mib: int
    memory_kind: str
    bandwidth_bytes_per_second: float
    fp32_flops: float
    bf16_flops: float
    fp8_flops: float | None
    int8_ops: float | None
    fp4_flops: float | None
    interconnect: str
    interconnect_bytes_per_second: float
    power_watts: int
    price_per_hour_assumed: float
    price_note: str
    source: str
    # The chip's architecture and a short name for plots and tables, from the datasheet.
    architecture: str = ""
    short_name: str = ""
    # The total CUDA reports (GiB, as vLLM's startup log prints it), and where it was read.
    memory_cuda_gib: float | None = None
    memory_cuda_source: str = ""
    # The vendor, and its own names for the matrix units and for the plain FP32 vector units.
    vendor: str = "NVIDIA"
    matrix_units: str = NVIDIA_UNITS[0]
    # The same name before a noun: "a tensor-core peak", "a Matrix Core peak".
    matrix_unit_attributive: str = "tensor-core"
    vector_units: str = NVIDIA_UNITS[1]
    units_source: str = NVIDIA_UNITS_SOURCE
    # L2 cache (bytes, binary as vendors state it; None where no public source states it), and
    # where it was read. `l2_dies` > 1: the L2 is split into private slices, one per compute die.
    l2_bytes: int | None = None
    l2_dies: int = 1
    l2_source: str = ""
    # A cache that every die shares in front of memory, beyond a per-die L2 (bytes, its name).
    shared_cache_bytes: int | None = None
    shared_cache_name: str = ""
    shared_cache_source: str = ""
    # Figures other sources give for the same product, beside the datasheet's: the memory at its
    # announcement (bytes); another vendor page's bandwidth (bytes/s) and who states it; the
    # memory bus (bits) and memory clock (Hz) a shipping card's driver reports. Each with its
    # source; None where none is on record.
    memory_announced_bytes: int | None = None
    memory_announced_source: str = ""
    bandwidth_other_bytes_per_second: float | None = None
    bandwidth_other_said_by: str = ""
    bandwidth_other_source: str = ""
    driver_memory_bus_bits: int | None = None
    driver_memory_clock_hz: float | None = None
    driver_memory_source: str = ""
    # Where `interconnect_bytes_per_second` is stated, when not in `source`.
    interconnect_source: str = ""
    # A GPU whose peers are each reached over a link of their own (a mesh, no switch): one
    # link's bandwidth, both directions together (bytes/s), and its source. None where any
    # peer gets the whole interconnect figure (NVLink through NVSwitch, a PCIe card's link).
    peer_link_bytes_per_second: float | None = None
    peer_link_source: str = ""

    @property
    def memory_total_bytes(self) -> int:
        """The total CUDA reports where it is on record, else nvidia-smi's (bytes): the course's
        one definition of GPU memory, and what an engine's memory fraction multiplies."""
        if self.memory_cuda_gib is not None:
            return round(self.memory_cuda_gib * GIB)
        return self.memory_reported_mib * MIB

    @property
    def memory_total_text(self) -> str:
        """`memory_total_bytes` as its source prints it: "79.22 GiB as CUDA counts it"."""
        if self.memory_cuda_gib is not None:
            return f"{self.memory_cuda_gib:,} GiB as CUDA counts it"
        return f"{self.memory_reported_mib:,} MiB as the driver counts it"

    @property
    def memory_total_basis(self) -> str:
        """Where `memory_total_bytes` comes from, in a phrase for a worked step."""
        if self.memory_cuda_gib is not None:
            return (f"{self.memory_cuda_gib:,} GiB as CUDA reports it (nvidia-smi shows "
                    f"{self.memory_reported_mib:,} MiB; the datasheet says {self.memory_label})")
        return (f"{self.memory_reported_mib:,} MiB as the driver reports it (the datasheet says "
                f"{self.memory_label}; on an NVIDIA GPU CUDA's own total, where engines start, "
                f"is a few hundred MiB lower and is not on record for this one)")

    @property
    def memory_label(self) -> str:
        """What the datasheet calls it: "80 GB"."""
        return f"{self.memory_bytes // GIGA:,} GB"

    @property
    def driver_bandwidth_bytes_per_second(self) -> float | None:
        """The peak bandwidth the driver's own figures give (bytes/s): bus bits ÷ 8 × memory
        clock × 2, HBM moving data on both clock edges. None where the driver's figures are not
        on record, or for memory that is not HBM (GDDR counts its transfers differently)."""
        if (self.driver_memory_bus_bits is None or self.driver_memory_clock_hz is None
                or not self.memory_kind.startswith("HBM")):
            return None
        return self.driver_memory_bus_bits / 8 * self.driver_memory_clock_hz * HBM_EDGES

    @property
    def reuse_cache(self) -> tuple[str, int] | None:
        """The on-chip cache a tensor written by one kernel and read by the next can stay in,
        whichever of the GPU's compute units run them (its name, bytes): the L2 where every
        unit shares it, the shared cache in front of memory where the L2 is split per die;
        None where no public source gives the size."""
        if self.l2_dies > 1:
            if self.shared_cache_bytes is None:
                return None
            return self.shared_cache_name, self.shared_cache_bytes
        if self.l2_bytes is None:
            return None
        return "L2", self.l2_bytes

    @property
    def interconnect_one_way_bytes_per_second(self) -> float:
        """The whole interconnect figure in one direction (bytes/s): on a mesh, all its links
        together, which only a collective over every peer uses."""
        return self.interconnect_bytes_per_second / 2

    @property
    def mesh_links(self) -> int:
        """Point-to-point links, one to each peer (7 on an MI300X: 896 ÷ 128 GB/s); 0 where
        any peer is reached at the whole interconnect figure."""
        if self.peer_link_bytes_per_second is None:
            return 0
        return round(self.interconnect_bytes_per_second / self.peer_link_bytes_per_second)

    @property
    def peer_one_way_bytes_per_second(self) -> float:
        """What a transfer from this GPU to one other GPU of its node gets, one direction
        (bytes/s): on a mesh one link's half (MI300X: 128 GB/s ÷ 2 = 64 GB/s), else the whole
        interconnect's (H100 SXM: 900 GB/s ÷ 2 = 450 GB/s to any peer through NVSwitch)."""
        if self.peer_link_bytes_per_second is None:
            return self.interconnect_one_way_bytes_per_second
        return self.peer_link_bytes_per_second / 2

    def collective_one_way_bytes_per_second(self, gpus: int) -> float:
        """Each GPU's bandwidth, one direction, in a collective (all-reduce, all-gather,
        all-to-all) over `gpus` GPUs of one node (bytes/s). On a mesh a GPU reaches the other
        gpus − 1 over one link each, so at best, the traffic spread evenly over those links,
        (gpus − 1) × one link (MI300X: 64 GB/s at 2 GPUs, 7 × 64 = 448 GB/s at 8); through a
        switch the whole one-way figure at any size."""
        if not self.mesh_links:
            return self.interconnect_one_way_bytes_per_second
        return min(max(gpus - 1, 1), self.mesh_links) * self.peer_one_way_bytes_per_second

    def rate_get(self, compute: str) -> float | None:
        """The dense peak for a `compute` kind: fp32, bf16, fp8, fp4 (FLOP/s), int8 (OP/s)."""
        return {
            "fp32": self.fp32_flops,
            "bf16": self.bf16_flops,
            "fp8": self.fp8_flops,
            "int8": self.int8_ops,
            "fp4": self.fp4_flops,
        }[compute]


GPUS: dict[str, Gpu] = {
    g.id: g
    for g in (
        Gpu(
            id="a100-80gb-sxm",
            name="NVIDIA A100 80GB SXM",
            memory_bytes=80 * GIGA,
            memory_reported_mib=81_920,
            memory_kind="HBM2e",
            bandwidth_bytes_per_second=2_039 * GIGA,
            fp32_flops=19.5 * TERA,
            bf16_flops=312 * TERA,
            fp8_flops=None,
            int8_ops=624 * TERA,
            fp4_flops=None,
            interconnect="NVLink 3",
            interconnect_bytes_per_second=600 * GIGA,
            power_watts=400,
            price_per_hour_assumed=1.80,
            price_note=PRICE_NOTE,
            source="NVIDIA A100 Tensor Core GPU datasheet "
            "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf); "  # noqa: E501
            + MEMORY_SOURCE,
            architecture="Ampere",
            short_name="A100",
            l2_bytes=40 * MIB,
            l2_source="NVIDIA A100 Tensor Core GPU Architecture whitepaper: 40 MB of L2 "
            "(https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
            "nvidia-ampere-architecture-whitepaper.pdf)",
        ),
        Gpu(
            id="h100-sxm",
            name="NVIDIA H100 SXM",
            memory_bytes=80 * GIGA,
            memory_reported_mib=81_559,
            memory_kind="HBM3",
            bandwidth_bytes_per_second=3.35 * TERA,
            fp32_flops=67 * TERA,
            bf16_flops=989.5 * TERA,
            fp8_flops=1_979 * TERA,
            int8_ops=1_979 * TERA,
            fp4_flops=None,
            interconnect="NVLink 4",
            interconnect_bytes_per_second=900 * GIGA,
            power_watts=700,
            price_per_hour_assumed=2.50,
            price_note=PRICE_NOTE,
            source="NVIDIA H100 Tensor Core GPU datasheet "
            "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE + "; "
            + H100_CUDA_SOURCE,
            architecture="Hopper",
            short_name="H100 SXM",
            memory_cuda_gib=79.22,
            memory_cuda_source=H100_CUDA_SOURCE,
            l2_bytes=50 * MIB,
            l2_source="NVIDIA H100 Tensor Core GPU Architecture whitepaper: 50 MB of L2 on the "
            "H100 SXM5 (https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper); "
            "CUDA reports it as 52,428,800 bytes = 50 × 2²⁰ (a deviceQuery printout of an H100 "
            "80GB HBM3 kept in https://github.com/thamada/nvidia-smi/blob/main/nvsim/"
            "H100SXMx8_deviceQuery.py)",
        ),
        Gpu(
            id="h100-pcie",
            name="NVIDIA H100 PCIe",
            memory_bytes=80 * GIGA,
            memory_reported_mib=81_559,
            memory_kind="HBM2e",
            bandwidth_bytes_per_second=2.0 * TERA,
            fp32_flops=51 * TERA,
            bf16_flops=756.5 * TERA,
            fp8_flops=1_513 * TERA,
            int8_ops=1_513 * TERA,
            fp4_flops=None,
            interconnect="NVLink bridge",
            interconnect_bytes_per_second=600 * GIGA,
            power_watts=350,
            price_per_hour_assumed=2.00,
            price_note=PRICE_NOTE,
            source="NVIDIA H100 PCIe GPU Product Brief (PB-11133-001, 2022) and the 2022 H100 "
            "datasheet's PCIe column "
            "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE,
            architecture="Hopper",
            short_name="H100 PCIe",
            l2_bytes=50 * MIB,
            l2_source="Chips and Cheese, 'Nvidia's H100: Funny L2, and Tons of Bandwidth' (the "
            "H100 PCIe enables 114 SMs and 50 MB of L2; https://chipsandcheese.com/2023/07/02/"
            "nvidias-h100-funny-l2-and-tons-of-bandwidth/)",
        ),
        Gpu(
            id="h200",
            name="NVIDIA H200 SXM",
            memory_bytes=141 * GIGA,
            memory_reported_mib=143_771,
            memory_kind="HBM3e",
            bandwidth_bytes_per_second=4.8 * TERA,
            fp32_flops=67 * TERA,
            bf16_flops=989.5 * TERA,
            fp8_flops=1_979 * TERA,
            int8_ops=1_979 * TERA,
            fp4_flops=None,
            interconnect="NVLink 4",
            interconnect_bytes_per_second=900 * GIGA,
            power_watts=700,
            price_per_hour_assumed=3.50,
            price_note=PRICE_NOTE,
            source="NVIDIA H200 Tensor Core GPU datasheet "
            "(https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE,
            architecture="Hopper",
            short_name="H200",
        ),
        Gpu(
            id="b200",
            # Not labelled "HGX B200": the memory and bandwidth are the DGX B200 datasheet's
            # (8 TB/s a GPU); NVIDIA's HGX page gives 7.7 TB/s for the same GPU (review P0607-12).
            name="NVIDIA B200",
            memory_bytes=180 * GIGA,
            memory_reported_mib=183_359,
            memory_kind="HBM3e",
            bandwidth_bytes_per_second=8 * TERA,
            fp32_flops=75 * TERA,
            bf16_flops=2_250 * TERA,
            fp8_flops=4_500 * TERA,
            int8_ops=4_500 * TERA,
            fp4_flops=9_000 * TERA,
            interconnect="NVLink 5",
            interconnect_bytes_per_second=1_800 * GIGA,
            power_watts=1_000,
            price_per_hour_assumed=5.00,
            price_note=PRICE_NOTE,
            source="NVIDIA DGX B200 datasheet (eight B200s: 1,440 GB of HBM3e, 64 TB/s, so "
            "180 GB and 8 TB/s a GPU; https://www.nvidia.com/en-us/data-center/dgx-b200/) and "
            "NVIDIA HGX platform specifications, HGX B200 column (tensor rates for eight GPUs, "
            "NVLink 5 at 1.8 TB/s a GPU, and 7.7 TB/s of memory bandwidth a GPU where the DGX "
            "datasheet implies 8; https://www.nvidia.com/en-us/data-center/hgx/); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE,
            architecture="Blackwell",
            short_name="B200",
            l2_bytes=round(126.5 * MIB),
            l2_source="the L2 a shipping B200's driver reports, '126.50 MB' in the binary "
            "units the same printout uses for its 178.35 GB of memory (cudaDeviceProp, in "
            "pytorch/ao pull request 4002, https://github.com/pytorch/ao/pull/4002); Chips and "
            "Cheese measured 126 MB (https://chipsandcheese.com/p/"
            "nvidias-b200-keeping-the-cuda-juggernaut)",
            memory_announced_bytes=192 * GIGA,
            memory_announced_source="192 GB of HBM3e at the announcement (Glenn K. Lockwood, "
            "'B200' notes, https://glennklockwood.com/garden/processors/B200)",
            bandwidth_other_bytes_per_second=7.7 * TERA,
            bandwidth_other_said_by="the HGX specification page",
            bandwidth_other_source="NVIDIA HGX platform specifications, HGX B200 column: 7.7 TB/s "
            "of memory bandwidth a GPU (https://www.nvidia.com/en-us/data-center/hgx/); the "
            "NVIDIA Blackwell datasheet gives the same "
            "(https://nvdam.widen.net/s/wwnsxrhm2w/blackwell-datasheet-3384703)",
            driver_memory_bus_bits=7_680,
            driver_memory_clock_hz=3_996e6,
            driver_memory_source="a shipping B200's driver: a 7,680-bit memory bus "
            "(cudaDeviceProp) at a 3,996 MHz memory clock (nvidia-smi), in pytorch/ao pull "
            "request 4002 (https://github.com/pytorch/ao/pull/4002)",
        ),
        Gpu(
            id="l40s",
            name="NVIDIA L40S",
            memory_bytes=48 * GIGA,
            memory_reported_mib=46_068,
            memory_kind="GDDR6",
            bandwidth_bytes_per_second=864 * GIGA,
            fp32_flops=91.6 * TERA,
            bf16_flops=362.05 * TERA,
            fp8_flops=733 * TERA,
            int8_ops=733 * TERA,
            fp4_flops=None,
            interconnect="PCIe Gen4 x16 (no NVLink)",
            interconnect_bytes_per_second=64 * GIGA,
            power_watts=350,
            price_per_hour_assumed=1.00,
            price_note=PRICE_NOTE,
            source="NVIDIA L40S datasheet "
            "(https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE,
            architecture="Ada Lovelace",
            short_name="L40S",
        ),
        Gpu(
            id="l4",
            name="NVIDIA L4",
            memory_bytes=24 * GIGA,
            memory_reported_mib=23_034,
            memory_kind="GDDR6",
            bandwidth_bytes_per_second=300 * GIGA,
            fp32_flops=30.3 * TERA,
            bf16_flops=121 * TERA,
            fp8_flops=242.5 * TERA,
            int8_ops=242.5 * TERA,
            fp4_flops=None,
            interconnect="PCIe Gen4 x16 (no NVLink)",
            interconnect_bytes_per_second=64 * GIGA,
            power_watts=72,
            price_per_hour_assumed=0.70,
            price_note=PRICE_NOTE,
            source="NVIDIA L4 Tensor Core GPU datasheet "
            "(https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet); "
            "dense = half the 'with sparsity' figures; " + MEMORY_SOURCE,
            architecture="Ada Lovelace",
            short_name="L4",
            l2_bytes=48 * MIB,
            l2_source="48 MB of L2 on the L4 (AD104), as TechPowerUp's GPU database lists it, "
            "reproduced at https://fpsbench.com/compare/gpu/nvidia-l4-vs-nvidia-tesla-m40; "
            "NVIDIA's L4 datasheet does not state it",
        ),
        Gpu(
            id="mi300x",
            name="AMD Instinct MI300X",
            memory_bytes=192 * GIGA,
            memory_reported_mib=196_592,
            memory_kind="HBM3",
            bandwidth_bytes_per_second=5.3 * TERA,
            fp32_flops=163.4 * TERA,
            bf16_flops=1_307.4 * TERA,
            fp8_flops=2_614.9 * TERA,
            int8_ops=2_614.9 * TERA,
            fp4_flops=None,
            interconnect="Infinity Fabric",
            interconnect_bytes_per_second=896 * GIGA,
            interconnect_source="7 Infinity Fabric links a GPU (ROCm, 'AMD Instinct MI300 series "
            "microarchitecture': seven links form a fully connected 8-GPU system, "
            "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html) × 128 GB/s "
            "each, both directions together (AMD Instinct MI300X platform data sheet, "
            "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/"
            "amd-instinct-mi300x-platform-data-sheet.pdf) = 896 GB/s, all 7 links together",
            peer_link_bytes_per_second=128 * GIGA,
            peer_link_source="AMD ROCm blog, 'Understanding RCCL Bandwidth and xGMI Performance "
            "on AMD Instinct MI300X' (2025): each GPU is joined to each of its seven peers by its "
            "own xGMI (Infinity Fabric) link, rated 64 GB/s each way for a point-to-point "
            "transfer between two GPUs, about 48 GB/s usable after CRC and protocol overhead "
            "(https://rocm.blogs.amd.com/software-tools-optimization/mi300x-rccl-xgmi/"
            "README.html); 128 GB/s both ways per link: the MI300X platform data sheet",
            power_watts=750,
            price_per_hour_assumed=2.50,
            price_note=PRICE_NOTE,
            source="AMD Instinct MI300X accelerator data sheet "
            "(https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf); "  # noqa: E501
            "dense (non-sparse) peaks; " + MEMORY_SOURCE,
            architecture="CDNA 3",
            short_name="MI300X",
            vendor="AMD",
            matrix_units="Matrix Cores",
            matrix_unit_attributive="Matrix Core",
            vector_units="vector ALUs",
            units_source="AMD names its matrix units Matrix Cores (AMD lab notes, 'AMD matrix "
            "cores', https://gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-readme/; "
            "ROCm, 'AMD Instinct MI300 series microarchitecture', "
            "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html) and its plain "
            "vector units VALUs (ROCm Compute Profiler, 'Compute unit', "
            "https://rocm.docs.amd.com/projects/rocprofiler-compute/en/latest/conceptual/cdna/"
            "compute-unit.html)",
            l2_bytes=32 * MIB,
            l2_dies=8,
            l2_source="ROCm, 'AMD GPU specifications': MI300X L2 32 MiB, 4 per XCD; each XCD's "
            "CUs share their own 4 MB L2 ('AMD Instinct MI300 series microarchitecture') "
            "(https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html; "
            "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html)",
            shared_cache_bytes=256 * MIB,
            shared_cache_name="Infinity Cache",
            shared_cache_source="ROCm, 'AMD GPU specifications': MI300X L3 (AMD Infinity Cache) "
            "256 MiB (https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html)",
        ),
    )
}
