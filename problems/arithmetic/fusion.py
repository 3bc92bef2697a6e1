"""What kernel fusion saves in memory traffic: RMSNorm, and the residual add before it, as eager
PyTorch runs them (one kernel per operation, each reading its inputs from memory and writing its
output back) against one fused kernel (one read and one write per element).

"Eager" is Hugging Face's LlamaRMSNorm.forward, op by op, with N = tokens × hidden elements,
T = tokens (rows), H = hidden, b bytes per activation value and FP32 intermediates:

    kernel                              reads          writes
    1 cast up to FP32 (absent if b = 4) N·b            N·4
    2 square                            N·4            N·4
    3 mean over the row                 N·4            T·4
    4 + ε                               T·4            T·4
    5 rsqrt                             T·4            T·4
    6 multiply by rsqrt (broadcast)     N·4 + T·4      N·4
    7 cast down (absent if b = 4)       N·4            N·b
    8 multiply by the weight            N·b + H·b      N·b

so 28 + 4b bytes per element when b < 4 (36 in BF16), 28 in FP32, plus 24 per row and the weight
once. The fused kernel moves 2b per element plus the weight. The eager residual add reads two
tensors and writes one (3b per element); fused with the norm it reads two and writes two (the
new residual stream and the output), 4b. Both are memory-bound by far (a handful of FLOPs per
element), so the floors are bytes over bandwidth. They count traffic to DRAM: when an eager
kernel's FP32 input and output fit in the L2 cache together, the next kernel reads its input
from there, so real eager kernels can do better than this count; and at small token counts each
launch costs more than its bytes.
"""

from problems.arithmetic.catalog import Gpu, dtype_get, gpu_get
from problems.arithmetic.errors import ArithmeticInputError
from problems.arithmetic.inputs import count_check, fraction_check
from problems.arithmetic.steps import Result, Step
from problems.arithmetic.units import (
    bandwidth_format,
    bytes_short,
    count_format,
    flops_rate_format,
    number_format,
    seconds_format,
)
from problems.arithmetic.wording import count_phrase

RMSNORM_DTYPES = ("bf16", "fp16", "fp32")
HIDDEN_MAX = 65_536
TOKENS_MAX = 1_048_576
LAYERS_MAX = 200
# Bytes of one FP32 intermediate value.
FP32 = 4
# Per row, eager: the mean written (4), read and written by + ε (8), by rsqrt (8), read by the
# multiply (4).
ROW_BYTES = 24
# FLOPs per element of the norm: square, accumulate, scale by rstd, multiply by the weight; the
# residual add one more. Per-row work (ε, rsqrt) is left out.
NORM_FLOPS_PER_ELEMENT = 4
ADD_FLOPS_PER_ELEMENT = 1


def rmsnorm_traffic_model(*, tokens: int, hidden: int, value_bytes: int) -> dict[str, int]:
    """DRAM bytes and kernel counts of RMSNorm and of add + RMSNorm, eager (Hugging Face, op by
    op) and fused (bytes, kernels, FLOP). `value_bytes` is 2 (BF16, FP16) or 4 (FP32)."""
    if value_bytes not in (2, 4):
        raise ValueError("value_bytes must be 2 or 4")
    n = tokens * hidden
    b = value_bytes
    casts = b < FP32
    eager_per_element = (28 + 4 * b) if casts else 28
    weight = hidden * b
    norm_eager = eager_per_element * n + ROW_BYTES * tokens + weight
    norm_fused = 2 * b * n + weight
    add_eager_bytes = 3 * b * n
    return {
        "elements": n,
        "norm_eager_per_element": eager_per_element,
        "norm_eager_kernels": 8 if casts else 6,
        "norm_eager_bytes": norm_eager,
        "norm_fused_per_element": 2 * b,
        "norm_fused_kernels": 1,
        "norm_fused_bytes": norm_fused,
        "add_eager_per_element": 3 * b,
        "add_eager_bytes": add_eager_bytes + norm_eager,
        "add_eager_kernels": (8 if casts else 6) + 1,
        "add_fused_per_element": 4 * b,
        "add_fused_bytes": 4 * b * n + weight,
        "add_fused_kernels": 1,
        # The middle case: a fused norm after an eager add (two kernels).
        "add_split_bytes": add_eager_bytes + norm_fused,
        "add_split_kernels": 2,
        "weight_bytes": weight,
        "norm_flops": NORM_FLOPS_PER_ELEMENT * n,
        "add_flops": (NORM_FLOPS_PER_ELEMENT + ADD_FLOPS_PER_ELEMENT) * n,
    }


def intermediate_cache_fit(*, gpu: Gpu, elements: int) -> dict:
    """Whether the eager norm's FP32 intermediates stay in the on-chip cache the next kernel
    can read them back from, whichever compute units run it (`Gpu.reuse_cache`: the L2, or the
    MI300X's Infinity Cache, its L2 being private to each die). Each eager kernel reads one
    FP32 tensor (`elements` × 4 bytes) while it writes the next, so the pair must fit for the
    written one to be there when the next kernel starts: under a least-recently-used policy a
    kernel that streams 2 × S bytes through a cache of C < 2 × S leaves only part of its output
    behind, the oldest part first, and that is the part the next kernel reads first.

    Bytes of one tensor (`bytes`) and of the pair (`pair_bytes`); the cache's name and size;
    `fits` (the pair fits) and `alone_fits` (one tensor would), None where no public source
    gives that cache's size. Hand: 4,096 × 4,096 × 4 = 67,108,864 B = 64 MiB, a pair of 128
    MiB: over an H100's 50 MiB of L2 even alone; over a B200's 126.5 MiB as a pair though one
    alone fits; within an MI300X's 256 MiB Infinity Cache."""
    intermediate = elements * FP32
    pair = 2 * intermediate
    cache = gpu.reuse_cache
    if cache is None:
        return {"bytes": intermediate, "pair_bytes": pair, "cache_name": None,
                "cache_bytes": None, "fits": None, "alone_fits": None}
    name, size = cache
    return {"bytes": intermediate, "pair_bytes": pair, "cache_name": name, "cache_bytes": size,
            "fits": pair <= size, "alone_fits": intermediate <= size}


def _time(size: float, flops: float, *, bandwidth: float, rate: float) -> tuple[float, str]:
    memory, compute = size / bandwidth, flops / rate
    return max(memory, compute), "memory" if memory >= compute else "compute"


def rmsnorm_fusion(
    *,
    hidden_size: int = 4096,
    tokens: int = 4096,
    dtype: str = "bf16",
    gpu: str = "h100-sxm",
    layers: int = 32,
    bandwidth_efficiency: float = 1.0,
) -> Result:
    """Eager against fused RMSNorm (and add + RMSNorm): DRAM bytes, kernels, and time floors
    (bytes, seconds), per norm and over a forward pass of `layers` pre-norm layers (2·layers + 1
    norms, all but the first after a residual add).

    The norm's arithmetic is elementwise FP32 work on the GPU's vector units (CUDA cores, or
    AMD's vector ALUs), not matmuls on its matrix units, so its compute ceiling is the GPU's FP32
    rate; its intensity is far below that ridge.
    """
    if dtype not in RMSNORM_DTYPES:
        raise ArithmeticInputError(field="dtype", message="choose BF16, FP16 or FP32")
    d = dtype_get(dtype)
    g = gpu_get(gpu)
    hidden_size = count_check(hidden_size, field="hidden_size", minimum=16, maximum=HIDDEN_MAX)
    tokens = count_check(tokens, field="tokens", maximum=TOKENS_MAX)
    layers = count_check(layers, field="layers", maximum=LAYERS_MAX)
    bandwidth_efficiency = fraction_check(bandwidth_efficiency, field="bandwidth_efficiency")
    b = int(d.bytes)
    t = rmsnorm_traffic_model(tokens=tokens, hidden=hidden_size, value_bytes=b)
    bandwidth = g.bandwidth_bytes_per_second * bandwidth_efficiency
    rate = g.fp32_flops
    times = {
        key: _time(t[f"{key}_bytes"], t["add_flops" if key.startswith("add") else "norm_flops"],
                   bandwidth=bandwidth, rate=rate)
        for key in ("norm_eager", "norm_fused", "add_eager", "add_fused", "add_split")
    }
    norms = 2 * layers + 1
    adds = 2 * layers
    pass_eager = t["norm_eager_bytes"] + adds * t["add_eager_bytes"]
    pass_fused = t["norm_fused_bytes"] + adds * t["add_fused_bytes"]
    pass_eager_s = times["norm_eager"][0] + adds * times["add_eager"][0]
    pass_fused_s = times["norm_fused"][0] + adds * times["add_fused"][0]
    intensity = NORM_FLOPS_PER_ELEMENT / (2 * b)
    ridge = rate / g.bandwidth_bytes_per_second
    floor = bandwidth_efficiency >= 1
    kind = "floor" if floor else "time"
    n = t["elements"]
    casts = b < FP32
    eager_breakdown = (f"cast up {b}+4, square 4+4, mean 4, multiply 4+4, cast down 4+{b}, "
                       f"weight multiply {b}+{b}" if casts else
                       "square 4+4, mean 4, multiply 4+4, weight multiply 4+4")

    def when(key: str) -> str:
        return f"{kind} ({times[key][1]}-bound)"

    steps = (
        Step("Elements", f"{count_phrase(tokens, 'token')} × {hidden_size:,} hidden", n,
             "elements",
             number_format(n)),
        Step(f"Eager RMSNorm: {t['norm_eager_kernels']} kernels",
             f"{t['norm_eager_per_element']} B per element ({eager_breakdown}) × "
             f"{number_format(n)} + {ROW_BYTES} B per row × {tokens:,} + the weight "
             f"{hidden_size:,} × {b} B", t["norm_eager_bytes"], "B",
             bytes_short(t["norm_eager_bytes"])),
        Step("Fused RMSNorm: 1 kernel", f"{2 * b} B per element (one read, one write of {b} B) "
             f"× {number_format(n)} + the weight", t["norm_fused_bytes"], "B",
             bytes_short(t["norm_fused_bytes"])),
        Step("Eager ÷ fused, RMSNorm", f"{bytes_short(t['norm_eager_bytes'])} ÷ "
             f"{bytes_short(t['norm_fused_bytes'])}",
             t["norm_eager_bytes"] / t["norm_fused_bytes"], "×",
             f"{number_format(t['norm_eager_bytes'] / t['norm_fused_bytes'])}×"),
        Step(f"Eager add + RMSNorm: {t['add_eager_kernels']} kernels",
             f"the add reads two tensors and writes one, {3 * b} B per element × "
             f"{number_format(n)}, + eager RMSNorm", t["add_eager_bytes"], "B",
             bytes_short(t["add_eager_bytes"])),
        Step("Fused add + RMSNorm: 1 kernel", f"{4 * b} B per element (reads x and the residual, "
             "writes the new residual and the output) + the weight", t["add_fused_bytes"], "B",
             bytes_short(t["add_fused_bytes"])),
        Step("Eager ÷ fused, add + RMSNorm", f"{bytes_short(t['add_eager_bytes'])} ÷ "
             f"{bytes_short(t['add_fused_bytes'])}",
             t["add_eager_bytes"] / t["add_fused_bytes"], "×",
             f"{number_format(t['add_eager_bytes'] / t['add_fused_bytes'])}×"),
        Step("Intensity of the fused norm against the ridge",
             f"{NORM_FLOPS_PER_ELEMENT} FLOPs per element ÷ {2 * b} B, against "
             f"{flops_rate_format(rate)} FP32 ({g.vector_units}; no {g.matrix_units} in a norm) ÷ "
             f"{bandwidth_format(g.bandwidth_bytes_per_second)} = {number_format(ridge)} FLOP/B",
             intensity, "FLOP/B", f"{number_format(intensity)} FLOP/B"),
        Step(f"Eager RMSNorm {when('norm_eager')}", f"{bytes_short(t['norm_eager_bytes'])} ÷ "
             f"{bandwidth_format(bandwidth)}", times["norm_eager"][0], "s",
             seconds_format(times["norm_eager"][0])),
        Step(f"Fused RMSNorm {when('norm_fused')}", f"{bytes_short(t['norm_fused_bytes'])} ÷ "
             f"{bandwidth_format(bandwidth)}", times["norm_fused"][0], "s",
             seconds_format(times["norm_fused"][0])),
        Step(f"Eager add + RMSNorm {when('add_eager')}",
             f"{bytes_short(t['add_eager_bytes'])} ÷ {bandwidth_format(bandwidth)}",
             times["add_eager"][0], "s", seconds_format(times["add_eager"][0])),
        Step(f"Fused add + RMSNorm {when('add_fused')}",
             f"{bytes_short(t['add_fused_bytes'])} ÷ {bandwidth_format(bandwidth)}",
             times["add_fused"][0], "s", seconds_format(times["add_fused"][0])),
        Step(f"Eager add, then fused RMSNorm {when('add_split')}",
             f"({bytes_short(3 * b * t['elements'])} for the add + "
             f"{bytes_short(t['norm_fused_bytes'])} for the norm) ÷ "
             f"{bandwidth_format(bandwidth)}; {t['add_split_kernels']} kernels",
             times["add_split"][0], "s", seconds_format(times["add_split"][0])),
        Step(f"A forward pass, eager: {count_format(norms, 'norm')}",
             f"one plain norm + {adds:,} add-and-norms = {bytes_short(pass_eager)}",
             pass_eager_s, "s", seconds_format(pass_eager_s)),
        Step("A forward pass, fused", f"one plain norm + {adds:,} fused add-and-norms = "
             f"{bytes_short(pass_fused)}", pass_fused_s, "s", seconds_format(pass_fused_s)),
        Step("Saved per forward pass", f"{seconds_format(pass_eager_s)} − "
             f"{seconds_format(pass_fused_s)}", pass_eager_s - pass_fused_s, "s",
             seconds_format(pass_eager_s - pass_fused_s)),
    )
    return Result(values={
        **{k: v for k, v in t.items()},
        "value_bytes": b,
        "casts": casts,
        "norm_eager_seconds": times["norm_eager"][0],
        "norm_fused_seconds": times["norm_fused"][0],
        "add_eager_seconds": times["add_eager"][0],
        "add_fused_seconds": times["add_fused"][0],
        "add_split_seconds": times["add_split"][0],
        # What fusing the add adds on top of a fused norm: the saving grows by this share, and
        # the add-and-norm pair gets this much faster.
        "residual_extra_saving": (times["add_eager"][0] - times["add_fused"][0])
        / (times["add_eager"][0] - times["add_split"][0]) - 1,
        "residual_split_speedup": times["add_split"][0] / times["add_fused"][0],
        "norm_eager_bound": times["norm_eager"][1],
        "norm_fused_bound": times["norm_fused"][1],
        "add_eager_bound": times["add_eager"][1],
        "add_fused_bound": times["add_fused"][1],
        "norm_ratio": t["norm_eager_bytes"] / t["norm_fused_bytes"],
        "add_ratio": t["add_eager_bytes"] / t["add_fused_bytes"],
        "intensity_flops_per_byte": intensity,
        "ridge_flops_per_byte": ridge,
        "norms_per_pass": norms,
        "adds_per_pass": adds,
        "pass_eager_bytes": pass_eager,
        "pass_fused_bytes": pass_fused,
        "pass_eager_seconds": pass_eager_s,
        "pass_fused_seconds": pass_fused_s,
        "pass_saved_seconds": pass_eager_s - pass_fused_s,
        "bandwidth_bytes_per_second": bandwidth,
    }, steps=steps)
