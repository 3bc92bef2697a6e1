"""Login throttling (django-axes): repeated wrong passwords lock out the address and the
username for a while, with a clear message, and the right password does not get through."""

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


def test_the_lockout_covers_the_address_and_the_username(ada):
    User.objects.create_user("bob", password="another good password")
    for n in range(LIMIT):
        login(f"guess-{n}")
    # The same address, another account: locked (the address is).
    assert login("another good password", username="bob").status_code == 429
    # The same account from elsewhere: locked (the username is).
    assert login("correct horse battery", addr="198.51.100.20").status_code == 429
    # Someone else, elsewhere: unaffected.
    assert login("another good password", username="bob",
                 addr="198.51.100.21").status_code == 302


def test_a_good_login_still_works(ada):
    assert login("correct horse battery").status_code == 302
