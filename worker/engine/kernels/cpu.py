"""Fused CPU kernels (`cpu_fused.c`), compiled on this machine and called through ctypes.

On a model as small as the course's, a decode step on the CPU is mostly overhead, not
arithmetic: each PyTorch op pays for dispatch and reads and writes its whole tensor, and a
layer's RMSNorm, RoPE, K/V writes, masked attention and SwiGLU are about twenty of them. And the
matrix multiplies themselves ran slowly: PyTorch's (MKL) at under 40% of what the course
machine's AMD cores allow with AVX-512, slower still at a few rows once the weights came from
L3. Here a layer is four matrix multiplies on weights packed in panels (each read as one
contiguous stream, with AVX-512 where the CPU has it) and four fused calls, and attention
reads only each sequence's real context (no padding, no mask): decodes from their slots,
prefill chunks from the pool's blocks. worker/engine/README.md has the
measurements.

The source is compiled once per machine with the system's C compiler (`cc -O3 -march=native
-fopenmp`, about a second) into `var/kernels/`, named by a hash of the source and of the flags
and CPU, so a changed file builds afresh, builds for other CPUs sharing the checkout stay, a
build made earlier loads without a compiler, and processes share the build. Without OpenMP it
builds single-threaded: a flag set whose flag the compiler named in refusing it is remembered
as `cpu_fused-<hash>.refused`, so later processes skip it (delete the file to try again); any
other failed compile is tried again by the next process, and a fallback build is logged as a
warning. The build loaded shows in the engine's stats (`cpu_kernels`) and the worker's
heartbeat. ENGINE_CPU_KERNELS_AVX512=0 builds the path of CPUs without AVX-512. Without a
compiler, or with ENGINE_CPU_KERNELS=0, `cpu_kernels()` is None and the model runs PyTorch's
ops, which stay the reference the tests hold these kernels to.
"""

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_fused.c")
# -ffast-math lets the compiler reorder sums and call the vectorised expf of glibc's libmvec;
# the kernels never see inf or NaN on purpose (softmax subtracts the row's maximum). Tried in
# order: a compiler without OpenMP (Apple's clang) or without -march=native still builds.
FLAG_SETS = [
    ["-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC"],
    ["-O3", "-march=native", "-ffast-math", "-fPIC"],
    ["-O3", "-ffast-math", "-fPIC"],
]
# The flags are for compiling only: the library is linked in a second command without them.
# Linked with -ffast-math, GCC before 13 adds crtfastmath.o, whose constructor turns on
# flush-to-zero for the whole process the moment the library loads, so PyTorch's own ops (the
# reference these kernels are held to) would start rounding subnormal floats to zero.
_LINK_ONLY = ["-fopenmp"]  # the runtime library, kept when compiling asked for it
_CACHE_DIR = Path(__file__).resolve().parents[3] / "var" / "kernels"

_lock = threading.Lock()
_loaded: "CpuKernels | None | bool" = False  # False: not tried yet


def cpu_kernels_wanted() -> bool:
    """ENGINE_CPU_KERNELS: auto (default) or 1 uses the kernels when they build; 0 never."""
    setting = os.environ.get("ENGINE_CPU_KERNELS", "auto").strip().lower()
    return setting not in ("0", "off", "false", "no")


def avx512_wanted() -> bool:
    """ENGINE_CPU_KERNELS_AVX512: auto (default) lets -march=native use AVX-512 where the CPU
    has it; 0 builds the 8-float-vector path (-mno-avx512f) that CPUs without it run, so it
    can be measured and tested on any machine."""
    setting = os.environ.get("ENGINE_CPU_KERNELS_AVX512", "auto").strip().lower()
    return setting not in ("0", "off", "false", "no")


def flag_sets() -> list[list[str]]:
    """FLAG_SETS as this process builds them (without AVX-512 when the setting says so)."""
    if avx512_wanted():
        return [list(flags) for flags in FLAG_SETS]
    return [[*flags, "-mno-avx512f"] if "-march=native" in flags else list(flags)
            for flags in FLAG_SETS]


_unavailable = ""  # why cpu_kernels() is None, when it is


def cpu_kernels() -> "CpuKernels | None":
    """The compiled kernels, built on first use in this process; None when unavailable."""
    global _loaded, _unavailable
    if not cpu_kernels_wanted():
        return None
    with _lock:
        if _loaded is False:
            try:
                _loaded = _load()
            except Exception as exc:  # noqa: BLE001  any failure leaves PyTorch's ops, once
                log.warning("CPU kernels unavailable, using PyTorch ops: %s", exc)
                _loaded, _unavailable = None, str(exc)[:200]
        return _loaded


def kernels_describe(kernels: "CpuKernels | None | bool") -> str:
    """Which build a model runs, for the engine's stats and the worker's heartbeat."""
    if isinstance(kernels, CpuKernels):
        return kernels.build
    if not cpu_kernels_wanted():
        return "off (ENGINE_CPU_KERNELS=0): PyTorch ops"
    if kernels is None:
        return f"unavailable ({_unavailable or 'not a CPU fp32 model'}): PyTorch ops"
    return "not loaded yet"


def _compiler() -> str:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")


def _compiler_version(cc: str) -> str:
    """The compiler's first line of --version; its name when it prints nothing (the key must
    not depend on a line that is not there)."""
    try:
        done = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return cc
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else cc


def _cpu_signature() -> str:
    """What -march=native depends on: the CPU's model and feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return os.uname().machine
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def _cache_dir() -> Path:
    """Where builds go: var/kernels/ in the checkout, or a temporary directory when that
    cannot be written (a read-only checkout)."""
    for cache in (_CACHE_DIR, Path(tempfile.gettempdir()) / "course-engine-kernels"):
        try:
            cache.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=cache)
        except OSError:
            continue
        os.close(fd)
        os.unlink(probe)
        return cache
    raise RuntimeError(f"cannot write a kernel build to {_CACHE_DIR} or the temporary directory")


def _flag_named(flags: list[str], fallback: list[str] | None, stderr: str) -> bool:
    """Whether a failed compile refused the flag set itself: the compiler's message names a
    flag that the next set drops (-fopenmp, -march=native). A compile that failed for any
    other reason (out of memory, a full disk, a killed process) is not remembered."""
    dropped = [f for f in flags if f not in (fallback or [])]
    return any(f in stderr or f.lstrip("-") in stderr for f in dropped)


def _build() -> Path:
    """The compiled library's path, built now unless this machine already has it.

    Named `cpu_fused-<source>-<flags and CPU>.so`: the key needs neither the compiler nor a
    compile, so a machine without a compiler loads a build made there before, and builds for
    other CPUs sharing the checkout stay (only builds of an older source are deleted)."""
    source = SOURCE.read_bytes()
    source_key = hashlib.sha256(source).hexdigest()[:10]
    cache = _cache_dir()
    sets = flag_sets()
    keys = [hashlib.sha256(b"\0".join([source, " ".join(flags).encode(),
                                        _cpu_signature().encode()])).hexdigest()[:12]
            for flags in sets]
    targets = [cache / f"cpu_fused-{source_key}-{key}.so" for key in keys]
    errors = []
    cc = None
    for i, (flags, target) in enumerate(zip(sets, targets, strict=True)):
        refused = target.with_suffix(".refused")  # the compiler named these flags as refused
        if target.exists():
            return target
        if refused.exists():
            errors.append(refused.read_text(errors="replace"))
            continue
        if cc is None:
            try:
                cc = _compiler()
            except RuntimeError:
                # No compiler now: a lesser build made earlier still beats PyTorch's ops.
                for later in targets[i + 1:]:
                    if later.exists():
                        return later
                raise
        # Built under a temporary name and renamed into place: processes that build at once
        # never load a half-written file.
        fd, partial = tempfile.mkstemp(suffix=".so", dir=cache)
        os.close(fd)
        obj = partial[: -len(".so")] + ".o"
        try:
            done = subprocess.run([cc, *flags, "-c", "-o", obj, str(SOURCE)],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                link = [f for f in flags if f in _LINK_ONLY]
                done = subprocess.run([cc, "-shared", *link, "-o", partial, obj, "-lm"],
                                      capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                os.replace(partial, target)
                for stale in [*cache.glob("cpu_fused-*.so"), *cache.glob("cpu_fused-*.refused")]:
                    if not stale.name.startswith(f"cpu_fused-{source_key}-"):
                        stale.unlink(missing_ok=True)  # a build of an older source
                return target
            error = f"{cc} {' '.join(flags)}: {done.stderr.strip()[-300:]}"
            errors.append(error)
            if _flag_named(flags, sets[i + 1] if i + 1 < len(sets) else None, done.stderr):
                # Remembered, so later processes (every worker and test process) go straight
                # to the next flag set instead of paying for a failing compile each time.
                refused.write_text(f"{_compiler_version(cc)}\n{error}")
        finally:
            for leftover in (partial, obj):
                if os.path.exists(leftover):
                    os.unlink(leftover)
    raise RuntimeError("; ".join(errors))


def _load() -> "CpuKernels":
    """Build (or find) the library and load it. Another process with another source may
    delete a build as stale between this one finding it and loading it: then build again.
    A build without the first flag set's OpenMP or -march=native is logged as a warning."""
    library = os.environ.get("ENGINE_CPU_KERNELS_LIBRARY")
    if library:
        # A build made elsewhere, loaded as it is: the AddressSanitizer test's
        # (tests/engine/test_kernels_asan.py).
        return CpuKernels(Path(library))
    path = _build()
    try:
        kernels = CpuKernels(path)
    except OSError:
        if path.exists():
            raise
        kernels = CpuKernels(_build())
    best = flag_sets()[0]
    if kernels.flags is not None and kernels.flags != best:
        missing = " ".join(f for f in best if f not in kernels.flags)
        log.warning("CPU kernels: a fallback build without %s is loaded (%s); it runs slower. "
                    "A refusal remembered in %s/*.refused is retried once that file is "
                    "deleted.", missing, kernels.build, path.parent)
    return kernels


def _flag_keys(path: Path) -> list[tuple[list[str], bool]]:
    """Each flag set of this process, and whether `path` is its build (by the key in its name)."""
    try:
        source = SOURCE.read_bytes()
    except OSError:
        return []
    out = []
    for flags in flag_sets():
        key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(),
                                          _cpu_signature().encode()])).hexdigest()[:12]
        out.append((flags, path.stem.endswith(f"-{key}")))
    return out


_P, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
# What a kernel's non-zero status means (KERNEL_* in cpu_fused.c). A bad index is found
# before anything is written; a failed allocation inside a thread is not, so decode attention
# may have written some tokens' K/V into their slots (the values the call was to write).
_FAILURES = {1: (IndexError, "an index (a token id, position, pool slot or block, slot row or "
                             "row) is out of range"),
             2: (MemoryError, "no memory for attention's scratch buffers"),
             3: (ValueError, "the heads do not fit: num_heads must be a multiple of "
                             "num_kv_heads, and head_dim even and above 0")}


def _check(status: int, kernel: str) -> None:
    if status:
        error, what = _FAILURES[status]
        raise error(f"{kernel}: {what}")


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


_F32, _I64 = torch.float32, torch.int64


def _need(kernel: str, name: str, t: object, dtype: torch.dtype, shape: tuple,
          *, rows_apart: bool = False) -> None:
    """Raise ValueError unless `t` is a CPU tensor of `dtype` and `shape` (None: any size),
    contiguous; with `rows_apart`, a 2-D tensor whose rows may lie further apart (stride(0) at
    least its width) but whose elements within a row are adjacent. The C reads raw pointers:
    anything else would read or write the wrong memory. (A few hundred nanoseconds a tensor,
    against the tens of microseconds of a kernel call.)"""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{kernel}: {name} must be a tensor, got {type(t).__name__}")
    if t.device.type != "cpu" or t.dtype != dtype:
        raise ValueError(f"{kernel}: {name} must be a {str(dtype)[6:]} CPU tensor, got "
                         f"{str(t.dtype)[6:]} on {t.device}")
    if t.dim() != len(shape) or any(want is not None and got != want
                                    for got, want in zip(t.shape, shape, strict=True)):
        wanted = ", ".join("any" if w is None else str(w) for w in shape)
        raise ValueError(f"{kernel}: {name} must have shape [{wanted}], got {list(t.shape)}")
    if rows_apart:
        if t.stride(1) != 1 or t.stride(0) < t.shape[1]:
            raise ValueError(f"{kernel}: {name}'s elements within a row must be adjacent")
    elif not t.is_contiguous():
        raise ValueError(f"{kernel}: {name} must be contiguous")


def _heads(kernel: str, num_heads: int, num_kv_heads: int, head_dim: int) -> int:
    """The width of one packed qkv row, after checking the heads (the C checks them too)."""
    if num_kv_heads < 1 or num_heads < 1 or num_heads % num_kv_heads or head_dim < 2 \
            or head_dim % 2:
        raise ValueError(f"{kernel}: {num_heads} heads over {num_kv_heads} KV heads of "
                         f"{head_dim} channels: num_heads must be a multiple of num_kv_heads "
                         "and head_dim even")
    return (num_heads + 2 * num_kv_heads) * head_dim


@dataclass
class PackedLinear:
    """A linear layer's weight [N, K] as gemm_packed reads it: panels of `panel` columns,
    [ceil(N / panel), K, panel], zero past N; the bias, if any, padded to match."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    out_features: int
    in_features: int


class CpuKernels:
    """Typed wrappers over the compiled functions. Callers pass contiguous fp32 CPU tensors
    (and int64 index tensors); see cpu_fused.c for each function's layout. `threads` is how
    many threads a kernel may split its work across (the caller's torch.get_num_threads())."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # The flag set this build was compiled with (None for a file not named by _build).
        self.flags = next((flags for flags, key in _flag_keys(path) if key), None)
        lib = ctypes.CDLL(str(path))
        lib.add_rmsnorm.argtypes = [_P, _P, _P, _P, _I, _I, _F, _P, _I]
        lib.rope_store.argtypes = [_P, _I, _I, _I, _I, _I, _P, _P, _I, _P, _P, _P, _I, _P]
        lib.decode_attention.argtypes = [_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _P, _P, _F, _P,
                                         _I]
        lib.silu_mul.argtypes = [_P, _I, _I, _P]
        lib.gemm_packed.argtypes = [_P, _I, _I, _I, _P, _I, _P, _P, _I, _I]
        lib.paged_attention.argtypes = [_P, _I, _I, _I, _I, _I, _P, _P, _I, _I, _P, _I, _P, _P,
                                        _P, _I, _F, _P, _I]
        lib.decode_layers.argtypes = [_I, _P, _P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _I, _I, _I,
                                      _F, _P, _P, _I, _P, _P, _I, _I, _I, _P, _P, _F, _I]
        lib.embed_packed.argtypes = [_P, _I, _I, _I, _P, _I, _P]
        lib.layer_args.restype = _I
        self.layer_args = lib.layer_args()  # the addresses decode_layers takes per layer
        for fn in (lib.silu_mul, lib.gemm_packed):
            fn.restype = None
        for fn in (lib.add_rmsnorm, lib.rope_store, lib.decode_attention, lib.paged_attention,
                   lib.decode_layers, lib.embed_packed):
            fn.restype = _I  # 0, or one of _FAILURES
        lib.gemm_panel_width.restype = _I
        self.panel = lib.gemm_panel_width()
        self._lib = lib
        # AVX-512 builds pack 32-column panels (two 16-float vectors), the others 16.
        parts = ["AVX-512" if self.panel == 32 else "no AVX-512"]
        if self.flags is not None:
            parts += ["OpenMP" if "-fopenmp" in self.flags else "single-threaded",
                      "-march=native" if "-march=native" in self.flags else "generic CPU"]
        self.build = f"C kernels ({', '.join(parts)}; {path.name})"

    def _run(self, name: str, *args: object) -> None:
        """Call a compiled function, raising what a non-zero status means (for a bad index,
        the call changed nothing); while a PyTorch profiler records, inside a range named
        `cpu_fused::<name>`, so a profile lists the kernels beside PyTorch's `aten::` ops."""
        if torch.autograd._profiler_enabled():
            with torch.profiler.record_function(f"cpu_fused::{name}"):
                _check(getattr(self._lib, name)(*args), name)
        else:
            _check(getattr(self._lib, name)(*args), name)

    def pack(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> PackedLinear:
        """`weight` [N, K] (and `bias` [N]) laid out for `linear`: a copy, the original is
        left as it is."""
        n, k = weight.shape
        panels = -(-n // self.panel)
        padded = torch.zeros(panels * self.panel, k)
        padded[:n] = weight.detach()
        packed = padded.view(panels, self.panel, k).transpose(1, 2).contiguous()
        if bias is not None:
            bias = torch.cat([bias.detach(), torch.zeros(panels * self.panel - n)])
        return PackedLinear(packed, bias, n, k)

    def linear(self, x: torch.Tensor, w: PackedLinear, threads: int) -> torch.Tensor:
        """x [M, K] @ W^T (+ bias): what F.linear computes, summed in a fixed order."""
        if isinstance(x, torch.Tensor) and x.dim() == 2 and x.stride(-1) != 1:
            x = x.contiguous()
        _need("linear", "x", x, _F32, (None, w.in_features), rows_apart=True)
        panels = -(-w.out_features // self.panel)
        _need("linear", "weight", w.weight, _F32, (panels, w.in_features, self.panel))
        if w.bias is not None:
            _need("linear", "bias", w.bias, _F32, (panels * self.panel,))
        out = torch.empty(x.shape[0], w.out_features)
        self._run("gemm_packed", x.data_ptr(), x.shape[0], w.in_features, x.stride(0),
                  w.weight.data_ptr(), w.out_features, _ptr(w.bias), out.data_ptr(),
                  w.out_features, threads)
        return out

    def embed_packed(self, w: PackedLinear, ids: torch.Tensor) -> torch.Tensor:
        """The rows `ids` [n] of the matrix `w` packs ([out_features, in_features]): what
        F.embedding reads from a tied embedding table, once only the LM head's packed copy
        of it is kept. Raises IndexError for an id outside [0, out_features)."""
        panels = -(-w.out_features // self.panel)
        _need("embed_packed", "weight", w.weight, _F32, (panels, w.in_features, self.panel))
        _need("embed_packed", "ids", ids, _I64, (None,))
        out = torch.empty(ids.shape[0], w.in_features)
        self._run("embed_packed", w.weight.data_ptr(), w.in_features, self.panel,
                  w.out_features, ids.data_ptr(), ids.shape[0], out.data_ptr())
        return out

    def add_rmsnorm(self, x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor,
                    eps: float, select: torch.Tensor | None = None) -> torch.Tensor:
        """x += delta in place (when given), then RMSNorm of x's rows (or of `select`'s)."""
        _need("add_rmsnorm", "x", x, _F32, (None, None))
        rows, dim = x.shape
        if delta is not None:
            _need("add_rmsnorm", "delta", delta, _F32, (rows, dim))
        _need("add_rmsnorm", "weight", weight, _F32, (dim,))
        if select is not None:
            _need("add_rmsnorm", "select", select, _I64, (None,))
        n = rows if select is None else len(select)
        out = torch.empty(n, dim)
        self._run("add_rmsnorm", x.data_ptr(), _ptr(delta), weight.data_ptr(), out.data_ptr(),
                  rows, dim, eps, _ptr(select), n)
        return out

    def rope_store(self, qkv: torch.Tensor, *, num_heads: int, num_kv_heads: int, head_dim: int,
                   cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                   pool_k: torch.Tensor, pool_v: torch.Tensor, slots: torch.Tensor) -> None:
        """RoPE on qkv's q and k heads in place, then K and V into the pool at `slots`."""
        width = _heads("rope_store", num_heads, num_kv_heads, head_dim)
        _need("rope_store", "qkv", qkv, _F32, (None, None), rows_apart=True)
        if qkv.shape[1] < width:
            raise ValueError(f"rope_store: qkv rows must hold {width} floats (q, k and v "
                             f"heads), got {qkv.shape[1]}")
        tokens = qkv.shape[0]
        _need("rope_store", "cos", cos, _F32, (None, head_dim))
        _need("rope_store", "sin", sin, _F32, tuple(cos.shape))
        _need("rope_store", "positions", positions, _I64, (tokens,))
        _need("rope_store", "slots", slots, _I64, (tokens,))
        _need("rope_store", "pool_k", pool_k, _F32, (None, None, num_kv_heads, head_dim))
        _need("rope_store", "pool_v", pool_v, _F32, tuple(pool_k.shape))
        self._run("rope_store", qkv.data_ptr(), qkv.shape[0], qkv.stride(0), num_heads,
                  num_kv_heads, head_dim, cos.data_ptr(), sin.data_ptr(), cos.shape[0],
                  positions.data_ptr(), pool_k.data_ptr(), pool_v.data_ptr(),
                  pool_k.shape[0] * pool_k.shape[1], slots.data_ptr())

    def decode_attention(self, qkv: torch.Tensor, *, num_heads: int, num_kv_heads: int,
                         head_dim: int, keys: torch.Tensor, values: torch.Tensor,
                         rows: torch.Tensor, positions: torch.Tensor, scale: float,
                         threads: int) -> torch.Tensor:
        """Each qkv row's new K/V into its slot row at its position, then its attention over
        positions 0 .. position of that row: [tokens, num_heads * head_dim]. Slot capacity
        (values.shape[2]) should be a multiple of 32 (whole vector tiles; any capacity is
        read within bounds). Raises IndexError for a row or position outside the buffers."""
        width = _heads("decode_attention", num_heads, num_kv_heads, head_dim)
        _need("decode_attention", "qkv", qkv, _F32, (None, None), rows_apart=True)
        if qkv.shape[1] < width:
            raise ValueError(f"decode_attention: qkv rows must hold {width} floats (q, k and "
                             f"v heads), got {qkv.shape[1]}")
        _need("decode_attention", "keys", keys, _F32, (None, num_kv_heads, head_dim, None))
        n_rows, capacity = keys.shape[0], keys.shape[3]
        _need("decode_attention", "values", values, _F32,
              (n_rows, num_kv_heads, capacity, head_dim))
        _need("decode_attention", "rows", rows, _I64, (qkv.shape[0],))
        _need("decode_attention", "positions", positions, _I64, (qkv.shape[0],))
        out = torch.empty(qkv.shape[0], num_heads * head_dim)
        self._run("decode_attention", qkv.data_ptr(), qkv.shape[0], qkv.stride(0), num_heads,
                  num_kv_heads, head_dim, keys.data_ptr(), values.data_ptr(), values.shape[0],
                  values.shape[2], rows.data_ptr(), positions.data_ptr(), scale,
                  out.data_ptr(), threads)
        return out

    def paged_attention(self, qkv: torch.Tensor, *, num_heads: int, num_kv_heads: int,
                        head_dim: int, pool_k: torch.Tensor, pool_v: torch.Tensor,
                        block_tables: torch.Tensor, offsets: torch.Tensor,
                        query_lens: torch.Tensor, starts: torch.Tensor, scale: float,
                        threads: int) -> torch.Tensor:
        """Causal attention for sequences with several queries each, over the paged pool:
        sequence s's queries are qkv rows offsets[s] .. + query_lens[s], at positions
        starts[s] ..; block_tables [S, max_blocks]. Returns [rows of qkv, heads * head_dim].
        The sequences' rows must follow one another and cover qkv's rows (offsets[0] = 0,
        each next offset the last plus its queries), else IndexError, as for a block id
        outside the pool or a context longer than the table."""
        width = _heads("paged_attention", num_heads, num_kv_heads, head_dim)
        _need("paged_attention", "qkv", qkv, _F32, (None, None), rows_apart=True)
        if qkv.shape[1] < width:
            raise ValueError(f"paged_attention: qkv rows must hold {width} floats (q, k and v "
                             f"heads), got {qkv.shape[1]}")
        _need("paged_attention", "starts", starts, _I64, (None,))
        num_seqs = len(starts)
        for name, index in (("offsets", offsets), ("query_lens", query_lens)):
            _need("paged_attention", name, index, _I64, (num_seqs,))
        _need("paged_attention", "block_tables", block_tables, _I64, (num_seqs, None))
        _need("paged_attention", "pool_k", pool_k, _F32, (None, None, num_kv_heads, head_dim))
        _need("paged_attention", "pool_v", pool_v, _F32, tuple(pool_k.shape))
        out = torch.empty(qkv.shape[0], num_heads * head_dim)
        self._run("paged_attention", qkv.data_ptr(), qkv.shape[0], qkv.stride(0), num_heads,
                  num_kv_heads, head_dim, pool_k.data_ptr(), pool_v.data_ptr(),
                  pool_k.shape[0], pool_k.shape[1], block_tables.data_ptr(),
                  block_tables.shape[1], offsets.data_ptr(), query_lens.data_ptr(),
                  starts.data_ptr(), num_seqs, scale, out.data_ptr(), threads)
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """silu(gate) * up for gate_up [rows, 2 * inter] (gate, then up): [rows, inter]."""
        _need("silu_mul", "gate_up", gate_up, _F32, (None, None))
        rows, width = gate_up.shape
        if width % 2:
            raise ValueError(f"silu_mul: gate_up's width must be even (gate, then up), got "
                             f"{width}")
        out = torch.empty(rows, width // 2)
        self._run("silu_mul", gate_up.data_ptr(), rows, width // 2, out.data_ptr())
        return out
