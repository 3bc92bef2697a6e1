"""Torch CPU threads: experiments run on one (`one_thread`), however many run at once in a
process; a worker's shared engine on `engine_threads()`."""

import contextlib
import os
import threading

_threads_lock = threading.Lock()
_threads_users = 0
_threads_saved = 0


@contextlib.contextmanager
def one_thread():
    """Run on one CPU thread, then restore the process's setting. The experiments measure
    numbers, not speed, and on a small shared machine torch's thread pool spinning against other
    processes cost far more than it gave: on the two-core development machine under load,
    quantizing six formats took 29 s with two threads and 1.5 s with one, and scoring them 60 s
    against 6 s. The setting is the process's: `make run`'s experiments worker is a prefork
    pool (one task per process), but where one threads-pool process takes every queue (the
    test suite's worker) its shared engine runs on one thread too while this runs. A count of
    the runs inside restores the setting when the last one leaves."""
    import torch

    global _threads_users, _threads_saved
    with _threads_lock:
        if _threads_users == 0:
            _threads_saved = torch.get_num_threads()
            torch.set_num_threads(1)
        _threads_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_saved)


# Most threads a CPU worker's shared engine takes when the operator names none: the demo model's
# ops are small, and past a few threads the synchronisation costs more than it gives.
_ENGINE_THREADS_MAX = 4


def engine_threads(setting: str | None = None, cpu_count: int | None = None) -> int:
    """How many torch CPU threads a worker's shared engine runs on: `ENGINE_THREADS` (a whole
    number, or `auto`), where `auto` is half the machine's cores, at least 1 and at most 4.

    Half, because the engine shares the machine with the web server, Redis, the experiments
    worker and the learner's browser, and torch's OpenMP threads wait for each other at the end
    of every op: when another process takes a core one of them needs, the other spins until it
    is back. Measured on the two-core development machine, at batch 1: two threads gave 2.4 ms
    per output token idle and 22–25 ms beside one busy process; one thread gave 3.0 ms idle and
    2.9 ms beside it.
    """
    raw = (setting if setting is not None else os.environ.get("ENGINE_THREADS", "auto")).strip()
    if raw.lower() in ("", "auto"):
        cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
        return max(1, min(_ENGINE_THREADS_MAX, cores // 2))
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"ENGINE_THREADS must be 'auto' or a whole number of threads of at "
                         f"least 1, not {raw!r}")
    return threads
