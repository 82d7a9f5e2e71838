"""The gateway's hot path, answered before Django builds a request.

A pool read (`GET /api/v1/pools/<auto id>`, or a `POST` of its own candidates) whose
decision this process holds for the current change counters costs here one query (the
token and the counters, ladder.tokens) and a dictionary lookup, not a request object,
thirteen middleware, the router and validating every candidate; the bytes are those the
endpoint rendered, or its `304`. The lane only replays what Django answered: a request
of a shape (method, host, scheme, trusted proxy headers) whose 200 it has not seen, a bad
or revoked token or a decision not cached yet goes on to Django, every time. Its query
runs under the API's deadline (omniroute_admin.deadline).
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError

from ladder.api.pool_answers import PoolAnswer, body_key, cached_pool_answer
from omniroute_admin.deadline import DeadlinePassed, call_within_deadline
from omniroute_admin.errors import (
    DATABASE_DOWN,
    DATABASE_SLOW,
    JSON_CONTENT_TYPE,
    unavailable_body,
)

logger = logging.getLogger(__name__)

POOLS_PREFIX = "/api/v1/pools/"
BEARER = "Bearer "
# Request shapes whose headers are kept: a handful in practice (the hosts a balancer
# sends). The bounds stop made-up Host headers from growing it past a few kilobytes.
MAX_SHAPES = 64
MAX_SHAPE_BYTES = 1024
# The headers of one decision, not of the request shape: never learned, sent per answer.
PER_DECISION = frozenset({"content-length", "etag", "cache-control"})

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = tuple[tuple[str, str], ...]
Reply = tuple[str, list[tuple[str, str]], bytes]


class PoolFastLane:
    """WSGI middleware in front of Django's handler (omniroute_admin.wsgi)."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.headers: dict[tuple[Any, ...], Headers] = {}  # learned, per request shape
        self._lock = threading.Lock()
        self._shape_keys: tuple[str, ...] | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if not is_pool_request(environ):
            return self.app(environ, start_response)
        method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
        post_key = None
        if method == "POST":
            # Read the body here, and hand Django a copy should it answer instead.
            body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
            environ["wsgi.input"] = io.BytesIO(body)
            post_key = body_key(environ.get("CONTENT_TYPE", ""), body)
        shape = self._shape(environ)
        headers = self.headers.get(shape)
        if headers is None:
            return self.app(environ, self._learning(shape, start_response))
        secret = environ["HTTP_AUTHORIZATION"][len(BEARER) :]  # as ninja's HttpBearer takes it
        try:
            answer = call_within_deadline(
                cached_pool_answer,
                path[len(POOLS_PREFIX) :],
                secret,
                post_key,
                environ.get("HTTP_IF_NONE_MATCH"),
            )
        except DeadlinePassed as why:
            logger.warning("%s %s %s: answered 503", method, path, why)
            return _send(start_response, unavailable_reply(headers, DATABASE_SLOW))
        except (OperationalError, InterfaceError) as error:
            logger.warning(
                "database unavailable during %s %s: %s", method, path, type(error).__name__
            )
            return _send(start_response, unavailable_reply(headers, DATABASE_DOWN))
        if answer is None:
            return self.app(environ, start_response)
        return _send(start_response, pool_reply(headers, answer))

    def _shape(self, environ: dict[str, Any]) -> tuple[Any, ...]:
        """What, besides path, token and body, decides Django's answer and headers: the
        method, the host (ALLOWED_HOSTS), the scheme (SECURE_SSL_REDIRECT, HSTS) and the
        proxy headers the settings trust."""
        if self._shape_keys is None:
            keys = ["REQUEST_METHOD", "HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "wsgi.url_scheme"]
            if settings.SECURE_PROXY_SSL_HEADER:
                keys.append(settings.SECURE_PROXY_SSL_HEADER[0])
            if settings.USE_X_FORWARDED_HOST:
                keys.append("HTTP_X_FORWARDED_HOST")
            if settings.USE_X_FORWARDED_PORT:
                keys.append("HTTP_X_FORWARDED_PORT")
            self._shape_keys = tuple(keys)
        return tuple(environ.get(key) for key in self._shape_keys)

    def _learning(self, shape: tuple[Any, ...], start_response: StartResponse) -> StartResponse:
        """start_response that keeps the headers of the endpoint's 200 for this shape:
        a plain JSON answer, the same for every caller, of a shape of plausible size."""

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            content_type = next((v for n, v in headers if n.lower() == "content-type"), "")
            if (
                status.startswith("200 ")
                and exc_info is None
                and content_type.startswith("application/json")
                and not any(n.lower() == "set-cookie" for n, _ in headers)
                and sum(len(v) for v in shape if isinstance(v, str)) <= MAX_SHAPE_BYTES
            ):
                kept = tuple((n, v) for n, v in headers if n.lower() not in PER_DECISION)
                with self._lock:
                    if shape in self.headers or len(self.headers) < MAX_SHAPES:
                        self.headers[shape] = kept
            if exc_info is not None:
                return start_response(status, headers, exc_info)
            return start_response(status, headers)

        return start


def is_pool_request(environ: dict[str, Any]) -> bool:
    """Whether a request is one this lane may answer: a pool read (not its history, always
    Django's) with a bearer token, and a body of declared length for a POST only."""
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD")
    length = environ.get("CONTENT_LENGTH") or "0"
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return not (
        method not in ("GET", "POST")
        or not path.startswith(POOLS_PREFIX)
        or path.rstrip("/").endswith("/history")
        or not path.isascii()
        or environ.get("SCRIPT_NAME")
        or not environ.get("HTTP_AUTHORIZATION", "").startswith(BEARER)
        or "HTTP_TRANSFER_ENCODING" in environ
        or not length.isdigit()
        or (method == "GET" and length != "0")
        or (method == "POST" and not 0 < int(length) <= (2**31 if limit is None else limit))
    )


def pool_reply(headers: Headers, answer: PoolAnswer) -> Reply:
    """A cached pool answer with the headers learned for its request shape. Its 304 drops
    the content type, as Django's HttpResponseNotModified does (and CommonMiddleware
    gives it a Content-Length of 0)."""
    body, tag, cache_control = answer
    kept = [(n, v) for n, v in headers if body is not None or n.lower() != "content-type"]
    body_bytes = b"" if body is None else body
    return (
        "304 Not Modified" if body is None else "200 OK",
        [*kept, ("ETag", tag), ("Cache-Control", cache_control), _length(body_bytes)],
        body_bytes,
    )


def unavailable_reply(headers: Headers, detail: str) -> Reply:
    """The API's JSON 503 (omniroute_admin.errors.unavailable: the same content type,
    `Retry-After: 1` and body) with the headers learned for its request shape."""
    body = unavailable_body(detail)
    kept = [(n, v) for n, v in headers if n.lower() != "content-type"]
    status = "503 Service Unavailable"
    return (
        status,
        [*kept, ("Content-Type", JSON_CONTENT_TYPE), ("Retry-After", "1"), _length(body)],
        body,
    )


def _length(body: bytes) -> tuple[str, str]:
    return ("Content-Length", str(len(body)))


def _send(start_response: StartResponse, reply: Reply) -> list[bytes]:
    status, headers, body = reply
    start_response(status, headers)
    return [body] if body else []
