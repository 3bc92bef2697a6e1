"""The fragment cache behind the calculators: what it serves is exactly what a fresh render
gives, for every calculator, default or not; it is bounded, and keyed on every input."""

import re

import pytest
from django.test import override_settings

from course.render_cache import FragmentCache, fragments, query_key
from problems.calculators import calculators_all

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache():
    fragments.clear()
    yield
    fragments.clear()


def _html(client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200
    # CSRF tokens are masked afresh on every response (64 characters): everything else equal.
    return re.sub(r"\b[A-Za-z0-9]{64}\b", "CSRF", response.content.decode())


@pytest.mark.parametrize("path", ["/calculators/", "/pages/01/", "/"])
def test_a_cached_page_is_the_same_as_a_fresh_render(client, path):
    with override_settings(RENDER_CACHE=False):
        fresh = _html(client, path)
    first = _html(client, path)
    again = _html(client, path)
    assert first == fresh == again
    if path == "/calculators/":
        # The whole listing is kept (one hit per view after the first), built from each
        # calculator's kept fragment.
        assert fragments.hits >= 1
        assert sum(1 for key in fragments._entries if key[0] == "calculator") >= \
            len(calculators_all())


def test_every_calculator_re_render_is_the_same_cached_or_not(client):
    # API-only formulas (page=False) have no calculator view to cache.
    for calculator in [c for c in calculators_all(listed_only=False) if c.page]:
        form = calculator.form_class(prefix=calculator.slug)
        query = {form.add_prefix(k): v for k, v in form.defaults().items() if v is not None}
        path = f"/calculators/{calculator.slug}/"
        with override_settings(RENDER_CACHE=False):
            fresh = client.get(path, query, HTTP_HX_REQUEST="true").content
        assert client.get(path, query, HTTP_HX_REQUEST="true").content == fresh
        assert client.get(path, query, HTTP_HX_REQUEST="true").content == fresh


def test_changed_inputs_are_not_served_from_the_cache(client):
    from problems.calculators import calculator_get

    form = calculator_get("kv-cache").form_class(prefix="kv-cache")
    query = {form.add_prefix(k): v for k, v in form.defaults().items() if v is not None}
    path = "/calculators/kv-cache/"
    one = client.get(path, {**query, "kv-cache-users": "7"}, HTTP_HX_REQUEST="true").content
    two = client.get(path, {**query, "kv-cache-users": "8"}, HTTP_HX_REQUEST="true").content
    assert one != two and b"Correct the" not in one + two
    page_one = client.get(path, {**query, "kv-cache-users": "7"}).content
    assert b'value="7"' in page_one and b'value="8"' not in page_one


def test_the_cache_is_bounded_by_bytes():
    cache = FragmentCache(max_bytes=1000)
    for n in range(50):
        cache.get_or_render(n, lambda n=n: f"{n:03d}" * 50)  # 150 bytes each
    assert cache.bytes <= 1000
    assert cache.get_or_render(49, lambda: "fresh") == "049" * 50  # the newest stayed
    assert cache.get_or_render(0, lambda: "fresh") == "fresh"  # the oldest went


def test_long_or_foreign_queries_do_not_make_keys():
    assert query_key({"a-x": "1", "b-y": "2"}, prefix="a") == (("a-x", ("1",)),)
    assert query_key({"a-x": "9" * 5000}, prefix="a") is None


@pytest.mark.parametrize("page", range(1, 11))
def test_every_page_is_the_same_with_its_figures_cached_or_not(client, page):
    """Each problem's worked figures are computed once per query and kept (they were computed
    on every view: about 80% of page 01's render). What is served stays a fresh render's,
    at the defaults and with inputs that change the figures or are refused."""
    from course.render_cache import contexts

    path = f"/pages/{page:02d}/"
    for query in ("", "?p1-prompt_tokens=4000&p1-batch=8", "?p1-prompt_tokens=-5"):
        with override_settings(RENDER_CACHE=False):
            fresh = _html(client, path + query)
        assert _html(client, path + query) == fresh
        assert _html(client, path + query) == fresh
    assert contexts.hits > 0


def test_the_calculators_listing_follows_its_query(client):
    """The kept listing is keyed on the whole query: inputs in it give their own listing."""
    form, name, value = next(
        (form, k, v) for c in calculators_all()
        for form in [c.form_class(prefix=c.slug)] for k, v in form.defaults().items()
        if isinstance(v, int) and not isinstance(v, bool) and v > 1)
    query = {form.add_prefix(name): str(value * 2)}
    with override_settings(RENDER_CACHE=False):
        fresh = _html(client, "/calculators/?" + "&".join(f"{k}={v}" for k, v in query.items()))
    default = _html(client, "/calculators/")
    changed = _html(client, "/calculators/?" + "&".join(f"{k}={v}" for k, v in query.items()))
    assert changed == fresh != default
