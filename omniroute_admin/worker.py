"""The production worker class: uvicorn's, with a deadline on reading each request.

    gunicorn omniroute_admin.asgi:application -k omniroute_admin.worker.Worker

uvicorn closes a kept-alive connection that stays idle past gunicorn's `--keep-alive`,
but not one that opens and sends nothing, nor one that drips its request a byte at a
time: 2,000 such sockets were held for good, every descriptor of the server with them
(issue #30). Here a connection must send each request whole, headers and body, within
`REQUEST_READ_TIMEOUT_SECONDS` of its opening (its first request) or of the request's
first byte (a later one: until then the keep-alive timeout applies), or it is closed.
The time the application takes to answer does not count (a held change-feed answer
lasts up to 30 s). A request cut short this way never reaches the application
(omniroute_admin.asgi reads the whole body before calling it).

Imported by gunicorn's master before any worker forks: it loads no Django (the
deadline is read from the settings when a connection opens, in a worker)."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker


class ReadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools), closing a connection whose request is
    not complete within the deadline."""

    read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_deadline()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._start_deadline()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._stop_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _start_deadline(self) -> None:
        if self.read_deadline is None:
            from django.conf import settings

            seconds = float(settings.REQUEST_READ_TIMEOUT_SECONDS)
            self.read_deadline = self.loop.call_later(seconds, self._too_slow)

    def _stop_deadline(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def _too_slow(self) -> None:
        self.read_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class Worker(UvicornWorker):
    """uvicorn's gunicorn worker class with ReadDeadlineProtocol."""

    CONFIG_KWARGS: dict[str, Any] = {**UvicornWorker.CONFIG_KWARGS, "http": ReadDeadlineProtocol}
