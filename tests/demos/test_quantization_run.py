"""Problem 11's and 12's demos end to end: a real worker process, real Redis, the SSE relay
under real uvicorn."""

import pytest

from tests.demos.conftest import run_wait_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_quantization_runs_to_finished_with_its_events_in_order(site, celery_worker_process):
    status, started = site.request("POST", "/demos/quantization/runs",
                                   {"formats": ["int8", "int4"], "documents": 4})
    assert status == 201, started
    reader = site.events_open(started["events_url"])
    seen = reader.until(lambda e: e.type in ("finished", "failed", "cancelled"))
    reader.close()
    types = [e.type for e in seen]
    assert types[-1] == "finished", seen[-1].data
    assert types[:3] == ["started", "format_quantized", "format_quantized"]
    first_evaluated = types.index("format_evaluated")
    assert set(types[3:first_evaluated]) == {"evaluation_progress"}
    assert types[first_evaluated:] == ["format_evaluated"] * 3 + ["plot", "finished"]
    for event in seen:
        if event.type == "format_quantized":
            assert event.data["linear_bytes"] == event.data["predicted_bytes"]
    assert [e.data["format"] for e in seen if e.type == "format_evaluated"] == [
        "fp32", "int8", "int4"]
    finished = seen[-1].data
    assert finished["bytes"] == {"int8": 4_407_552, "int4": 2_262_336}
    assert finished["best_4bit"] == "int4"
    state = run_wait_state(site, started["run_id"], {"finished"})
    assert state["demo"] == "quantization" and state["params"]["documents"] == 4


def test_bad_parameters_are_a_422_naming_the_field(site):
    status, body = site.request("POST", "/demos/quantization/runs", {"documents": 1000})
    assert status == 422 and body["field"] == "documents"


def test_the_worker_measures_itself_and_the_page_reads_it(site, celery_worker_process):
    from demos.hardware import LATEST_KEY, LOCK_KEY
    from demos.services import redis
    from worker.tasks import hardware_measure_task

    redis().delete(LATEST_KEY, LOCK_KEY)
    status, body = site.request("GET", "/demos/hardware")
    assert status == 200 and body == {"measured": False, "detail": "not measured yet"}
    # Tiny sizes through the real worker (the page's button sends none).
    measured = hardware_measure_task.apply_async(
        kwargs={"matmul_n": 64, "copy_bytes": 2**20, "sweep_k": 128, "batches": [1, 8],
                "repeats": 2}, queue="experiments").get(timeout=60)
    status, body = site.request("GET", "/demos/hardware")
    assert status == 200 and body == measured
    assert [s["batch"] for s in body["sweep"]] == [1, 8] and body["peak_flops"] > 0
    # A press queues one measurement; a second within ten minutes is refused.
    status, body = site.request("POST", "/demos/hardware/measure", {})
    assert status == 202, body
    status, body = site.request("POST", "/demos/hardware/measure", {})
    assert status == 429 and "ten minutes" in body["error"]
    redis().delete(LOCK_KEY)
