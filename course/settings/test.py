"""The test suite: fast password hashing, no secrets needed."""

from .base import *  # noqa: F401,F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["*"]

# A file, not memory, so the worker processes the tests start see the same test database.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405

# The worker's roofline measurement (problem 12's demo) at tiny sizes: a press of "Measure this
# worker" in a test must not spend seconds of the shared worker's CPU.
HARDWARE_MEASURE_SIZES = {"matmul_n": 64, "copy_bytes": 2**20, "sweep_k": 128,
                          "batches": (1, 8), "repeats": 2}

# Room for the disconnect tests' long answers (the shipped model's whole 1,024-token context),
# so a client that gives up always does so long before the answer could be finished.
API_MAX_TOKENS = 1000
