"""Problem 11's sentence under the token-latency gain plot follows the plot (strict review of
pages 06-07): at the defaults the plot's lines dip below 1 and come back, which the old fixed
sentence ("watch the speedup shrink toward 1 ... past a format's largest batch its line stops")
contradicted."""

import pytest

from problems.content import p11
from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db


def worked_text(client, query: str = "") -> str:
    response = client.get("/pages/06/" + query)
    assert response.status_code == 200
    return text_of(section_html(problem_html(response.content.decode(), 11), 11, "worked"))


def test_defaults_name_the_dip_below_one_and_its_cause(client) -> None:
    """Llama 3 70B, H100 SXM, 1,000 tokens, BF16 KV. At 32 sequences the KV is 32 × 1,000 ×
    327,680 B = 10.5 GB. BF16 on TP 2 leaves each GPU 76.6 − 141/2 − 3.3 = 2.7 GB beside its
    weights and reserve, less than its 10.5/2 = 5.24 GB share of the KV, so it moves to TP 4;
    FP8 on TP 1 leaves 76.6 − 72.7 − 3.3 = 0.6 GB < 10.5 GB, on TP 2 76.6 − 36.4 − 3.3 =
    36.9 GB ≥ 5.24 GB (and ≥ 1.34 GB, its share of one 8,192-token sequence), so it stays on
    TP 2. Four GPUs read 149.5/4 = 37.4 GB
    each against two reading 81.4/2 = 40.7 GB: FP8's token is slower (gain 0.939, 1.06×), the
    plot's first point below 1."""
    shape = p11.gain_shape(*_defaults())
    assert shape["dip"]["batch_text"] == "32 sequences"
    assert shape["dip"]["name"] == "FP8 (E4M3)"
    assert shape["dip"]["slower_text"] == "1.06× slower"
    assert shape["dip"]["base_tp_text"] == "4 GPUs (TP 4)"
    assert shape["dip"]["tp_text"] == "2 GPUs (TP 2)"
    text = worked_text(client)
    assert "its line stops" not in text and "watch the speedup shrink toward 1" not in text
    assert ("at 32 sequences FP8 (E4M3) steps 1.06× slower than BF16 because BF16 has moved "
            "onto 4 GPUs (TP 4) while FP8 (E4M3) still fits 2 GPUs (TP 2)") in text


def test_no_dip_named_where_the_lines_stay_above_one(client) -> None:
    """Llama 3.1 8B on a B200 (about 173 GB usable): BF16 is 16.1 GB and one GPU holds 256
    sequences of 1,000 tokens (256 × 131,072 B = 33.6 GB), so every format and the baseline
    stay on 1 GPU at every batch of the plot and no point can drop below 1 from a move to more
    GPUs; the sentence names no dip and no stopped line."""
    query = "?p11-formats-model=llama-3.1-8b&p11-formats-gpu=b200"
    inputs, result = _defaults(model="llama-3.1-8b", gpu="b200")
    shape = p11.gain_shape(inputs, result)
    assert shape == {"stops": False, "dip": None, "jumps": False}
    text = worked_text(client, query)
    assert "slower token bought with fewer GPUs" not in text
    assert "a line stops" not in text.lower()
    # Every point is on 1 GPU, so the plot's lines do not jump either.
    assert "its lines are not smooth" not in text


def _defaults(**changes):
    inputs = {i.name: i.initial for i in p11.INPUTS}
    inputs.update(changes)
    return inputs, p11.quantization_formats(**inputs)


def test_no_deployment_blames_the_weights_when_they_are_the_cause(client) -> None:
    """Llama 3.1 405B on an L4: 90% of the 24.2 GB CUDA reports is 21.7 GB, less the 3.3 GB
    reserve leaves 18.4 GB a GPU, 148 GB on eight. The smallest format, INT4 (group 128), is
    401,650,696,192 × 4.16 bits ÷ 8 + 4,202,692,608 × 2 B = 217 GB, more than 148 GB: the
    weights rule every deployment out. The old sentence blamed the KV cache ("this batch's KV
    cache alone is 516 MB, more than eight of them hold beside any weights"), and 516 MB
    (1,000 tokens × 516,096 B) is not what eight L4s cannot hold."""
    text = worked_text(client, "?p11-formats-model=llama-3.1-405b&p11-formats-gpu=l4")
    assert "KV cache alone" not in text
    assert ("The weights alone rule it out: even the smallest format, INT4 (group 128) at "
            "217 GB, is more than 8 GPUs hold beside their runtime reserves (148 GB).") in text


def test_no_deployment_blames_the_kv_when_the_weights_fit(client) -> None:
    """Llama 3.1 405B on an L40S, 4 sequences of 100,000 tokens: usable 43.5 GB, so eight hold
    8 × (43.5 − 3.3) = 321 GB beside their reserves; INT4's 217 GB fit (27.1 GB a GPU, 13.1 GB
    free), FP8's 410 GB do not. The batch's KV is 4 × 100,000 × 516,096 B = 206 GB, 25.8 GB a
    GPU on eight, more than the 13.1 GB free: no deployment, because of the KV."""
    text = worked_text(client, "?p11-formats-model=llama-3.1-405b&p11-formats-gpu=l40s"
                               "&p11-formats-prompt_tokens=100000&p11-formats-batch=4")
    assert ("The smallest format's weights (INT4 (group 128), 217 GB) fit on 8 GPUs, but not "
            "beside the KV each GPU must be able to hold: its share of this batch's cache "
            "(206 GB in all)") in text


def test_fit_names_whose_memory_total_it_multiplies(client) -> None:
    """The catalog has CUDA's own total for the H100 SXM only (79.22 GiB = 85.1 GB; ×0.9 =
    76.6 GB). For the A100 80GB it holds nvidia-smi's 81,920 MiB = 80 GiB = 85.9 GB (×0.9 =
    77.3 GB), which the page called "the 85.9 GB = 80 GiB CUDA reports", and for the MI300X the
    196,592 MiB = 206 GB ROCm hands PyTorch."""
    h100 = worked_text(client)
    assert "the 85.1 GB = 79.2 GiB CUDA reports" in h100
    a100 = worked_text(client, "?p11-formats-gpu=a100-80gb-sxm")
    assert "85.9 GB = 80 GiB CUDA reports" not in a100
    assert "the 85.9 GB = 80 GiB the driver reports" in a100
    assert "not on record for this GPU, so the room below is slightly high" in a100
    mi300x = worked_text(client, "?p11-formats-gpu=mi300x")
    assert "the 206 GB = 192 GiB ROCm reports to PyTorch" in mi300x


def test_a_native_fp8_baseline_is_not_compared_with_itself(client) -> None:
    """DeepSeek-V3 ships FP8, so FP8 is the baseline: the decode pass names it once ("FP8
    (E4M3) needs 4 GPUs (TP 4) and steps in 3 ms" on MI300Xs with an FP8 cache: 673 GB of
    weights need 4 × (186 − 3.3) GB) and does not go on to "FP8 needs 4 GPUs (TP 4): tokens
    baseline, baseline GPUs"."""
    text = worked_text(client, "?p11-formats-model=deepseek-v3&p11-formats-gpu=mi300x"
                               "&p11-formats-kv_dtype=fp8")
    assert "FP8 (E4M3) needs 4 GPUs (TP 4) and steps in" in text
    assert "tokens baseline" not in text and "baseline GPUs" not in text


def test_an_fp8_cache_is_not_told_to_switch_to_fp8(client) -> None:
    """With --kv-cache-dtype fp8 already set (163,840 B a token for Llama 3 70B instead of
    327,680), "Switch the KV cache to FP8 and the gain comes back" asks for what is done; the
    page says the 8-bit cache is why the gain holds up."""
    text = worked_text(client, "?p11-formats-kv_dtype=fp8")
    assert "Switch the KV cache to FP8" not in text
    assert "The cache is already in 8 bits here" in text
    assert "Switch the KV cache to FP8 and much of the gain comes back" in worked_text(client)


def test_a_short_prefill_names_each_formats_bound(client) -> None:
    """Llama 3.1 8B on an H100 SXM, a 128-token prompt: BF16 reads 15 GB (4.49 ms) against
    2 × 128 × 7.07×10⁹ FLOP ≈ 1.81 ms of BF16 compute, memory-bound; FP8 halves the bytes
    (2.40 ms, memory-bound, 1.87×); INT4 reads about 4.7 GB (1.40 ms) but multiplies at the BF16
    rate (1.81 ms), compute-bound, 4.49 ÷ 1.81 = 2.48×. The page said all three "gain by their
    bytes"; INT4's and NVFP4's gain is capped by compute, not set by their bytes."""
    text = worked_text(client, "?p11-formats-model=llama-3.1-8b&p11-formats-batch=512"
                               "&p11-formats-prompt_tokens=128")
    assert "those gain by their bytes" not in text
    assert ("FP8 1.87× (memory-bound), INT4 2.48× (compute-bound), NVFP4 2.48× "
            "(compute-bound)") in text
