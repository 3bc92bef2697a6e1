"""Drills through the views and the JSON API: a question drawn and graded (the mistake named,
the working shown), bad answers a clear 400 beside the field, rounds of ten to their score,
history and weak spots, visitors' attempts moving to the account at login."""

import json
import re

import pytest
from django.contrib.auth import get_user_model

from course.models import DrillAttempt
from problems.drills import ROUND_SIZE, kind_get, question_draw

pytestmark = pytest.mark.django_db


def _url(kind: str, seed: int) -> str:
    return f"/practice/drills/{kind}/{seed}/"


def _llama70_seed() -> int:
    kind = kind_get("kv-per-token")
    return next(s for s in range(1, 500)
                if question_draw(kind, s).inputs["model"] == "llama-3.1-70b")


def test_index_lists_topics_and_rounds(client):
    html = client.get("/practice/drills/").content.decode()
    assert "Rapid-fire round" in html and "Kv cache" in html
    assert client.get("/practice/").content.decode().count("/practice/drills/") >= 1


def test_next_draws_a_question_of_the_topic(client):
    response = client.get("/practice/drills/next/?mode=queueing")
    assert response.status_code == 302
    kind = re.match(r"/practice/drills/([\w-]+)/\d+/", response.url).group(1)
    assert kind_get(kind).topic == "queueing"
    assert client.get(response.url).status_code == 200


def test_a_named_mistake_and_the_working(client):
    seed = _llama70_seed()
    html = client.post(_url("kv-per-token", seed), {"answer": "163,840 B"}).content.decode()
    assert "K and V not doubled" in html
    assert "327,680 B" in html  # the answer, and in the working
    assert "80 layers × 2 (K and V) × 8 KV heads" in html
    attempt = DrillAttempt.objects.get()
    assert (attempt.verdict, attempt.mistake, attempt.topic) == (
        "wrong", "K and V not doubled", "kv-cache")


@pytest.mark.parametrize("answer, message", [
    ("", "Type a number"), ("many", "does not start with a number"),
    ("4 ms", "the question asks for a size in bytes"), ("12 parsecs", "not a unit"),
])
def test_bad_answers_are_a_400_beside_the_field(client, answer, message):
    response = client.post(_url("kv-per-token", _llama70_seed()), {"answer": answer})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'id="drill-answer-error"' in response.content.decode()
    assert not DrillAttempt.objects.exists()


def test_unknown_drills_are_404(client):
    assert client.get(_url("no-such-drill", 1)).status_code == 404
    assert client.get(_url("kv-per-token", 0)).status_code == 404


def test_a_round_of_ten_to_its_score(client):
    assert client.post("/practice/drills/round/start/", {"mode": "mixed"}).status_code == 302
    for number in range(1, ROUND_SIZE + 1):
        page = client.get("/practice/drills/round/").content.decode()
        assert f"Question {number} of {ROUND_SIZE}" in page
        state = client.session["drill_round"]
        kind, seed = state["items"][state["index"]]
        q = question_draw(kind_get(kind), seed)
        # Every other question answered exactly (in the answer's base unit), the rest timed out.
        if number % 2:
            answer = {"bytes": f"{q.answer} B", "seconds": f"{q.answer} s",
                      "percent": f"{q.answer * 100}%", "dollars": f"${q.answer}"}.get(
                q.kind.dimension, f"{q.answer}")
            posted = client.post("/practice/drills/round/", {"answer": answer})
            assert "Right" in posted.content.decode()
        else:
            posted = client.post("/practice/drills/round/", {"answer": "", "timeout": "1"})
            assert "Out of time" in posted.content.decode()
    end = client.get("/practice/drills/round/").content.decode()
    assert f"Round over: 5 of {ROUND_SIZE}" in end
    assert end.count("out of time") == 5
    assert DrillAttempt.objects.filter(verdict="late").count() == 5


def test_weak_spots_come_from_misses(client):
    seed = _llama70_seed()
    for _ in range(3):
        client.post(_url("kv-per-token", seed), {"answer": "1 GB"})
    client.post(_url("kv-per-token", seed), {"answer": "327,680 B"})
    html = client.get("/practice/drills/").content.decode()
    assert re.search(r"Kv cache <span class=\"badge\">weak</span>", html)
    for _ in range(5):
        response = client.get("/practice/drills/next/?mode=weak")
        kind = re.match(r"/practice/drills/([\w-]+)/", response.url).group(1)
        assert kind_get(kind).topic == "kv-cache"
    history = client.get("/practice/drills/history/").content.decode()
    assert "Accuracy over time" in history and "Kv cache" in history


def test_a_visitors_drills_move_to_the_account_at_login(client):
    client.post(_url("kv-per-token", _llama70_seed()), {"answer": "327,680 B"})
    user = get_user_model().objects.create_user("dana", password="a long enough password 1")
    client.post("/accounts/login/", {"username": "dana", "password": "a long enough password 1"})
    assert DrillAttempt.objects.get().user == user


def test_the_json_api_draws_and_grades(client):
    kinds = client.get("/api/drills/kinds").json()
    assert len(kinds) >= 25
    drawn = client.get(f"/api/drills/draw?kind=kv-per-token&seed={_llama70_seed()}").json()
    assert "answer" not in drawn and drawn["answer_dimension"] == "bytes"
    graded = client.post("/api/drills/grade", json.dumps(
        {"kind": drawn["kind"], "seed": drawn["seed"], "answer": "163840 bytes"}),
        content_type="application/json").json()
    assert graded["verdict"] == "wrong" and graded["mistake"] == "K and V not doubled"
    assert graded["answer"] == 327_680 and graded["steps"]
    bad = client.post("/api/drills/grade", json.dumps(
        {"kind": drawn["kind"], "seed": drawn["seed"], "answer": "lots"}),
        content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "answer"
    assert client.get("/api/drills/draw?topic=nope").status_code == 400


def test_problem_pages_link_their_drills_and_show_level(client):
    html = client.get("/pages/02/").content.decode()
    assert "/practice/drills/next/?kind=kv-per-token" in html
    assert "A good answer takes about 5 minutes" in html
