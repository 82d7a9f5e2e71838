"""ASGI entry point, the production server (docs/HOT_PATH.md, "The change feed"):

    gunicorn omniroute_admin.asgi:application -k omniroute_admin.worker.Worker

Every request runs the WSGI application (`omniroute_admin.wsgi.lanes`: the pool fast lane
in front of Django, request deadlines included) on a pool of `ASGI_WSGI_THREADS` threads
per process. An answer that asks to be held (the change feed's, omniroute_admin.change_feed)
is then held on the event loop: the thread is back in the pool at once, and a gateway
long-polling the feed costs one coroutine and one socket, never a thread or a database
connection. Its repeats are held without Django while the hub holds a proof of it
(change_feed.ChangeHub.prove), so a change answers every waiter and none of them runs
Django again at once."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from itertools import chain
from typing import Any

from a2wsgi.wsgi import build_environ

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

from django.conf import settings

from omniroute_admin.wsgi import lanes  # loads Django: import it first

# isort: split
from omniroute_admin import change_feed
from omniroute_admin.change_feed import Headers, held_answer, take_hold

Scope = dict[str, Any]
Receive = Any
Send = Any
# A streamed answer is sent in pieces of about this many bytes.
STREAM_PIECE = 64 * 1024


class BufferedWSGI:
    """A WSGI application as ASGI, one thread hop per request: the body is read on the
    loop, the whole call runs on a pool thread, and the answer is sent from the loop.
    (a2wsgi's WSGIMiddleware hands every message across threads and back, which halved
    the pool endpoint's throughput here; its environ is used.) A streaming answer (the
    CSV exports) is sent as it is made, from the pool thread that runs it (its database
    cursor belongs to that thread), each piece once the client took the last: constant
    memory (once gathered whole: 89.6 s to the first byte and 465 MB at 1,000,000 rows)."""

    def __init__(self, app: Any, threads: int) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wsgi")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan events to act on, no websockets to accept
        poll = _poll_key(scope)
        if poll is not None:
            hub = change_feed.get_hub()
            held = hub.proven(*poll)
            if held is not None:  # a repeat of a long poll Django accepted
                await _hold(send, receive, *held)
                return
            proof = poll[0], hub.epoch  # the epoch before Django authenticates it
        body = await _body(scope, receive)
        if body is None:
            return
        environ = build_environ(scope, BytesIO(body))  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.executor, self._call, environ, loop, send)
        if reply is None:  # streamed from the pool thread
            return
        status, headers, content = reply
        headers, hold = take_hold(headers)
        if hold is None:
            await _send(send, status, headers, content)
            return
        after, wait = hold
        if poll is not None:
            change_feed.get_hub().prove(*proof, wait, headers)
        await _hold(send, receive, after, wait, headers)

    def _call(
        self, environ: Any, loop: asyncio.AbstractEventLoop, send: Send
    ) -> tuple[int, Headers, bytes] | None:
        """The app's answer, buffered; None when it streamed and was sent from here."""
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: Headers, exc_info: Any = None) -> Any:
            started[:] = [int(status.split(" ", 1)[0]), headers]
            return chunks.append

        result = self.app(environ, start_response)
        try:
            if getattr(result, "streaming", False):
                _stream(loop, send, started[0], started[1], chain(chunks, result))
                return None
            chunks.extend(result)
        finally:
            getattr(result, "close", lambda: None)()
        return started[0], started[1], b"".join(chunks)


def _stream(
    loop: asyncio.AbstractEventLoop,
    send: Send,
    status: int,
    headers: Headers,
    body: Iterable[bytes],
) -> None:
    """Send a streaming answer from this pool thread in pieces of about STREAM_PIECE
    bytes, each sent on the loop before the next is made."""

    def sent(message: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(send(message), loop).result()

    sent({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
    piece = bytearray()
    for chunk in body:
        piece += chunk
        if len(piece) >= STREAM_PIECE:
            sent({"type": "http.response.body", "body": bytes(piece), "more_body": True})
            piece.clear()
    sent({"type": "http.response.body", "body": bytes(piece)})


def _encoded(headers: Headers) -> list[tuple[bytes, bytes]]:
    return [(n.lower().encode("latin1"), v.encode("latin1")) for n, v in headers]


async def _send(send: Send, status: int, headers: Headers, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
    await send({"type": "http.response.body", "body": body})


async def _body(scope: Scope, receive: Receive) -> bytes | None:
    """The request body, unless its declared length is over the limit (Django answers
    the 413 from the header without reading it: omniroute_admin.middleware); None when
    the connection closed before it was whole (the client left, or was too slow:
    omniroute_admin.worker), and the request is not run."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = next((v for n, v in scope["headers"] if n == b"content-length"), b"0")
    if limit is not None and declared.isdigit() and int(declared) > limit:
        return b""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if limit is not None and size > limit:  # undeclared and too long: Django
            return b""  # reads CONTENT_LENGTH bytes, none here, and answers from that
        if not message.get("more_body"):
            return b"".join(chunks)


def _poll_key(scope: Scope) -> tuple[bytes, str] | None:
    """A GET without a body whose query has one `after`: a digest of everything the
    request says but that `after`'s value, and the value. Two requests with one key differ
    only in the version they hold, so Django's answer to a long poll of one, given the
    current version, is its answer to the other."""
    if b"after=" not in scope["query_string"] or scope["method"] != "GET":
        return None
    parts = scope["query_string"].split(b"&")
    afters = [i for i, part in enumerate(parts) if part.startswith(b"after=")]
    headers = scope["headers"]
    if len(afters) != 1 or any(n in (b"content-length", b"transfer-encoding") for n, _ in headers):
        return None
    after = parts[afters[0]][len(b"after=") :]
    parts[afters[0]] = b"after="
    said: tuple[Any, ...] = (scope["scheme"], scope.get("http_version"), scope["path"])
    said += (scope.get("root_path", ""), scope.get("raw_path"), b"&".join(parts), *headers)
    return hashlib.sha256(repr(said).encode()).digest(), after.decode("latin1")


async def _hold(
    send: Send, receive: Receive, after: tuple[int, int], wait: float, headers: Headers
) -> None:
    """Send the feed's answer once the version moves past `after`, `wait` passes or the
    client goes away."""
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        moved = await change_feed.get_hub().await_change(after, wait, gone)
    finally:
        gone.cancel()
    await _send(send, 200, *held_answer(headers, moved or after))


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


application = BufferedWSGI(lanes, int(settings.ASGI_WSGI_THREADS))
