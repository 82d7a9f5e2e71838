"""The smallest WSGI app: bench/load.py serves it with the same gunicorn settings to
show what gunicorn and loopback HTTP cost on this machine before any application code."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

BODY = b'{"status": "ok"}'


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
    )
    return [BODY]
