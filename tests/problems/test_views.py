"""/calculators/ and /calculators/<slug>/ through the test client: full pages, htmx partials,
bad input, and the embedding template tag."""

import json
import re
from html import unescape

import pytest
from django.template import Context, Template
from django.test import RequestFactory

from problems.arithmetic import memory
from problems.calculators import calculators_all

pytestmark = pytest.mark.django_db

KV_QUERY = ("kv-cache-model=llama-3-8b&kv-cache-tokens=1300&kv-cache-users=1"
            "&kv-cache-dtype=bf16&kv-cache-tp=1")


def _step_values(html: str) -> list[str]:
    values = re.findall(r'<td class="value(?: value-long)?">([^<]*)</td>', html)
    return [unescape(v) for v in values]


def test_index_lists_every_calculator_with_its_working(client):
    response = client.get("/calculators/")
    assert response.status_code == 200
    html = response.content.decode()
    for calculator in calculators_all():
        assert f'id="calc-{calculator.slug}"' in html
        assert f'href="/calculators/{calculator.slug}/"' in html
    assert html.count('<table class="steps">') == len(calculators_all())
    assert "calculator-invalid" not in html
    # The scripts that draw plots come once, with the first calculator.
    assert html.count("plotly-basic.min.js") == 1
    assert html.count("js/plots.js") == 1


@pytest.mark.parametrize("calculator", calculators_all(), ids=lambda c: c.slug)
def test_each_calculator_renders_on_its_own_page_with_defaults(client, calculator):
    response = client.get(f"/calculators/{calculator.slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<form class="calculator-form" method="get" novalidate' in html
    assert _step_values(html), "no worked steps"
    assert "calculator-invalid" not in html
    if calculator.plot is not None:
        figure = json.loads(unescape(re.search(r'data-plot="([^"]*)"', html).group(1)))
        assert figure["data"][0]["x"]
        assert '<table class="plot-table">' in html


def test_page_figures_equal_the_arithmetic_for_the_same_inputs(client):
    html = client.get(f"/calculators/kv-cache/?{KV_QUERY}").content.decode()
    expected = memory.kv_cache(model="llama-3-8b", tokens=1300, users=1, dtype="bf16", tp=1)
    assert _step_values(html) == [step.display for step in expected.steps]


def test_plain_submit_keeps_the_inputs(client):
    html = client.get(f"/calculators/kv-cache/?{KV_QUERY}").content.decode()
    assert 'name="kv-cache-tokens" value="1300"' in html
    assert '<option value="llama-3-8b" selected>' in html


def test_htmx_rerender_returns_only_the_partial_with_new_numbers(client):
    full = client.get("/calculators/kv-cache/").content.decode()
    response = client.get(f"/calculators/kv-cache/?prefix=kv-cache&{KV_QUERY}",
                          HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "HX-Request" in response["Vary"]
    html = response.content.decode()
    assert "<html" not in html and "<form" not in html
    assert 'id="calc-kv-cache-output"' in html
    expected = memory.kv_cache(model="llama-3-8b", tokens=1300, users=1)
    assert _step_values(html) == [step.display for step in expected.steps]
    assert _step_values(html) != _step_values(full)
    # Every field's error slot comes along out of band, emptied when the input is fine.
    assert 'id="id_kv-cache-tokens_error" hx-swap-oob="true"></p>' in html


def test_htmx_rerender_with_a_prefix_binds_that_prefix(client):
    query = KV_QUERY.replace("kv-cache-", "p3-kv-")
    html = client.get(f"/calculators/kv-cache/?prefix=p3-kv&{query}",
                      HTTP_HX_REQUEST="true").content.decode()
    assert 'id="calc-p3-kv-output"' in html
    expected = memory.kv_cache(model="llama-3-8b", tokens=1300, users=1)
    assert _step_values(html)[2] == expected.steps[2].display


@pytest.mark.parametrize("htmx", [False, True])
def test_bad_input_shows_a_field_error_not_a_500(client, htmx):
    query = KV_QUERY.replace("tokens=1300", "tokens=-4")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get(f"/calculators/kv-cache/?{query}", **headers)
    assert response.status_code == 200
    html = response.content.decode()
    error = re.search(r'id="id_kv-cache-tokens_error"[^>]*>([^<]+)</p>', html)
    assert error and "at least 1" in error.group(1)
    assert "calculator-invalid" in html
    if not htmx:
        assert 'name="kv-cache-tokens" value="-4"' in html


def test_a_formula_refusal_shows_beside_its_field(client):
    query = KV_QUERY.replace("tp=1", "tp=3")
    html = client.get(f"/calculators/kv-cache/?{query}").content.decode()
    error = re.search(r'id="id_kv-cache-tp_error"[^>]*>([^<]+)</p>', html)
    assert error and "split evenly" in error.group(1)


def test_unknown_calculator_is_404_and_bad_prefix_is_400(client):
    assert client.get("/calculators/no-such-thing/").status_code == 404
    assert client.get("/calculators/kv-cache/?prefix=%3Cb%3E").status_code == 400
    assert client.post("/calculators/kv-cache/").status_code == 405


def test_template_tag_embeds_with_overrides_and_a_prefix():
    request = RequestFactory().get("/pages/02/")
    template = Template('{% load calculator_tags %}'
                        '{% calculator "kv-cache" prefix="p3" model="llama-3.1-70b" tokens=32768 '
                        'users=100 %}'
                        '{% calculator "kv-cache" prefix="p3-small" tokens=1000 users=1 %}')
    html = template.render(Context({"request": request}))
    assert 'id="calc-p3"' in html and 'id="calc-p3-small"' in html
    assert html.count("plotly-basic.min.js") == 1
    big = memory.kv_cache(model="llama-3.1-70b", tokens=32768, users=100)
    small = memory.kv_cache(model="llama-3.1-70b", tokens=1000, users=1)
    values = _step_values(html)
    assert big.steps[2].display in values and small.steps[2].display in values
    # Plain submit goes back to the embedding page, to this calculator.
    assert 'action="/pages/02/#calc-p3"' in html
    assert 'hx-get="/calculators/kv-cache/?prefix=p3"' in html


def test_template_tag_request_overrides_the_embedding_defaults():
    request = RequestFactory().get("/pages/02/?p3-model=llama-3-8b&p3-tokens=1300&p3-users=1"
                                   "&p3-dtype=bf16&p3-tp=1")
    html = Template('{% load calculator_tags %}{% calculator "kv-cache" prefix="p3" tokens=9 %}'
                    ).render(Context({"request": request}))
    expected = memory.kv_cache(model="llama-3-8b", tokens=1300, users=1)
    assert _step_values(html)[2] == expected.steps[2].display


# (calculator, page query, API path and query): the same inputs on both sides.
SAME_INPUTS = [
    ("kv-cache", KV_QUERY, "kv-cache?model=llama-3-8b&tokens=1300&users=1&dtype=bf16&tp=1"),
    ("decode", "decode-model=llama-3-8b&decode-gpu=h100-sxm&decode-batch=4"
               "&decode-context_tokens=2000&decode-output_tokens=300&decode-dtype=bf16"
               "&decode-kv_dtype=&decode-bandwidth_efficiency=0.8",
     "decode?model=llama-3-8b&gpu=h100-sxm&batch=4&context_tokens=2000&output_tokens=300"
     "&dtype=bf16&bandwidth_efficiency=0.8"),
    ("queue", "queue-arrival_rate=30&queue-service_rate=10&queue-servers=4",
     "queue?arrival_rate=30&service_rate=10&servers=4"),
    ("speculative", "speculative-acceptance=0.6&speculative-draft_tokens=5"
                    "&speculative-draft_cost=0.1&speculative-batch=64",
     "speculative?acceptance=0.6&draft_tokens=5&draft_cost=0.1&model=llama-3-8b&gpu=h100-sxm"
     "&batch=64&context_tokens=1000&mfu=0.5"),
    ("chunked-prefill", "chunked-prefill-prompt_tokens=20000&chunked-prefill-chunk_tokens=1024",
     "chunked-prefill?model=llama-3.1-8b&gpu=h100-sxm&prompt_tokens=20000&chunk_tokens=1024&mfu=0.5"),
    ("cost", "cost-gpu=h200&cost-tokens_per_second=3000&cost-price_per_hour=",
     "cost?gpu=h200&tokens_per_second=3000"),
]


@pytest.mark.parametrize(("slug", "page_query", "api_query"), SAME_INPUTS,
                         ids=[case[0] for case in SAME_INPUTS])
def test_page_figures_equal_the_json_api_for_the_same_inputs(client, slug, page_query, api_query):
    api = client.get(f"/api/calc/{api_query}")
    assert api.status_code == 200, api.content
    html = client.get(f"/calculators/{slug}/?{page_query}").content.decode()
    assert _step_values(html) == [step["display"] for step in api.json()["steps"]]


def test_index_binds_the_submitted_calculator_and_leaves_the_others_on_defaults(client):
    html = client.get("/calculators/?weights-model=llama-3-8b&weights-dtype=int4").content.decode()
    expected = memory.weights_bytes(model="llama-3-8b", dtype="int4")
    assert expected.steps[-1].display in _step_values(html)
    assert 'name="kv-cache-tokens" value="32768"' in html


def test_a_link_made_before_an_input_existed_still_works(client):
    """A query that names some of a calculator's fields binds them; the others, such as the
    new kv_dtype or reserve_gb, keep their defaults instead of turning into errors."""
    html = client.get("/calculators/decode/?decode-batch=16").content.decode()
    assert "calculator-invalid" not in html
    assert 'name="decode-batch" value="16"' in html


def test_api_only_formulas_have_no_page(client):
    assert client.get("/calculators/roofline-ridge/").status_code == 404
    assert client.get("/api/calc/roofline?gpu=h100-sxm").status_code == 200


def test_template_tag_names_an_unknown_calculator():
    from django.template import TemplateSyntaxError

    with pytest.raises(TemplateSyntaxError):
        Template('{% load calculator_tags %}{% calculator "nope" %}').render(Context({}))
