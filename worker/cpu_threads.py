"""Experiments run torch on one CPU thread (`one_thread`), however many run at once in a process."""

import contextlib
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
