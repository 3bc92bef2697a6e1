"""Page 04 (problems 8 and 22) at inputs the earlier reviews did not try: a load the cache
makes fit, a hit no shorter than a miss, one user token, uneven homes named with their noun,
and a split layout that needs more GPUs than colocated at the load asked."""

import re

import pytest

from problems.content import p08, p22
from tests.problems.content.helpers import problem_html, section_html, text_of

pytestmark = pytest.mark.django_db


def _text(client, number: int, slug: str, prefix: str, calculator, **values) -> str:
    query = "&".join(f"{prefix}-{k}={'' if v is None else v}" for k, v in {
        **calculator.form_class().defaults(), **values}.items())
    response = client.get("/pages/04/?" + query)
    assert response.status_code == 200
    problem = problem_html(response.content.decode(), number)
    return " ".join(text_of(section_html(problem, number, slug)).split())


def p8_text(client, slug: str, **values) -> str:
    return _text(client, 8, slug, p08.PREFIX, p08.CALCULATOR, **values)


def p22_text(client, slug: str, **values) -> str:
    return _text(client, 22, slug, p22.PREFIX, p22.CALCULATOR, **values)


def test_problem_8_a_load_the_cache_makes_fit_is_not_said_to_queue_without_bound(client) -> None:
    """One replica of 4 H100s, one application, 1,000 requests a minute: every request a miss
    needs 10.4 GPUs of prefill against 4, but every request hits, and the hits need 0.959. The
    page said 'queues grow without bound' regardless."""
    worked = p8_text(client, "worked", replicas=1, applications=1)
    assert "queues grow without bound" not in worked
    assert "about 10.4 GPUs busy against its 4 GPUs" in worked
    assert "at affine routing's 0.959, so here the cache decides whether the prefills fit" \
        in worked
    # 405B on L4s: even every hit cannot fit, and then the page says so.
    worse = p8_text(client, "worked", model="llama-3.1-405b", gpu="l4")
    assert "Even at affine routing's hit rate they need about 45.2, so queues grow without " \
           "bound whatever the cache does" in worse


def test_problem_8_a_hit_no_shorter_than_a_miss_saves_no_ttft_in_words(client) -> None:
    """A 100-token system prompt and one user token on Llama 3.1 70B: both lone prefills read
    the weights in 13 ms; the page said '0 s of TTFT (0% of a lone prefill)', '0 GPU-seconds,
    0% of the throughput view's', 'Only the 1 user tokens' and 'each hit saves about 0 s'."""
    worked = p8_text(client, "worked", system_tokens=100, user_tokens=1)
    answer = p8_text(client, "answer", system_tokens=100, user_tokens=1)
    for text in (worked, answer):
        assert "0 s of TTFT" not in text and not re.search(r"(?<![\d.])0% of", text)
    assert "1 user tokens" not in worked
    assert "Only the request's own 1 token is computed, attending to the cached prefix" in worked
    assert "that saves no TTFT at all: both lone prefills are bound by reading the weights, " \
           "13 ms each" in worked
    assert "would give no GPU-seconds at all" in worked
    assert "a hit just as long, because both passes are bound by reading the weights" in answer


def test_problem_8_names_the_gpu_it_prices(client) -> None:
    """The question's opening said '(the calculator's GPU)' instead of naming it."""
    worked = p8_text(client, "worked", gpu="mi300x")
    assert "on replicas of 4 GPUs (AMD Instinct MI300X)" in worked
    assert "the calculator's GPU" not in worked


def test_problem_22_a_split_that_needs_more_gpus_at_this_load_is_not_said_to_pay_here(
        client) -> None:
    """At 0.001 requests a second one colocated replica (4 GPUs) serves the load against two
    pools of one replica each (8 GPUs): the goodput per GPU favours splitting (0.289 against
    0.248), but the page said 'splitting pays here'. At the defaults both need 12 GPUs, and at
    50 requests a second splitting saves 28."""
    quiet = p22_text(client, "worked", requests_per_second=0.001)
    assert "splitting pays here" not in quiet
    assert "1 replica (4 GPUs) colocated against 2 replicas (8 GPUs) split" in quiet
    assert "At this load, though, two pools of whole replicas need 4 GPUs more than colocated " \
           "serving: the gain per GPU pays only once the load keeps both pools busy." in quiet
    default = p22_text(client, "worked")
    assert "At this load both layouts need the same GPUs, so the gain shows as headroom" \
        in default
    busy = p22_text(client, "worked", requests_per_second=50)
    assert "At this load that saves 28 GPUs." in busy
    # DeepSeek-V3 on H200s: no gain per GPU, and a whole replica more at this load.
    mla = p22_text(client, "worked", model="deepseek-v3", tp=8, gpu="h200", dtype="fp8")
    assert "per GPU splitting buys nothing" in mla
    assert "At this load splitting also needs 8 GPUs more" in mla
    assert "it also needs" not in mla  # "it" had no noun: the layout, or the gain?
