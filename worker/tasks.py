"""Tasks every worker offers; demo runs live in demos/tasks.py."""

import platform
import socket

from celery import shared_task
from django.conf import settings


@shared_task(name="worker.describe")
def worker_describe() -> dict:
    """What this worker is: host, Python, torch and the engine model it serves."""
    import torch  # only ever imported in worker processes

    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "engine_model": settings.ENGINE_MODEL,
    }
