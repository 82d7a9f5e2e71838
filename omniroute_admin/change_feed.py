"""The change feed's long poll, `GET /api/v1/changes` (spec/api.md): its view
(ladder.api.feed) answers with the internal HOLD_HEADER when `after` is the current
version and `wait` > 0, and the server layer holds that answer until the version moves or
`wait` passes: under ASGI (omniroute_admin.asgi) as a coroutine, costing no thread and no
database connection; under WSGI (`ChangeFeedWait`) on the server thread that runs it,
fine for development and a few gateways (docs/HOT_PATH.md).

Every waiter in a process waits on its `ChangeHub`, which alone learns the version: on
PostgreSQL from ONE `LISTEN omniroute_changes` connection (every counter bump notifies at
commit), re-reading the counters on each notification and every
`CHANGE_FEED_RESYNC_SECONDS`; elsewhere (SQLite) every `POLL_SECONDS` while anyone waits.
One query per process per change, not per waiter.

A woken gateway asks again at once: 1,000 of them re-running Django at every change took
the pool endpoint's p99 from 11.7 ms to 1,378 ms. So a long poll Django accepted is
remembered (`prove`) and, under ASGI, its repeat (the same request, `after` the current
version) is held at once with the headers Django answered, for `PROOF_SECONDS`. Only a
listening hub keeps proofs: only it hears a token's revocation (TOKENS_PAYLOAD), which
forgets them all, as does every (re)connection of its listener.
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

from cachetools import TTLCache
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


class ChangeHub:
    """This process's view of the change version and the clients waiting for it to move.

    One thread keeps it (started by the first waiter): `listen=True` holds a PostgreSQL
    `LISTEN` connection, otherwise `read_counters` is polled while anyone waits."""

    def __init__(
        self,
        *,
        listen: bool,
        read_counters: Callable[[], Counters] = change_counters,
        poll_seconds: float = POLL_SECONDS,
        keep_proofs: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pid = os.getpid()
        self.listen = listen
        self.keep_proofs = listen if keep_proofs is None else keep_proofs
        self.read_counters = read_counters
        self.poll_seconds = poll_seconds
        self.counters: Counters | None = None
        self.waiters = 0
        self.reads = 0  # counter reads so far (one per poll or notification)
        self.epoch = 0  # moved by every forget_proofs
        self._proofs: TTLCache[bytes, tuple[float, Headers]]
        self._proofs = TTLCache(MAX_PROOFS, PROOF_SECONDS, timer=clock)
        self._condition = threading.Condition()
        # Per event loop, its coroutines' futures and the version each holds.
        self._waiting: dict[asyncio.AbstractEventLoop, dict[asyncio.Future[Any], Counters]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def wait_for_change(self, after: Counters, timeout: float) -> Counters | None:
        """`await_change` for a thread (WSGI), on an event loop of its own."""
        return asyncio.run(self.await_change(after, timeout))

    async def await_change(
        self, after: Counters, timeout: float, until: asyncio.Future[Any] | None = None
    ) -> Counters | None:
        """The counters once they move past `after`; None once `timeout` seconds pass or
        `until` is done (the client went away). One future, no thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Counters | None] = loop.create_future()
        with self._condition:
            self._join()
            if self.counters is not None and has_moved(self.counters, after):
                future.set_result(self.counters)
            else:
                waiting = self._waiting.setdefault(loop, {})
                waiting[future] = after
        timer = loop.call_later(timeout, _settle, future, None)
        if until is not None:
            until.add_done_callback(lambda _: _settle(future, None))
        try:
            return await future
        finally:
            timer.cancel()
            with self._condition:
                waiting = self._waiting.get(loop, {})
                waiting.pop(future, None)
                if not waiting:
                    self._waiting.pop(loop, None)
                self.waiters -= 1

    def publish(self, counters: Counters) -> None:
        """A new reading of the counters: wake every waiter if it moved."""
        with self._condition:
            if counters == self.counters:
                return
            self.counters = counters
            loops = list(self._waiting)
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._fire, loop)
            except RuntimeError:  # a closed loop
                with self._condition:
                    self._waiting.pop(loop, None)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: answer the coroutines waiting there whose version moved, FAN_OUT
        at a time, the loop serving its other requests between two turns."""
        with self._condition:
            current, waiting = self.counters, self._waiting.get(loop, {})
            moved = [f for f, after in waiting.items() if current and has_moved(current, after)]
            for future in moved[:FAN_OUT]:
                del waiting[future]
        for future in moved[:FAN_OUT]:
            _settle(future, current)
        if len(moved) > FAN_OUT:
            loop.call_soon(self._fire, loop)

    def prove(self, key: bytes, epoch: int, wait: float, headers: Headers) -> None:
        """Django accepted the long poll `key` (authenticated while `epoch` was current)
        and answered `headers`: hold its repeats without Django from now on."""
        with self._condition:
            if self.keep_proofs and epoch == self.epoch:  # no revocation since
                self._proofs[key] = (wait, headers)

    def proven(self, key: bytes, after: str) -> tuple[Counters, float, Headers] | None:
        """A repeat of a proven long poll whose `after` is the current version: the
        version to hold on, the wait and the headers to answer with. None: ask Django."""
        with self._condition:
            proof, current = self._proofs.get(key), self.counters
        if proof is None or current is None or after != format_version(current):
            return None
        return current, *proof

    def forget_proofs(self) -> None:
        """Every long poll goes through Django again (a token was revoked)."""
        with self._condition:
            self.epoch += 1
            self._proofs.clear()

    def _join(self) -> None:
        """Count one more waiter (holding the condition); start the thread if needed."""
        self.waiters += 1
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
                self._condition.wait_for(lambda: self.waiters or self._stopped.is_set())
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
                    table = ChangeCounter._meta.db_table
                    while not self._stopped.is_set():
                        self.reads += 1
                        sql = f'SELECT "name", "value" FROM "{table}"'
                        rows = dict(connection.execute(sql).fetchall())
                        self.publish(
                            (rows.get(ChangeCounter.CONFIG, 0), rows.get(ChangeCounter.STATE, 0))
                        )
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


def _listening_connection() -> Any:
    """A psycopg connection of our own to the default database, listening: Django's
    parameters without its cursor factory, adapters context and prepared statements."""
    import psycopg

    params = dict(connections[DEFAULT_DB_ALIAS].get_connection_params())
    for key in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
        params.pop(key, None)
    params.setdefault("connect_timeout", 5)
    connection = psycopg.connect(**params, autocommit=True)
    connection.execute(f"LISTEN {CHANGE_CHANNEL}")
    return connection


_hub: ChangeHub | None = None
_hub_lock = threading.Lock()


def get_hub() -> ChangeHub:
    """This process's hub (a forked child makes its own: threads do not survive a fork)."""
    global _hub
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


def held_answer(headers: Headers, counters: Counters) -> tuple[Headers, bytes]:
    """A held answer's headers and body: the version, byte for byte as ninja renders it."""
    body = json.dumps({"version": format_version(counters)}).encode()
    kept = [(n, v) for n, v in headers if n.lower() != "content-length"]
    return [*kept, ("Content-Length", str(len(body)))], body


def take_hold(headers: Headers) -> tuple[Headers, tuple[Counters, float] | None]:
    """The headers without HOLD_HEADER, and the hold it asked for (None: answer as is)."""
    hold = [parse_hold(v) for n, v in headers if n.lower() == HOLD_HEADER.lower()]
    kept = [(n, v) for n, v in headers if n.lower() != HOLD_HEADER.lower()]
    return kept, hold[0] if hold else None


class ChangeFeedWait:
    """WSGI middleware: holds an answer that asks for it, blocking this thread. Every
    other answer passes through untouched, streamed ones included."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        held: list[Any] = []

        def start(status: str, headers: Headers, exc_info: Any = None) -> Any:
            kept, hold = take_hold(headers)
            if hold is None:
                return start_response(status, kept, exc_info)
            held[:] = [status, kept, hold]
            return None  # no write(): Django never calls it

        iterable = self.app(environ, start)
        if not held:
            return iterable
        getattr(iterable, "close", lambda: None)()  # its body is sent afresh below
        status, headers, (after, wait) = held
        headers, body = held_answer(headers, get_hub().wait_for_change(after, wait) or after)
        start_response(status, headers)
        return [body]
