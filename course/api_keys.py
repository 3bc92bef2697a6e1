"""API keys for /v1: make, revoke, check, and the per-key limits (requests and tokens per
minute).

A key is `sk-course-` and 43 random URL-safe characters (256 bits), so a plain SHA-256 is
enough to store it: nobody can search that space, and checking a key costs one hash and one
indexed lookup. The key is shown once, when it is made.

The limits count in Redis per account, not per key (a second key is no second share), over
the last 60 seconds (a sliding window): a request is refused (429) when the account has made
API_KEY_REQUESTS_PER_MINUTE requests in that window, when the tokens it holds there plus this
request's reservation pass API_KEY_TOKENS_PER_MINUTE, or when API_CONCURRENT_PER_USER of its
requests are still running. A request reserves its prompt and max_tokens when it is admitted;
when it ends, the reservation becomes what it used (a client that left is charged what was
produced until then). An account holds at most API_KEYS_PER_USER active keys.
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
    """A new key for `user`: the row, and the key itself (shown once, never stored);
    TooManyKeys when the account already holds API_KEYS_PER_USER active keys."""
    active = ApiKey.objects.filter(user=user, revoked_at__isnull=True).count()
    if active >= settings.API_KEYS_PER_USER:
        raise TooManyKeys(f"an account holds at most {settings.API_KEYS_PER_USER} active keys; "
                          "revoke one first")
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
        super().__init__(f"{kind} limit {limit} reached")
        self.kind = kind  # "requests" or "tokens" (per minute), or "concurrent"
        self.limit = limit
        self.retry_after_s = retry_after_s


class TooManyKeys(Exception):
    """The account already holds API_KEYS_PER_USER active keys."""


def _keys(user_id: int) -> tuple[str, str, str, str]:
    base = f"course:ratelimit:user:{user_id}"
    return f"{base}:requests", f"{base}:tokens", f"{base}:amounts", f"{base}:inflight"


# One atomic step per admission: drop what left the sliding 60 s window, check the three
# limits, and take the request's share (a request, a token reservation, a seat) only when all
# three hold. Parallel requests can therefore never pass a limit between a check and its take.
_ADMIT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local max_requests, max_tokens = tonumber(ARGV[3]), tonumber(ARGV[4])
local reserve, max_inflight = tonumber(ARGV[5]), tonumber(ARGV[6])
local member, seat_ttl = ARGV[7], tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - window)
if #old > 0 then
  redis.call('HDEL', KEYS[3], unpack(old))
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - seat_ttl)
local function retry(zset)
  local first = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
  if #first == 0 then return 1 end
  return math.max(1, math.ceil(tonumber(first[2]) + window - now))
end
if max_inflight > 0 and redis.call('ZCARD', KEYS[4]) >= max_inflight then
  return {'concurrent', 1}
end
if redis.call('ZCARD', KEYS[1]) >= max_requests then
  return {'requests', retry(KEYS[1])}
end
if reserve > 0 then
  local spent = 0
  for _, amount in ipairs(redis.call('HVALS', KEYS[3])) do spent = spent + tonumber(amount) end
  if spent + reserve > max_tokens then return {'tokens', retry(KEYS[2])} end
  redis.call('ZADD', KEYS[2], now, member)
  redis.call('HSET', KEYS[3], member, reserve)
end
redis.call('ZADD', KEYS[1], now, member)
if max_inflight > 0 then redis.call('ZADD', KEYS[4], now, member) end
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], math.ceil(math.max(window, seat_ttl)) + 60) end
return {'ok', 0}
"""

# A request's seat is freed when it ends; one whose web process died is freed after this long
# (more than the longest a request may run).
SEAT_TTL_S = 600


def api_key_admit(client: redis.Redis, *, user_id: int, request_id: str, reserve_tokens: int = 0,
                  seat: bool = False, now: float | None = None) -> None:
    """Count one request against its account's limits over the last 60 seconds (a sliding
    window, not the clock minute): requests, tokens (`reserve_tokens`, the most the request can
    use, held until `api_key_settle` says what it used) and, with `seat`, requests running at
    once. Raises RateLimited naming the limit and when to try again."""
    limits = {"requests": settings.API_KEY_REQUESTS_PER_MINUTE,
              "tokens": settings.API_KEY_TOKENS_PER_MINUTE,
              "concurrent": settings.API_CONCURRENT_PER_USER}
    if reserve_tokens > limits["tokens"]:
        raise ValueError("a reservation past the whole token limit can never be admitted")
    now = time.time() if now is None else now
    kind, retry = client.eval(_ADMIT, 4, *_keys(user_id), now, 60, limits["requests"],
                              limits["tokens"], reserve_tokens,
                              limits["concurrent"] if seat else 0, request_id, SEAT_TTL_S)
    if kind != "ok":
        raise RateLimited(kind, limits[kind], int(retry))


def api_key_settle(client: redis.Redis, *, user_id: int, request_id: str,
                   tokens: int | None) -> None:
    """A request ended: free its seat and, when `tokens` is known, replace its reservation by
    what it used (the rest is refunded). None keeps the whole reservation."""
    _, tokens_key, amounts_key, inflight_key = _keys(user_id)
    pipe = client.pipeline(transaction=True)
    pipe.zrem(inflight_key, request_id)
    if tokens is not None:
        # Only while the reservation is still in the window (HSET would resurrect an old one).
        pipe.zscore(tokens_key, request_id)
    _, *score = pipe.execute()
    if tokens is not None and score and score[0] is not None:
        client.hset(amounts_key, request_id, int(tokens))


def api_key_tokens_reserve(client: redis.Redis, *, user_id: int, request_id: str,
                           tokens: int) -> None:
    """Change a running request's reservation (the worker counted its prompt)."""
    _, tokens_key, amounts_key, _ = _keys(user_id)
    if client.zscore(tokens_key, request_id) is not None:
        client.hset(amounts_key, request_id, int(tokens))
