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

Dashboard requests (every other path but static files and `/healthz`, which touch no
database) get the same treatment on a pool of their own, `DASHBOARD_MAX_THREADS` threads
with `DASHBOARD_REQUEST_DEADLINE_SECONDS`: past it they answer a 503 error state (an
htmx poll gets a line the page shows in its error box and keeps polling; a page, one that
reloads itself). Unlike the API's, this pool queues a short burst: a page load fires a
few requests at once (its live parts), so with every thread busy up to
`DASHBOARD_QUEUE_LENGTH` requests wait for the next free thread, each at most
`DASHBOARD_QUEUE_WAIT_SECONDS` (and never past its deadline); a request beyond the queue,
or one that waited its bound, gets the error state. On a healthy database a burst of
threads + queue requests is served whole. On a hung one the queue drains into 503s
within its wait bound, and a pool whose threads have neither taken nor finished a job
for that long queues no one (its threads are stuck): open dashboard tabs then hold
threads + queue of the server's threads for at most one wait, at the start of a hang,
and the dashboard's threads alone after it.
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
from django.template.loader import render_to_string
from django.utils.html import escape

from omniroute_admin.errors import DATABASE_DOWN, DATABASE_SLOW, unavailable
from omniroute_admin.middleware import is_api_path, too_large

logger = logging.getLogger(__name__)

# API requests per process that may wait on the database at once: how many a hung database
# can strand. Keep a server's own threads per process below it (the README runs gunicorn
# with 8), or healthy requests beyond it get the 503 too. Each thread that has run a
# request keeps one database connection.
MAX_THREADS = 16
DETAIL = DATABASE_SLOW
# The API's own document and its docs page: built from the code alone (once per process,
# omniroute_admin/api.py), never from the database, so no deadline and no 503 blaming it.
DOCS_PATHS = frozenset({"/api/v1/openapi.json", "/api/v1/docs"})
# The answer of omniroute_admin.errors to a database error inside the ninja API.
UNAVAILABLE_DETAIL = DATABASE_DOWN

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
        name = f"{pool.name}-deadline-{number}"
        threading.Thread(target=self._loop, name=name, daemon=True).start()

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
    """Threads that refuse work instead of queueing it when every one is busy (or, with a
    `queue`, let that many callers wait a bounded time for the next free one). A call is
    handed to the thread that went idle last (its database connection is the warmest),
    with two lock operations rather than an executor's queue and future."""

    def __init__(self, size: int, name: str = "api", queue: int = 0) -> None:
        self.pid = os.getpid()
        self.name = name
        self._size = size
        self._queue = queue
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._idle_threads: list[_Thread] = []
        self._started = 0
        self._waiting = 0  # callers queued for a free thread
        # When a thread last took a job or came free: a pool that has not moved for a
        # caller's whole wait has its threads stuck (a hung database), and queues no one.
        self._moved = time.monotonic()

    def submit(self, fn: Callable[..., T], *args: Any, wait: float = 0.0) -> _Job[T] | None:
        """Run `fn(*args)` on a free thread; with every one busy, wait up to `wait`
        seconds for one (when fewer than `queue` callers wait already); None when no
        thread came free."""
        with self._lock:
            taken, thread = self._take(wait)
            if not taken:
                return None
            number = self._started
            self._moved = time.monotonic()
        if thread is None:
            thread = _Thread(self, number)
        job = _Job(fn, args)
        thread.job = job
        thread.go.release()
        return job

    def _take(self, wait: float) -> tuple[bool, _Thread | None]:
        """Under the lock: (True, an idle thread), (True, None) to start a new one, or
        (False, None) when none came free."""
        if self._idle_threads:
            return True, self._idle_threads.pop()
        if self._started < self._size:
            self._started += 1
            return True, None
        if wait <= 0 or self._waiting >= self._queue or time.monotonic() - self._moved >= wait:
            return False, None
        self._waiting += 1
        try:
            if not self._freed.wait_for(lambda: bool(self._idle_threads), timeout=wait):
                return False, None
            return True, self._idle_threads.pop()
        finally:
            self._waiting -= 1

    def _idle(self, thread: _Thread) -> None:
        with self._lock:
            self._idle_threads.append(thread)
            self._moved = time.monotonic()
            self._freed.notify()


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


_dashboard_pool: _Pool | None = None


def _get_dashboard_pool() -> _Pool:
    """This process's pool of dashboard threads (DASHBOARD_MAX_THREADS)."""
    global _dashboard_pool
    pool = _dashboard_pool
    if pool is not None and pool.pid == os.getpid():
        return pool
    with _pool_lock:
        if _dashboard_pool is None or _dashboard_pool.pid != os.getpid():
            _dashboard_pool = _Pool(
                int(settings.DASHBOARD_MAX_THREADS),
                "dashboard",
                queue=int(settings.DASHBOARD_QUEUE_LENGTH),
            )
        return _dashboard_pool


def _in_transaction() -> bool:
    """Whether this thread holds an open transaction, which another thread could not see
    (only when the app is called inside one, as a test client in a test transaction is)."""
    return any(c.in_atomic_block for c in connections.all(initialized_only=True))


def deadline_applies() -> bool:
    """Whether work runs on the pool: the deadline is on and no transaction is open here."""
    return float(settings.API_REQUEST_DEADLINE_SECONDS) > 0 and not _in_transaction()


def is_dashboard_path(path: str) -> bool:
    """Paths that run on the dashboard's pool: all but the API's (their own pool), the
    static files (served before the session is read) and /healthz (which touches
    nothing, asked without a session cookie as a balancer does)."""
    static = "/" + settings.STATIC_URL.lstrip("/")
    return not (is_api_path(path) or path.startswith(static) or path == "/healthz")


def dashboard_deadline_applies(path: str) -> bool:
    """Whether a request for `path` runs on the dashboard's pool under its deadline."""
    return (
        float(settings.DASHBOARD_REQUEST_DEADLINE_SECONDS) > 0
        and is_dashboard_path(path)
        and not _in_transaction()
    )


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


def _on_dashboard_pool(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the dashboard's pool within DASHBOARD_REQUEST_DEADLINE_SECONDS,
    queued for a free thread at most DASHBOARD_QUEUE_WAIT_SECONDS of it."""
    deadline = float(settings.DASHBOARD_REQUEST_DEADLINE_SECONDS)
    started = time.monotonic()
    wait = min(float(settings.DASHBOARD_QUEUE_WAIT_SECONDS), deadline)
    job = _get_dashboard_pool().submit(fn, *args, wait=wait)
    if job is None:
        raise DeadlinePassed("every dashboard thread is waiting on the database")
    try:
        return job.result(timeout=max(deadline - (time.monotonic() - started), 0.0))
    except TimeoutError:
        raise DeadlinePassed("the database did not answer") from None


def _unavailable(detail: str) -> HttpResponse:
    return unavailable(detail)


def _too_late(request: HttpRequest, why: str) -> HttpResponse:
    log_too_late(request.method or "", request.path, why)
    return _unavailable(DETAIL)


def log_too_late(method: str, path: str, why: str, deadline: float | None = None) -> None:
    logger.warning(
        "%s %s passed its %.2f s deadline (%s): answered 503",
        method,
        path,
        float(settings.API_REQUEST_DEADLINE_SECONDS) if deadline is None else deadline,
        why,
    )


# The dashboard's error state. Built without the database (no session, no user, no
# context processors): it is what a request gets when the database does not answer.
NOT_ANSWERING = "The database is not answering."
DOWN = "The database is unavailable."
WRITE_CUT_OFF = (
    "The database did not answer in time: your change may or may not have been saved. "
    "Reload the page to check before you try again."
)
WRITE_FAILED = (
    "The database is unavailable: your change was probably not saved. "
    "Reload the page to check before you try again."
)


def page_unavailable(request: HttpRequest, *, answered: bool) -> HttpResponse:
    """The 503 a dashboard request gets when the database did not answer in time
    (`answered=False`) or answered with an error: for an htmx request a line for the
    page's error box (the part it asked for stays, and its poll goes on), for a page a
    small page that reloads itself (GET), for /readyz and /metrics their own formats."""
    from omniroute_admin.dashboard import POLL_SECONDS

    if request.path == "/readyz":
        problem = "DeadlinePassed" if not answered else "OperationalError"
        response: HttpResponse = JsonResponse(
            {"status": "unavailable", "down": {"database": problem}}, status=503
        )
    elif request.path == "/metrics":
        response = HttpResponse(
            "# metrics unavailable: DeadlinePassed\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    else:
        is_read = request.method in ("GET", "HEAD")
        if is_read:
            message = f"{DOWN if answered else NOT_ANSWERING} "
            message += f"Live parts of this page retry every {POLL_SECONDS} s."
        else:
            message = WRITE_FAILED if answered else WRITE_CUT_OFF
        if request.headers.get("HX-Request") == "true":
            response = HttpResponse(
                f'<span class="request-error-text">{escape(message)}</span>',
                status=503,
                content_type="text/html; charset=utf-8",
            )
            # Into the page's error box (templates/base.html, static/dashboard.js), not
            # over the part that asked: a polled part keeps its content and its poll.
            response["HX-Retarget"] = "#request-error"
            response["HX-Reswap"] = "innerHTML"
        else:
            context = {"message": message, "reload_seconds": POLL_SECONDS if is_read else None}
            response = HttpResponse(
                render_to_string("unavailable.html", context),
                status=503,
                content_type="text/html; charset=utf-8",
            )
        response["Vary"] = "HX-Request"
    response["Retry-After"] = str(POLL_SECONDS)
    response["Cache-Control"] = "no-store"
    # The security middleware above this one adds the rest; clickjacking's comes later.
    response["X-Frame-Options"] = "DENY"
    return response


class RequestDeadlineMiddleware:
    """API requests (`/api/`, `/v1/`) answer within API_REQUEST_DEADLINE_SECONDS: a JSON
    503 with Retry-After when the rest of the request has not finished by then. A view
    outside the ninja API that raises a database error (the `/v1/models` alias) gets the
    ninja API's JSON 503 too, never the generic 500."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api_path(request.path):
            if dashboard_deadline_applies(request.path):
                return self._dashboard(request)
            return self.get_response(request)
        if request.path in DOCS_PATHS or not deadline_applies():
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

    def _dashboard(self, request: HttpRequest) -> HttpResponse:
        """The rest of a dashboard request on the dashboard's pool, within its deadline."""
        try:
            _ = request.body  # as for the API: an abandoned thread never reads the socket
        except RequestDataTooBig:
            return too_large(request)
        try:
            return _on_dashboard_pool(self.get_response, request)
        except DeadlinePassed as why:
            deadline = float(settings.DASHBOARD_REQUEST_DEADLINE_SECONDS)
            log_too_late(request.method or "", request.path, str(why), deadline)
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
            return _unavailable(UNAVAILABLE_DETAIL)
        return page_unavailable(request, answered=True)
