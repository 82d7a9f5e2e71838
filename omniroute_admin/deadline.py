"""A deadline on API requests, so a hung database costs a gateway one second, not a hang.

The connect timeout bounds a database that refuses, and the statement timeout one that
is slow, but neither fires when the network or the server stops answering mid-query: a
thread then waits on its socket for as long as TCP keeps it open. So the rest of an API
request runs on a small per-process pool of threads, and the request thread answers a
JSON 503 with `Retry-After: 1` once `API_REQUEST_DEADLINE_SECONDS` have passed (0
disables this). The abandoned work carries on in its thread until the database answers
or the connection breaks, and its result is dropped: a write it was making may still
land, so a gateway retries writes that are idempotent (readings, spend by request id).

The pool is bounded and never queues: a request that finds every thread stuck on the
database gets the same 503 at once, so a hung database neither piles up work to run
when it wakes nor holds the server's own threads. Each pool thread keeps its own
database connection (Django's are per thread) and opens and closes every request the
way Django's request signals do, so CONN_MAX_AGE and CONN_HEALTH_CHECKS apply to it and
a connection broken during an outage is replaced on the first request after it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, close_old_connections, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from omniroute_admin.middleware import is_api_path, too_large

logger = logging.getLogger(__name__)

# API requests per process that may wait on the database at once: how many a hung database
# can strand. Keep a server's own threads per process below it (the README runs gunicorn
# with 8), or healthy requests beyond it get the 503 too. Each thread that has run a
# request keeps one database connection.
MAX_THREADS = 16
DETAIL = "The database did not answer in time; retry shortly."
# The answer of omniroute_admin.errors to a database error inside the ninja API.
UNAVAILABLE_DETAIL = "The database is unavailable; retry shortly."

Handler = Callable[[HttpRequest], HttpResponse]
T = TypeVar("T")


class _Job(Generic[T]):
    """One call handed to a pool thread; the caller waits on `done` for its outcome."""

    __slots__ = ("args", "done", "error", "fn", "value")

    def __init__(self, fn: Callable[..., T], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.done = threading.Lock()
        self.done.acquire()
        self.value: T | None = None
        self.error: BaseException | None = None

    def result(self, timeout: float) -> T:
        """The call's value (or its exception); TimeoutError if it has not returned."""
        if not self.done.acquire(timeout=timeout):
            raise TimeoutError
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class _Thread:
    """A pool thread: runs one job at a time, handed over through a lock."""

    def __init__(self, pool: _Pool, number: int) -> None:
        self.pool = pool
        self.job: _Job[Any] | None = None
        self.go = threading.Lock()
        self.go.acquire()
        # A daemon: a thread stuck on a hung database must not hold up the process's exit.
        threading.Thread(target=self._loop, name=f"api-deadline-{number}", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            job, self.job = self.job, None
            assert job is not None
            try:
                job.value = with_connections(job.fn, *job.args)
            except BaseException as error:  # handed to the caller, if it still waits
                job.error = error
            finally:
                job.done.release()
                self.pool._idle(self)


class _Pool:
    """Threads that refuse work instead of queueing it when every one is busy. A call is
    handed to the thread that went idle last (its database connection is the warmest),
    with two lock operations rather than an executor's queue and future."""

    def __init__(self, size: int) -> None:
        self.pid = os.getpid()
        self._size = size
        self._lock = threading.Lock()
        self._idle_threads: list[_Thread] = []
        self._started = 0

    def submit(self, fn: Callable[..., T], *args: Any) -> _Job[T] | None:
        """Run `fn(*args)` on a free thread; None at once if every one is busy."""
        with self._lock:
            if self._idle_threads:
                thread: _Thread | None = self._idle_threads.pop()
            elif self._started < self._size:
                self._started += 1
                thread = None
            else:
                return None
            number = self._started
        if thread is None:
            thread = _Thread(self, number)
        job = _Job(fn, args)
        thread.job = job
        thread.go.release()
        return job

    def _idle(self, thread: _Thread) -> None:
        with self._lock:
            self._idle_threads.append(thread)


def with_connections(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` between the database connection housekeeping of Django's request signals
    (CONN_MAX_AGE, a connection broken by an outage replaced)."""
    close_old_connections()  # what Django's request_started signal does
    try:
        return fn(*args)
    finally:
        close_old_connections()  # and request_finished


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _get_pool() -> _Pool:
    """This process's pool (a forked child makes its own: threads do not survive a fork)."""
    global _pool
    pool = _pool
    if pool is not None and pool.pid == os.getpid():
        return pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Pool(MAX_THREADS)
        return _pool


def _in_transaction() -> bool:
    """Whether this thread holds an open transaction, which another thread could not see
    (only when the app is called inside one, as a test client in a test transaction is)."""
    return any(c.in_atomic_block for c in connections.all(initialized_only=True))


def deadline_applies() -> bool:
    """Whether work runs on the pool: the deadline is on and no transaction is open here."""
    return float(settings.API_REQUEST_DEADLINE_SECONDS) > 0 and not _in_transaction()


class DeadlinePassed(Exception):
    """The work did not finish by the deadline, or no thread was free to start it."""


def call_within_deadline(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the request pool (`with_connections`), as the middleware runs the
    rest of an API request; DeadlinePassed when it has not returned within
    API_REQUEST_DEADLINE_SECONDS. With the deadline off it runs here, and inside a
    transaction (which another thread could not see) it runs here as it is."""
    if _in_transaction():
        return fn(*args)
    if float(settings.API_REQUEST_DEADLINE_SECONDS) <= 0:
        return with_connections(fn, *args)
    return _on_pool(fn, *args)


def _on_pool(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the request pool within the deadline (which is on)."""
    deadline = float(settings.API_REQUEST_DEADLINE_SECONDS)
    started = time.monotonic()
    job = _get_pool().submit(fn, *args)
    if job is None:
        raise DeadlinePassed("every request thread is waiting on the database")
    try:
        return job.result(timeout=max(deadline - (time.monotonic() - started), 0.0))
    except TimeoutError:
        raise DeadlinePassed("the database did not answer") from None


def _unavailable(detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=503)
    response["Retry-After"] = "1"
    return response


def _too_late(request: HttpRequest, why: str) -> JsonResponse:
    log_too_late(request.method or "", request.path, why)
    return _unavailable(DETAIL)


def log_too_late(method: str, path: str, why: str) -> None:
    logger.warning(
        "%s %s passed its %.2f s deadline (%s): answered 503",
        method,
        path,
        float(settings.API_REQUEST_DEADLINE_SECONDS),
        why,
    )


class RequestDeadlineMiddleware:
    """API requests (`/api/`, `/v1/`) answer within API_REQUEST_DEADLINE_SECONDS: a JSON
    503 with Retry-After when the rest of the request has not finished by then. A view
    outside the ninja API that raises a database error (the `/v1/models` alias) gets the
    ninja API's JSON 503 too, never the generic 500."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api_path(request.path) or not deadline_applies():
            return self.get_response(request)
        try:
            # Read the body here: the server owns the socket, and reuses it for the next
            # request once this one is answered, so an abandoned thread must never read it.
            _ = request.body
        except RequestDataTooBig:
            return too_large(request)
        try:
            return _on_pool(self.get_response, request)  # deadline_applies() said so
        except DeadlinePassed as why:
            return _too_late(request, str(why))

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_api_path(request.path) and isinstance(exception, (OperationalError, InterfaceError)):
            logger.warning(
                "database unavailable during %s %s: %s",
                request.method,
                request.path,
                type(exception).__name__,
            )
            return _unavailable(UNAVAILABLE_DETAIL)
        return None
