"""The web server's HTTP protocol: uvicorn's h11 protocol, plus a deadline for the request head.

uvicorn closes a kept-alive connection that stays silent, but not one that never finishes a
request: a socket that connects and sends nothing, or sends its headers a byte at a time,
stays open for good, and every open connection counts against `--limit-concurrency`. With 21
such sockets against a limit of 20 every request was answered 503; idle and slow-header
sockets stayed open 75 s and more. Here a connection must send a complete request head within
WEB_HEADER_TIMEOUT seconds of opening (or of its previous response ending), else it is closed.
The body and the response are not on this clock: an event stream may stay open for minutes.

`manage.py serve` passes it to uvicorn as `--http course.web_protocol:HeadTimeoutProtocol`.
"""

import asyncio
import os

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = float(os.environ.get("WEB_HEADER_TIMEOUT", "5"))


class HeadTimeoutProtocol(H11Protocol):
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_clock_start()

    def _head_clock_start(self) -> None:
        self._head_clock_stop()
        self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_late)

    def _head_clock_stop(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _head_late(self) -> None:
        self._head_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if not self._waiting_for_head():
            self._head_clock_stop()  # a whole head arrived: its request runs on its own time

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._head_clock_start()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_clock_stop()
        super().connection_lost(exc)
