"""Middleware of the site's own.

`HtmlGZipMiddleware`: HTML pages are gzipped for clients that accept it (`/calculators/` was
581 KB on the wire). Only whole HTML responses: static files are whitenoise's (compressed
ahead of time), and event streams and JSON stay as they are. Django's gzip adds random bytes
to each body (its BREACH mitigation) and CSRF tokens are masked per response.

`v1_json_errors` (first in MIDDLEWARE): every answer under /v1 is JSON. The API's views answer
their own errors in OpenAI's body; this catches what Django answers before or around them in
HTML (a 500 from an unexpected exception, a 400 for a Host header not in ALLOWED_HOSTS, a body
past DATA_UPLOAD_MAX_MEMORY_SIZE read by something else) and gives it the same body and status.
"""

import logging

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.gzip import GZipMiddleware
from django.utils.cache import patch_vary_headers
from django.utils.decorators import sync_and_async_middleware

logger = logging.getLogger(__name__)

_MESSAGES = {
    400: "the request could not be read",
    403: "the request is not allowed",
    404: "unknown route",
    405: "method not allowed",
    413: "the body is too large",
    429: "too many requests",
    500: "the server hit an internal error (it has been logged)",
    503: "the service is not answering; try again shortly",
}


def _is_v1(request: HttpRequest) -> bool:
    return request.path == "/v1" or request.path.startswith("/v1/")


def _as_json(response: HttpResponse) -> HttpResponse:
    status = response.status_code
    content_type = response.get("Content-Type", "")
    if status < 400 or content_type.startswith(("application/json", "text/event-stream")):
        return response
    kind = "server_error" if status >= 500 else "invalid_request_error"
    fixed = JsonResponse({"error": {"message": _MESSAGES.get(status, "request failed"),
                                    "type": kind, "param": None, "code": None}},
                         status=status)
    if "Retry-After" in response:
        fixed["Retry-After"] = response["Retry-After"]
    elif status == 503:
        fixed["Retry-After"] = "5"
    return fixed


@sync_and_async_middleware
def v1_json_errors(get_response):  # noqa: ANN001, ANN201
    if iscoroutinefunction(get_response):
        async def middleware(request: HttpRequest) -> HttpResponse:
            response = await get_response(request)
            return _as_json(response) if _is_v1(request) else response
    else:
        def middleware(request: HttpRequest) -> HttpResponse:
            response = get_response(request)
            return _as_json(response) if _is_v1(request) else response
    return middleware


# zlib's fastest level: /calculators/ (581 KB) packs to 111 KB in about 7 ms, where Django's
# level 6 takes 20-40 ms on the shared two-core machine for 83 KB, more than the page's render.
HTML_GZIP_LEVEL = 1


def _gzip(content: bytes, *, max_random_bytes: int) -> bytes:
    """Django's compress_string (a random-length file name in the header, against BREACH) at
    HTML_GZIP_LEVEL."""
    import gzip
    import secrets

    packed = gzip.compress(content, compresslevel=HTML_GZIP_LEVEL, mtime=0)
    header = bytearray(packed[:10])
    header[3] = gzip.FNAME
    return bytes(header) + b"a" * secrets.randbelow(max_random_bytes) + b"\x00" + packed[10:]


class HtmlGZipMiddleware(GZipMiddleware):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.streaming or not response.get("Content-Type", "").startswith("text/html") \
                or len(response.content) < 200 or response.has_header("Content-Encoding"):
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if "gzip" not in request.META.get("HTTP_ACCEPT_ENCODING", ""):
            return response
        packed = _gzip(response.content, max_random_bytes=self.max_random_bytes)
        if len(packed) >= len(response.content):
            return response
        response.content = packed
        response.headers["Content-Length"] = str(len(packed))
        etag = response.get("ETag")
        if etag and etag.startswith('"'):
            response.headers["ETag"] = "W/" + etag
        response.headers["Content-Encoding"] = "gzip"
        return response
