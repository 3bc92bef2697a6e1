"""API keys for /v1: make, revoke, check, and the per-key limits (requests and tokens per
minute).

A key is `sk-course-` and 43 random URL-safe characters (256 bits), so a plain SHA-256 is
enough to store it: nobody can search that space, and checking a key costs one hash and one
indexed lookup. The key is shown once, when it is made.

The limits count in Redis per key and per clock minute: a request is refused (429) when the key
has already made API_KEY_REQUESTS_PER_MINUTE requests this minute, or already spent
API_KEY_TOKENS_PER_MINUTE tokens (prompt + completion, added when a request ends).
"""

import hashlib
import secrets
import time

import redis
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from course.models import ApiKey

KEY_PREFIX = "sk-course-"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_key_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiKey, str]:
    """A new key for `user`: the row, and the key itself (shown once, never stored)."""
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(user=user, name=name.strip()[:60] or "key",
                                prefix=raw[: len(KEY_PREFIX) + 6], key_hash=_hash(raw))
    return key, raw


def api_key_revoke(*, user: AbstractBaseUser, key_id: int) -> bool:
    """Revoke one of `user`'s keys; False when it is not theirs or already revoked."""
    return bool(ApiKey.objects.filter(pk=key_id, user=user, revoked_at__isnull=True)
                .update(revoked_at=timezone.now()))


def api_key_authenticate(*, raw: str) -> ApiKey | None:
    """The active key for a presented secret, or None; marks it used."""
    if not raw.startswith(KEY_PREFIX):
        return None
    key = (ApiKey.objects.select_related("user")
           .filter(key_hash=_hash(raw), revoked_at__isnull=True, user__is_active=True).first())
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key


def api_keys_for(*, user: AbstractBaseUser) -> list[ApiKey]:
    return list(ApiKey.objects.filter(user=user))


class RateLimited(Exception):
    def __init__(self, kind: str, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{kind} per minute limit {limit} reached")
        self.kind = kind  # "requests" or "tokens"
        self.limit = limit
        self.retry_after_s = retry_after_s


def _window(now: float) -> tuple[int, int]:
    """The current clock minute and the seconds left in it (at least 1)."""
    minute = int(now // 60)
    return minute, max(1, int((minute + 1) * 60 - now))


def api_key_rate_check(client: redis.Redis, *, key_id: int, now: float | None = None) -> None:
    """Count one request against the key's minute; raise RateLimited when over a limit."""
    now = time.time() if now is None else now
    minute, retry = _window(now)
    requests_key = f"course:ratelimit:{key_id}:requests:{minute}"
    tokens_key = f"course:ratelimit:{key_id}:tokens:{minute}"
    pipe = client.pipeline(transaction=False)
    pipe.incr(requests_key)
    pipe.expire(requests_key, 120)
    pipe.get(tokens_key)
    count, _, spent = pipe.execute()
    if int(spent or 0) >= settings.API_KEY_TOKENS_PER_MINUTE:
        raise RateLimited("tokens", settings.API_KEY_TOKENS_PER_MINUTE, retry)
    if count > settings.API_KEY_REQUESTS_PER_MINUTE:
        raise RateLimited("requests", settings.API_KEY_REQUESTS_PER_MINUTE, retry)


def api_key_tokens_spend(client: redis.Redis, *, key_id: int, tokens: int,
                         now: float | None = None) -> None:
    """Add a finished request's prompt + completion tokens to the key's minute."""
    minute, _ = _window(time.time() if now is None else now)
    tokens_key = f"course:ratelimit:{key_id}:tokens:{minute}"
    pipe = client.pipeline(transaction=False)
    pipe.incrby(tokens_key, tokens)
    pipe.expire(tokens_key, 120)
    pipe.execute()
