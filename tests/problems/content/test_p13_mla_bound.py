"""Problem 13's MLA sentence follows the bound it has just computed (strict review of pages
06-07): with a BF16 cache on a B200 the page said "memory-bound" and "under the ridge", then
"That is why MLA's decode attention is compute-bound"."""

import pytest

from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db


def worked_text(client, query: str) -> str:
    response = client.get("/pages/07/?" + query)
    assert response.status_code == 200
    return text_of(section_html(problem_html(response.content.decode(), 13), 13, "worked"))


def test_bf16_cache_on_a_b200_is_called_memory_bound_throughout(client) -> None:
    """DeepSeek-V3, absorbed MLA: per layer and token each of 128 heads does 2 × 576 (scores
    against the latent and its RoPE key) + 2 × 512 (sum of the latent) = 2,176 FLOP, 278,528
    for the layer, against 576 × 2 B = 1,152 B of BF16 cache: 242 FLOP/B, 1.9 per head per
    byte. The B200's BF16 ridge is 2.25 PFLOP/s ÷ 8 TB/s = 281 FLOP/B: memory-bound. An FP8
    cache halves the bytes: 484 FLOP/B, over the ridge."""
    text = worked_text(client, "p13-breakdown-model=deepseek-v3&p13-breakdown-gpu=b200"
                               "&p13-breakdown-dtype=fp8&p13-breakdown-batch=1")
    assert "242 FLOP per byte against a ridge of 281 FLOP/B" in text
    assert "That is why MLA's decode attention is compute-bound" not in text
    assert "about 1.9 FLOPs per head per byte" in text
    assert ("but here it is still memory-bound: an FP8 cache, half the bytes for the same "
            "FLOPs, would lift it over the ridge") in text


def test_fp8_cache_on_an_h100_is_called_compute_bound(client) -> None:
    """The same model with an FP8 cache (576 B per layer and token) on an H100 SXM: 278,528 ÷
    576 = 484 FLOP/B, 3.8 per head per byte, above the BF16 ridge of 989.5 TFLOP/s ÷
    3.35 TB/s = 295 FLOP/B: compute-bound, and the page says so."""
    text = worked_text(client, "p13-breakdown-model=deepseek-v3&p13-breakdown-gpu=h100-sxm"
                               "&p13-breakdown-dtype=fp8&p13-breakdown-kv_dtype=fp8")
    assert "484 FLOP per byte against a ridge of 295 FLOP/B" in text
    assert "about 3.8 FLOPs per head per byte" in text
    assert "That is why MLA's decode attention is compute-bound here" in text
