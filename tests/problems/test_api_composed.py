"""The API endpoints of the course's composed formulas: the request for scale (problem 1),
streaming costs (problem 2) and the home page's stopping distance."""

import math

import pytest

from problems.arithmetic.reaction import reaction_distance
from problems.arithmetic.request import request_for_scale
from problems.arithmetic.streaming import streaming_for_scale


def test_request_endpoint_reproduces_the_course_example(client):
    body = client.get("/api/calc/request").json()
    assert body == request_for_scale().to_dict()
    steps = " ".join(step["display"] for step in body["steps"])
    assert "1.6×10¹³ FLOP" in steps
    assert "4.8" in steps


def test_streaming_endpoint_matches_the_formula(client):
    body = client.get("/api/calc/streaming?cut_after_tokens=50&batch=8").json()
    assert body == streaming_for_scale(cut_after_tokens=50, batch=8).to_dict()


def test_reaction_endpoint(client):
    body = client.get("/api/calc/reaction?speed_kmh=100&latency_ms=200").json()
    assert math.isclose(body["distance_m"], 100 / 3.6 * 0.2)
    assert body == reaction_distance(speed_kmh=100, latency_ms=200).to_dict()


@pytest.mark.parametrize(("url", "field"), [
    ("/api/calc/request?model=gpt-9", "model"),
    ("/api/calc/request?prompt_tokens=-5", "prompt_tokens"),
    ("/api/calc/streaming?batch=abc", "batch"),
    ("/api/calc/reaction?speed_kmh=100&latency_ms=-1", "latency_ms"),
    ("/api/calc/reaction?speed_kmh=nan&latency_ms=1", "speed_kmh"),
    ("/api/calc/reaction?latency_ms=1", "speed_kmh"),
])
def test_bad_input_names_the_field(client, url, field):
    response = client.get(url)
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["field"] == field
