"""The Celery worker side: the app, the tasks, and the inference engine (worker/engine)."""
