"""A deadline on requests, so a hung database costs a gateway one second, not a hang.

The connect and statement timeouts bound a database that refuses or is slow, but neither
fires when the network or the server stops answering mid-query: a thread then waits on
its socket for as long as TCP keeps it open. So the rest of a request runs on a small
per-process pool of threads, and the request thread answers a 503 once its deadline has
passed. The abandoned work carries on until the database answers or the connection
breaks, and its result is dropped: a write may still land, so gateways retry writes that
are idempotent (readings, spend by request id).

API requests (`API_REQUEST_DEADLINE_SECONDS`, 0 disables it) get a JSON 503 with
`Retry-After: 1`; their pool never queues, so a request that finds every thread stuck
gets the 503 at once and a hung database piles up no work. Dashboard requests (all but
the API's, static files and `/healthz`, which touch no database) get an error state past
`DASHBOARD_REQUEST_DEADLINE_SECONDS` on a pool of `DASHBOARD_MAX_THREADS`, which queues
a page load's short burst: up to `DASHBOARD_QUEUE_LENGTH` requests wait for a free thread,
each at most `DASHBOARD_QUEUE_WAIT_SECONDS`. A pool whose threads have neither taken nor
finished a job for that long queues no one (they are stuck): open tabs then hold server
threads for at most one wait, at the start of a hang.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, close_old_connections, connections
from django.http import HttpRequest, HttpResponse

from omniroute_admin.dashboard import page_unavailable
from omniroute_admin.errors import DATABASE_DOWN, DATABASE_SLOW, unavailable
from omniroute_admin.middleware import is_api_path, too_large

logger = logging.getLogger(__name__)

# API requests per process that may wait on the database at once: how many a hung database
# can strand. Keep a server's own threads per process below it (the README runs 8), or
# healthy requests beyond it get the 503 too. Each thread keeps one database connection.
MAX_THREADS = 16
# The API's own document and its docs page: built from the code alone, never a 503.
DOCS_PATHS = frozenset({"/api/v1/openapi.json", "/api/v1/docs"})

Handler = Callable[[HttpRequest], HttpResponse]
T = TypeVar("T")


class DeadlinePassed(Exception):
    """The work did not finish by the deadline, or no thread was free to start it."""


class Pool:
    """At most `size` threads, started as needed, each keeping its database connection
    (Django's are per thread) between jobs. With every thread busy a job is refused, or,
    with a `queue`, that many callers wait a bounded time for a free one. Daemon threads,
    unlike an executor's: one stuck on a hung database must not hold up the process's exit."""

    def __init__(self, size: int, name: str, queue: int = 0) -> None:
        self.size, self.name, self.queue = size, name, queue
        self.threads = self.idle = self.waiting = 0
        self.moved = time.monotonic()  # when a job was last taken or finished
        self._free = threading.Semaphore(size)
        self._lock = threading.Lock()
        self._jobs: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]
        self._jobs = SimpleQueue()

    def submit(self, fn: Callable[..., T], *args: Any, wait: float = 0.0) -> Future[T] | None:
        """`fn(*args)` on a free thread, queued up to `wait` s for one; None if none came."""
        if not self._free.acquire(blocking=False) and not self._queue_for(wait):
            return None
        future: Future[T] = Future()
        with self._lock:
            self.moved = time.monotonic()
            if self.idle:
                self.idle -= 1
            else:
                self.threads += 1
                name = f"{self.name}-deadline-{self.threads}"
                threading.Thread(target=self._run, name=name, daemon=True).start()
        self._jobs.put((future, fn, args))
        return future

    def _queue_for(self, wait: float) -> bool:
        with self._lock:
            if wait <= 0 or self.waiting >= self.queue or time.monotonic() - self.moved >= wait:
                return False
            self.waiting += 1
        try:
            return self._free.acquire(timeout=wait)
        finally:
            with self._lock:
                self.waiting -= 1

    def _run(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            try:
                future.set_result(with_connections(fn, *args))
            except BaseException as error:  # handed to the caller, if it still waits
                future.set_exception(error)
            with self._lock:
                self.idle += 1
                self.moved = time.monotonic()
            self._free.release()


def with_connections(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` between the connection housekeeping of Django's request signals
    (CONN_MAX_AGE, a connection broken by an outage replaced)."""
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


_pools: dict[tuple[str, int], Pool] = {}
_pools_lock = threading.Lock()


def pool(lane: str) -> Pool:
    """This process's pool for `lane`, "api" or "dashboard" (a forked child makes its own:
    threads do not survive a fork)."""
    key = (lane, os.getpid())
    if key not in _pools:
        with _pools_lock:
            if key not in _pools:
                if lane == "api":
                    _pools[key] = Pool(MAX_THREADS, "request")
                else:
                    size, queue = settings.DASHBOARD_MAX_THREADS, settings.DASHBOARD_QUEUE_LENGTH
                    _pools[key] = Pool(int(size), "dashboard", int(queue))
    return _pools[key]


def lane_of(path: str) -> str | None:
    """The pool a request for `path` runs on: "api", "dashboard", or None (the API's docs,
    static files and /healthz, asked without a session cookie as a balancer does)."""
    static = "/" + settings.STATIC_URL.lstrip("/")
    if path in DOCS_PATHS or path.startswith(static) or path == "/healthz":
        return None
    return "api" if is_api_path(path) else "dashboard"


def deadline_of(lane: str) -> float:
    if lane == "api":
        return float(settings.API_REQUEST_DEADLINE_SECONDS)
    return float(settings.DASHBOARD_REQUEST_DEADLINE_SECONDS)


def _in_transaction() -> bool:
    """Whether this thread holds an open transaction, which another thread could not see
    (only when the app is called inside one, as a test client in a test transaction is)."""
    return any(c.in_atomic_block for c in connections.all(initialized_only=True))


def call_within_deadline(fn: Callable[..., T], *args: Any, lane: str = "api") -> T:
    """`fn(*args)` on the lane's pool (`with_connections`); DeadlinePassed when it has not
    returned within the lane's deadline (a dashboard request queued for a free thread at
    most DASHBOARD_QUEUE_WAIT_SECONDS of it). With the deadline off it runs here, and
    inside a transaction it runs here as it is."""
    deadline = deadline_of(lane)
    if _in_transaction():
        return fn(*args)
    if deadline <= 0:
        return with_connections(fn, *args)
    started = time.monotonic()
    wait = 0.0 if lane == "api" else min(float(settings.DASHBOARD_QUEUE_WAIT_SECONDS), deadline)
    lane_pool = pool(lane)
    future = lane_pool.submit(fn, *args, wait=wait)
    if future is None:
        why = f"every {lane_pool.name} thread is waiting on the database"
    else:
        try:
            return future.result(timeout=max(deadline - (time.monotonic() - started), 0.0))
        except TimeoutError:
            why = "the database did not answer"
    raise DeadlinePassed(f"passed its {deadline:.2f} s deadline ({why})")


class RequestDeadlineMiddleware:
    """The rest of a request on its lane's pool, within its deadline (`lane_of`). A
    database error outside the ninja API (the `/v1/models` alias, a dashboard page) gets
    the 503 of an unavailable database, never the generic 500."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        lane = lane_of(request.path)
        if lane is None or deadline_of(lane) <= 0 or _in_transaction():
            return self.get_response(request)
        try:
            # Read the body here: the server owns the socket, and reuses it for the next
            # request once this one is answered, so an abandoned thread must never read it.
            _ = request.body
        except RequestDataTooBig:
            return too_large(request)
        try:
            return call_within_deadline(self.get_response, request, lane=lane)
        except DeadlinePassed as why:
            logger.warning("%s %s %s: answered 503", request.method, request.path, why)
            if lane == "api":
                return unavailable(DATABASE_SLOW)
            return page_unavailable(request, answered=False)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        logger.warning(
            "database unavailable during %s %s: %s",
            request.method,
            request.path,
            type(exception).__name__,
        )
        if is_api_path(request.path):
            return unavailable(DATABASE_DOWN)
        return page_unavailable(request, answered=True)
