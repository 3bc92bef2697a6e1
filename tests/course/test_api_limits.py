"""The /v1 limits (course/api_keys.py) on the real Redis: per account, not per key; a sliding
minute; tokens reserved at admission and refunded; a cap on requests running at once; and each
check with its take one atomic step, so parallel requests cannot pass a limit together."""

import threading
import uuid

import pytest
from django.core.management import CommandError, call_command

from course import api_keys
from course.api_keys import RateLimited, api_key_admit, api_key_settle


@pytest.fixture
def rds():
    from demos.services import redis

    client = redis()
    for key in client.scan_iter(match="course:ratelimit:user:9*"):
        client.delete(key)
    yield client
    for key in client.scan_iter(match="course:ratelimit:user:9*"):
        client.delete(key)


def _id() -> str:
    return uuid.uuid4().hex


def test_the_request_window_slides_instead_of_restarting_each_minute(rds, settings):
    """3 requests a minute; 3 at t=50 s. At t=61 s a calendar-minute counter had started afresh
    and let 3 more through (6 in 11 s); the sliding window refuses until t=110 s, when the
    first of them is 60 s old, and says so: Retry-After 49 s."""
    settings.API_KEY_REQUESTS_PER_MINUTE = 3
    for _ in range(3):
        api_key_admit(rds, user_id=901, request_id=_id(), now=1_000_050.0)
    with pytest.raises(RateLimited) as limited:
        api_key_admit(rds, user_id=901, request_id=_id(), now=1_000_061.0)
    assert (limited.value.kind, limited.value.retry_after_s) == ("requests", 49)
    api_key_admit(rds, user_id=901, request_id=_id(), now=1_000_110.5)


def test_tokens_are_reserved_at_admission_and_the_rest_refunded(rds, settings):
    """A 1,000-token limit: two requests reserving 600 each cannot both run (1,200 > 1,000),
    which is how 25,950 tokens were served in a minute against 20,000 when tokens were only
    counted at the end. Settling the first at 100 used tokens refunds 500: the second fits."""
    settings.API_KEY_TOKENS_PER_MINUTE = 1000
    first = _id()
    api_key_admit(rds, user_id=902, request_id=first, reserve_tokens=600, now=1000.0)
    with pytest.raises(RateLimited) as limited:
        api_key_admit(rds, user_id=902, request_id=_id(), reserve_tokens=600, now=1001.0)
    assert limited.value.kind == "tokens" and limited.value.retry_after_s == 59
    api_key_settle(rds, user_id=902, request_id=first, tokens=100)
    api_key_admit(rds, user_id=902, request_id=_id(), reserve_tokens=600, now=1002.0)
    # 100 + 600 held: 301 more would pass the limit, 300 fit.
    with pytest.raises(RateLimited):
        api_key_admit(rds, user_id=902, request_id=_id(), reserve_tokens=301, now=1003.0)
    api_key_admit(rds, user_id=902, request_id=_id(), reserve_tokens=300, now=1003.0)


def test_requests_running_at_once_are_capped_and_a_finished_one_frees_its_seat(rds, settings):
    settings.API_CONCURRENT_PER_USER = 2
    seats = [_id(), _id()]
    for seat in seats:
        api_key_admit(rds, user_id=903, request_id=seat, seat=True, now=1000.0)
    with pytest.raises(RateLimited) as limited:
        api_key_admit(rds, user_id=903, request_id=_id(), seat=True, now=1000.5)
    assert limited.value.kind == "concurrent"
    api_key_settle(rds, user_id=903, request_id=seats[0], tokens=0)
    api_key_admit(rds, user_id=903, request_id=_id(), seat=True, now=1001.0)
    # A seat whose web process died is freed after SEAT_TTL_S.
    api_key_admit(rds, user_id=903, request_id=_id(), seat=True,
                  now=1001.0 + api_keys.SEAT_TTL_S + 1)


def test_parallel_admissions_never_pass_the_limit_together(rds, settings):
    """20 threads at once against a limit of 5 requests: exactly 5 admitted (a check followed
    by a separate take admits more under a race)."""
    settings.API_KEY_REQUESTS_PER_MINUTE = 5
    admitted, barrier = [], threading.Barrier(20)

    def one() -> None:
        barrier.wait()
        try:
            api_key_admit(rds, user_id=904, request_id=_id())
            admitted.append(1)
        except RateLimited:
            pass

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 5


@pytest.mark.django_db
def test_two_keys_of_one_account_share_its_limits(django_user_model, settings):
    """Key 2 answered while key 1 was limited: the limits now count per account."""
    from django.test import Client

    from demos.services import redis

    settings.API_KEY_REQUESTS_PER_MINUTE = 2
    user = django_user_model.objects.create_user(username="two-keys", password="pw-long-1234")
    for key in redis().scan_iter(match=f"course:ratelimit:user:{user.pk}:*"):
        redis().delete(key)
    raws = [api_keys.api_key_create(user=user, name=f"k{i}")[1] for i in range(2)]
    statuses = [Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/v1/models").status_code
                for raw in (raws[0], raws[0], raws[1])]
    assert statuses == [200, 200, 429]


@pytest.mark.django_db
def test_an_account_holds_a_bounded_number_of_keys(django_user_model, settings, client):
    """40 keys on one account in 1.4 s multiplied every per-key limit."""
    settings.API_KEYS_PER_USER = 3
    user = django_user_model.objects.create_user(username="many-keys", password="pw-long-1234")
    for i in range(3):
        api_keys.api_key_create(user=user, name=f"k{i}")
    with pytest.raises(api_keys.TooManyKeys):
        api_keys.api_key_create(user=user, name="one too many")
    client.force_login(user)
    response = client.post("/account/", {"name": "one too many"})
    assert response.status_code == 400 and b"at most 3 active keys" in response.content
    first = api_keys.api_keys_for(user=user)[0]
    api_keys.api_key_revoke(user=user, key_id=first.pk)
    api_keys.api_key_create(user=user, name="after a revoke")


@pytest.mark.django_db
def test_wrong_keys_from_one_address_are_throttled(settings):
    from django.test import Client

    from demos.services import redis

    for key in redis().scan_iter(match="course:ratelimit:authfail:*"):
        redis().delete(key)
    settings.API_AUTH_FAILURES_PER_MINUTE = 3
    stranger = Client(HTTP_AUTHORIZATION="Bearer sk-course-guess")
    statuses = [stranger.get("/v1/models").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    for key in redis().scan_iter(match="course:ratelimit:authfail:*"):
        redis().delete(key)


@pytest.mark.django_db
def test_apikey_revoke_revokes_exactly_one_key(django_user_model):
    """`--prefix sk-course-` matched every key and revoked them all."""
    user = django_user_model.objects.create_user(username="revoker", password="pw-long-1234")
    keys = [api_keys.api_key_create(user=user, name=f"k{i}")[0] for i in range(3)]
    with pytest.raises(CommandError, match="matches 3 active keys"):
        call_command("apikey", "revoke", "--user", "revoker", "--prefix", "sk-course-")
    call_command("apikey", "revoke", "--user", "revoker", "--prefix", keys[1].prefix + "…")
    assert [k.is_active for k in api_keys.api_keys_for(user=user)
            if k.pk in {x.pk for x in keys}] == [True, False, True]
    with pytest.raises(CommandError, match="matches 0 active keys"):
        call_command("apikey", "revoke", "--user", "revoker", "--prefix", keys[1].prefix)
