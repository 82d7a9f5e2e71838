"""ASGI entry point, the production server (docs/HOT_PATH.md, "The change feed"):

    gunicorn omniroute_admin.asgi:application -k omniroute_admin.worker.Worker

Every request runs the WSGI application (the pool fast lane in front of Django, exactly
as `omniroute_admin.wsgi` serves it: request deadlines, the dashboard's pool, the fast
lane unchanged) on a bounded pool of `ASGI_WSGI_THREADS` threads per process.
An answer that asks to be held (the change feed's, omniroute_admin.change_feed: the view
Django resolved says so with an internal header, so a path prefix changes nothing) is
then held on the event loop: the thread is back in the pool at once, and a gateway
long-polling the feed costs one coroutine and one socket, never a thread or a database
connection. Its repeats (the same request with the version it was answered) are held
without Django while the hub holds a proof of it (change_feed.ChangeHub.prove), so a
change answers every waiter and none of them runs Django again at once."""

from __future__ import annotations

import asyncio
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from typing import Any

from a2wsgi.wsgi import build_environ

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

from django.conf import settings

from omniroute_admin.wsgi import lanes  # loads Django: import it first

# isort: split
from ladder.api.feed import HOLD_HEADER
from omniroute_admin import change_feed
from omniroute_admin.change_feed import take_hold, version_body, with_body

Scope = dict[str, Any]
Receive = Any
Send = Any
Reply = tuple[int, list[tuple[bytes, bytes]], bytes]


class BufferedWSGI:
    """A WSGI application as ASGI, one thread hop per request: the body is read on the
    loop, the whole call (environ to the last body byte) runs on a pool thread, and the
    answer is sent from the loop. a2wsgi's WSGIMiddleware hands every message across
    threads and back (three round trips for a small answer), which halved the pool
    endpoint's throughput here; almost every answer of this app is small, so buffering
    costs nothing. A streaming answer (Django's StreamingHttpResponse: the CSV exports)
    is the exception: it is sent as it is made, in pieces of about STREAM_PIECE bytes,
    from the pool thread that runs it (its database cursor belongs to that thread), each
    piece waiting for the client to take the last (constant memory; once the whole
    export was gathered first: 89.6 s to the first byte and 465 MB at 1,000,000 rows).
    Its environ is a2wsgi's."""

    def __init__(self, app: Any, threads: int) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wsgi")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1000})
            return
        poll = _poll_key(scope) if b"after=" in scope["query_string"] else None
        proof = None
        if poll is not None:
            hub = change_feed.get_hub()
            held = hub.proven(*poll)
            if held is not None:  # a repeat of a long poll Django accepted
                after, wait, headers = held
                await send_reply(send, await _held_reply(receive, after, wait, headers))
                return
            proof = poll[0], hub.epoch  # the epoch before Django authenticates it
        body = await _body(scope, receive)
        if body is not None:
            await self.respond(environ_of(scope, body), send, receive, proof)

    async def respond(
        self,
        environ: dict[str, Any],
        send: Send,
        receive: Receive,
        proof: tuple[bytes, int] | None = None,
    ) -> None:
        """Run the app for `environ` on a pool thread and send its answer, held first
        when it asks to be (the change feed's); a held answer proves `proof`'s key."""
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.executor, self._call, environ, loop, send)
        if reply is None:  # streamed from the pool thread
            return
        status, encoded, content = reply
        if any(name == HOLD for name, _ in encoded):
            headers, hold = take_hold(
                [(n.decode("latin1"), v.decode("latin1")) for n, v in encoded]
            )
            if hold is not None:
                after, wait = hold
                if proof is not None:
                    change_feed.get_hub().prove(proof[0], proof[1], wait, headers)
                await send_reply(send, await _held_reply(receive, after, wait, headers))
                return
            encoded = _encoded(headers)
        await send_reply(send, (status, encoded, content))

    async def reply(self, environ: dict[str, Any]) -> Reply:
        """The app's answer to `environ`, run on a pool thread."""
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.executor, self._call, environ)
        assert reply is not None  # buffered: no loop or send given
        return reply

    def _call(
        self,
        environ: dict[str, Any],
        loop: asyncio.AbstractEventLoop | None = None,
        send: Send | None = None,
    ) -> Reply | None:
        """The app's answer, buffered; None when it streamed and was sent from here
        (given the loop and `send`)."""
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[Any], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return chunks.append

        result = self.app(environ, start_response)
        try:
            if loop is not None and send is not None and getattr(result, "streaming", False):
                _stream(started, chunks, result, loop, send)
                return None
            chunks.extend(result)
        finally:
            getattr(result, "close", lambda: None)()
        status, headers = started
        return int(status.split(" ", 1)[0]), _encoded(headers), b"".join(chunks)


# A streamed answer is sent in pieces of about this many bytes.
STREAM_PIECE = 64 * 1024


def _encoded(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(n.lower().encode("latin1"), v.encode("latin1")) for n, v in headers]


def _stream(
    started: list[Any],
    written: list[bytes],
    result: Any,
    loop: asyncio.AbstractEventLoop,
    send: Send,
) -> None:
    """Send a streaming answer from this pool thread as it is made: each piece is sent
    on the loop, and the next made only once the server has taken it."""

    def sent(message: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(send(message), loop).result()

    status, headers = started
    sent(
        {
            "type": "http.response.start",
            "status": int(status.split(" ", 1)[0]),
            "headers": _encoded(headers),
        }
    )
    piece, size = list(written), sum(len(c) for c in written)
    for chunk in result:
        piece.append(chunk)
        size += len(chunk)
        if size >= STREAM_PIECE:
            sent({"type": "http.response.body", "body": b"".join(piece), "more_body": True})
            piece, size = [], 0
    sent({"type": "http.response.body", "body": b"".join(piece)})


def environ_of(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ of a request (a2wsgi's), its body in `wsgi.input`."""
    environ: dict[str, Any] = build_environ(scope, BytesIO(body))  # type: ignore[arg-type, assignment]
    return environ


async def send_reply(send: Send, reply: Reply) -> None:
    """Send an answer."""
    status, headers, content = reply
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


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
            break
    return b"".join(chunks)


_wsgi = BufferedWSGI(lanes, int(settings.ASGI_WSGI_THREADS))
HOLD = HOLD_HEADER.lower().encode("latin1")


application = _wsgi


def _poll_key(scope: Scope) -> tuple[bytes, str] | None:
    """A GET without a body whose query has one `after`: a digest of everything the
    request says but that `after`'s value, and the value. Two requests with one key differ
    only in the version they hold, so Django's answer to a long poll of one, given the
    current version, is its answer to the other."""
    parts = scope["query_string"].split(b"&")
    afters = [i for i, part in enumerate(parts) if part.startswith(b"after=")]
    headers = scope["headers"]
    if scope["method"] != "GET" or len(afters) != 1:
        return None
    if any(name in (b"content-length", b"transfer-encoding") for name, _ in headers):
        return None
    after = parts[afters[0]][len(b"after=") :]
    parts[afters[0]] = b"after="
    said: tuple[Any, ...] = (scope["scheme"], scope.get("http_version"), scope["path"])
    said += (scope.get("root_path", ""), scope.get("raw_path"), b"&".join(parts), *headers)
    return hashlib.sha256(repr(said).encode()).digest(), after.decode("latin1")


async def _held_reply(
    receive: Receive, after: tuple[int, int], wait: float, headers: list[tuple[str, str]]
) -> Reply:
    """The feed's answer once the version moves past `after` or `wait` passes."""
    content = version_body(await _held(receive, after, wait) or after)
    return 200, _encoded(with_body(headers, content)), content


async def _held(receive: Receive, after: tuple[int, int], wait: float) -> Any:
    """The new counters, None once `wait` passed or the client went away."""
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        return await change_feed.get_hub().await_change(after, wait, gone)
    finally:
        gone.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
