"""Limits that hold however a person arrives (issue 33): sign-ups per address, new anonymous
sessions per address, practice attempts per account or address, and login records pruned."""

import re
from datetime import timedelta

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _signup(n: int, addr: str = "203.0.113.40"):  # noqa: ANN202
    return Client().post("/accounts/signup/", {
        "username": f"newcomer{n}", "password1": "a long good password 9",
        "password2": "a long good password 9"}, REMOTE_ADDR=addr)


def test_sign_ups_from_one_address_are_limited(settings):
    """20 sign-ups in 5.9 s multiplied every per-account limit; now the 4th within the hour
    from one address is refused (limit 3 here), and another address still signs up."""
    from django.contrib.auth.models import User

    settings.SIGNUPS_PER_ADDRESS_PER_HOUR = 3
    statuses = [_signup(n).status_code for n in range(4)]
    assert statuses == [302, 302, 302, 429]
    assert not User.objects.filter(username="newcomer3").exists()
    assert "Too many accounts" in _signup(9).content.decode()
    assert _signup(10, addr="198.51.100.41").status_code == 302


def test_cookie_less_progress_posts_stop_making_sessions(settings):
    """300 cookie-less progress posts made 301 session rows in 4.3 s. Now an address makes at
    most NEW_SESSIONS_PER_ADDRESS_PER_HOUR (5 here); the 6th is refused before any row is
    written, while a visitor who has a session goes on marking pages."""
    settings.NEW_SESSIONS_PER_ADDRESS_PER_HOUR = 5
    before = Session.objects.count()
    statuses = [Client().post("/pages/01/progress", {"done": "1"},
                              REMOTE_ADDR="203.0.113.50").status_code for _ in range(8)]
    assert statuses == [302] * 5 + [429] * 3
    assert Session.objects.count() - before == 5
    kept = Client()
    kept.post("/pages/01/progress", {"done": "1"}, REMOTE_ADDR="203.0.113.51")
    for _ in range(10):
        assert kept.post("/pages/02/progress", {"done": "1"},
                         REMOTE_ADDR="203.0.113.51").status_code == 302


def _started(client: Client) -> str:
    html = client.get("/practice/1/").content.decode()
    return re.search(r'name="started" value="([^"]+)"', html).group(1)


def test_practice_attempts_are_capped_per_address(settings):
    """300 answers of 20,000 characters added 6 MB in 14 s. Now an address (anonymous) saves
    at most PRACTICE_ATTEMPTS_PER_HOUR answers (3 here); the 4th is refused beside the answer,
    which is kept for later."""
    from course.models import PracticeAttempt

    settings.PRACTICE_ATTEMPTS_PER_HOUR = 3
    statuses = []
    for n in range(4):
        visitor = Client(REMOTE_ADDR="203.0.113.60")
        statuses.append(visitor.post("/practice/1/", {"answer": f"answer {n} " + "x" * 100,
                                                      "started": _started(visitor)}).status_code)
    assert statuses == [302, 302, 302, 400]
    assert PracticeAttempt.objects.count() == 3


def test_expired_login_records_are_pruned():
    """Failed-login rows whose cool-off has passed, and successful-login records past
    AXES_ACCESS_LOG_KEEP_DAYS, are deleted by the sweep (they grew without bound: +289 rows)."""
    from axes.models import AccessAttempt, AccessLog
    from django.conf import settings

    from course.sweeper import login_records_prune

    old = timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(minutes=1)
    for n in range(3):
        AccessAttempt.objects.create(username=f"u{n}", ip_address="203.0.113.70",
                                     user_agent="t", failures_since_start=1)
    AccessAttempt.objects.update(attempt_time=old)  # attempt_time is set on create
    fresh = AccessAttempt.objects.create(username="now", ip_address="203.0.113.70",
                                         user_agent="t", failures_since_start=1)
    AccessLog.objects.create(username="ada", ip_address="203.0.113.70", user_agent="t")
    AccessLog.objects.filter().update(attempt_time=timezone.now() - timedelta(days=31))
    assert login_records_prune() == 4
    assert list(AccessAttempt.objects.values_list("pk", flat=True)) == [fresh.pk]


def test_cookie_less_practice_views_stop_making_sessions(settings):
    """Each cookie-less view of an interview gave the visitor an id, so a session row. Past
    the address's allowance (3 here) the page still shows, with a draft tag for that page
    only, and no row is written."""
    settings.NEW_SESSIONS_PER_ADDRESS_PER_HOUR = 3
    before = Session.objects.count()
    for _ in range(6):
        response = Client().get("/practice/1/", REMOTE_ADDR="203.0.113.80")
        assert response.status_code == 200 and b'name="started"' in response.content
    assert Session.objects.count() - before == 3
