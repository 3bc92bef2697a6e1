"""The Triton kernels' tests run only where Triton can run them: compiled on a CUDA machine, or
in a process started with TRITON_INTERPRET=1 (Triton reads it once, at its first import). The
main test process has neither on a CPU-only machine, so there tests/engine/test_kernels.py
runs this directory again in a child process under the interpreter, and this process skips
collecting it."""

import os

import pytest
import torch

_RUNNABLE = os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()
collect_ignore_glob = [] if _RUNNABLE else ["test_*.py"]


# The kernel tests run in a bare child process without Django (tests/engine/test_kernels.py):
# the site-wide autouse fixtures of tests/conftest.py (Redis throttles, the problems' render
# cache) import Django and have nothing to clear here, so these same-named ones replace them.
@pytest.fixture(autouse=True)
def site_throttles_cleared():
    yield


@pytest.fixture(autouse=True)
def problem_contexts_cleared():
    yield
