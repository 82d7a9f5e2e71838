"""An HTTP client whose every attempt ends at one deadline, whatever the other side does.

httpx's timeouts bound each connect, read and write: a receiver that drips a byte just
inside the read timeout holds the attempt for as long as it likes (a byte every 3 s held
a worker process about 60 s per webhook attempt). Here every socket operation of the
attempt is given the time left until its deadline at most, and one with none left fails
as a timeout, so the whole attempt (connect, TLS, request, the answer's status line and
headers) ends by the deadline (docs/NOTIFICATIONS.md)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx


def _left(deadline: float, timeout: float | None) -> float:
    """The time an operation may take: its own timeout, cut to what is left of the
    deadline; a timeout error when nothing is left."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(self._deadline, timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(self._deadline, timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        stream = self._stream.start_tls(
            ssl_context, server_hostname, _left(self._deadline, timeout)
        )
        return _DeadlineStream(stream, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, deadline: float) -> None:
        self._backend = httpcore.SyncBackend()
        self._deadline = deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(
            host, port, _left(self._deadline, timeout), local_address, socket_options
        )
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_transport(seconds: float) -> httpx.HTTPTransport:
    """A transport (certificates verified, no proxy) whose requests all end within
    `seconds` from now: use it for one attempt."""
    transport = httpx.HTTPTransport()
    # httpx names no parameter for httpcore's network backend: its pool is rebuilt with
    # the same SSL context and this backend (tests/ladder/services/test_notifications.py
    # pins the outcome against a dripping receiver).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=transport._pool._ssl_context,
        network_backend=_DeadlineBackend(time.monotonic() + seconds),
    )
    return transport
