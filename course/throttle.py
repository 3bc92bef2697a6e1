"""Per-address and per-visitor limits that hold however a person arrives: a sliding window in
Redis, each check and its take one atomic step (a Lua script), so parallel requests cannot
pass a limit together.

    retry = window_take(scope="signup:203.0.113.5", limit=5, window_s=3600)
    if retry: answer 429 with Retry-After: retry

Used for sign-ups per address, failed logins per address, new anonymous sessions per address
(each cookie-less write made a session row) and practice attempts per visitor.
"""

import time
import uuid

from django.conf import settings
from django.http import HttpRequest

# Drop what left the window; refuse when `limit` entries remain (answering the seconds until
# the oldest leaves); else add this one.
_TAKE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, math.ceil(tonumber(first[2]) + window - now))
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[5])
  redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
end
return 0
"""


def _redis():  # noqa: ANN202
    from demos.services import redis

    return redis()


def window_take(*, scope: str, limit: int, window_s: float, take: bool = True,
                now: float | None = None) -> int:
    """Count one event against `scope` over the last `window_s` seconds: 0 when it is within
    `limit` (and counted, unless `take` is False: a check only), else the seconds until the
    oldest event leaves the window (and it is not counted)."""
    now = time.time() if now is None else now
    return int(_redis().eval(_TAKE, 1, f"course:throttle:{scope}", now, window_s, limit,
                             "1" if take else "0", uuid.uuid4().hex))


def address_of(request: HttpRequest) -> str:
    from demos.services import client_address_for_request

    return client_address_for_request(request) or "unknown"


def new_session_allowed(request: HttpRequest) -> int:
    """0 when this request may make a new anonymous session (it has none yet); else the
    seconds until its address may make another. Requests with a session, and signed-in ones,
    always may: the limit is on cookie-less visitors making rows."""
    if request.user.is_authenticated or request.session.session_key:
        return 0
    return window_take(scope=f"sessions:{address_of(request)}",
                       limit=int(getattr(settings, "NEW_SESSIONS_PER_ADDRESS_PER_HOUR", 60)),
                       window_s=3600)
