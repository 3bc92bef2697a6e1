"""Every demo can start at its defaults, a run that can never fit is refused at once, and the
engine demos and the experiments wait in shares of their own (issue 33)."""

import importlib
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from demos import services
from demos.models import Run
from demos.params import DEMO_SLUGS, run_params_parse
from demos.runners import RUNNERS

DEMOS = sorted({*DEMO_SLUGS, *(slug for slug, r in RUNNERS.items() if r.params is not None)})


def _demo_settings(module_name: str, monkeypatch) -> dict:  # noqa: ANN001
    """The DEMO_* values a settings module sets (none today: the defaults in demos/conf.py)."""
    monkeypatch.setenv("SECRET_KEY", "only-for-reading-the-production-settings-" + "x" * 20)
    module = importlib.reload(importlib.import_module(module_name))
    return {name: getattr(module, name) for name in dir(module) if name.startswith("DEMO_")}


def _post(client: Client, slug: str, body: dict, **extra):  # noqa: ANN003, ANN202
    return client.post(f"/demos/{slug}/runs", data=json.dumps(body),
                       content_type="application/json", **extra)


@pytest.mark.django_db
@pytest.mark.parametrize("module_name", ["course.settings.dev", "course.settings.production"])
def test_every_demo_at_its_defaults_is_admitted(module_name, monkeypatch):
    """kv-bytes' defaults asked for 8,256 tokens of work against a limit of 8,000, so every
    start answered 429 "try again in 22 s", forever. Each demo's defaults now start (201) on
    an empty queue, under the development and the production settings."""
    overrides = _demo_settings(module_name, monkeypatch)
    refused = {}
    with override_settings(**overrides, DEMO_QUEUE="demos-nobody-listens-shares"):
        for n, slug in enumerate(DEMOS):
            Run.objects.all().delete()
            response = _post(Client(), slug, {}, REMOTE_ADDR=f"198.51.100.{n + 1}")
            if response.status_code != 201:
                refused[slug] = (response.status_code, response.json())
    assert refused == {}


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["batching", "prefix-cache", "disagg"])
def test_a_run_that_can_never_fit_is_a_422_naming_the_field(slug):
    """At their maxima (batching 49,152 tokens of work, prefix-cache 167,680, disagg 15,280)
    these answered 429 "try again", which could never succeed: each asked for more than the
    whole share (then 8,000). Now 422, naming the parameter whose lowering frees the most."""
    schema = RUNNERS[slug].params
    body = {s.name: s.maximum for s in schema.specs
            if s.kind == "whole" and s.maximum is not None}
    params = run_params_parse(demo=slug, body=json.dumps(body).encode())
    limit = services.share_token_limit(experiments=True)
    with override_settings(DEMO_MAX_QUEUED_EXPERIMENT_TOKENS=min(limit, params.work_tokens - 1)):
        response = _post(Client(), slug, body)
    assert response.status_code == 422, response.content
    named = response.json()["field"]
    assert named in {s.name for s in schema.specs}
    assert f"lower {named}" in response.json()["error"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
@override_settings(DEMO_MAX_QUEUED_ACCOUNTS=2, DEMO_QUEUE="demos-nobody-listens-shares",
                   DEMO_EXPERIMENTS_PER_ADDRESS=10)
def test_queued_experiments_do_not_close_the_engine_demos():
    """A backlog on the one-at-a-time experiments queue closed the chat demos too: the shares
    counted both queues' waiting runs together."""
    for n in range(2):
        learner = Client()
        learner.force_login(User.objects.create_user(f"exp{n}", password="x" * 12))
        assert _post(learner, "profile", {}, REMOTE_ADDR=f"198.51.100.{n}").status_code == 201
    late = Client()
    late.force_login(User.objects.create_user("late", password="x" * 12))
    assert _post(late, "profile", {}, REMOTE_ADDR="198.51.100.50").status_code == 429
    assert _post(late, "lifecycle", {"prompt": "Hi"},
                 REMOTE_ADDR="198.51.100.50").status_code == 201


@pytest.mark.django_db
@override_settings(DEMO_QUEUE="demos-nobody-listens-shares", DEMO_EXPERIMENTS_PER_ADDRESS=2)
def test_experiments_are_capped_per_address_whoever_is_signed_in():
    """Free accounts from one address: the third queued experiment from it is refused."""
    statuses = []
    for n in range(3):
        learner = Client()
        learner.force_login(User.objects.create_user(f"same-addr{n}", password="x" * 12))
        statuses.append(_post(learner, "profile", {}, REMOTE_ADDR="203.0.113.7").status_code)
    assert statuses == [201, 201, 429]


@pytest.mark.django_db(transaction=True)
@override_settings(DEMO_QUEUE="demos-nobody-listens-shares", DEMO_ACTIVE_PER_ADDRESS=1)
def test_parallel_starts_from_one_address_keep_its_limit():
    """Six starts at once from one address, each a new cookie-less visitor, with one active
    run allowed per address: exactly one run. The count and the insert were separate steps,
    and parallel starts all passed the count (3 runs where 1 was the rule)."""
    import concurrent.futures

    from demos.params import RunParams

    params = RunParams(prompt="Hi", max_tokens=8, temperature=0.0, top_p=1.0)

    def start(n: int) -> str:
        from django.db import connection

        try:
            services.run_start(owner=f"session:parallel{n}", demo="lifecycle", params=params,
                               client_addr="203.0.113.88")
            return "started"
        except services.RateLimited:
            return "refused"
        finally:
            connection.close()

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(start, range(6)))
    assert sorted(outcomes) == ["refused"] * 5 + ["started"]
    assert Run.objects.filter(client_addr="203.0.113.88").count() == 1


@pytest.mark.django_db
def test_a_run_queued_when_redis_was_lost_frees_its_owner_at_once():
    """Redis restarted empty: the run's message and its enqueued marker are gone. Its owner's
    next start was refused as a second active run until the sweep came round (about 40 s);
    the liveness check now sees the missing marker and ends the run at once."""
    from datetime import timedelta

    from django.utils import timezone

    lost = Run.objects.create(owner="session:lost-one", demo="lifecycle", params={})
    Run.objects.filter(pk=lost.pk).update(created_at=timezone.now() - timedelta(seconds=5))
    assert services.run_active_for_owner(owner="session:lost-one") is None
    lost.refresh_from_db()
    assert lost.state == "failed" and lost.summary["reason"] == "lost"
    # One just created (its marker is written right after the commit) is left alone.
    fresh = Run.objects.create(owner="session:fresh-one", demo="lifecycle", params={})
    assert services.run_active_for_owner(owner="session:fresh-one").pk == fresh.pk
