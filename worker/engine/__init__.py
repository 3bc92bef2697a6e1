"""A compact inference engine: paged KV cache, continuous batching, speculative decoding.

No Django here: the Celery worker imports this lazily, and tests use it with bare pytest.
"""

from worker.engine.engine import Engine
from worker.engine.outputs import RequestOutput
from worker.engine.sampling_params import SamplingParams
from worker.engine.scheduler import QueueFullError

__all__ = ["Engine", "QueueFullError", "RequestOutput", "SamplingParams"]
