"""Regressions from a third strict read of problems 11, 13, 14, 16, 19, 24 and 25, each at the
input that showed a sentence wrong or misleading (the defaults were already right)."""


import re

import pytest

from problems.registry import PROBLEMS
from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db


def text(client, number: int, slug: str, query: str = "") -> str:
    """One section's visible text, whitespace collapsed, at `query` (prefixed fields)."""
    page = f"/pages/{PROBLEMS[number].page:02d}/"
    response = client.get(page + (f"?{query}" if query else ""))
    assert response.status_code == 200
    html = problem_html(response.content.decode(), number)
    return " ".join(text_of(section_html(html, number, slug)).split())


def test_p16_a_small_drop_on_long_prompts_is_not_blamed_on_the_lengths(client) -> None:
    """2,000-token prompts at 20,000 tokens/s take 100 ms against 100 ms of decode: a perfect
    cache saves up to 50% of the uncached cost. A 0.1-point drop adds only 0.0667%, which used to
    read "At these lengths the hit rate is not a lever … because decode, not prefill, takes most
    of each request's time". At 100-token prompts and 2,000-token answers (5 ms against 667 ms)
    the lengths really do make it irrelevant: at most 0.744%."""
    query = "p16-cost-hit_rate_drop=0.001"
    answer = text(client, 16, "answer", query)
    assert "At these lengths the hit rate is not a lever" not in answer
    assert "The hit rate is a direct lever here" in answer and "up to 50%" in answer
    worked = text(client, 16, "worked", query)
    assert "decode, not prefill, takes" not in worked
    assert "small because the drop is" in worked
    short = "p16-cost-prompt_tokens=100&p16-cost-output_tokens=2000"
    answer = text(client, 16, "answer", short)
    assert "At these lengths the hit rate is not a lever" in answer and "0.744%" in answer


def test_p19_many_expected_events_are_not_called_a_handful(client) -> None:
    """At 30% → 35% errors the normal formula asks 562 requests, which expect about 168 errors:
    the page said "only about 168 errors" and "With ten or so events, or fewer, a count is
    lumpy", and the model answer "with only about 168 errors expected I'd continuity-correct".
    The correction moves 562 to 582 (3.6%): a nudge, not a rescue."""
    query = ("p19-canary-error_rate=0.3&p19-canary-error_rate_regressed=0.35"
             "&p19-canary-p99_regression=1.02")
    worked = text(client, 19, "worked", query)
    assert "only about 168" not in worked and "about 168 errors on average" in worked
    assert "ten or so events" not in worked and "only nudges them, to 582 requests" in worked
    answer = text(client, 19, "answer", query)
    assert "only about 168" not in answer and "the continuity correction adds little" in answer
    # The defaults keep the handful: 8.31 errors and 5.5 requests above the p99.
    assert "only about 8.31 errors" in text(client, 19, "worked")


def test_p19_a_one_request_sample_reads_in_the_singular(client) -> None:
    """A 100× slowdown puts every candidate request above today's p99: one request settles it,
    which the page printed as "the larger: 1 requests"."""
    query = ("p19-canary-error_rate_regressed=1&p19-canary-p99_regression=100"
             "&p19-canary-canary_share=0.001&p19-canary-replicas=100000")
    worked = text(client, 19, "worked", query)
    assert "1 requests" not in worked and "the larger: 1 request (" in worked


def test_p19_a_half_share_canary_harms_more_users_before_a_decision(client) -> None:
    """At a 50% share the canary needs 3,234 requests against 1,806 at 1%, so a bad release
    costs 16 extra failures against 9: the trade-off said the harm was "about the same either
    way"."""
    tradeoffs = text(client, 19, "tradeoffs", "p19-canary-canary_share=0.5")
    assert "about the same either way" not in tradeoffs
    assert "16 extra failed requests against 9 at 1%" in tradeoffs
    assert "about the same either way" in text(client, 19, "tradeoffs")


def test_p14_an_overlapped_host_longer_than_the_step_does_not_read_full(client) -> None:
    """Overlapped, a 10 ms host against a 4.52 ms batch-1 step leaves the GPU idle 5.48 ms of
    every 10: nvidia-smi reads 45.2%. The model answer said "with the host overlapped nvidia-smi
    shows 100%"; at the defaults (3 ms, not overlapped) the hypothetical stays."""
    answer = text(client, 14, "answer", "p14-util-host_ms=10&p14-util-overlap=on")
    assert "with the host overlapped nvidia-smi shows" not in answer
    assert "so even overlapped it reads 45.2%" in answer
    assert "even overlapped" not in text(client, 14, "answer")


def test_p14_a_model_too_big_at_either_batch_is_flagged_at_both(client) -> None:
    """Llama 3.1 405B in BF16 (808 GB) fits one 24 GB L4 at no batch: the warning named only
    batch 64, as if batch 1 ran."""
    worked = text(client, 14, "worked", "p14-util-model=llama-3.1-405b&p14-util-gpu=l4")
    assert "At batch 1 and batch 64 these weights" in worked and "neither batch" in worked


def test_p14_a_per_sequence_cost_lost_in_rounding_is_not_printed_as_x_not_x(client) -> None:
    """Beside a 2.8 s step on an L4, 50 µs a sequence leaves the gain at 61.5× either way: the
    page said "the throughput gain over batch 1 is 61.5×, not 61.5×". Overlapped at 1 ms host,
    the per-sequence part hides behind the 6.98 ms step, and the page offered overlapping as the
    fix although it was already on."""
    worked = text(client, 14, "worked", "p14-util-model=llama-3.1-405b&p14-util-gpu=l4")
    assert "61.5×, not 61.5×" not in worked and "barely matters" in worked
    hidden = text(client, 14, "worked", "p14-util-overlap=on&p14-util-host_ms=1")
    assert "hides behind the GPU's 6.98 ms step" in hidden
    assert "overlapping the host with the GPU" not in hidden
    assert "48.7×, not 64×" in text(client, 14, "worked", "p14-util-host_ms=10&p14-util-overlap=on")


def test_p13_moe_experts_stay_memory_bound_where_the_page_said_all_weights_turn(client) -> None:
    """Mixtral 8x7B at batch 512 sends 512 × 2 ÷ 8 = 128 tokens to each expert, under the H100's
    BF16 ridge of 295: the MLP, most of the step, stays memory-bound. The page said "raise the
    batch into the hundreds and watch the weight groups turn compute-bound"."""
    worked = text(client, 13, "worked", "p13-breakdown-model=mixtral-8x7b")
    assert "watch the weight groups turn compute-bound" not in worked
    assert "while the MLP stays memory-bound (each expert multiplies only its share" in worked
    dense = text(client, 13, "worked")
    assert "the attention projections, the MLP and the LM head turn compute-bound" in dense


def test_p13_the_ten_kernel_layer_is_a_floor_for_moe_and_mla(client) -> None:
    """DeepSeek-V3's 61 layers were counted at 10 kernels each (613), the count of a dense GQA
    layer, with no word that its router, expert GEMMs and MLA projections launch more."""
    worked = text(client, 13, "worked", "p13-breakdown-model=deepseek-v3&p13-breakdown-dtype=fp8")
    assert "so read 613 as a floor" in worked and "MLA's low-rank" in worked
    assert "read 323 as a floor" not in text(client, 13, "worked")


def test_p13_an_fp16_model_does_not_compute_attention_in_bf16(client) -> None:
    worked = text(client, 13, "worked", "p13-breakdown-dtype=fp16")
    assert "attention computes in FP16" in worked and "computes in BF16" not in worked


def test_p13_a_bf16_head_beside_fp8_layers_multiplies_at_the_bf16_rate() -> None:
    """Llama 3 8B in FP8 on an H100 at batch 512: the BF16 head (525M parameters) reads 1.05 GB
    (0.313 ms) and does 5.38×10¹¹ FLOP. At the FP8 rate that was 0.272 ms and memory-bound; at
    the BF16 rate it really multiplies at, 0.544 ms and compute-bound."""
    from problems.arithmetic.utilization import decode_step_breakdown

    r = decode_step_breakdown(model="llama-3-8b", gpu="h100-sxm", batch=512,
                              context_tokens=1000, dtype="fp8")
    assert r["lm_head_bound"] == "compute"
    assert r["lm_head_seconds"] == pytest.approx(r["lm_head_flops"] / 989.4e12, rel=0.01)


def test_p11_int4_that_buys_no_speed_is_not_called_a_speed_gain(client) -> None:
    """DeepSeek-V3 on B200s: FP8 on 8 GPUs steps in 1.82 ms, INT4 on 4 in 1.87 ms, "about the
    same"; the answer said "The gain is partly speed and partly GPUs". course-lm at batch 256 on
    one H100 (KV 99.3% of the bytes): INT4 is about the same on the same GPU, and the answer
    said "Here the gain is all speed"."""
    moe = text(client, 11, "answer", "p11-formats-model=deepseek-v3&p11-formats-gpu=b200")
    assert "partly speed" not in moe
    assert "The gain is all GPUs: INT4 here keeps about the same token latency" in moe
    tiny = text(client, 11, "answer", "p11-formats-model=course-lm&p11-formats-batch=256")
    assert "gain is all speed" not in tiny and "Here INT4 buys nothing" in tiny
    assert "partly speed and partly GPUs" in text(client, 11, "answer")


P24_FP8_BASE = "p24-cost-dtype=fp8&p24-cost-kv_dtype=fp8&p24-cost-gpu=b200&p24-cost-tp=2"
P24_CAP_LOOSE = "p24-cost-batch_cap=100000&p24-cost-tpot_target_ms=20"


def test_p24_a_baseline_already_in_fp8_is_not_narrowed_again(client) -> None:
    """Llama 3.1 70B already in FP8 weights and KV on 2 × B200: the FP8 lever changes nothing.
    The page said "Narrower weights and KV do nothing here: it would not lower the cost per token
    here", the model answer still counted "Second, FP8 (E4M3) weights and KV cache … Those two
    together take 29.2% off" (all of it batching's), and the takeaway said "batching to the
    latency target and FP8 do most of the work"."""
    worked = text(client, 24, "worked", P24_FP8_BASE)
    assert "already runs FP8 (E4M3) weights and an FP8 (E4M3) KV cache" in worked
    assert "cost per token here" not in worked
    assert "batching to the latency target and FP8 do most of the work" not in worked
    assert "batching to the latency target (29.2% of the baseline)" in worked
    answer = text(client, 24, "answer", P24_FP8_BASE)
    assert "FP8 (E4M3) weights and KV cache: fewer bytes" not in answer
    assert "That takes 29.2% off" in answer and "Second, prefix caching" in answer


def test_p24_a_cap_that_does_not_bind_is_said_so(client) -> None:
    """With the engine cap at 100,000 and a 20 ms TPOT target the batch is 104, set by the
    latency target: lifting the cap does nothing, for that reason, and the answer must not open
    with "First, batch up to the latency target". Under FP8 the latency target holds the batch
    at 399 while 592 would fit; the page said "so 399 sequences fit"."""
    worked = text(client, 24, "worked", P24_CAP_LOOSE)
    assert "the batch is already 104, set by the latency target, not by the engine cap" in worked
    assert "so 399 sequences fit" not in worked
    assert "592 sequences would fit, but the latency target holds the batch at 399" in worked
    answer = text(client, 24, "answer", P24_CAP_LOOSE)
    assert "batch up to the latency target" not in answer
    assert "First, FP8 (E4M3) weights and KV cache" in answer and "That takes 58.4% off" in answer


def test_p24_speculation_that_pays_is_not_dismissed_as_no_cost_lever(client) -> None:
    """With acceptance 0.95 and 4 drafted tokens, speculation applies at the final batch of 514
    (1.04×), yet the answer said "not as a cost lever at full batch"."""
    query = P24_CAP_LOOSE + "&p24-cost-spec_alpha=0.95&p24-cost-spec_gamma=4"
    answer = text(client, 24, "answer", query)
    assert "not as a cost lever at full batch" not in answer
    assert "still pays at the batch reached here (1.04×)" in answer


def test_p25_decode_replicas_are_counted_as_worth_not_fractional_replicas(client) -> None:
    """"So the peak needs 7.87 decode replicas" is a fractional count of whole things (and
    "7.87×10⁻⁶ decode replicas" at one daily user); the whole count comes per region below."""
    worked = text(client, 25, "worked")
    assert "needs 7.87 decode replicas' worth" in worked
    assert not re.search(r"\d\.\d+ decode replicas[^']", worked)
    assert "That needs 7.87 decode replicas' worth" in text(client, 25, "answer")


def test_p25_a_latency_bound_batch_does_not_make_both_counts_equal(client) -> None:
    """At a 20 ms TPOT target the batch is 450 (latency) against 668 (memory): throughput asks
    8.82 replicas, KV memory 5.92. The answer said "counting it by throughput or by KV memory
    comes to the same", the worked answer "These are one formula", and the tornado note "because
    KV memory, not the target, limits the batch"."""
    query = "p25-fleet-tpot_target_ms=20"
    answer = text(client, 25, "answer", query)
    assert "comes to the same" not in answer
    assert "KV memory alone would ask only 5.92" in answer
    worked = text(client, 25, "worked", query)
    assert "These are one formula" not in worked
    assert "They differ because the batch, 450, is set by the latency target" in worked
    assert "your 20 ms target lies below it and does bind" in worked


def test_p25_full_utilisation_is_not_called_conservative(client) -> None:
    """At 100% utilisation the planned batch is the whole batch: "a replica run 100% busy
    carries a smaller batch than 668, whose step is shorter than 26.5 ms (26.5 ms)"."""
    worked = text(client, 25, "worked", "p25-fleet-utilisation=1")
    assert "a little conservative" not in worked
    assert "a little conservative" in text(client, 25, "worked")


def test_p25_a_fleet_without_a_spare_region_does_not_claim_failover(client) -> None:
    """Sized without surviving a region's loss (or with one region), the answer still said "On a
    region failure the survivors have the capacity"."""
    for query in ("p25-fleet-survive_region=off", "p25-fleet-regions=1"):
        answer = text(client, 25, "answer", query)
        assert "the survivors have the capacity" not in answer
    assert "the survivors have the capacity" in text(client, 25, "answer")


def test_p25_open_conversations_are_not_all_between_turns(client) -> None:
    """14,260 conversations are open at the peak (347 requests/s × (11.1 s + 30 s)); 3,844 of
    them are requests in flight, so about 10,417 wait between turns. The page called all 14,260
    "open between turns", and with no think time called the 3,844 in flight idle."""
    worked = text(client, 25, "worked")
    assert "about 10,417 of them idle while their user reads the answer" in worked
    assert "open between turns" not in worked
    none = text(client, 25, "worked", "p25-fleet-think_s=0")
    assert "no conversation waits between turns" in none


def test_p25_the_tornado_note_reads_at_the_learners_inputs(client) -> None:
    worked = text(client, 25, "worked", "p25-fleet-turns=8")
    assert "At the defaults" not in worked and "At these inputs" in worked


def test_p11_an_fp8_kv_cache_is_not_offered_as_the_next_step(client) -> None:
    """With the KV cache already in FP8 the model answer still said the cache "isn't touched
    unless I quantize it separately, to FP8 for instance"."""
    answer = text(client, 11, "answer", "p11-formats-batch=64&p11-formats-kv_dtype=fp8")
    assert "to FP8 for instance" not in answer
    assert "here it is already in FP8 (E4M3)" in answer
    assert "to FP8 for instance" in text(client, 11, "answer")


def test_p24_speculation_switched_off_keeps_its_figures_true(client) -> None:
    """With the speculation lever off, the worked answer said "at the batch reached by then it
    gives 1×, so it stays off" and the follow-up "to 1× at the larger batch": 1× was no
    computation at all. At the final batch of 730 speculation gives 0.871×."""
    worked = text(client, 24, "worked", "p24-cost-spec=off")
    assert "it gives 1×" not in worked and "its lever is switched off here" in worked
    followups = text(client, 24, "followups", "p24-cost-spec=off")
    assert "to 1× at the larger batch" not in followups
    assert "to 0.871× at the larger batch" in followups


def test_p24_no_lever_that_lowers_the_cost_is_said_plainly(client) -> None:
    off = "&".join(f"p24-cost-{name}=off" for name in (
        "batching", "fp8", "prefix", "right_gpu", "spec", "autoscale", "commit", "route",
        "cap_output", "disagg"))
    worked = text(client, 24, "worked", off)
    assert "none do the most work" not in worked and "no lever lowers the cost" in worked


def test_p25_single_turn_prompts_are_not_called_multi_turn(client) -> None:
    """One turn per session with a 20,000-token system prompt: prefill outgrows decode because
    the prompts are long, and the page said "long multi-turn prompts"."""
    worked = text(client, 25, "worked", "p25-fleet-turns=1&p25-fleet-system_tokens=20000")
    assert "multi-turn prompts" not in worked
    assert "long prompts make input the larger job" in worked


def test_p16_a_drop_to_no_hits_does_not_promise_a_larger_fall(client) -> None:
    """At a 10% hit rate a 10-point drop takes it to zero, adding 0.503% per request (2,000-token
    prompts, 5,700-token answers: a perfect cache saves up to 5%). The page said "That is small
    because the drop is … so a larger fall would show", though no larger fall is possible; at a
    50% hit rate a 5-point drop still reads that way (losing it all would add 2.56%)."""
    lengths = "p16-cost-prompt_tokens=2000&p16-cost-output_tokens=5700"
    worked = text(client, 16, "worked",
                  lengths + "&p16-cost-cache_hit_rate=0.1&p16-cost-hit_rate_drop=0.1")
    assert "a larger fall would show" not in worked
    assert "little is cached to lose: even a fall to no hits at all would add under 1%" in worked
    assert "up to 5%" in worked and "a higher hit rate would show" in worked
    worked = text(client, 16, "worked",
                  lengths + "&p16-cost-cache_hit_rate=0.5&p16-cost-hit_rate_drop=0.05")
    assert "small because the drop is" in worked and "a larger fall would show" in worked


def test_p19_the_few_events_warning_names_its_own_threshold(client) -> None:
    """At a 50% share the gates expect 14.2 errors and 9.26 slow requests: under the 20 events
    the page treats as few, yet it said "With ten or so events, or fewer", a bound 14.2 is not
    under. It names the threshold it tests."""
    worked = text(client, 19, "worked", "p19-canary-canary_share=0.5")
    assert "only about 14.2 errors" in worked
    assert "ten or so events" not in worked
    assert "With fewer than about 20 events expected, a count is lumpy" in worked


def test_p24_small_pricing_levers_are_not_called_comparable(client) -> None:
    """Autoscaling to 37% and a 2% discount remove 5.41% and 2% of what is left, against 54.4%
    for FP8; the takeaway called that "comparable to a technical lever's" and said they look
    small "only because they come after most of the cost is gone". With every technical lever
    off, autoscaling alone read "The pricing lever need no code"."""
    worked = text(client, 24, "worked",
                  "p24-cost-autoscale_utilisation=0.37&p24-cost-commit_discount=0.02")
    assert "comparable to a technical lever's" not in worked
    assert "only because they come after most of the cost is gone" not in worked
    assert ("they remove only a small share of what is left (autoscaling 5.41% and committed "
            "capacity 2%), against 54.4% for the largest technical lever") in worked
    off = "&".join(f"p24-cost-{name}=off" for name in (
        "batching", "fp8", "prefix", "right_gpu", "spec", "commit", "route", "cap_output",
        "disagg"))
    worked = text(client, 24, "worked", off)
    assert "The pricing lever needs no code, and at these inputs it is the only lever" in worked
    assert "comes after most of the cost is gone" not in worked
    worked = text(client, 24, "worked")
    assert ("comparable to a technical lever's (autoscaling 41.7% and committed capacity 30%); "
            "they look small in the waterfall only because they come after") in worked


def test_p25_one_turn_sessions_have_no_conversations_between_turns(client) -> None:
    """At one turn a session, 2,083 conversations sit idle while their user reads the answer, but
    none is "between turns": there is no next turn. The server still cannot tell, so their KV is
    counted; the sentence says why instead of "of them between turns"."""
    worked = text(client, 25, "worked", "p25-fleet-turns=1")
    assert "of them between turns" not in worked
    assert ("about 2,083 of them idle while their user reads the answer (with one turn a session "
            "none will send another, but the server cannot tell)") in worked
