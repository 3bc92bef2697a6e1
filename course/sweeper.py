"""The site's periodic sweep, run by every web process in a background thread (started by
course/asgi.py): runs whose worker is gone are ended (demos.services.runs_sweep), and expired
sessions are deleted (what `manage.py clearsessions` does) once an hour.

A Redis lock per task (SET NX with an expiry) means one process in the whole fleet does each
sweep per interval, however many web processes run; no Celery beat or cron is needed.
"""

import logging
import threading

from django.conf import settings
from django.db import close_old_connections

from demos.conf import demo_setting

logger = logging.getLogger(__name__)

LOCK_PREFIX = "course:sweep:"
SESSIONS_EVERY_S = 3600

_thread: threading.Thread | None = None


def _lock_take(name: str, seconds: float) -> bool:
    from demos.services import redis

    return bool(redis().set(f"{LOCK_PREFIX}{name}", "1", nx=True, ex=max(1, int(seconds))))


def login_records_prune() -> int:
    """Delete django-axes' failed-login rows whose cool-off has passed (they lock nothing any
    more; before, only a later attempt cleaned them) and its successful-login records older
    than AXES_ACCESS_LOG_KEEP_DAYS. Returns how many rows went."""
    from datetime import timedelta

    from axes.models import AccessAttempt, AccessLog
    from django.utils import timezone

    now = timezone.now()
    attempts, _ = AccessAttempt.objects.filter(
        attempt_time__lt=now - settings.AXES_COOLOFF_TIME).delete()
    logs, _ = AccessLog.objects.filter(
        attempt_time__lt=now - timedelta(days=settings.AXES_ACCESS_LOG_KEEP_DAYS)).delete()
    return attempts + logs


def site_sweep(*, interval_s: float | None = None) -> dict | None:
    """One sweep, unless another process swept within `interval_s`: what it did, or None."""
    from django.contrib.sessions.backends.db import SessionStore

    from demos.services import runs_sweep

    interval_s = interval_s or float(demo_setting("DEMO_SWEEP_INTERVAL")) or 30.0
    if not _lock_take("runs", interval_s * 0.9):
        return None
    done: dict = {"runs": runs_sweep(), "sessions_cleared": False}
    if (settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"
            and _lock_take("sessions", SESSIONS_EVERY_S)):
        SessionStore.clear_expired()
        done["sessions_cleared"] = True
        done["login_records_pruned"] = login_records_prune()
    return done


def _loop(interval_s: float, stop: threading.Event) -> None:
    while not stop.wait(interval_s):
        try:
            site_sweep(interval_s=interval_s)
        except Exception:  # Redis or the database away for a moment: sweep again next time
            logger.warning("the periodic sweep failed", exc_info=True)
        finally:
            close_old_connections()


def sweeper_start(*, stop: threading.Event | None = None) -> threading.Thread | None:
    """Start this process's sweep thread (once); None when DEMO_SWEEP_INTERVAL is 0."""
    global _thread
    interval_s = float(demo_setting("DEMO_SWEEP_INTERVAL"))
    if interval_s <= 0 or _thread is not None:
        return _thread
    _thread = threading.Thread(target=_loop, args=(interval_s, stop or threading.Event()),
                               daemon=True, name="site-sweeper")
    _thread.start()
    return _thread
