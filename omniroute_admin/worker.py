"""The production worker class (`-k omniroute_admin.worker.Worker`): uvicorn's, with a
deadline on reading each request.

uvicorn closes a kept-alive connection idle past `--keep-alive`, but not one that sends
nothing or drips its request a byte at a time: 2,000 such sockets once held every
descriptor of the server (issue #30). Here a connection must send each request whole
within `REQUEST_READ_TIMEOUT_SECONDS` of its opening (its first request) or of the
request's first byte (a later one), or it is closed; the time the application takes to
answer does not count. Imported by gunicorn's master before any worker forks: it loads
no Django until a connection opens, in a worker."""

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
            self.read_deadline = self.loop.call_later(seconds, self.transport.close)

    def _stop_deadline(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None


class Worker(UvicornWorker):
    """uvicorn's gunicorn worker class with ReadDeadlineProtocol."""

    CONFIG_KWARGS: dict[str, Any] = {**UvicornWorker.CONFIG_KWARGS, "http": ReadDeadlineProtocol}
