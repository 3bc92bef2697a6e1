"""Demo runs over HTTP: start (POST JSON), read, cancel, and the SSE stream of events.

Errors are JSON naming what was wrong: 422 for a bad parameter, 409 for a run already active,
429 (with Retry-After) when the queue is full, 404 for someone else's run.
"""

import json

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from demos import services
from demos.params import DEMO_SLUGS, ParamError, run_params_defaults, run_params_parse
from demos.relay import run_events_relay
from demos.runners.streaming import streaming_prompts
from demos.services import CancelTarget, EnqueueFailed, QueueFull, RateLimited, RunConflict


def _error(status: int, *, field: str | None = None, message: str, **extra) -> JsonResponse:
    body = {"error": message, **extra}
    if field:
        body["field"] = field
    return JsonResponse(body, status=status)


def _events_url(run_id: str) -> str:
    return reverse("demos:run_events", args=[run_id])


def demo_context(slug: str) -> dict:
    """What a demo's partial needs: its defaults and example prompts (for pages including it)."""
    return {"demo_slug": slug, "demo_defaults": run_params_defaults(slug),
            "demo_examples": EXAMPLE_PROMPTS, "demo_streams": streaming_prompts("")[1:]}


EXAMPLE_PROMPTS = (
    "What happens during prefill?",
    "Why is decoding slower per token than prefill?",
    "What is paged attention?",
    "What is a GPU good for?",
)


@require_GET
def demo_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A demo on a page of its own (the course page includes the same partial)."""
    if slug not in DEMO_SLUGS:
        raise Http404("No such demo")
    return render(request, "demos/demo_page.html", demo_context(slug))


@require_POST
def run_create(request: HttpRequest, slug: str) -> JsonResponse:
    if slug not in DEMO_SLUGS:
        return _error(404, message=f"No demo named {slug!r}.")
    try:
        params = run_params_parse(demo=slug, body=request.body)
    except ParamError as exc:
        return _error(422, field=exc.field, message=f"{exc.field} {exc.message}")
    owner = services.run_owner_for_request(request)
    try:
        run = services.run_start(owner=owner, demo=slug, params=params,
                                 client_addr=services.client_address_for_request(request))
    except RunConflict as exc:
        run_id = str(exc.active.id)
        return _error(409, message=f"You already have a run in progress ({run_id}); "
                      "cancel it or wait for it to end.", active_run_id=run_id,
                      active_events_url=_events_url(run_id))
    except (QueueFull, RateLimited) as exc:
        response = _error(429, message=exc.message, retry_after_s=exc.retry_after_s)
        response["Retry-After"] = str(exc.retry_after_s)
        return response
    except EnqueueFailed as exc:
        return _error(503, message="The demo could not be queued right now; please try again "
                      "in a minute.", run_id=str(exc))
    return JsonResponse({"run_id": str(run.id), "events_url": _events_url(str(run.id)),
                         "state": run.state}, status=201)


def _owned_run(request: HttpRequest, run_id) -> "services.Run | None":
    # Reading or cancelling never creates a session: without one, no run is yours.
    return services.run_get_for_owner(
        run_id=str(run_id), owner=services.run_owner_for_request(request, create=False))


@never_cache
@require_GET
def run_detail(request: HttpRequest, run_id) -> JsonResponse:
    run = _owned_run(request, run_id)
    if run is None:
        return _error(404, message="No such run.")
    return JsonResponse(services.run_as_json(run))


@require_POST
def run_cancel(request: HttpRequest, run_id) -> JsonResponse:
    """Cancel the run, or with {"stream": n} only that stream of a multi-stream run."""
    run = _owned_run(request, run_id)
    if run is None:
        return _error(404, message="No such run.")
    stream = None
    if request.content_type == "application/json" and request.body.strip():
        try:
            body = json.loads(request.body)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return _error(422, field="body", message="body must be a JSON object")
        if not isinstance(body, dict):
            return _error(422, field="body", message="body must be a JSON object")
        stream = body.get("stream")
    elif request.POST.get("stream", "") != "":  # a plain form post works too
        raw = request.POST["stream"]
        stream = int(raw) if raw.isdigit() else raw
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)
                               or not 0 <= stream < 16):
        return _error(422, field="stream", message="stream must be a stream number")
    run = services.run_cancel(run=run, target=CancelTarget(stream=stream))
    return JsonResponse(services.run_as_json(run), status=202)


def _stream_param(request: HttpRequest) -> int | None:
    raw = request.GET.get("stream")
    if raw in (None, ""):
        return None
    if not raw.isdigit() or int(raw) >= 16:
        raise ValueError("stream must be a stream number")
    return int(raw)


def _last_event_id(request: HttpRequest) -> str:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id") or "0-0"
    left, _, right = raw.partition("-")
    return raw if left.isdigit() and right.isdigit() else "0-0"


@never_cache
@require_GET
async def run_events(request: HttpRequest, run_id) -> HttpResponse:
    """text/event-stream of the run's events, from the start or from Last-Event-ID."""
    try:
        stream = _stream_param(request)
    except ValueError as exc:
        return _error(422, field="stream", message=str(exc))
    owner = await sync_to_async(services.run_owner_for_request)(request, create=False)
    run = await sync_to_async(services.run_get_for_owner)(run_id=str(run_id), owner=owner)
    if run is None:
        return _error(404, message="No such run.")
    response = StreamingHttpResponse(
        run_events_relay(run_id=str(run.id), stream=stream, last_id=_last_event_id(request)),
        content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx and friends: do not buffer the stream
    return response
