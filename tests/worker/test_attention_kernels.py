"""The three attention implementations of problem 5's demo agree with a float64 reference, and
the tiled one holds memory that does not grow with the sequence."""

import pytest
import torch

from worker.attention_kernels import (
    IMPLEMENTATIONS,
    attention_tiled,
    peak_intermediate_bytes,
    tiled_source,
)


@pytest.mark.parametrize("n,tile", [(1, 4), (7, 4), (64, 16), (100, 32), (256, 64)])
def test_all_three_agree_with_a_float64_reference(n, tile) -> None:
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(3, n, 16, generator=g) for _ in range(3))
    reference = IMPLEMENTATIONS["naive"](q.double(), k.double(), v.double())
    for name, fn in IMPLEMENTATIONS.items():
        out = fn(q, k, v, tile=tile) if name == "tiled" else fn(q, k, v)
        assert out.shape == q.shape
        assert (out.double() - reference).abs().max().item() < 1e-5, name


def test_the_first_row_attends_only_to_itself() -> None:
    q, k, v = (torch.randn(2, 10, 8) for _ in range(3))
    assert torch.allclose(attention_tiled(q, k, v, tile=4)[:, 0], v[:, 0], atol=1e-6)


def test_naive_memory_grows_with_the_square_and_tiled_stays_flat() -> None:
    held = {}
    for n in (128, 256):
        q, k, v = (torch.randn(2, n, 16) for _ in range(3))
        held[n] = {name: peak_intermediate_bytes(fn, q, k, v)[1]
                   for name, fn in IMPLEMENTATIONS.items() if name != "sdpa"}
    # Scores and probabilities, FP32, 2 heads, plus the boolean mask: 2·N²·2·4 + N².
    assert held[128]["naive"] == 2 * 128 * 128 * 2 * 4 + 128 * 128
    assert held[256]["naive"] == 4 * held[128]["naive"]
    assert held[256]["tiled"] == held[128]["tiled"] < held[128]["naive"]


def test_the_page_shows_the_real_source() -> None:
    source = tiled_source()
    assert source.startswith("def attention_tiled(") and "m_new" in source
    assert "end of tiled attention" not in source
