"""How many torch threads a worker's shared engine runs on (worker/cpu_threads.py)."""

import pytest

from worker.cpu_threads import engine_threads


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (3, 1), (4, 2), (8, 4), (64, 4)])
def test_auto_takes_half_the_cores_between_one_and_four(cores, threads):
    assert engine_threads("auto", cpu_count=cores) == threads
    assert engine_threads("", cpu_count=cores) == threads


def test_a_number_is_taken_as_it_is(monkeypatch):
    assert engine_threads("3", cpu_count=2) == 3
    monkeypatch.setenv("ENGINE_THREADS", " 6 ")
    assert engine_threads(cpu_count=2) == 6
    monkeypatch.setenv("ENGINE_THREADS", "AUTO")
    assert engine_threads(cpu_count=8) == 4


@pytest.mark.parametrize("bad", ["abc", "0", "-2", "1.5"])
def test_a_bad_setting_names_itself(bad):
    with pytest.raises(ValueError, match="ENGINE_THREADS must be 'auto' or a whole number"):
        engine_threads(bad)


def test_the_shared_engine_steps_on_that_many_threads():
    """The loop thread sets it before loading: the machine measured there reports it."""
    from tests.demos.runners.conftest import MODEL
    from worker.demo_engine import serving_get

    serving = serving_get(str(MODEL))
    assert serving.machine["threads"] == engine_threads()
