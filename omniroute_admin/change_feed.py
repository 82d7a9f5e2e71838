"""The change feed's long poll: `GET /api/v1/changes` (spec/api.md, "Caching a decision in
the gateway").

The endpoint itself is an ordinary ninja view (ladder.api.feed.get_changes) behind all of
Django's guards: it authenticates the token (whose query also reads both counters),
validates `after` and `wait`, and answers at once unless `after` is the current version
and `wait` > 0. Then it answers the current version with the internal `HOLD_HEADER`
("<version> <wait>"; the protocol is the endpoint's, in `ladder/api/feed.py`), and the
server layer in front of Django holds that answer until the version moves or `wait`
seconds pass, and sends it with the version it then knows:

- under ASGI (omniroute_admin.asgi) the hold is a coroutine on the event loop: a waiting
  gateway costs no thread and no database connection;
- under WSGI (`ChangeFeedWait`, in omniroute_admin.wsgi) it blocks the server thread that
  runs the request (runserver: one thread per request; gunicorn gthread: one of the
  worker's `--threads`), still with no database connection: fine for development and a
  few gateways, not for many (docs/HOT_PATH.md).

Every waiter in a process waits on this process's `ChangeHub`, which alone learns the
version: on PostgreSQL from ONE listening connection (`LISTEN omniroute_changes`; every
counter bump notifies, delivered at commit, billing.services.counters.bump), re-reading
the counters on each notification and every `CHANGE_FEED_RESYNC_SECONDS` (a health check and a
catch-up should a notification ever be missed); elsewhere (SQLite) by reading the
counters every `POLL_SECONDS` while anyone waits. So a change wakes every waiter of every
process on every host that shares the database, with one query per process, not per
waiter. No Redis pub/sub: every deployment with more than one host has PostgreSQL.

A woken client asks again at once, with the version it was just told: a thousand
gateways would re-run a thousand requests through Django at every change (with 1,000
waiters and a change every 2 s, the pool endpoint's p99 went from 11.7 ms to 1,378 ms).
So under ASGI a long poll Django accepted is remembered (`ChangeHub.prove`): a repeat of
it, the same request in everything but its `after`, with `after` the current version, is
held at once on the event loop with the headers Django answered, for `PROOF_SECONDS`.
Only a listening hub keeps proofs, because only it hears a token's revocation (its
`NOTIFY` with TOKENS_PAYLOAD, ladder.tokens.revoke_token), which forgets them all, as
does every (re)connection of its listener (a notice may have been missed meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections
from prometheus_client import Gauge

from billing.models import ChangeCounter
from billing.services import change_counters
from billing.services.counters import CHANGE_CHANNEL, TOKENS_PAYLOAD
from ladder.api.feed import HOLD_HEADER, parse_hold
from ladder.core.change_version import Counters, format_version, has_moved
from ladder.metrics import REGISTRY

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.15
RECONNECT_SECONDS = 1.0
# A long poll Django accepted is repeated without Django for this long at most (its
# token's `last_used_at` then moves again), and this many are remembered per process.
PROOF_SECONDS = 60.0
MAX_PROOFS = 10_000
# Coroutines answered per turn of their event loop when the version moves.
FAN_OUT = 50

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = list[tuple[str, str]]


def version_body(counters: Counters) -> bytes:
    """The feed's answer, byte for byte as ninja renders it."""
    return json.dumps({"version": format_version(counters)}).encode()


class ChangeHub:
    """This process's view of the change version and the clients waiting for it to move.

    One thread keeps it (started by the first waiter): `listen=True` holds a PostgreSQL
    `LISTEN` connection, otherwise `read_counters` is polled while anyone waits. Threads
    wait with `wait_for_change`, coroutines with `await_change`; both return the new
    counters, or None when `timeout` passed first."""

    def __init__(
        self,
        *,
        listen: bool,
        read_counters: Callable[[], Counters] | None = None,
        poll_seconds: float = POLL_SECONDS,
        keep_proofs: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pid = os.getpid()
        self.listen = listen
        self.keep_proofs = listen if keep_proofs is None else keep_proofs
        self.epoch = 0  # moved by every forget_proofs
        self.clock = clock  # the proofs' age
        self._proofs: dict[bytes, tuple[float, float, Headers]] = {}
        self.read_counters = read_counters or _read_counters
        self.poll_seconds = poll_seconds
        self.reads = 0  # counter reads so far (one per poll or notification)
        self._counters: Counters | None = None
        self._condition = threading.Condition()
        self._waiters = 0
        # Per event loop, its coroutines' futures and the version each holds.
        self._waiting: dict[asyncio.AbstractEventLoop, dict[asyncio.Future[Any], Counters]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def counters(self) -> Counters | None:
        return self._counters

    @property
    def waiters(self) -> int:
        return self._waiters

    def wait_for_change(self, after: Counters, timeout: float) -> Counters | None:
        """Block until the version moves past `after` or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        with self._condition:
            self._join()
            try:
                while True:
                    current = self._counters
                    if current is not None and has_moved(current, after):
                        return current
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._condition.wait(remaining)
            finally:
                self._waiters -= 1

    async def await_change(
        self, after: Counters, timeout: float, until: asyncio.Future[Any] | None = None
    ) -> Counters | None:
        """`wait_for_change` for a coroutine: one future, no thread (None also once
        `until` is done: the client went away)."""
        loop = asyncio.get_running_loop()
        with self._condition:
            self._join()
            waiting = self._waiting.setdefault(loop, {})
        current = self._counters
        if current is not None and has_moved(current, after):
            with self._condition:
                self._waiters -= 1
            return current
        future: asyncio.Future[Counters | None] = loop.create_future()
        waiting[future] = after
        timer = loop.call_later(timeout, _settle, future, None)
        if until is not None:
            until.add_done_callback(lambda _: _settle(future, None))
        try:
            return await future
        finally:
            timer.cancel()
            waiting.pop(future, None)
            with self._condition:
                self._waiters -= 1

    def publish(self, counters: Counters) -> None:
        """A new reading of the counters: wake every waiter if it moved."""
        with self._condition:
            if counters == self._counters:
                return
            self._counters = counters
            self._condition.notify_all()
            loops = list(self._waiting)
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._fire, loop)
            except RuntimeError:  # a closed loop
                with self._condition:
                    self._waiting.pop(loop, None)

    def prove(self, key: bytes, epoch: int, wait: float, headers: Headers) -> None:
        """Django accepted the long poll `key` (authenticated while `epoch` was current)
        and answered `headers`: hold its repeats without Django from now on."""
        with self._condition:
            if not self.keep_proofs or epoch != self.epoch:  # a revocation since
                return
            self._proofs.pop(key, None)
            self._proofs[key] = (self.clock(), wait, headers)
            if len(self._proofs) > MAX_PROOFS:
                del self._proofs[next(iter(self._proofs))]

    def proven(self, key: bytes, after: str) -> tuple[Counters, float, Headers] | None:
        """A repeat of a proven long poll whose `after` is the current version: the
        version to hold on, the wait and the headers to answer with. None: ask Django."""
        proof, current = self._proofs.get(key), self._counters
        if proof is None or current is None or after != format_version(current):
            return None
        proven_at, wait, headers = proof
        return (current, wait, headers) if self.clock() - proven_at < PROOF_SECONDS else None

    def forget_proofs(self) -> None:
        """Every long poll goes through Django again (a token was revoked)."""
        with self._condition:
            self.epoch += 1
            self._proofs.clear()

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: answer the coroutines waiting there whose version moved,
        FAN_OUT at a time, the loop serving its other requests between two."""
        current, waiting = self._counters, self._waiting.get(loop, {})
        answered = 0
        for future, after in list(waiting.items()):
            if current is not None and has_moved(current, after):
                del waiting[future]
                _settle(future, current)
                answered += 1
                if answered == FAN_OUT:
                    loop.call_soon(self._fire, loop)
                    return

    def _join(self) -> None:
        """Count one more waiter (holding the condition); start the thread if needed."""
        self._waiters += 1
        self._condition.notify_all()  # a poller idle for lack of waiters
        if self._thread is None:
            target = self._listen if self.listen else self._poll
            self._thread = threading.Thread(target=target, name="change-feed", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._condition:
            self._condition.notify_all()

    def _poll(self) -> None:
        """Read the counters every `poll_seconds` while anyone waits."""
        while not self._stopped.is_set():
            with self._condition:
                while self._waiters == 0 and not self._stopped.is_set():
                    self._condition.wait()
            try:
                self.reads += 1
                self.publish(self.read_counters())
            except Exception:  # the database is down: the waiters time out meanwhile
                logger.warning("change feed: could not read the change counters", exc_info=True)
            finally:
                close_old_connections()
            self._stopped.wait(self.poll_seconds)

    def _listen(self) -> None:
        """Hold one LISTEN connection; re-read the counters on every notification."""
        while not self._stopped.is_set():
            try:
                with _listening_connection() as connection:
                    # Read after LISTEN: a bump committed in between is then seen by
                    # the read or notified, never missed; so is a revocation.
                    self.forget_proofs()
                    while not self._stopped.is_set():
                        self.reads += 1
                        self.publish(_read_on(connection))
                        resync = float(settings.CHANGE_FEED_RESYNC_SECONDS)
                        for notice in connection.notifies(timeout=resync, stop_after=1):
                            if notice.payload == TOKENS_PAYLOAD:
                                self.forget_proofs()
            except Exception:
                logger.warning("change feed: the listening connection failed", exc_info=True)
                self._stopped.wait(RECONNECT_SECONDS)


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _read_counters() -> Counters:
    return change_counters()


def psycopg_params() -> dict[str, Any]:
    """The default database's connection parameters for a psycopg connection of our own
    (Django's cursor factory and adapters context left out; its prepare_threshold kept)."""
    params = dict(connections[DEFAULT_DB_ALIAS].get_connection_params())
    for key in ("cursor_factory", "context", "server_side_binding"):
        params.pop(key, None)
    params.setdefault("connect_timeout", 5)
    return params


def _listening_connection() -> Any:
    import psycopg

    params = psycopg_params()
    params.pop("prepare_threshold", None)
    connection = psycopg.connect(**params, autocommit=True)
    connection.execute(f"LISTEN {CHANGE_CHANNEL}")
    return connection


def _read_on(connection: Any) -> Counters:
    table = ChangeCounter._meta.db_table
    rows = dict(connection.execute(f'SELECT "name", "value" FROM "{table}"').fetchall())
    return rows.get(ChangeCounter.CONFIG, 0), rows.get(ChangeCounter.STATE, 0)


_hub: ChangeHub | None = None
_hub_lock = threading.Lock()


def get_hub() -> ChangeHub:
    """This process's hub (a forked child makes its own: threads do not survive a fork)."""
    global _hub
    hub = _hub
    if hub is not None and hub.pid == os.getpid():
        return hub
    with _hub_lock:
        if _hub is None or _hub.pid != os.getpid():
            _hub = ChangeHub(listen=connections[DEFAULT_DB_ALIAS].vendor == "postgresql")
        return _hub


WAITERS = Gauge(
    "omniroute_change_feed_waiters",
    "Change-feed requests waiting for the version to move in this process.",
    registry=REGISTRY,
)
WAITERS.set_function(lambda: _hub.waiters if _hub is not None and _hub.pid == os.getpid() else 0)


def take_hold(headers: Headers) -> tuple[Headers, tuple[Counters, float] | None]:
    """The headers without HOLD_HEADER, and the hold it asked for (None: answer as is)."""
    kept, hold = [], None
    for name, value in headers:
        if name.lower() == HOLD_HEADER.lower():
            hold = parse_hold(value)
        else:
            kept.append((name, value))
    return kept, hold


def with_body(headers: Headers, body: bytes) -> Headers:
    """`headers` with the Content-Length of `body`."""
    kept = [(n, v) for n, v in headers if n.lower() != "content-length"]
    return [*kept, ("Content-Length", str(len(body)))]


class ChangeFeedWait:
    """WSGI middleware: holds an answer that asked for it (the view Django resolved sets
    HOLD_HEADER, so a path prefix changes nothing), blocking this thread. Every other
    answer passes through untouched, streamed ones included."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        held: list[Any] = []

        def start(status: str, headers: Headers, exc_info: Any = None) -> Any:
            kept, hold = take_hold(headers)
            if hold is None:
                if len(kept) != len(headers):  # a HOLD_HEADER that does not parse
                    headers = kept
                return start_response(status, headers, exc_info)
            held[:] = [status, kept, hold]
            return _no_write

        iterable = self.app(environ, start)
        if not held:
            return iterable
        try:
            body = b"".join(iterable)
        finally:
            getattr(iterable, "close", lambda: None)()
        status, headers, (after, wait) = held
        body = version_body(get_hub().wait_for_change(after, wait) or after)
        start_response(status, with_body(headers, body))
        return [body]


def _no_write(data: bytes) -> None:
    raise RuntimeError("the change feed does not support the WSGI write() callable")
