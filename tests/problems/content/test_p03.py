"""Problem 3 on page 02, through Django's test client: every section written, the figures equal
to the JSON API's, inputs that change them, a refused input beside its field, no typed figures,
the live demo embedded."""

import re
from pathlib import Path

import pytest

from problems.arithmetic.units import bytes_short, count_format
from problems.content import p03
from problems.registry import SECTIONS
from tests.problems.content.helpers import problem_html, section_html, text_of, typed_figures

pytestmark = pytest.mark.django_db

PAGE = "/pages/02/"
TEMPLATE = Path(p03.__file__).with_suffix(".html")


def page_get(client, query: str = "") -> str:
    response = client.get(PAGE + query)
    assert response.status_code == 200
    return response.content.decode()


def section_text(client, slug: str, query: str = "") -> str:
    return text_of(section_html(problem_html(page_get(client, query), 3), 3, slug))


def api(client, **params) -> dict:
    response = client.get("/api/calc/kv-sizing", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_all_nine_sections_are_written(client) -> None:
    problem = problem_html(page_get(client), 3)
    for slug, heading in SECTIONS:
        section = section_html(problem, 3, slug)
        assert heading in section and "being-written" not in section
        assert len(text_of(section)) > len(heading) + 200, slug


def test_worked_figures_equal_the_api(client) -> None:
    """Llama 3.1 70B, BF16, 32,768 tokens × 100 users: 10.7 GB per user, 1.07 TB in all; 24
    H100s (41 users per 8-GPU node)."""
    worked = section_text(client, "worked")
    body = api(client)
    assert bytes_short(body["bytes_per_sequence"]) == "10.7 GB" and "10.7 GB" in worked
    assert bytes_short(body["total_bytes"]) == "1.07 TB"
    assert bytes_short(body["total_bytes"]) in worked
    for row in body["gpus"]:
        assert count_format(row["gpus"], "GPU") in worked
        assert count_format(row["node_users"], "user") in worked
    assert bytes_short(body["fp8_total_bytes"]) in worked
    assert bytes_short(body["mla_total_bytes"]) in worked


def test_inputs_change_the_working(client) -> None:
    worked = section_text(client, "worked", "?p03-kv-kv_dtype=fp8&p03-kv-users=10")
    body = api(client, kv_dtype="fp8", users=10)
    assert bytes_short(body["total_bytes"]) in worked
    assert "FP8" in worked


def test_a_refused_input_shows_beside_its_field(client) -> None:
    content = page_get(client, "?p03-kv-model=llama-3-70b")
    worked = section_html(problem_html(content, 3), 3, "worked")
    error = re.search(r'id="id_p03-kv-tokens_error"[^>]*>(.*?)<', worked, re.S)
    assert error and "context window" in error.group(1)
    response = client.get("/api/calc/kv-sizing", {"mean_tokens": 10**6})
    assert response.status_code in (400, 422) and "mean_tokens" in response.content.decode()


def test_hints_are_hidden_and_the_demo_is_embedded(client) -> None:
    problem = problem_html(page_get(client), 3)
    followups = section_html(problem, 3, "followups")
    assert followups.count("<details>") >= 4
    mistakes = section_html(problem, 3, "mistakes")
    assert mistakes.count("<li>") >= 4
    assert 'id="demo-kv-bytes"' in section_html(problem, 3, "demo")


def test_no_figure_is_typed_into_the_template() -> None:
    assert typed_figures(TEMPLATE.read_text()) == []


def test_sources_are_titled_links() -> None:
    assert len(p03.SOURCES) >= 8
    for title, url in p03.SOURCES:
        assert title and url.startswith("https://")


def test_the_pcie_reload_time_is_called_a_floor(client) -> None:
    """Bringing an offloaded cache back over PCIe assumes every GPU has its own uncontended
    link at a stated efficiency: the worked answer and the model answer call it a floor."""
    for slug in ("worked", "answer"):
        text = section_text(client, slug)
        assert "floor" in text, slug
        assert "in about" not in text.split("PCIe", 1)[1].split("recomput", 1)[0], slug


def test_the_words_follow_the_models_attention(client) -> None:
    """Another model in the calculator keeps every sentence true: MLA caches a latent (61 × 576
    values × 2 B = 70,272 B per token for DeepSeek-V3) that tensor parallelism cannot split; an
    MHA model has no KV heads to share; a cache smaller than the weights is not called several
    times them."""
    mla = "?p03-kv-model=deepseek-v3"
    worked = section_text(client, "worked", mla)
    assert "61 layers × (512 latent + 64 RoPE key) × 2 B per BF16 value = 70,272 bytes" in worked
    assert "KV heads of 192" not in worked and "latent kept whole on every GPU" in worked
    assert "does not split at all" in section_text(client, "concepts", mla)
    answer = section_text(client, "answer", mla)
    assert "grouped-query" not in answer and "17.2% of the 1.34 TB" in answer
    assert "memory problem first" not in answer and not re.search(r"\b0 GPUs", answer)
    assert "no tensor-parallel size splits it" in section_text(client, "followups", mla)

    mha = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048"
    concepts = section_text(client, "concepts", mha)
    assert "Llama 2 7B has none" in concepts and "is a fraction" not in concepts
    assert "grouped-query" not in section_text(client, "answer", mha)

    default = section_text(client, "answer")
    assert "thanks to grouped-query attention" in default and "memory problem first" in default
    assert "H200s need 12 GPUs and B200s 8 GPUs" in default


def test_the_rest_of_the_words_follow_the_model_too(client) -> None:
    """With another model chosen, Llama 3.1 70B's window stays its own 131,072 tokens (it read the
    chosen model's 4,096); the levers table does not call an MHA model's own cache a saving of 1×
    or MLA '1× less' than itself; the mistakes quote a real GQA ratio (64 ÷ 8 heads = 8×); and the
    answer does not send DeepSeek-V3 in BF16 to 'GPUs with more memory' that do not fit it
    either."""
    mha = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048"
    assert "with a 131,072-token window" in section_text(client, "concepts", mha)
    worked = section_text(client, "worked", mha)
    assert "instead of GQA" not in worked and "524,288 B per token, 1×" not in worked
    assert "Llama 2 7B already caches every head" in worked
    assert "GQA model such as Llama 3.1 70B this overstates the cache 8×" in section_text(
        client, "mistakes", mha)
    mla = "?p03-kv-model=deepseek-v3"
    worked = section_text(client, "worked", mla)
    assert "1× less" not in worked and "instead of MLA" in worked
    answer = section_text(client, "answer", mla)
    assert "GPUs with more memory" not in answer and "nor on H200s or B200s" in answer
    assert "H200s need" in section_text(client, "answer", mla + "&p03-kv-dtype=fp8")
    follow = section_text(client, "followups", mla)
    assert "above the KV-head count" not in follow and "per-GPU cache stays put" in follow
    assert "Data parallel attention" in text_of(page_get(client))
    # The kv-bytes demo's note says an uncalibrated FP8 scale is 1, as vLLM's own docs do.
    assert "Quantized KV Cache" in text_of(page_get(client))


def test_one_user_of_one_token_reads_in_the_singular(client) -> None:
    """At one user of one token in an FP8 cache the prose counts "1 user", "1 token" and
    "1 byte" (it printed "1 users each holding 1 tokens" and "1 bytes per value"), writes "an
    FP8 cache", and does not print 163,840 bytes twice."""
    query = "?p03-kv-users=1&p03-kv-tokens=1&p03-kv-mean_tokens=1&p03-kv-kv_dtype=fp8"
    worked = section_text(client, "worked", query)
    answer = section_text(client, "answer", query)
    for text in (worked, answer):
        assert not re.search(r"\b1 (users|tokens|bytes)\b", text), text
    assert "with an FP8 (E4M3) cache (1 byte per value), 1 user holding 1 token" in worked
    assert "163,840 bytes (163,840 B)" not in worked
    assert "with a BF16 cache (2 bytes per value), 100 users each holding 32,768 tokens" in (
        section_text(client, "worked"))


def test_the_fp8_lever_follows_the_cache_format(client) -> None:
    """An FP8 cache saves nothing over a cache already one byte per value (the page said "an FP8
    cache halves it again"), and where the weights leave no room on an H100 node it does not
    "seat 0 users"."""
    fp8 = "?p03-kv-kv_dtype=fp8"
    assert "halves it again" not in section_text(client, "answer", fp8)
    assert "already takes one byte per value" in section_text(client, "worked", fp8)
    assert "halves it again" in section_text(client, "answer")
    assert "cuts it 4× again" in section_text(client, "answer", "?p03-kv-kv_dtype=fp32")
    worked = section_text(client, "worked", "?p03-kv-model=deepseek-v3")
    assert "seats 0 users" not in worked and "still not one user fits" in worked


def test_the_offloading_verdict_follows_the_figures(client) -> None:
    """At 1% of the PCIe link one conversation takes longer to come back (2.1 s) than to
    recompute (1.49 s): the page must not say offloading beats recomputing."""
    slow = "?p03-kv-pcie_efficiency=0.01"
    body = api(client, pcie_efficiency=0.01)
    assert body["reload_seconds"] > body["recompute_seconds"]
    assert "offloading beats recomputing" not in section_text(client, "worked", slow)
    assert "I would offload" not in section_text(client, "answer", slow)
    assert "offloading beats recomputing" in section_text(client, "worked")
    assert "I would offload" in section_text(client, "answer")


def test_the_llama_2_suggestion_names_its_window(client) -> None:
    """Choosing Llama 2 7B at the page's 32,768 tokens is refused (its window is 4,096), so the
    suggestion to try it says to stay within that window."""
    assert "within its 4,096-token window" in section_text(client, "worked")


def test_the_tp_16_hint_follows_the_kv_head_count(client) -> None:
    """Llama 2 7B's 32 KV heads still split at a tensor-parallel size of 16, two on each GPU: the
    hint does not answer the question about 16 with "only 32 KV heads exist"."""
    mha = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048"
    follow = section_text(client, "followups", mha)
    assert "Only 32 KV heads exist" not in follow
    assert "still splits them, 2 KV heads on each GPU" in follow
    assert "Only 8 KV heads exist" in section_text(client, "followups")


def test_mla_is_compared_like_for_like_and_per_gpu(client) -> None:
    """The strict review's M1, at the defaults (Llama 3.1 70B, BF16). By hand: MLA at 80 layers
    is 80 × (512 + 64) × 2 B = 92,160 B per token, 327,680 ÷ 92,160 = 3.56× less (the raw
    70,272 B mixed in 61 layers against 80: 4.66×); under tp 8 GQA keeps 327,680 ÷ 8 =
    40,960 B per token on each GPU, MLA the whole latent, 92,160 ÷ 40,960 = 2.25× more."""
    worked = section_text(client, "worked")
    assert "at this model's 80 layers 92,160 B, 3.56× less" in worked
    assert "each GPU keeps 92,160 B per token against 40,960 B" in worked
    assert "(2.25× more): MLA wins per GPU only with data-parallel attention" in worked
    answer = section_text(client, "answer")
    assert ("would be 92,160 B per token, 3.56× less, but it saves memory per GPU only with "
            "data-parallel attention") in answer


def test_deepseek_v3_names_its_fp8_checkpoint(client) -> None:
    """The strict review's M2: DeepSeek-V3 sized in BF16 fits nowhere, but its released
    checkpoint is FP8 (config.json quantization_config fp8 e4m3), which one 8-GPU H200 node
    serves: 671B × 1 B ≈ 0.69 TB of weights ÷ 8 = 86 GB per GPU, under 0.9 × 151 GB − 3.3 GB."""
    worked = section_text(client, "worked", "?p03-kv-model=deepseek-v3")
    assert "released checkpoint stores its weights in FP8" in worked
    assert "8-GPU H200 node then seats" in worked
    fp8 = section_text(client, "worked", "?p03-kv-model=deepseek-v3&p03-kv-dtype=fp8")
    assert "released checkpoint" not in fp8


def test_course_model_cache_is_its_own_fp32(client) -> None:
    """The strict review's M9: a blank cache format is the model's own precision. course-lm
    is FP32: 6 layers × 2 × 4 KV heads × 32 × 4 B = 6,144 bytes per token, not 3,072 (BF16)."""
    query = "?p03-kv-model=course-lm&p03-kv-tokens=1024&p03-kv-mean_tokens=512"
    worked = section_text(client, "worked", query)
    assert "= 6,144 bytes" in worked and "an FP32 cache" in worked


def test_the_tp16_follow_up_links_a_calculator_with_tp_and_names_pp(client) -> None:
    """The strict review's M8 and X1: the hint pointed to a calculator with no tp input. Past
    8 KV heads, tp 8 × pp 2 keeps 327,680 ÷ 8 ÷ 2 = 20,480 B per token on each GPU."""
    problem = problem_html(page_get(client), 3)
    followups = section_html(problem, 3, "followups")
    assert 'href="/calculators/kv-cache/"' in followups
    text = text_of(followups)
    assert "pipeline parallel 2 over 16 GPUs keeps 20,480 B per token" in text
    assert "data-parallel attention" in text
    tradeoffs = section_text(client, "tradeoffs")
    assert "prefix caching" in tradeoffs and "stored once" in tradeoffs


def test_an_mla_model_is_not_compared_with_itself_and_its_fp8_checkpoint_is_sized(client) -> None:
    """Found on the fresh read: at DeepSeek-V3 the answer compared its latent with itself
    ('70,272 B per token, about the same ... against 70,272 B') and ended 'look at a narrower
    weight format' though its own checkpoint is FP8, which one 8-GPU H200 node serves."""
    answer = section_text(client, "answer", "?p03-kv-model=deepseek-v3")
    assert "against 70,272 B" not in answer and "already caches a latent" in answer
    assert "ships in FP8 (E4M3): in its released format one 8-GPU H200 node seats" in answer
    # Qwen2.5 7B's node is two tp-4 replicas, and the answer says so, not 'split eight ways'.
    # Each H100 keeps 0.9 × CUDA's 79.22 GiB − 15,231,233,024 ÷ 4 − 3.3e9 = 69,447,836,311.3 B
    # for a quarter of each user's 32,768 × 57,344 B: ⌊147.8⌋ = 147 users a replica, 294 a node.
    qwen = section_text(client, "answer", "?p03-kv-model=qwen2.5-7b")
    assert "laid out as 2 replicas of tensor parallel 4 seats about 294 users" in qwen


def test_the_reserve_is_named_as_measured_at_tp_one(client) -> None:
    """The strict review's M3: PR 10511 measured 1.79 GiB of non-torch memory at tp 1 and
    3.58 GiB at tp 2 (NCCL buffers), so figures at tp 2 and up built on the tp-1 reserve are
    optimistic, and the page says so beside the reserve."""
    worked = section_text(client, "worked")
    assert "vLLM's measured figure at tensor parallel 1" in worked
    assert "NCCL's buffers add more" in worked and "slightly optimistic" in worked


def test_offload_and_recompute_are_timed_on_a_node_that_holds_the_model(client) -> None:
    """Found on the fresh review: at Llama 3.1 405B the page timed recomputing a user on "an
    8-GPU H100 node" that its own fit check says cannot hold one user (812 GB of BF16 weights
    ÷ 8 = 101.5 GB > 0.9 × 85.5 GB). The first node that does is eight H200s (14 users), so:
    by hand, 126 × 2 × 8 × 128 × 2 = 516,096 B per token × 32,768 ÷ 8 GPUs = 2.11 GB on each,
    ÷ (64 GB/s × 0.8) = 41.3 ms back over PCIe, and 2.11 GB ÷ 4.8 TB/s = 440 µs from HBM."""
    worked = section_text(client, "worked", "?p03-kv-model=llama-3.1-405b")
    assert "H100 node at an assumed" not in worked
    assert "recomputing it as a prefill on those 8 H200s" in worked
    assert "440 µs from HBM across the replica against 41.3 ms over PCIe" in worked
    # Nothing holds DeepSeek-V3 in BF16 on eight of any of them: the page says so.
    v3 = section_text(client, "worked", "?p03-kv-model=deepseek-v3")
    assert "No 8-GPU node of H100 SXMs, H200s or B200s holds the weights and one user" in v3
    # Qwen2.5 7B's node is two tp-4 replicas: one user's prefill runs on 4 GPUs, not 8
    # (about twice the 8-GPU figure), and its cache comes back over those 4 links.
    qwen = api(client, model="qwen2.5-7b")
    eight = api(client, model="llama-2-7b", tokens=4096, mean_tokens=2048)
    assert qwen["offload_tp"] == 4 and eight["offload_tp"] == 8
    assert "on those 4 H100 SXMs" in section_text(client, "worked", "?p03-kv-model=qwen2.5-7b")


def test_the_mla_sentence_follows_which_side_wins_per_gpu(client) -> None:
    """Found on the fresh review: at Llama 2 7B the answer said MLA's latent saves memory "only
    with data-parallel attention", though under tp 8 its latent (32 × 576 × 2 = 36,864 B per
    token, whole on each GPU) is still less than Llama 2 7B's 524,288 ÷ 8 = 65,536 B per GPU."""
    query = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048"
    answer = section_text(client, "answer", query)
    assert "only with data-parallel attention" not in answer
    assert ("14.2× less, and less per GPU even under tensor parallelism, where every GPU keeps "
            "the whole latent: 36,864 B per token against 65,536 B") in answer


def test_the_answer_does_not_derive_the_gpu_count_from_the_node(client) -> None:
    """Found on the fresh review: "one 8-GPU node ... seats about 268 users at full context, so I
    need 4 GPUs" (Llama 2 7B at 4,096 tokens): 4 GPUs come from 4 replicas of tp 1 (28 users
    each: 0.9 × 85.5 − 13.5 − 3.3 = 60.2 GB ÷ 2.15 GB), not from the node's layout."""
    query = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048"
    answer = section_text(client, "answer", query)
    assert "so I need" not in answer
    assert "seating all 100 users takes 4 GPUs (4 replicas of tensor parallel 1)" in answer
    one = section_text(client, "answer", "?p03-kv-users=1&p03-kv-tokens=131072")
    assert "seating the one user takes 4 GPUs (1 replica of tensor parallel 4)" in one


def test_an_mla_model_has_no_rows_comparing_its_latent_with_itself(client) -> None:
    """Found on the fresh review: DeepSeek-V3's working showed "70,272 B split over 8 GPUs
    (where its KV heads allow) ... 70,272 B against 70,272 B per token"."""
    worked = section_text(client, "worked", "?p03-kv-model=deepseek-v3")
    assert "this model against MLA" not in worked
    assert "MLA at this model's layer count" not in worked


def test_a_lever_that_saves_nothing_says_so(client) -> None:
    """Found on the fresh review: Llama 2 7B at 4,096 tokens with a 4,096-token window and a
    mean of 4,096 showed both levers at the baseline's 215 GB (524,288 B × 4,096 × 100) with
    their usual costs, as if they helped."""
    query = "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=4096"
    worked = section_text(client, "worked", query)
    assert "no saving: the mean is the maximum, 4,096 tokens" in worked
    assert ("no saving at this context: the window is not shorter than the 4,096 tokens each "
            "user holds") in worked
    assert "no saving at this context: no layer has the window" in section_text(
        client, "worked", "?p03-kv-window_share=0")
    one = section_text(client, "worked", "?p03-kv-users=1&p03-kv-tokens=131072")
    assert "For 1 user: 42.9 GB" in one and "All users" not in one


def test_mla_is_not_offered_as_a_saving_where_it_would_cache_more(client) -> None:
    """Found on the fresh review: course-lm caches 6 layers × 2 × 4 KV heads × 32 × 4 B =
    6,144 B per token; DeepSeek-V3's latent at its 6 layers in FP32 is 6 × 576 × 4 = 13,824 B,
    2.25× more, yet the answer said MLA "saves memory per GPU only with data-parallel
    attention", as if it saved memory at all."""
    query = "?p03-kv-model=course-lm&p03-kv-tokens=1024&p03-kv-mean_tokens=512"
    answer = section_text(client, "answer", query)
    assert "saves memory per GPU" not in answer
    assert "would be 13,824 B per token, 2.25× more than its own cache" in answer
    worked = section_text(client, "worked", query)
    assert "no saving: with KV heads this small" in worked
    assert "MLA wins per GPU" not in worked


def test_the_pipeline_example_starts_where_heads_stop_splitting(client) -> None:
    """Found on the fresh review: for Llama 2 7B (32 KV heads) the hint said that "past" the
    KV-head count tp 8 × pp 2 over 16 GPUs keeps 32,768 B per token, which tp 16 alone also
    keeps (524,288 ÷ 16). Past 32 heads the example is tp 32 × pp 2 over 64 GPUs:
    524,288 ÷ 32 ÷ 2 = 8,192 B. At the defaults it stays tp 8 × pp 2: 327,680 ÷ 16 = 20,480 B."""
    follow = section_text(client, "followups",
                          "?p03-kv-model=llama-2-7b&p03-kv-tokens=4096&p03-kv-mean_tokens=2048")
    assert "parallel 32 × pipeline parallel 2 over 64 GPUs keeps 8,192 B per token" in follow
    assert "parallel 8 × pipeline parallel 2 over 16 GPUs keeps 20,480 B per token" in (
        section_text(client, "followups"))


def test_the_course_model_takes_a_plain_possessive(client) -> None:
    """Found on the strict re-review: at course-lm the page wrote "DeepSeek-V3's latent at
    course-lm (this course's demo model)'s 6 layers" and "course-lm (this course's demo
    model)'s own cache"."""
    query = "?p03-kv-model=course-lm&p03-kv-tokens=1024&p03-kv-mean_tokens=512"
    text = section_text(client, "worked", query) + section_text(client, "answer", query)
    assert "model)'s" not in text
    assert "DeepSeek-V3's latent at course-lm's 6 layers" in section_text(client, "answer", query)
    assert "course-lm's own cache is smaller than the latent" in text


def test_offload_figures_on_a_node_that_cannot_hold_the_model_say_so_in_the_answer(
        client) -> None:
    """Found on the strict re-review: DeepSeek-V3 in BF16 fits on no 8-GPU node of H100s,
    H200s or B200s; the worked answer says its offload figures are for 8 B200s "as if they
    could", but the model answer offered 45 ms against 558 ms with no such word."""
    answer = section_text(client, "answer", "?p03-kv-model=deepseek-v3")
    assert ("against 558 ms of prefill to recompute it, both counted on 8 B200s as if they "
            "could hold the model, which in this format they cannot") in answer
    assert "as if they could hold the model" not in section_text(client, "answer")


def test_a_model_whose_query_heads_do_not_divide_by_16_says_so(client) -> None:
    """Found on the strict re-review: for Qwen2.5 7B (28 query heads, 4 KV heads) the page set
    its cache "under tensor parallel 8" beside MLA's and answered "what changes with tensor
    parallelism of 16?" with copied KV heads, though no engine runs it at 8 or 16: vLLM
    refuses a size that does not divide the query heads."""
    query = "?p03-kv-model=qwen2.5-7b"
    worked = section_text(client, "worked", query)
    assert "under tensor parallel 8" not in worked
    assert ("under tensor parallel 4 the latent cannot be split by heads, so each GPU keeps "
            "32,256 B per token against 14,336 B") in worked
    hint = section_text(client, "followups", query)
    assert ("Qwen2.5 7B cannot run at a tensor-parallel size of 16 at all: its 28 query heads "
            "do not divide by 16") in hint
    assert "up to 16, its heads allow 1, 2 and 4" in hint
    assert "cannot run at a tensor-parallel size of 16" not in section_text(client, "followups")
