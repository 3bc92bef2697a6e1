"""Live demos: runs of the inference engine in Celery workers, streamed to the page over SSE.

Pages include a demo with `{% load demo_tags %}{% demo "lifecycle" %}` (or "streaming").
HTTP: POST /demos/<slug>/runs (JSON prompt, max_tokens, temperature, top_p) → 201
{"run_id", "events_url"}; GET /demos/runs/<id>; POST /demos/runs/<id>/cancel (optionally
{"stream": n}); GET /demos/runs/<id>/events[?stream=n] (Server-Sent Events, Last-Event-ID
resumes). Code: params (checks), services (runs), events (Redis keys), relay (SSE), tasks (the
Celery task), runners/ (what each demo does with the engine), estimate (the arithmetic's
estimate for a run). The engine a worker keeps between runs is worker/demo_engine.py: only
worker processes import torch.
"""
