"""Demo runs over HTTP: start (POST JSON), read, cancel, and the SSE stream of events.

Errors are JSON naming what was wrong: 422 for a bad parameter, 413 for a body over
DATA_UPLOAD_MAX_MEMORY_SIZE, 409 for a run already active, 429 (with Retry-After) when a limit
or the queue is full, 404 for someone else's run, 503 (with Retry-After) when Redis or the
broker does not answer. Never an HTML 500, and never internal error text.
"""

import functools
import logging

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from demos import services
from demos.params import (
    ParamError,
    demo_known,
    json_object_parse,
    prompt_fit_check,
    run_params_defaults,
    run_params_parse,
    whole_number_parse,
)
from demos.relay import StreamRefused, run_events_relay, stream_slot_take
from demos.runners.streaming import streaming_prompts
from demos.services import CancelTarget, EnqueueFailed, QueueFull, RateLimited, RunConflict

logger = logging.getLogger(__name__)

MAX_STREAMS = 16  # stream numbers a multi-stream run may have (0 to 15)


def _error(status: int, *, field: str | None = None, message: str, **extra) -> JsonResponse:
    body = {"error": message, **extra}
    if field:
        body["field"] = field
    return JsonResponse(body, status=status)


def _events_url(run_id: str) -> str:
    return reverse("demos:run_events", args=[run_id])


def demo_context(slug: str) -> dict:
    """What a demo's partial needs: its defaults and example prompts (for pages including it);
    for a demo with a schema of its own, its fields, its partial and its script."""
    from demos.runners import runner_get

    context = {"demo_slug": slug, "demo_defaults": run_params_defaults(slug),
               "demo_examples": EXAMPLE_PROMPTS, "demo_streams": streaming_prompts("")[1:]}
    runner = runner_get(slug)
    if runner.params is not None:
        context.update(demo_fields=runner.params.specs, demo_partial=f"demos/_{slug}.html",
                       demo_script=f"js/demos/{slug}.js",
                       **(runner.context() if runner.context else {}))
    return context


@functools.cache
def _demo_problems() -> dict[str, int]:
    """Each demo's slug → the problem whose page includes it (read from the pages' prose)."""
    import re

    from problems.registry import CONTENT_DIR

    found: dict[str, int] = {}
    for path in sorted(CONTENT_DIR.glob("p[0-9][0-9].html")):
        for slug in re.findall(r'{%\s*demo\s+"([a-z0-9-]+)"', path.read_text()):
            found.setdefault(slug, int(path.stem[1:]))
    return found


def demo_home(slug: str) -> dict:
    """Where a learner finds a demo: its name in words and the link to it on its problem's
    page (or its page of its own when no problem includes it)."""
    number = _demo_problems().get(slug)
    url = (f"{reverse('course:problem', args=[number])}#demo-{slug}" if number
           else reverse("demos:demo_page", args=[slug]))
    name = slug.replace("-", " ")
    return {"name": f"problem {number}'s {name} demo" if number else f"the {name} demo",
            "url": url}


EXAMPLE_PROMPTS = (
    "What happens during prefill?",
    "Why is decoding slower per token than prefill?",
    "What is paged attention?",
    "What is a GPU good for?",
)


@require_GET
def demo_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A demo on a page of its own (the course page includes the same partial)."""
    if not demo_known(slug):
        raise Http404("No such demo")
    return render(request, "demos/demo_page.html", demo_context(slug))


def _redis_unavailable(exc: Exception) -> JsonResponse:
    # The visitor sees a plain sentence; the address and driver text go to the log only.
    logger.error("Redis did not answer a demo request", exc_info=exc)
    response = _error(503, message="The live demos are unavailable for a moment (their message "
                      "store does not answer); please try again shortly.", retry_after_s=15)
    response["Retry-After"] = "15"
    return response


def _redis_guarded(view):
    """Turn Redis being away into a JSON 503 instead of an HTML 500."""
    @functools.wraps(view)
    def guarded(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except redis.RedisError as exc:
            return _redis_unavailable(exc)
    return guarded


def _body_read(request: HttpRequest) -> bytes:
    """The request body; RequestDataTooBig past DATA_UPLOAD_MAX_MEMORY_SIZE."""
    return request.body


def _too_big() -> JsonResponse:
    return _error(413, field="body", message="body is larger than the server accepts")


@require_POST
@_redis_guarded
def run_create(request: HttpRequest, slug: str) -> JsonResponse:
    if not demo_known(slug):
        return _error(404, message=f"No demo named {slug!r}.")
    try:
        params = run_params_parse(demo=slug, body=_body_read(request))
        prompt_tokens = prompt_fit_check(params, model_dir=settings.ENGINE_MODEL)
    except RequestDataTooBig:
        return _too_big()
    except ParamError as exc:
        return _error(422, field=exc.field, message=f"{exc.field} {exc.message}")
    try:
        # Before any session is saved or slot counted: a run that can never fit is refused.
        services.run_work_fit_check(demo=slug, params=params, work=services.run_work_tokens(
            demo=slug, params=params, prompt_tokens=prompt_tokens))
    except services.WorkTooLarge as exc:
        return _error(422, field=exc.field, message=f"This run {exc.message}.")
    from course.throttle import new_session_allowed

    retry = new_session_allowed(request)  # before a session row is written for a new visitor
    if retry:
        response = _error(429, message="Too many new visitors from your address in the last "
                          f"hour; try again in {max(1, round(retry / 60))} minutes, or sign in.",
                          retry_after_s=retry)
        response["Retry-After"] = str(retry)
        return response
    owner = services.run_owner_for_request(request)
    try:
        run = services.run_start(owner=owner, demo=slug, params=params,
                                 client_addr=services.client_address_for_request(request),
                                 prompt_tokens=prompt_tokens)
    except RunConflict as exc:
        run_id = str(exc.active.id)
        where = demo_home(exc.active.demo)
        return _error(409, message=f"You already have a run of {where['name']} in progress; "
                      "cancel it there or wait for it to end.", active_run_id=run_id,
                      active_events_url=_events_url(run_id), active_demo=exc.active.demo,
                      active_demo_name=where["name"], active_demo_url=where["url"])
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
@_redis_guarded
def run_detail(request: HttpRequest, run_id) -> JsonResponse:
    run = _owned_run(request, run_id)
    if run is None:
        return _error(404, message="No such run.")
    return JsonResponse(services.run_as_json(run))


@never_cache
@require_GET
@_redis_guarded
def run_file(request: HttpRequest, run_id, name: str) -> HttpResponse:
    """A file the run kept for its owner (the profile demo's trace), as a download; 404 for
    anyone else, for a name no run keeps, and once it has expired."""
    run = _owned_run(request, run_id)
    data = services.run_file_get(run_id=str(run_id), name=name) if run is not None else None
    if data is None:
        return _error(404, message="No such file (it may have expired; run the demo again).")
    response = HttpResponse(data, content_type=services.RUN_FILES[name])
    response["Content-Disposition"] = f'attachment; filename="{run_id}-{name}"'
    return response


def _stream_number(value: object) -> int:
    """A stream's number (0 to 15) from JSON or a form, else ParamError("stream")."""
    number = whole_number_parse(value, field="stream")
    if not 0 <= number < MAX_STREAMS:
        raise ParamError("stream", "must be a stream number")
    return number


@require_POST
@_redis_guarded
def run_cancel(request: HttpRequest, run_id) -> JsonResponse:
    """Cancel the run, or with {"stream": n} only that stream of a multi-stream run."""
    try:
        run = _owned_run(request, run_id)
        if run is None:
            return _error(404, message="No such run.")
        stream = None
        if request.content_type == "application/json":
            body = _body_read(request)
            if body.strip():
                raw = json_object_parse(body).get("stream")
                stream = None if raw is None else _stream_number(raw)
        elif request.POST.get("stream", "") != "":  # a plain form post works too
            stream = _stream_number(request.POST["stream"])
    except RequestDataTooBig:
        return _too_big()
    except ParamError as exc:
        return _error(422, field=exc.field, message=f"{exc.field} {exc.message}")
    run = services.run_cancel(run=run, target=CancelTarget(stream=stream))
    return JsonResponse(services.run_as_json(run), status=202)


def _last_event_id(request: HttpRequest) -> str:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id") or "0-0"
    left, _, right = raw.partition("-")
    plain = all(part.isascii() and part.isdigit() and len(part) <= 20 for part in (left, right))
    return raw if plain else "0-0"


@never_cache
@require_GET
async def run_events(request: HttpRequest, run_id) -> HttpResponse:
    """text/event-stream of the run's events, from the start or from Last-Event-ID."""
    raw_stream = request.GET.get("stream")
    try:
        stream = None if raw_stream in (None, "") else _stream_number(raw_stream)
    except ParamError as exc:
        return _error(422, field=exc.field, message=f"{exc.field} {exc.message}")
    owner = await sync_to_async(services.run_owner_for_request)(request, create=False)
    try:
        run = await sync_to_async(services.run_get_for_owner)(run_id=str(run_id), owner=owner)
    except redis.RedisError as exc:
        return _redis_unavailable(exc)
    if run is None:
        return _error(404, message="No such run.")
    try:
        slot = await stream_slot_take(owner=owner, run_id=str(run.id))
    except StreamRefused as exc:
        response = _error(exc.status, message=exc.message, retry_after_s=30)
        response["Retry-After"] = "30"
        return response
    except redis.RedisError as exc:
        return _redis_unavailable(exc)
    response = StreamingHttpResponse(
        run_events_relay(run_id=str(run.id), stream=stream, last_id=_last_event_id(request),
                         slot=slot),
        content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx and friends: do not buffer the stream
    return response


@never_cache
@require_GET
@_redis_guarded
def hardware_latest(request: HttpRequest) -> JsonResponse:
    """The worker's latest measured roofline (problem 12), or {"measured": false} when none
    is stored."""
    from demos.hardware import hardware_latest as latest

    found = latest(services.redis())
    if found is None:
        # Not an error: page 06 asks on every load, and a worker that has not measured itself
        # yet is the usual state (a 404 here filled the console and the log).
        return JsonResponse({"measured": False, "detail": "not measured yet"})
    return JsonResponse(found)


@require_POST
@_redis_guarded
def hardware_measure(request: HttpRequest) -> JsonResponse:
    """Ask a worker to measure itself: 202, or 429 with Retry-After while a measurement asked
    for in the last ten minutes is running or fresh."""
    from demos.hardware import hardware_measure_request

    try:
        wait = hardware_measure_request(services.redis())
    except redis.RedisError:
        raise
    except Exception:
        logger.exception("could not queue a hardware measurement")
        return _error(503, message="The measurement could not be queued right now; please try "
                      "again in a minute.")
    if wait:
        response = _error(429, message=f"A measurement was asked for in the last ten minutes; "
                          f"try again in {wait} s.", retry_after_s=wait)
        response["Retry-After"] = str(wait)
        return response
    return JsonResponse({"detail": "measuring; the result is kept for a day"}, status=202)
