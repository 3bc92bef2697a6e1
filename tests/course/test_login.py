"""Logging in: `next` keeps the visitor on this site (an outside address is ignored)."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("next_url", "lands"), [
    ("/pages/03/", "/pages/03/"),
    ("https://evil.example/steal", "/"),
    ("//evil.example/steal", "/"),
    ("https:/\\evil.example", "/"),
])
def test_login_next_stays_on_the_site(next_url, lands):
    User.objects.create_user("ada", password="correct horse battery")
    response = Client().post(f"/accounts/login/?next={next_url}",
                             {"username": "ada", "password": "correct horse battery",
                              "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == lands
