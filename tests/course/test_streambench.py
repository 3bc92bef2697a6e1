"""`make bench-service` end to end: the engine alone, then the same decode through the site as
`make run` serves it (both workers, uvicorn, a private Redis), streamed with the official
`openai` client, and the table that compares them. Numbers are not asserted, only that each
row was measured and the ratio printed."""

import re
from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.slow
def test_streambench_measures_the_engine_alone_inside_the_worker_and_through_v1():
    out = StringIO()
    call_command("streambench", "--repeats", "2", "--processes", "1", stdout=out)
    text = out.getvalue()
    assert "batch-1 decode (one 16-token prompt" in text and "decode floor:" in text
    rows = {}
    for label in ("engine alone (worker.engine.bench)", "engine inside the worker (/metrics)",
                  "through /v1, as the client sees it"):
        line = next(line for line in text.splitlines() if line.startswith(label))
        rows[label] = [float(v) for v in line[len(label):].split()]
        median, low, high = rows[label]
        assert 0 < low <= median <= high
    ratio = float(re.search(r"service / engine alone: ([0-9.]+)x", text).group(1))
    assert ratio == pytest.approx(rows["through /v1, as the client sees it"][0]
                                  / rows["engine alone (worker.engine.bench)"][0], rel=0.01)
