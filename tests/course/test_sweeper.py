"""The periodic sweep every web process runs (course/sweeper.py): runs whose worker is gone end,
expired sessions are cleared, and only one process in the fleet does it per interval."""

import pytest
from django.contrib.sessions.models import Session
from django.test import override_settings
from django.utils import timezone

from course import sweeper
from demos.models import Run
from demos.services import redis


@pytest.fixture(autouse=True)
def locks_cleared():
    keys = list(redis().scan_iter(match=f"{sweeper.LOCK_PREFIX}*"))
    if keys:
        redis().delete(*keys)
    yield


@pytest.mark.django_db
@override_settings(DEMO_QUEUE_TIMEOUT=60)
def test_a_sweep_ends_stale_runs_and_clears_expired_sessions():
    run = Run.objects.create(owner="session:x", demo="lifecycle", params={})
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timezone.timedelta(hours=1))
    Session.objects.create(session_key="old", session_data="",
                           expire_date=timezone.now() - timezone.timedelta(days=1))
    Session.objects.create(session_key="current", session_data="",
                           expire_date=timezone.now() + timezone.timedelta(days=1))
    done = sweeper.site_sweep()
    assert done["runs"]["queue_timeout"] == 1 and done["sessions_cleared"]
    run.refresh_from_db()
    assert run.state == "failed"
    assert list(Session.objects.values_list("session_key", flat=True)) == ["current"]


@pytest.mark.django_db
def test_only_one_process_sweeps_per_interval():
    assert sweeper.site_sweep() is not None
    assert sweeper.site_sweep() is None  # another process (here: this one) swept just now
