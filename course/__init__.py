"""The course site. Importing the Celery app here lets `shared_task` bind to it in every process."""

from worker.celery import app as celery_app

__all__ = ["celery_app"]
