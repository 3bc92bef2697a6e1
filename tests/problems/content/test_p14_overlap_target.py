"""Problem 14's "What 30% would take" and "What the bigger batch buys" at the inputs that
change their regime (strict review of pages 06-07): overlap on, and no host time at all."""

import pytest

from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db


def worked_text(client, query: str) -> str:
    response = client.get("/pages/07/?" + query)
    assert response.status_code == 200
    return text_of(section_html(problem_html(response.content.decode(), 14), 14, "worked"))


def test_overlapped_host_time_for_the_target_is_gpu_time_over_the_target(client) -> None:
    """Llama 3 8B on an H100 SXM, BF16: GPU time 4.52 ms at batch 1 (15.1 GB ÷ 3.35 TB/s) and
    6.98 ms at batch 64 (23.4 GB). Overlapped with 20 ms of host work a step lasts 20 ms and
    nvidia-smi reads 4.52 ÷ 20 = 22.6%, so reading 30% needs host = 4.52 ÷ 0.3 = 15.1 ms and
    6.98 ÷ 0.3 = 23.3 ms, not the non-overlapped 10.5 and 16.3 ms alone."""
    text = worked_text(client, "p14-util-overlap=on&p14-util-host_ms=20")
    assert "nvidia-smi now reads 22.6% and 34.9%" in text
    assert ("With the host overlapped, as set here, it would have to be longer still, 15.1 ms "
            "and 23.3 ms (GPU time ÷ 0.3)") in text
    off = worked_text(client, "p14-util-overlap=off")
    assert "With the host overlapped, as set here" not in off


def test_no_host_time_shares_no_host_cost(client) -> None:
    """Host 0 ms, no per-sequence part: steps are 4.52 and 6.98 ms, 221 against 9,163 tokens/s
    (64 ÷ 6.98 ms), 41.4× the throughput, all of it from reading the weights once; there is
    no fixed host cost to share."""
    text = worked_text(client, "p14-util-host_ms=0")
    assert "9,163 tokens/s against 221 tokens/s" in text
    assert "the fixed host cost is shared by more tokens" not in text
    assert "(with no host time set, that is the whole gain)" in text
