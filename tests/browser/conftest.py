"""Browser tests start runs from 127.0.0.1 like the demo tests: each starts with no run starts
counted against that address (the per-address limit would otherwise carry across tests)."""

from tests.demos.conftest import run_rate_limits_cleared  # noqa: F401  (autouse fixture)
