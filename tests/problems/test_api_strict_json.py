"""The JSON API's bodies are read by the same strict parser as /v1 and the demos (issue 33):
invalid Unicode is refused at parse time, everywhere text enters."""

import pytest


@pytest.mark.parametrize("body", [
    '{"kind": "kv-bytes", "seed": 1, "answer": "12 \\ud800GB"}',  # a lone surrogate
    '{"kind": "kv-bytes", "seed": 1, "answer": "1", "\\udfff": 2}',
    '{"kind": "kv-bytes", "seed": ' + "7" * 5000 + ', "answer": "1"}',
    "[" * 50_000 + "]" * 50_000,
])
def test_a_drill_answer_with_invalid_json_text_is_a_400(client, body):
    """The surrogate reached the grader as text; now the body is refused as it is read."""
    response = client.post("/api/drills/grade", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Cannot parse request body")
