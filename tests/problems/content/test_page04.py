"""Page 04 (problems 8 and 22) through Django's test client: every section written, the figures
equal to the JSON API's for the same inputs, inputs that change them, hints hidden, titled SVGs,
no figure typed into the templates, sources listed, the live demos embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import flops_format, percent_format, seconds_format
from problems.content import p08, p22
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/04/"


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def api_get(client, path: str, **params) -> dict:
    response = client.get(f"/api/calc/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def section_text(content: str, number: int, slug: str) -> str:
    return text_of(section_html(problem_html(content, number), number, slug))


@pytest.mark.parametrize("number", [8, 22])
def test_all_nine_sections_are_written(client, number: int) -> None:
    problem = problem_html(page_get(client), number)
    for slug, heading in SECTIONS:
        section = section_html(problem, number, slug)
        assert heading in section
        assert "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


@pytest.mark.parametrize("number", [8, 22])
def test_four_follow_ups_with_hidden_hints_and_four_mistakes(client, number: int) -> None:
    problem = problem_html(page_get(client), number)
    followups = section_html(problem, number, "followups")
    questions = re.findall(r"<dt>", followups)
    hints = re.findall(r"<details><summary>Hint</summary>.*?</details>", followups, flags=re.S)
    assert len(questions) >= 4 and len(hints) == len(questions)
    assert len(re.findall(r"<li>", section_html(problem, number, "mistakes"))) >= 4


@pytest.mark.parametrize("number", [8, 22])
def test_the_diagram_is_an_accessible_svg(client, number: int) -> None:
    concepts = section_html(problem_html(page_get(client), number), number, "concepts")
    svg = re.search(r"<svg\b[^>]*>.*?</svg>", concepts, flags=re.S).group(0)
    assert 'role="img"' in svg
    assert re.search(r"<title[^>]*>[^<]+</title>", svg)
    assert re.search(r"<desc[^>]*>[^<]+</desc>", svg)


@pytest.mark.parametrize("module", [p08, p22])
def test_the_templates_type_no_figures_and_sources_are_links(module) -> None:
    assert typed_figures(Path(module.__file__).with_suffix(".html").read_text()) == []
    assert len(module.SOURCES) >= 5
    for title, url in module.SOURCES:
        assert title and url.startswith("https://")


def test_problem_8_figures_equal_the_api(client) -> None:
    api = api_get(client, "prefix-routing", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                  system_tokens=2000, user_tokens=200, requests_per_minute=1000, replicas=8,
                  applications=40, cache_gb=10, mfu=0.5, bandwidth_efficiency=0.8,
                  request_seconds=5)
    worked = section_text(page_get(client), 8, "worked")
    assert f"taking {seconds_format(api['miss_seconds'])}" in worked
    assert f"{seconds_format(api['ttft_saved'])} of TTFT" in worked
    assert f"a replica keeps {api['capacity']} prefixes" in worked  # ⌊10 GB ÷ 655.36 MB⌋ = 15
    assert api["capacity"] == 15
    # 10.4 in flight per replica hold 40 × (1 − e^(−10.4/40)) = 9.17 prefixes: (9.17 + 15)/40.
    assert f"hit rate {percent_format(api['hit_random'])}" in worked
    assert api["hit_random"] == pytest.approx(0.604, abs=5e-4)
    assert f"hit rate {percent_format(api['hit_affine'])}" in worked
    assert "the idle cache alone gives 37.5%" in worked  # 15/40
    # 1,440,000 requests a day × 2.79×10¹⁴ FLOP saved per hit, all hitting: 4.0×10²⁰ FLOP.
    assert api["flops_day_affine"] == pytest.approx(1_440_000 * api["flops_saved"])
    assert f"({flops_format(api['flops_day_affine'])}), about" in worked


def test_problem_8_inputs_change_the_figures(client) -> None:
    query = "&".join(f"p8-routing-{k}={'' if v is None else v}" for k, v in {
        **p08.CALCULATOR.form_class().defaults(), "applications": 1}.items())
    worked = section_text(page_get(client, "?" + query), 8, "worked")
    assert "hit rate 100%" in worked and "37.5%" not in worked and "60.4%" not in worked
    assert "Here both hit rates are equal" in worked


def test_problem_8_uneven_homes_quote_the_fleet_and_the_busiest_replica(client) -> None:
    """10 applications on 8 replicas keeping one prefix each: fleet 80%, busiest 50%."""
    query = "&".join(f"p8-routing-{k}={'' if v is None else v}" for k, v in {
        **p08.CALCULATOR.form_class().defaults(), "applications": 10, "cache_gb": 0.7,
        "request_seconds": 0}.items())
    worked = section_text(page_get(client, "?" + query), 8, "worked")
    assert "fleet-wide hit rate 80%" in worked
    assert "home to 2 applications, hits only 50%" in worked
    assert "hits only 50%. The price of affinity is balance: that replica takes 20%" in worked
    # The plot's row for 3 replicas: homes of 4, 3, 3 keeping 1 each: random 10%, fleet 3 ÷ 10
    # = 30%, busiest 1 ÷ 4 = 25%, its share 4 ÷ 10 = 40%.
    assert "3 10 30 25 40" in worked


def test_problem_8_balance_names_the_busiest_replica_when_every_home_hits(client) -> None:
    """10 applications on 8 replicas keeping 15 prefixes each: every replica hits 100%, so the
    hit-rate sentence names no busiest replica; the balance sentence must name it itself (home
    to 2 of 10: 20% of the traffic against an even 12.5%), not refer back to 'that replica'."""
    query = "&".join(f"p8-routing-{k}={'' if v is None else v}" for k, v in {
        **p08.CALCULATOR.form_class().defaults(), "applications": 10}.items())
    worked = section_text(page_get(client, "?" + query), 8, "worked")
    assert "fleet-wide hit rate 100%." in worked
    assert ("the busiest replica, home to 2 applications, takes 20% of the traffic against an "
            "even 12.5%") in worked
    assert "that replica" not in worked


def test_problem_8_bad_input_is_a_field_error_and_the_prose_keeps_defaults(client) -> None:
    content = page_get(client, "?p8-routing-replicas=0")
    worked = section_html(problem_html(content, 8), 8, "worked")
    assert 'id="id_p8-routing-replicas_error"' in worked
    assert "37.5%" in text_of(worked)


def test_problem_22_figures_equal_the_api(client) -> None:
    api = api_get(client, "disagg-plan", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                  prompt_tokens=8192, output_tokens=512, requests_per_second=2,
                  link_efficiency=0.8, mfu_prefill=0.5)
    worked = section_text(page_get(client), 22, "worked")
    assert f"{seconds_format(api['prefill_seconds'])} (compute-bound)" in worked
    for link in api["links"]:
        assert f"{link['name']}" in worked and seconds_format(link["seconds"]) in worked
    # 8,192 × 327,680 B = 2.68 GB; 2,684,354,560 ÷ 4 GPUs over 50 GB/s × 0.8 = 16.8 ms.
    assert api["kv_bytes"] == 2_684_354_560
    assert "2.68 GB for the prompt" in worked and "16.8 ms" in worked
    # One 100 GbE port shared by the 4 GPUs: 2.68 GB ÷ 10 GB/s = 268 ms.
    assert "4 times as long, 268 ms" in worked


def test_problem_22_short_prompts_hide_their_transfer_about_as_well(client) -> None:
    """The transfer's share of the prefill is nearly independent of prompt length (bytes and
    FLOPs both grow per token): 256 tokens give 2.1 ms over 100 GbE against a 17.8 ms prefill
    (11.8%), 8,192 tokens 67.1 ms against 611 ms (11%). The prose must not call the short
    prompt the hard case for the transfer."""
    short = api_get(client, "disagg-plan", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                    prompt_tokens=256, output_tokens=512, requests_per_second=2,
                    link_efficiency=0.8, mfu_prefill=0.5)
    long = api_get(client, "disagg-plan", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                   prompt_tokens=8192, output_tokens=512, requests_per_second=2,
                   link_efficiency=0.8, mfu_prefill=0.5)
    assert short["links"][2]["ratio"] == pytest.approx(long["links"][2]["ratio"], rel=0.15)
    worked = section_text(page_get(client), 22, "worked")
    assert "hard case" not in worked
    assert f"{percent_format(short['links'][2]['ratio'])} of its" in worked
    assert "A shorter prompt hides its transfer about as well" in worked


def p22_query(**changes) -> str:
    return "?" + "&".join(f"p22-disagg-{k}={'' if v is None else v}" for k, v in {
        **p22.CALCULATOR.form_class().defaults(), **changes}.items())


def test_problem_22_short_prompt_wording_follows_the_figures(client) -> None:
    """DeepSeek-V3 on 8 × H200 in FP8: 100 GbE takes 57.6 ms, 60.6% of a 95.1 ms prefill, but a
    256-token prefill is bound by reading the weights (21.8 ms), so its 1.8 ms is 8.24%: the
    short prompt hides its transfer better, and its prefill : decode ratio, prompts batched 32 to
    a pass, is 0.177 against the asked prompt's 0.459. The latent is whole on every GPU, so one
    shared port carries one copy in the same 57.6 ms, not 8 times as long. Llama 3.1 70B at
    100,000 tokens: 6.05% against the short prompt's 11.8%, so the short one hides it less
    well. At 128 tokens there is no shorter 256-token prompt to compare."""
    worked = section_text(page_get(client, p22_query(
        model="deepseek-v3", gpu="h200", tp=8, dtype="fp8")), 22, "worked")
    assert "A shorter prompt hides its transfer better" in worked
    assert "8.24% of its 21.8 ms prefill, which is bound by reading the weights" in worked
    # Review P22-E2: 32 such prompts fill an 8,192-token pass, so each costs its 2.33 ms of
    # compute, not a 21.8 ms weight read: 2.33 ÷ 13.1 ms of decode is 0.177, not 1.66.
    assert "the ratio is 0.177" in worked and "counting 32 of them to a pass at 2.33 ms" in worked
    assert "shrinks faster than the short prefill" not in worked
    assert "that row's time stands" in worked and "times as long" not in worked
    worked = section_text(page_get(client, p22_query(prompt_tokens=100_000)), 22, "worked")
    assert "A shorter prompt hides its transfer less well" in worked
    # 100,256 tokens × 81,920 B = 8.21 GB per GPU, in the unit the step table uses too.
    assert "takes 8.21 GB of it per GPU" in worked
    assert "chat-like traffic needs more decode" in worked
    worked = section_text(page_get(client, p22_query(prompt_tokens=128)), 22, "worked")
    assert "A shorter prompt" not in worked and "With 256-token prompts" not in worked


def test_problem_22_decode_fit_counts_weights_kv_and_the_reserve(client) -> None:
    """Per GPU of the decode replica: usable = memory × fraction − reserve; weights 35.3 GB
    (141 GB ÷ 4); what is left ÷ one sequence's KV (8,448 tokens × 81,920 B = 692 MB) is the
    batch memory holds."""
    api = api_get(client, "disagg-plan", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                  prompt_tokens=8192, output_tokens=512, requests_per_second=2,
                  link_efficiency=0.8, mfu_prefill=0.5)
    assert api["decode_free_gpu"] == pytest.approx(
        api["decode_usable_gpu"] - api["decode_weights_gpu"])
    assert api["decode_kv_sequence_gpu"] == 8_448 * 81_920
    assert api["batch"] <= api["decode_free_gpu"] // api["decode_kv_sequence_gpu"]
    worked = section_text(page_get(client), 22, "worked")
    assert "The fit check first" in worked and "692 MB of it per GPU" in worked


def test_problem_22_inputs_change_the_figures(client) -> None:
    query = "&".join(f"p22-disagg-{k}={'' if v is None else v}" for k, v in {
        **p22.CALCULATOR.form_class().defaults(), "prompt_tokens": 4096}.items())
    worked = section_text(page_get(client, "?" + query), 22, "worked")
    assert "1.34 GB for the prompt" in worked and "2.68 GB" not in worked


def test_the_live_demos_are_embedded(client) -> None:
    content = page_get(client)
    assert 'data-demo="prefix-cache"' in section_html(problem_html(content, 8), 8, "demo")
    assert 'data-demo="disagg"' in section_html(problem_html(content, 22), 22, "demo")


def test_problem_8_cache_salt_claims_name_their_source(client) -> None:
    """The isolation paragraph says vLLM's per-request cache_salt is mixed into the first
    block's hash; the pull request that added it says so and is listed beside the advisory."""
    urls = [url for _, url in p08.SOURCES]
    assert "https://github.com/vllm-project/vllm/pull/17045" in urls
    assert "https://github.com/vllm-project/vllm/pull/17045" in page_get(client)


def test_problem_22_decode_side_prefix_hits_name_their_source(client) -> None:
    """'only if the transfer asks for the blocks it lacks': vLLM's NixlConnector does (a partial
    prefix-cache hit on the decode side reads only the uncomputed blocks), listed in sources."""
    cited = [url for _, url in p22.SOURCES if url.endswith("nixl_connector.py")]
    assert len(cited) == 1 and cited[0] in page_get(client)
    assert "asks for the blocks it lacks" in section_text(page_get(client), 22, "tradeoffs")


def test_problem_22_pools_quote_how_busy_the_rounded_up_replicas_are(client) -> None:
    # 2 requests/s × 611 ms = 1.22 prefill replicas, rounded up to 2: not "full use".
    api = api_get(client, "disagg-plan", model="llama-3.1-70b", gpu="h100-sxm", tp=4,
                  prompt_tokens=8192, output_tokens=512, requests_per_second=2,
                  link_efficiency=0.8, mfu_prefill=0.5)
    worked = section_text(page_get(client), 22, "worked")
    assert "at full use" not in worked
    pre = percent_format(2 * api["prefill_seconds"] / api["prefill_replicas"])
    dec = percent_format(2 * api["decode_busy"] / api["decode_replicas"])
    assert f"prefill pool is then busy {pre} of the time and the decode pool {dec}" in worked


def test_problem_22_model_answer_names_links_that_do_not_keep_up_with_the_prefill(client) -> None:
    # Llama 2 7B on one B200: 1.84 GB over 100 GbE at 80% takes 184 ms against a 43.2 ms
    # prefill, so sending layer by layer does not leave only the last layer's share.
    query = ("?p22-disagg-model=llama-2-7b&p22-disagg-gpu=b200&p22-disagg-tp=1"
             "&p22-disagg-prompt_tokens=3500")
    api = api_get(client, "disagg-plan", model="llama-2-7b", gpu="b200", tp=1,
                  prompt_tokens=3500, output_tokens=512, requests_per_second=2,
                  link_efficiency=0.8, mfu_prefill=0.5)
    eth = api["links"][2]
    assert eth["ratio"] > 1
    model = section_text(page_get(client, query), 22, "answer")
    assert "on a link that keeps up with the prefill" in model
    assert f"100 Gigabit Ethernet does not ({seconds_format(eth['exposed_layered'])} lands" in model
    # At the defaults (Llama 3.1 70B, 4 × H100) every link keeps up, and the caveat is absent.
    assert "keeps up" not in section_text(page_get(client), 22, "answer")


def test_problem_22_one_gpu_replicas_are_not_described_as_tensor_parallel(client) -> None:
    query = "?p22-disagg-model=llama-3.1-8b&p22-disagg-gpu=b200&p22-disagg-tp=1"
    content = page_get(client, query)
    worked = section_text(content, 22, "worked")
    answer = section_text(content, 22, "answer")
    assert "each of the 1 GPUs" not in worked and "1.07 GB for the prompt, all held" in worked
    assert "1-way tensor parallelism" not in answer and "1.07 GB of KV, sent from one GPU" in answer
    default = page_get(client)
    assert "each of the 4 GPUs holds and sends 671 MB" in section_text(default, 22, "worked")
    assert "4-way tensor parallelism" in section_text(default, 22, "answer")


def test_problem_8_one_application_and_one_prefix_read_in_the_singular(client) -> None:
    # 1 GB of cache ÷ 655 MB per prefix keeps one prefix.
    one = section_text(page_get(client, "?p8-routing-applications=1&p8-routing-cache_gb=1"),
                       8, "worked")
    assert "With 1 application, random routing" in one
    assert "a replica keeps 1 prefix." in one
    assert "With one application, as here: both policies hit" in one
    assert "Set the applications to one" not in one
    default = section_text(page_get(client), 8, "worked")
    assert "With 40 applications, random routing" in default
    assert "a replica keeps 15 prefixes." in default
    assert "Set the applications to one: both policies hit" in default


def test_problem_22_answer_names_the_gpus_own_link_and_the_latent_as_a_copy(client) -> None:
    """Review: the model answer said "Over NVLink" for an L40S (PCIe, no NVLink) and an MI300X
    (Infinity Fabric), called each GPU's whole MLA latent its "share", and two GPUs read "all 2
    GPUs"."""
    content = page_get(client, p22_query(model="llama-3.1-8b", gpu="l40s", tp=2))
    answer = section_text(content, 22, "answer")
    assert "Over NVLink" not in answer and "Over PCIe Gen4 x16 (no NVLink) that is" in answer
    worked = section_text(content, 22, "worked")
    assert "all 2 GPUs" not in worked and "where both GPUs share one 100 GbE port" in worked
    answer = section_text(page_get(client, p22_query(
        model="deepseek-v3", gpu="h200", tp=8, dtype="fp8")), 22, "answer")
    assert "MB share" not in answer and "MB copy of the latent in parallel" in answer
    answer = section_text(page_get(client), 22, "answer")
    assert "each GPU sends its 671 MB share in parallel. Over NVLink 4 that is" in answer


def test_problem_22_counts_of_one_read_in_the_singular(client) -> None:
    """Review: one request a second and a one-token answer read "At 1 requests a second" and "1
    tokens of answer"."""
    content = page_get(client, p22_query(requests_per_second=1, output_tokens=1))
    worked = section_text(content, 22, "worked")
    assert "At 1 request a second" in worked and "and 1 token of answer" in worked
    assert "1 requests a second" not in worked and "1 tokens of answer" not in worked
    default = section_text(page_get(client), 22, "worked")
    assert "a prompt of 8,192 tokens and 512 tokens of answer" in default
    assert "At 2 requests a second" in default


def test_p08_names_the_format_and_counts_one_gpu_and_one_replica(client) -> None:
    query = ("?p8-routing-model=llama-3.1-8b&p8-routing-tp=1&p8-routing-replicas=1"
             "&p8-routing-dtype=fp8")
    content = page_get(client, query)
    worked = section_text(content, 8, "worked")
    assert "Llama 3.1 8B in FP8 (E4M3) on replicas of one GPU" in worked
    assert "in BF16" not in worked and "1 GPUs" not in worked and "1 replicas" not in worked
    assert "on one replica." in worked
    assert "With one replica there is nothing to route" in worked
    assert "of the traffic to each replica" not in worked
    answer = section_text(content, 8, "answer")
    assert "For Llama 3.1 8B on one GPU," in answer and "1 GPUs" not in answer
    # One replica: affinity hits no more often than random routing, so the answer does not set
    # a hit rate against itself.
    r = api_get(client, "prefix-routing", **{**p08.CALCULATOR.form_class().defaults(),
                                             "model": "llama-3.1-8b", "tp": 1, "replicas": 1,
                                             "dtype": "fp8"})
    assert r["hit_random"] == r["hit_affine"]
    same = percent_format(r["hit_random"])
    assert f"{same} of the time, against {same}" not in answer
    default = section_text(page_get(client), 8, "worked")
    assert "Llama 3.1 70B in BF16 on replicas of 4 GPUs" in default


def test_p08_quotes_sglangs_ttft_as_the_average_it_is(client) -> None:
    # The SGLang paper (section 6.2): a month serving Chatbot Arena, hit rates of 52.4%
    # (LLaVA-Next-34B) and 74.1% (Vicuna-33B), "reduces first-token latency by an average of
    # 1.7x for Vicuna-33B". The page used to call it "up to 1.7× lower" on "its workloads".
    concepts = section_text(page_get(client), 8, "concepts")
    assert "up to 1.7×" not in concepts
    assert "1.7× lower on average for Vicuna-33B" in concepts
    assert "Chatbot Arena" in concepts


def test_problem_8_says_which_view_each_saving_takes_on_a_memory_bound_hit(client) -> None:
    """Review P8-E1: DeepSeek-V3 in FP8 on 8 × H200. The lone hit is weight-read-bound, so
    timing it alone gives 0.000298 GPU·s against the throughput view's 0.154 (1.53×10¹⁴ FLOP ÷
    989.5 TFLOP/s): 0.193% of it. The day is 61.8 GPU·h, not 0.119."""
    query = ("?p8-routing-model=deepseek-v3&p8-routing-tp=8&p8-routing-gpu=h200"
             "&p8-routing-dtype=fp8")
    worked = section_text(page_get(client, query), 8, "worked")
    assert "0.154 GPU-seconds (a throughput view)" in worked
    assert "0.000298 GPU-seconds" in worked and "0.193% of the throughput view's" in worked
    assert "at affine routing's, 61.8" in worked and "0.119" not in worked
    # The latent is whole on each of the 8 GPUs: 1.12 GB a prefix, 8 kept, not 71 (fresh read).
    # Random routing: 1,440,000 × 42.9% × 0.154 GPU·s ÷ 3,600 = 26.5 GPU·h a day.
    assert "keep only 8 idle" in worked and "the cache saves 26.5 GPU-hours" in worked


def test_problem_8_decode_gains_routers_and_skew_are_named(client) -> None:
    """Review P8-M5, P8-M7 and P8-K1: decode is not "unchanged" (shared blocks, cascade
    attention, less interference); random routing "sees" every prefix; SGLang's Arena rates
    were one worker per model; the router's knowledge of cache state, OpenAI's routing and
    skew are explained, each with a source."""
    problem = problem_html(page_get(client), 8)
    concepts = section_text(problem, 8, "concepts")
    assert "It does not make decode faster" not in concepts
    assert "cascade" in concepts and f"{p08.FLASHINFER_CASCADE}×" in concepts
    assert "one SGLang worker per model" in concepts
    assert "each replica sees every prefix" in concepts
    assert "stored or evict" in concepts or "store or evict" in concepts
    assert f"first {p08.OPENAI_ROUTE_TOKENS}" in concepts and "prompt_cache_key" in concepts
    assert "replicate the hot ones" in concepts
    sources = " ".join(title + url for title, url in p08.SOURCES)
    assert "prompt-caching" in sources and "cascade-inference" in sources
    assert "one SGLang worker per model" in sources
    followups = section_text(problem, 8, "followups")
    assert "exactly when it matters most" not in followups
    assert "How does the router know" in followups


def test_problem_22_push_and_pull_are_a_trade_off_not_a_mistake(client) -> None:
    """Review P22-E3: vLLM's NIXL connector pulls the KV after prefill, and Splitwise §4
    sends small prompts' KV after prefill, so "sending the KV only after prefill" is a design
    choice: the page weighs it against pushing layer by layer and cites both."""
    problem = problem_html(page_get(client), 22)
    mistakes = section_text(problem, 22, "mistakes")
    assert "Sending the KV only after prefill" not in mistakes
    concepts = section_text(problem, 22, "concepts")
    assert "Push layer by layer, or pull after prefill" in concepts
    assert "synchronisation per layer" in concepts and "decode side pulls" in concepts
    assert "81,920 separate regions of 8 KiB" in concepts  # review P22-K3, 512 × 80 × 2
    tradeoffs = section_text(problem, 22, "tradeoffs")
    assert "Conditional disaggregation" in tradeoffs and "goodput per GPU" in tradeoffs
    sources = " ".join(title for title, _ in p22.SOURCES)
    assert "section 4: layer-wise KV transfer" in sources
    assert "pulls the prompt's KV blocks after prefill" in sources
    assert "conditional disaggregation" in sources


def test_problem_22_colocated_baseline_at_the_defaults(client) -> None:
    """Review P22-K2: 3 colocated replicas (0.991 requests/s each within 50 ms, at batch 25)
    against 2 + 1 split, 0.2886 against 0.2478 requests/s per GPU: 1.16× higher split. (With the
    H100's budget taken from CUDA's 79.22 GiB the decode pool holds 54 sequences, not the 55 of
    nvidia-smi's total, which made it 0.2893 and 1.17×.)"""
    worked = section_text(page_get(client), 22, "worked")
    assert "The load needs 3 replicas (12 GPUs) colocated against 3 replicas (12 GPUs) split" \
        in worked
    assert "0.289 split against 0.248 colocated, 1.16× higher: per GPU splitting pays" in worked


def test_problem_22_wide_replicas_and_pcie_gpus_are_flagged(client) -> None:
    """Review P22-M8: TP 16 spans two nodes, so no NVLink row and 1.01 s of all-reduces over
    the network against a 153 ms prefill; an L40S's InfiniBand row runs at its PCIe Gen4 x16
    (31.5 GB/s), and the DGX sentence is not said of it."""
    worked = section_text(page_get(client, p22_query(tp=16)), 22, "worked")
    assert "(within a node)" not in worked and "no NVLink 4 row" in worked
    assert "1.01 s over the network" in worked and "more than the prefill itself" in worked
    worked = section_text(page_get(client, p22_query(gpu="l40s", model="llama-3.1-8b", tp=1)),
                          22, "worked")
    assert "DGX" not in worked and "cannot beat the GPU's own PCIe Gen4 x16" in worked
    assert "31.5 GB/s" in worked


def test_problem_8_says_when_the_fleet_is_idle_overloaded_or_cannot_hold_the_model(client) -> None:
    """Read-through findings. At 1 request a minute on 8 replicas a 155 ms prefill meets another
    about 1/60 ÷ 8 × 5 s = 1% of the time: the GPU time a hit frees is idle time, not
    capacity. Llama 3.1 405B in BF16 on one L4: 812 GB of weights against 18.4 GB usable, and
    1,000 a minute of 1.8×10¹⁵-FLOP prefills at 60.6 TFLOP/s would keep 492 GPUs busy
    against the fleet's 8."""
    idle = section_text(page_get(client, "?p8-routing-requests_per_minute=1"), 8, "worked")
    assert "a hit frees GPU time nobody was waiting for" in idle
    assert "kept busy all day" not in idle
    busy = section_text(page_get(client), 8, "worked")
    assert "at this load the engine batches prefills" in busy and "A caution" not in busy
    query = "?p8-routing-model=llama-3.1-405b&p8-routing-gpu=l4&p8-routing-tp=1"
    worked = section_text(page_get(client, query), 8, "worked")
    assert "812 GB on each GPU against 18.4 GB usable" in worked
    assert "would keep about 492 GPUs busy against its 8 GPUs" in worked
    # Fresh read: the assumed 5 s a request runs is shorter than this miss's own prefill,
    # 1.8×10¹⁵ FLOP ÷ (121 TFLOP/s × 50%) = 29.5 s, so Little's law undercounts.
    assert ("5 s (an assumption, and too short here: a miss's prefill alone takes 29.5 s, so "
            "this undercounts what is in flight)") in worked
    assert "too short here" not in busy


def test_problem_22_one_gpu_replicas_have_no_all_reduce_step(client) -> None:
    """Read-through finding: at TP 1 the all-reduce step read '2(1 − 1)/1 … = 0 B … 0 s'; a
    replica of one GPU has no tensor-parallel all-reduce, so neither step nor sentence."""
    r = api_get(client, "disagg-plan", model="llama-3.1-8b", gpu="h200", tp=1,
                prompt_tokens=256, output_tokens=512)
    assert not any("all-reduces" in s["label"] for s in r["steps"])
    worked = section_text(page_get(client, p22_query(model="llama-3.1-8b", gpu="h200", tp=1)),
                          22, "worked")
    assert "all-reduces the activations" not in worked
    assert "the replica's one GPU, sending all of it" in worked


def test_problem_8_counts_the_latent_on_every_gpu_of_the_replica(client) -> None:
    """Fresh read, DeepSeek-V3 on 8 H200s in FP8: the page said a replica keeps 71 prefixes of
    141 MB, but MLA's 70,272 B latent a token sits whole on each of the 8 GPUs, so a
    2,000-token prefix costs the replica 8 × 140.5 MB = 1.12 GB and 10 GB keeps 8; random
    routing hits (9.17 + 8) ÷ 40 = 42.9%, not 100%."""
    query = ("?p8-routing-model=deepseek-v3&p8-routing-gpu=h200&p8-routing-tp=8"
             "&p8-routing-dtype=fp8")
    worked = section_text(page_get(client, query), 8, "worked")
    assert "70.3 kB on each of its 8 GPUs, because each keeps the same latent" in worked
    assert "gives 1.12 GB per copy of the prefix" in worked
    assert "a replica keeps 8 prefixes" in worked and "hit rate 42.9%" in worked
    default = section_text(page_get(client), 8, "worked")
    assert "328 kB of KV per token across the replica gives 655 MB per copy" in default


def test_problem_22_a_link_slower_than_the_prefill_hides_nothing(client) -> None:
    """Fresh read, course-lm in FP32 on one B200 with 512-token prompts: 512 × 6,144 B =
    3.15 MB over 100 GbE at 80% (10 GB/s) is 315 µs against a 140 µs prefill (224%), and a
    256-token prompt's 1.57 MB is 157 µs against 64.8 µs (243%). The page said the shorter
    prompt 'hides its transfer about as well' and that short prompts' poor fit 'is elsewhere';
    neither transfer is hidden at all."""
    worked = section_text(page_get(client, p22_query(
        model="course-lm", gpu="b200", tp=1, dtype="fp32", prompt_tokens=512,
        output_tokens=256)), 22, "worked")
    assert "315 µs, 224% of the prefill" in worked
    # 512 × 6,144 B = 3.15 MB, in the unit that reads ("0.00315 GB" before).
    assert "KV to move. 3.15 MB for the prompt" in worked
    # One token of Llama 3.1 70B: 327,680 B, a quarter on each of 4 GPUs, 81,920 B
    # ("0.0819 MB" before).
    one = section_text(page_get(client, p22_query(prompt_tokens=1, output_tokens=1)), 22,
                       "worked")
    assert "327,680 B for the prompt; each of the 4 GPUs holds and sends 81,920 B." in one
    assert "The link is slower than the prefill here" in worked
    assert "A shorter prompt cannot hide its transfer either" in worked
    assert "243% of its 64.8 µs prefill" in worked
    assert "about as well" not in worked and "is elsewhere" not in worked
    default = section_text(page_get(client), 22, "worked")
    assert "The link is slower than the prefill" not in default
    assert "What makes short prompts a poor fit is elsewhere" in default


def test_problem_8_a_prefix_larger_than_the_idle_room_is_never_kept(client) -> None:
    """Fresh read, Llama 3.1 8B on one H100, a 100,000-token system prompt, 10 requests a
    minute: 100,000 × 131,072 B = 13.1 GB per prefix against 10 GB of room, so ⌊0.76⌋ = 0 are
    kept. The page said 'a replica keeps 0 prefixes', 'keep only 0 idle' and 'Set the
    applications to one: … one prefix fits everywhere'. Only held prefixes hit: 10/60 × 5 s
    ÷ 8 = 0.104 in flight, 40 × (1 − e^(−0.104/40)) = 0.104 held, 0.26%. With requests taken
    to run for no time nothing hits at all, and the page said 'saves 0 GPU-hours (0 FLOP)'."""
    base = ("?p8-routing-system_tokens=100000&p8-routing-model=llama-3.1-8b&p8-routing-tp=1"
            "&p8-routing-requests_per_minute=10")
    worked = section_text(page_get(client, base), 8, "worked")
    assert "a replica cannot keep even one: the prefix is larger than that room" in worked
    assert "keep none idle: hit rate 0.26%, all of it from the prefixes running requests hold" \
        in worked
    assert not re.search(r"\b0 prefixes", worked) and "only 0 idle" not in worked
    assert "one prefix fits everywhere" not in worked
    worked = section_text(page_get(client, base + "&p8-routing-request_seconds=0"), 8,
                          "worked")
    assert "no request ever hits" in worked
    assert "With no hits under either routing, the cache saves nothing." in worked
    assert not re.search(r"(?<![\d,.])0 GPU-hours|\(0 FLOP\)", worked)
    answer = section_text(page_get(client, base + "&p8-routing-request_seconds=0"), 8,
                          "answer")
    assert "that never hits" in answer and not re.search(r"up to 0 GPU-hours", answer)


def test_problem_22_an_all_reduce_longer_than_the_prefill_is_a_multiple_not_100_percent(
        client) -> None:
    """Fresh read, Llama 3.1 70B at TP 16 on H100s: 2 × 80 layers × 2(15/16) × 8,192 tokens ×
    8,192 × 2 B = 40.3 GB per GPU over 400 Gb/s at 80% (40 GB/s) is 1.01 s against a 153 ms
    prefill, 6.59 times it; the page said '100% of the prefill' (a share clamped at one). On
    eight L40S, 37.6 GB over PCIe is 1.47 s against 835 ms, 1.76 times."""
    worked = section_text(page_get(client, p22_query(tp=16)), 22, "worked")
    assert "1.01 s over the network" in worked
    assert "6.59 times the prefill if none of it overlaps" in worked
    assert "100% of the prefill" not in worked
    worked = section_text(page_get(client, p22_query(gpu="l40s", tp=8)), 22, "worked")
    assert "1.76 times the prefill if none of it overlaps" in worked
    default = section_text(page_get(client), 22, "worked")
    assert "89.5 ms over NVLink 4, 14.6% of the prefill if none of it overlaps" in default


@pytest.mark.parametrize("tp", [2, 8])
def test_problem_22_on_mi300x_moves_kv_over_one_link_and_all_reduces_over_the_group(
        client, tp) -> None:
    """Review: two MI300Xs moved KV at 448 GB/s, half the 896 GB/s of all 7 of a GPU's
    Infinity Fabric links together; a copy between two GPUs crosses one link, 64 GB/s each
    way, and only the all-reduce over all 8 sees 7 links (448 GB/s)."""
    query = p22_query(model="llama-3.1-70b", gpu="mi300x", tp=tp, dtype="bf16")
    content = page_get(client, query)
    worked = section_text(content, 22, "worked")
    from problems import arithmetic as a

    r = a.disagg_plan(**{**p22.CALCULATOR.defaults(), "model": "llama-3.1-70b",
                         "gpu": "mi300x", "tp": tp, "dtype": "bf16"})
    links = 1 if tp == 2 else 7
    assert f"over Infinity Fabric ({links} link{'s' if links > 1 else ''} a GPU, 64 GB/s each " \
           "way)" in worked
    assert seconds_format(r["allreduce_seconds"]) in worked
    if tp == 2:
        node = r["links"][0]
        assert node["line_rate"] == 64e9 and r["allreduce_seconds"] == pytest.approx(
            r["allreduce_bytes"] / (64e9 * 0.8))
        assert ("Infinity Fabric (within a node, one link between each pair of GPUs) 64 GB/s "
                f"{seconds_format(node['seconds'])}") in worked
    else:
        assert "no Infinity Fabric row" in worked
        assert r["allreduce_seconds"] == pytest.approx(r["allreduce_bytes"] / (448e9 * 0.8))
    mistakes = section_text(content, 22, "mistakes")
    assert ("figure of 896 GB/s counts both directions, 448 GB/s each way, and all 7 links of "
            "a GPU together, one to each peer: a copy between two GPUs crosses only the link "
            "between them, 64 GB/s each way") in mistakes
    # NVIDIA's NVSwitch gives any peer the whole figure: unchanged.
    h200 = section_text(page_get(client, p22_query(model="llama-3.1-70b", gpu="h200", tp=tp,
                                                   dtype="bf16")), 22, "mistakes")
    assert "900 GB/s counts both directions, 450 GB/s each way." in h200
