"""Login throttling: repeated wrong passwords for one username from one address lock that pair
(django-axes), many from one address lock the address (course/throttle.py), each for a while
with a clear message; the right password does not get through a lock."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

LIMIT = 5


def login(password: str, *, username: str = "ada", addr: str = "203.0.113.5"):
    return Client().post("/accounts/login/", {"username": username, "password": password},
                         REMOTE_ADDR=addr)


@pytest.fixture
def ada():
    return User.objects.create_user("ada", password="correct horse battery")


def test_forty_wrong_passwords_are_not_all_answered(ada):
    statuses = [login(f"guess-{n}").status_code for n in range(40)]
    assert statuses[:LIMIT - 1] == [200] * (LIMIT - 1)  # the form again, with its error
    assert set(statuses[LIMIT:]) == {429}


def test_a_locked_out_login_says_so_and_refuses_the_right_password(ada):
    for n in range(LIMIT):
        login(f"guess-{n}")
    response = login("correct horse battery")
    assert response.status_code == 429
    html = response.content.decode()
    assert "Too many failed logins" in html and "minutes" in html
    assert "_auth_user_id" not in Client().session.keys()


def test_the_lockout_covers_the_pair_not_the_username_alone(ada):
    """5 wrong passwords for "ada" from one address, then ada's own correct password from
    another: it answered 429 when the username alone was locked, so anyone could lock anyone
    out, again and again. Now only that address-and-username pair is paused."""
    User.objects.create_user("bob", password="another good password")
    for n in range(LIMIT):
        login(f"guess-{n}")
    # The same pair: locked.
    assert login("correct horse battery").status_code == 429
    # The same account from elsewhere: ada gets in.
    assert login("correct horse battery", addr="198.51.100.20").status_code == 302
    # The same address, another account: not locked by ada's pair.
    assert login("another good password", username="bob").status_code == 302


def test_an_address_failing_across_many_usernames_is_paused(ada, settings):
    """Guessing one password across usernames from one address: after
    LOGIN_ADDRESS_FAILURE_LIMIT failures (8 here) the address is paused, even for a username
    it never tried; another address is not."""
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = 8
    statuses = [login("Winter2026!", username=f"user{n}").status_code for n in range(9)]
    assert statuses == [200] * 8 + [429]
    assert login("correct horse battery").status_code == 429
    assert login("correct horse battery", addr="198.51.100.30").status_code == 302


def test_a_good_login_still_works(ada):
    assert login("correct horse battery").status_code == 302
