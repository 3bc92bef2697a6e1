"""The Triton RMSNorm against the engine's PyTorch RMSNorm (and Hugging Face's op-by-op code):
every dtype, hidden sizes that are and are not powers of two, one row and many, the fused
residual add, strided input, bad shapes; then the engine with the kernel switched on gives
the same greedy tokens as without it."""

import os

import pytest
import torch
import triton
import triton.language as tl

from worker.engine.kernels import triton_mode
from worker.engine.kernels.parity import rmsnorm_hf, rmsnorm_parity, rmsnorm_tolerance
from worker.engine.kernels.rmsnorm import rmsnorm, row_start
from worker.engine.layers.norm import RMSNorm

MODE = triton_mode()
DEVICE = "cuda" if MODE == "compiled" else "cpu"
SHAPES = [(1, 64), (3, 100), (2, 3, 4096), (17, 896), (4, 5)]


def tol(dtype: torch.dtype) -> dict:
    return rmsnorm_tolerance(dtype=dtype, mode=MODE)


def engine_norm(weight: torch.Tensor, eps: float) -> RMSNorm:
    norm = RMSNorm(weight.shape[0], eps).to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm


def test_the_mode_is_known() -> None:
    assert MODE in ("compiled", "interpreter")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_residual", [False, True])
def test_parity_with_the_engines_pytorch_rmsnorm(dtype, shape, with_residual) -> None:
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 3).to(dtype).to(DEVICE)
    w = (torch.randn(shape[-1], generator=g) * 0.2 + 1).to(dtype).to(DEVICE)
    norm = engine_norm(w, 1e-5)
    with torch.no_grad():
        if with_residual:
            r = torch.randn(shape, generator=g).to(dtype).to(DEVICE)
            y, s = rmsnorm(x, w, 1e-5, residual=r)
            torch.testing.assert_close(s, x + r, **tol(dtype))
            torch.testing.assert_close(y, norm.forward_eager(x + r), **tol(dtype))
            # The engine's eager path and Hugging Face's op-by-op code round alike.
            torch.testing.assert_close(y, rmsnorm_hf(x + r, w, 1e-5), **tol(dtype))
        else:
            y = rmsnorm(x, w, 1e-5)
            torch.testing.assert_close(y, norm.forward_eager(x), **tol(dtype))
            torch.testing.assert_close(y, rmsnorm_hf(x, w, 1e-5), **tol(dtype))
    assert y.shape == x.shape and y.dtype == dtype


def test_the_residual_sum_is_exact_in_fp32() -> None:
    g = torch.Generator().manual_seed(1)
    x, r = torch.randn(8, 896, generator=g), torch.randn(8, 896, generator=g)
    x, r = x.to(DEVICE), r.to(DEVICE)
    assert torch.equal(rmsnorm(x, torch.ones(896, device=DEVICE), 1e-6, residual=r)[1], x + r)


def test_strided_input_and_no_rows() -> None:
    x = torch.randn(64, 8, device=DEVICE).t()  # columns not contiguous
    w = torch.rand(64, device=DEVICE) + 0.5
    torch.testing.assert_close(rmsnorm(x, w, 1e-6), rmsnorm_hf(x, w, 1e-6))
    empty = rmsnorm(torch.empty(0, 32, device=DEVICE), torch.ones(32, device=DEVICE), 1e-6)
    assert empty.shape == (0, 32)


def test_a_row_of_zeros_stays_zero() -> None:
    """ε inside the root keeps the division finite."""
    y = rmsnorm(torch.zeros(2, 16, device=DEVICE), torch.ones(16, device=DEVICE), 1e-6)
    assert torch.equal(y, torch.zeros(2, 16, device=DEVICE))


def test_the_mean_divides_by_the_real_width() -> None:
    """Hidden 5 in a block of 8: a row of ones has RMS 1 (dividing by 8 would give √(8/5))."""
    y = rmsnorm(torch.ones(1, 5, device=DEVICE), torch.ones(5, device=DEVICE), 0.0)
    torch.testing.assert_close(y, torch.ones(1, 5, device=DEVICE))


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="weight"):
        rmsnorm(torch.randn(2, 8), torch.ones(7), 1e-6)
    with pytest.raises(ValueError, match="residual"):
        rmsnorm(torch.randn(2, 8), torch.ones(8), 1e-6, residual=torch.randn(2, 7))
    with pytest.raises(ValueError, match="above 16,384"):
        rmsnorm(torch.randn(1, 16_385), torch.ones(16_385), 1e-6)
    with pytest.raises(ValueError, match="above 32,768"):
        rmsnorm(torch.randn(1, 32_769).bfloat16(), torch.ones(32_769).bfloat16(), 1e-6)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_the_demos_parity_check_passes_and_reports_ulps(dtype) -> None:
    result = rmsnorm_parity(tokens=7, hidden=96, dtype=dtype, residual=True, device=DEVICE)
    assert result["passed"] and result["mode"] == MODE
    errors = result["kernel_vs_engine"]
    assert 0 <= errors["max_ulps"] <= 8 and errors["max_abs"] >= 0
    # Against FP64, the reference itself is off by about half an ulp at most per rounding.
    assert result["engine_vs_fp64"]["max_ulps"] <= 4


def test_the_engine_gives_the_same_tokens_with_the_kernel(tiny_models, monkeypatch) -> None:
    """ENGINE_TRITON=force puts the kernel in every RMSNorm of the model, wherever Triton runs;
    greedy tokens and prompt logits stay those of the PyTorch path. (On a CPU the fused C
    kernels, kernels/cpu.py, would do the norms themselves: they are turned off here.)"""
    from worker.engine import Engine, SamplingParams
    from worker.engine.model_runner import BatchEntry

    monkeypatch.setenv("ENGINE_CPU_KERNELS", "0")

    prompts = [[5, 9, 11, 200, 17, 3, 44, 90], [7, 7, 8]]
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    outputs, logits = {}, {}
    for setting in ("0", "force"):
        monkeypatch.setenv("ENGINE_TRITON", setting)
        engine = Engine.from_pretrained(tiny_models["llama"], num_kv_blocks=16,
                                        device=DEVICE)
        outputs[setting] = [o.token_ids for o in engine.generate(prompts, params)]
        logits[setting] = engine.runner.execute(
            [BatchEntry(prompts[0], 0, list(range(8)), len(prompts[0]))])
        norms = [m for m in engine.runner.model.modules() if isinstance(m, RMSNorm)]
        assert {m.use_triton for m in norms} == {setting == "force"}
        if setting == "force":
            # Every norm after the first layer's input norm got the residual: the kernel's
            # HAS_RESIDUAL path did the adds (review P0607-19).
            fused = []
            for m in norms:
                kernel = m._kernel

                def recording(x, w, eps, residual=None,  # noqa: ANN001, ANN202
                              kernel=kernel, fused=fused):
                    fused.append(residual is not None)
                    return kernel(x, w, eps) if residual is None else kernel(
                        x, w, eps, residual=residual)

                m._kernel = recording
            engine.runner.execute([BatchEntry(prompts[1], 0, list(range(8)), 3)])
            assert fused.count(False) == 1 and fused.count(True) == len(norms) - 1
    assert outputs["0"] == outputs["force"]
    torch.testing.assert_close(logits["force"], logits["0"], rtol=1e-4, atol=1e-5)
    assert os.environ["ENGINE_TRITON"] == "force"


@triton.jit
def _row_start_probe(out_ptr, row, row_stride):
    """Stores the offset the kernel computes for `row`, and the same product in int32, the way
    the kernel computed it before (review P0607-20)."""
    tl.store(out_ptr, row_start(row, row_stride))
    tl.store(out_ptr + 1, (row * row_stride).to(tl.int64))


@pytest.mark.skipif(MODE != "interpreter", reason="probes the interpreter's integer types")
def test_row_offsets_past_two_to_the_31_do_not_wrap() -> None:
    """A 128K-token prefill of a 16,384-wide model (Llama 3.1 405B): row 131,072 starts at
    131,072 × 16,384 = 2,147,483,648 = 2³¹ elements, one past int32's largest value. In int32
    the product wraps to −2,147,483,648; the kernel's 64-bit `row_start` gives 2³¹. Row 131,071
    starts at 2³¹ − 16,384 = 2,147,467,264 either way. (Allocating the 8 GiB tensor itself is
    not needed: the offset is all that differs.)"""
    out = torch.zeros(2, dtype=torch.int64)
    _row_start_probe[(1,)](out, 131_072, 16_384)
    assert out.tolist() == [2**31, -(2**31)]
    _row_start_probe[(1,)](out, 131_071, 16_384)
    assert out.tolist() == [2**31 - 16_384, 2**31 - 16_384]


def test_a_weight_the_kernel_would_misread_is_refused() -> None:
    """The kernel reads the weight as `weight_ptr + cols`: a strided view (every other element
    of a 128-wide tensor, stride 2) would read the wrong values, so it is refused, as are an
    integer input and a weight of another dtype the kernel does not take."""
    x = torch.randn(2, 64, device=DEVICE)
    strided = torch.randn(128, device=DEVICE)[::2]
    with pytest.raises(ValueError, match="contiguous"):
        rmsnorm(x, strided, 1e-5)
    with pytest.raises(ValueError, match="x is torch.int64"):
        rmsnorm(torch.ones(2, 64, dtype=torch.int64, device=DEVICE), torch.ones(64), 1e-5)
    with pytest.raises(ValueError, match="weight is torch.float64"):
        rmsnorm(x, torch.ones(64, dtype=torch.float64, device=DEVICE), 1e-5)
