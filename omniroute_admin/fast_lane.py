"""The gateway's hot path, answered before Django builds a request.

Every gateway request asks for a pool (`GET /api/v1/pools/<auto id>`, or a `POST` of its
own candidates), and nearly every answer is a decision this process already holds for
the current change counters. Through Django such an answer costs a request object,
thirteen middleware, the router and (for a POST) validating every candidate, around one
query; here it costs the query (the token and the counters, ladder.tokens) and a
dictionary lookup (a POST by a digest of its exact body), and the bytes are the very
bytes the endpoint rendered. A request whose `If-None-Match` names the decision's tag
gets the endpoint's `304` for the same one query, with no body.

The lane only replays what Django itself answered. It serves a request only when an
earlier request of the same shape (host, scheme, proxy headers) got a 200 from the
endpoint, and it sends that response's headers (security headers included) with the
cached body; a decision's own headers (`ETag`, `Cache-Control`) are never learned but
computed for each answer (ladder.api.pool_answers). So a host Django refuses, a plain-HTTP
request it redirects, an unknown or revoked token, a bad auto id or a decision not
cached yet all go on to Django, every time, and get Django's answer. Its one query runs
under the request deadline (omniroute_admin.deadline) like any API request: a database
that hangs or fails gets the same JSON 503 as the endpoint would give.
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
from omniroute_admin.deadline import (
    DETAIL,
    UNAVAILABLE_DETAIL,
    DeadlinePassed,
    call_within_deadline,
    log_too_late,
)
from omniroute_admin.errors import JSON_CONTENT_TYPE, unavailable_body

logger = logging.getLogger(__name__)

POOLS_PREFIX = "/api/v1/pools/"
# `GET /api/v1/pools/<auto id>/history` (ladder.api.history) is Django's, always: never
# answered here, and its headers (a page's `Link`) never learned for a shape.
HISTORY_SUFFIX = "/history"
BEARER = "Bearer "
# Request shapes whose headers are kept: a handful in practice (the hosts a load balancer
# sends); the bound only stops a stream of made-up Host headers from growing it.
MAX_SHAPES = 64
# And a shape whose values (host, proxy headers) are longer than this is never learned,
# so the 64 shapes stay a few kilobytes whatever headers a client sends.
MAX_SHAPE_BYTES = 1024
# The headers of one decision, not of the request shape: never learned, sent per answer.
PER_DECISION = frozenset({"content-length", "etag", "cache-control"})

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = tuple[tuple[str, str], ...]


class PoolFastLane:
    """WSGI middleware in front of Django's handler (omniroute_admin.wsgi)."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._headers: dict[tuple[Any, ...], Headers] = {}
        self._lock = threading.Lock()
        self._shape_keys: tuple[str, ...] | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        method: str = environ.get("REQUEST_METHOD", "")
        length = environ.get("CONTENT_LENGTH") or "0"
        if not is_pool_request(environ):
            return self.app(environ, start_response)
        post_key = None
        if method == "POST":
            # Read the body here, and hand Django a copy should it answer instead.
            body = environ["wsgi.input"].read(int(length))
            environ["wsgi.input"] = io.BytesIO(body)
            post_key = body_key(environ.get("CONTENT_TYPE", ""), body)
        shape = self._shape(environ)
        headers = self._headers.get(shape)
        if headers is None:
            return self.app(environ, self._learning(shape, start_response))
        auto_id = path[len(POOLS_PREFIX) :]
        # What ninja's HttpBearer takes from "Bearer <secret>".
        secret = environ["HTTP_AUTHORIZATION"][len(BEARER) :]
        try:
            answer = call_within_deadline(
                cached_pool_answer, auto_id, secret, post_key, environ.get("HTTP_IF_NONE_MATCH")
            )
        except DeadlinePassed as why:
            log_too_late(method, path, str(why))
            return _unavailable(start_response, headers, DETAIL)
        except (OperationalError, InterfaceError) as error:
            logger.warning(
                "database unavailable during %s %s: %s", method, path, type(error).__name__
            )
            return _unavailable(start_response, headers, UNAVAILABLE_DETAIL)
        if answer is None:
            return self.app(environ, start_response)
        status, reply_headers, reply_body = pool_reply(headers, answer)
        start_response(status, reply_headers)
        return [reply_body] if reply_body else []

    def learned(self, environ: dict[str, Any]) -> Headers | None:
        """The headers learned for this pool request's shape, or None (not learned yet)."""
        return self._headers.get(self._shape(environ))

    def _shape(self, environ: dict[str, Any]) -> tuple[Any, ...]:
        """What, besides path, token and body, decides Django's answer and headers: the
        method, the host (ALLOWED_HOSTS), the scheme (SECURE_SSL_REDIRECT, HSTS) and the
        proxy headers the settings trust."""
        keys = self._shape_keys
        if keys is None:
            extra = []
            if settings.SECURE_PROXY_SSL_HEADER:
                extra.append(settings.SECURE_PROXY_SSL_HEADER[0])
            if settings.USE_X_FORWARDED_HOST:
                extra.append("HTTP_X_FORWARDED_HOST")
            if settings.USE_X_FORWARDED_PORT:
                extra.append("HTTP_X_FORWARDED_PORT")
            keys = self._shape_keys = (
                "REQUEST_METHOD",
                "HTTP_HOST",
                "SERVER_NAME",
                "SERVER_PORT",
                "wsgi.url_scheme",
                *extra,
            )
        return tuple(environ.get(key) for key in keys)

    def _learning(self, shape: tuple[Any, ...], start_response: StartResponse) -> StartResponse:
        """start_response that keeps the headers of the endpoint's 200 for this shape."""

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if status.startswith("200 ") and exc_info is None:
                self._learn(shape, headers)
            if exc_info is not None:
                return start_response(status, headers, exc_info)
            return start_response(status, headers)

        return start

    def _learn(self, shape: tuple[Any, ...], headers: list[tuple[str, str]]) -> None:
        names = {name.lower() for name, _ in headers}
        content_type = next((v for n, v in headers if n.lower() == "content-type"), "")
        # Only a plain JSON answer that is the same for every caller is replayed.
        if "set-cookie" in names or not content_type.startswith("application/json"):
            return
        if sum(len(value) for value in shape if isinstance(value, str)) > MAX_SHAPE_BYTES:
            return
        kept = tuple((n, v) for n, v in headers if n.lower() not in PER_DECISION)
        with self._lock:
            if shape in self._headers or len(self._headers) < MAX_SHAPES:
                self._headers[shape] = kept


def is_pool_request(environ: dict[str, Any]) -> bool:
    """Whether a request is one this lane may answer: a pool read (not its history) with
    a bearer token, and a body of declared length for a POST only."""
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD")
    length = environ.get("CONTENT_LENGTH") or "0"
    return not (
        method not in ("GET", "POST")
        or not path.startswith(POOLS_PREFIX)
        or path.rstrip("/").endswith(HISTORY_SUFFIX)
        or not path.isascii()
        or environ.get("SCRIPT_NAME")
        or not environ.get("HTTP_AUTHORIZATION", "").startswith(BEARER)
        or "HTTP_TRANSFER_ENCODING" in environ
        or not length.isdigit()
        or (method == "GET" and length != "0")
        or (method == "POST" and not 0 < int(length) <= _body_limit())
    )


def _body_limit() -> int:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return int(limit) if limit is not None else 2**31


Reply = tuple[str, list[tuple[str, str]], bytes]


def pool_reply(headers: Headers, answer: PoolAnswer) -> Reply:
    """The status, headers and body of a cached pool answer, with the headers learned
    for its request shape."""
    body, tag, cache_control = answer
    if body is None:
        # Django's 304 (HttpResponseNotModified) drops the content type too, and its
        # CommonMiddleware gives it a Content-Length of 0: the same headers here.
        kept = [(n, v) for n, v in headers if n.lower() != "content-type"]
        return (
            "304 Not Modified",
            [*kept, ("ETag", tag), ("Cache-Control", cache_control), ("Content-Length", "0")],
            b"",
        )
    return (
        "200 OK",
        [
            *headers,
            ("ETag", tag),
            ("Cache-Control", cache_control),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def unavailable_reply(headers: Headers, detail: str) -> Reply:
    """The API's JSON 503 (omniroute_admin.errors.unavailable: the same content type,
    `Retry-After: 1` and body) with the headers learned for its request shape."""
    body = unavailable_body(detail)
    kept = [(n, v) for n, v in headers if n.lower() != "content-type"]
    return (
        "503 Service Unavailable",
        [
            *kept,
            ("Content-Type", JSON_CONTENT_TYPE),
            ("Retry-After", "1"),
            ("Content-Length", str(len(body))),
        ],
        body,
    )


def _unavailable(start_response: StartResponse, headers: Headers, detail: str) -> list[bytes]:
    status, reply_headers, body = unavailable_reply(headers, detail)
    start_response(status, reply_headers)
    return [body]
