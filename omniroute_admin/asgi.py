"""ASGI entry point, the production server (docs/HOT_PATH.md, "The change feed"):

    gunicorn omniroute_admin.asgi:application -k uvicorn_worker.UvicornWorker --workers N

Every request runs the WSGI application (the pool fast lane in front of Django, exactly
as `omniroute_admin.wsgi` serves it: request deadlines, the dashboard's pool, the fast
lane unchanged) on a bounded pool of `ASGI_WSGI_THREADS` threads per process (a2wsgi).
A change-feed answer that asks to be held (omniroute_admin.change_feed) is then held on
the event loop: the thread is back in the pool at once, and a gateway long-polling the
feed costs one coroutine and one socket, never a thread or a database connection."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from a2wsgi import WSGIMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

from django.conf import settings  # noqa: E402

from omniroute_admin.wsgi import lanes  # noqa: E402  (loads Django)

from omniroute_admin.change_feed import (  # noqa: E402
    FEED_PATH,
    get_hub,
    take_hold,
    version_body,
    with_body,
)

_wsgi = WSGIMiddleware(lanes, workers=int(settings.ASGI_WSGI_THREADS))  # type: ignore[arg-type]

Scope = dict[str, Any]
Receive = Any
Send = Any


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "http" and scope["path"] == FEED_PATH and not scope.get("root_path"):
        await _feed(scope, receive, send)
    else:
        await _wsgi(scope, receive, send)  # type: ignore[arg-type]


async def _feed(scope: Scope, receive: Receive, send: Send) -> None:
    """The feed through the WSGI application; its answer held here when it asks."""
    messages: list[dict[str, Any]] = []

    async def keep(message: dict[str, Any]) -> None:
        messages.append(message)

    await _wsgi(scope, receive, keep)  # type: ignore[arg-type]
    start, *body = messages
    headers = [(n.decode("latin1"), v.decode("latin1")) for n, v in start["headers"]]
    headers, hold = take_hold(headers)
    if hold is None:
        content = b"".join(m.get("body", b"") for m in body)
    else:
        after, wait = hold
        content = version_body(await _held(receive, after, wait) or after)
        headers = with_body(headers, content)
    await send(
        {
            "type": "http.response.start",
            "status": start["status"],
            "headers": [(n.lower().encode("latin1"), v.encode("latin1")) for n, v in headers],
        }
    )
    await send({"type": "http.response.body", "body": content})


async def _held(receive: Receive, after: tuple[int, int], wait: float) -> Any:
    """The new counters, None once `wait` passed or the client went away."""
    change = asyncio.ensure_future(get_hub().await_change(after, wait))
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({change, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not change.done():
            change.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
    return change.result() if change.done() and not change.cancelled() else None


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
