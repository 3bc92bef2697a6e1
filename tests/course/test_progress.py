"""Progress per visitor: marking pages done, the session for anonymous visitors, the database
for accounts, merging on login and signup, and isolation between visitors."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from course.models import PageProgress

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

PASSWORD = "a-long-Passphrase-42"


def _mark(client: Client, slug: str, done: str, **headers):
    return client.post(f"/pages/{slug}/progress", {"done": done}, **headers)


def _home(client: Client) -> str:
    return client.get("/").content.decode()


def test_plain_form_marks_done_and_redirects_back(client):
    response = _mark(client, "03", "1")
    assert response.status_code == 302
    assert response["Location"] == "/pages/03/#progress"
    html = client.get("/pages/03/").content.decode()
    assert "Pages done 1 / 10" in html
    assert "Mark as not done" in html


def test_htmx_swaps_the_panel_and_the_summary(client):
    response = _mark(client, "03", "1", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="progress"')
    assert "Mark as not done" in html
    assert 'id="progress-summary" data-progress-summary hx-swap-oob="true"' in html
    assert "Pages done 1 / 10" in html
    assert "HX-Request" in response["Vary"]


def test_next_up_is_the_first_page_not_done(client):
    _mark(client, "01", "1")
    _mark(client, "03", "1")
    html = _home(client)
    assert "Pages done 2 / 10" in html
    assert 'Next up: <a href="/pages/02/">02 The KV cache and attention</a>' in html
    assert html.count('<span class="badge done">Done</span>') == 2


def test_marking_not_done_undoes_it(client):
    _mark(client, "01", "1")
    _mark(client, "01", "0")
    assert "Pages done 0 / 10" in _home(client)
    _mark(client, "01", "0")  # idempotent
    assert "Pages done 0 / 10" in _home(client)


def test_all_done_has_nothing_next(client):
    for n in range(1, 11):
        _mark(client, f"{n:02d}", "1")
    html = _home(client)
    assert "Pages done 10 / 10" in html
    assert "Next up: nothing" in html


@pytest.mark.parametrize("body", [{"done": "2"}, {"done": ""}, {"done": "yes"}, {}])
def test_bad_done_values_are_400(client, body):
    response = client.post("/pages/03/progress", body)
    assert response.status_code == 400
    assert "done" in response.content.decode()


def test_progress_needs_post(client):
    assert client.get("/pages/03/progress").status_code == 405


def test_csrf_is_enforced():
    strict = Client(enforce_csrf_checks=True)
    strict.get("/pages/03/")
    assert _mark(strict, "03", "1").status_code == 403
    token = strict.cookies["csrftoken"].value
    assert _mark(strict, "03", "1", HTTP_X_CSRFTOKEN=token).status_code == 302
    assert "Pages done 1 / 10" in _home(strict)


def test_two_visitors_never_share_progress():
    alice, bob = Client(), Client()
    _mark(alice, "04", "1")
    assert "Pages done 1 / 10" in _home(alice)
    assert "Pages done 0 / 10" in _home(bob)


def test_account_progress_lives_in_the_database(client, django_user_model):
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    client.force_login(user)
    _mark(client, "05", "1")
    assert list(PageProgress.objects.filter(user=user).values_list("page", flat=True)) == [5]
    other = Client()
    other.force_login(user)  # another device
    assert "Pages done 1 / 10" in _home(other)
    _mark(other, "05", "0")
    assert not PageProgress.objects.filter(user=user).exists()


def test_two_accounts_never_share_progress(client, django_user_model):
    ada = django_user_model.objects.create_user("ada", password=PASSWORD)
    bob = django_user_model.objects.create_user("bob", password=PASSWORD)
    client.force_login(ada)
    _mark(client, "02", "1")
    other = Client()
    other.force_login(bob)
    assert "Pages done 0 / 10" in _home(other)


def test_login_merges_the_session_into_the_account(client, django_user_model):
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    PageProgress.objects.create(user=user, page=7)
    _mark(client, "01", "1")
    _mark(client, "07", "1")
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert response.status_code == 302
    assert sorted(PageProgress.objects.filter(user=user).values_list("page", flat=True)) == [1, 7]
    assert "Pages done 2 / 10" in _home(client)


def test_signup_keeps_the_anonymous_progress(client):
    _mark(client, "03", "1")
    response = client.post("/accounts/signup/", {
        "username": "grace", "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302
    user = get_user_model().objects.get(username="grace")
    assert list(PageProgress.objects.filter(user=user).values_list("page", flat=True)) == [3]
    html = _home(client)
    assert "Signed in as grace" in html
    assert "Pages done 1 / 10" in html


def test_logout_hides_the_account_progress(client, django_user_model):
    user = django_user_model.objects.create_user("ada", password=PASSWORD)
    client.force_login(user)
    _mark(client, "06", "1")
    assert client.post("/accounts/logout/").status_code == 302
    assert "Pages done 0 / 10" in _home(client)
    assert PageProgress.objects.filter(user=user, page=6).exists()


def test_login_with_a_wrong_password_says_so(client, django_user_model):
    django_user_model.objects.create_user("ada", password=PASSWORD)
    response = client.post("/accounts/login/", {"username": "ada", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def test_signup_errors_sit_beside_their_fields(client):
    response = client.post("/accounts/signup/", {
        "username": "grace", "password1": PASSWORD, "password2": "different"})
    html = response.content.decode()
    assert response.status_code == 200
    assert '<p class="field-error" id="id_password2_error">' in html
    assert "didn’t match" in html or "didn't match" in html


@pytest.mark.parametrize("stored", [[3, 42, 0], [3, "x", None, 3.5], "3"])
def test_session_progress_ignores_values_that_are_not_pages(client, stored):
    session = client.session
    session["pages_done"] = stored
    session.save()
    expected = "Pages done 0 / 10" if stored == "3" else "Pages done 1 / 10"
    assert expected in _home(client)


def test_login_moves_the_session_copy_into_the_account(client, django_user_model):
    django_user_model.objects.create_user("ada", password=PASSWORD)
    _mark(client, "02", "1")
    client.post("/accounts/login/", {"username": "ada", "password": PASSWORD})
    assert "pages_done" not in client.session
    _mark(client, "02", "0")  # undone on the account: nothing in the session brings it back
    assert "Pages done 0 / 10" in _home(client)
