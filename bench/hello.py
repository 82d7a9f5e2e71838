"""The smallest WSGI and ASGI apps: the benchmarks serve them with the same server
settings to show what the server and loopback HTTP cost on this machine before any
application code (gunicorn serves `app`, uvicorn `asgi_app`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

BODY = b'{"status": "ok"}'


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    )
    return [BODY]


async def asgi_app(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": BODY})
