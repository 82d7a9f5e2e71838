"""Cached pool answers on the event loop, under the production server (omniroute_admin.asgi).

The fast lane (omniroute_admin.fast_lane) answers a cached decision for one query, the
token and the counters, on a request-deadline thread: under ASGI that is two thread
hops per request (the loop to the WSGI pool, that thread to the deadline pool), and the
query's round trip waits for the GIL behind every thread answering. This lane answers
the same requests on the event loop itself, with no thread and no Django query:

- The token is the one `authenticate` last read in this process (ladder.tokens.
  known_token), which stands for the database's row while the `tokens` change counter
  read with it has not moved: a revocation bumps it in its own transaction.
- The counters (config, state, tokens) come from a read on this process's own
  asynchronous connection that **started after the request arrived**, so the answer
  reflects every write committed before it, exactly as the fast lane's query does; a
  gateway's own write is never answered stale, on any process or host. Requests that
  arrive while a read is in flight share the next one (`CounterReader`): one small
  query serves a burst.
- The decision is this process's cached one for those counters (services.
  cached_decision), its bytes and headers the fast lane's.

Anything else goes on to the fast lane and Django, as before: a token this process has
not authenticated yet, or last wrote `last_used_at` for over a minute ago, a moved
`tokens` counter (every known token is then forgotten), a decision not cached, a shape
not learned. A read past API_REQUEST_DEADLINE_SECONDS answers the deadline's 503 from
the loop (its connection is abandoned to its query, like a stuck deadline thread, and
at most MAX_STUCK of those at once); a database error answers the fast lane's 503.
PostgreSQL only (SQLite runs the fast lane; its queries are local and have no hop to
save). docs/HOT_PATH.md, "Answers on the event loop"."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from billing.models import ChangeCounter
from ladder import core, services
from ladder.core import AutoId
from ladder.models import ApiToken
from ladder.pool_answers import answer_decision, body_key, parse_pool_id
from ladder.schemas import SpendIn
from ladder.services.spend_write import guarded_insert_statement, window_sum_statement
from ladder.spend_answers import spend_body, spend_input_of
from ladder.tokens import KnownToken, forget_known_tokens, known_token
from omniroute_admin.change_feed import psycopg_params
from omniroute_admin.deadline import DETAIL, UNAVAILABLE_DETAIL, log_too_late, with_connections
from omniroute_admin.fast_lane import (
    BEARER,
    POOLS_PREFIX,
    SPEND_STATUS,
    Headers,
    PoolFastLane,
    is_pool_request,
    is_spend_request,
    pool_reply,
    unavailable_reply,
)

logger = logging.getLogger(__name__)

# Connections of one event loop (one per server process) open at once for the spend
# reports in flight (their statement is a fraction of a millisecond; a report that finds
# none free within its deadline answers 503), and for the counter reads (one at a time,
# a second when the first is slow: HEDGE_SECONDS).
MAX_OPEN = 4
MAX_READERS = 2
# A counter read in flight for this long lets the next one start on another connection.
HEDGE_SECONDS = 0.05
# Connections abandoned to a database that stopped answering, at most, per process: past
# it a request answers the deadline's 503 at once (the fast lane's threads likewise).
MAX_STUCK = 4
# (config, state, tokens)
Counters3 = tuple[int, int, int]
Reply = tuple[int, list[tuple[bytes, bytes]], bytes]
T = TypeVar("T")


class Current(NamedTuple):
    """The counters of a read that started after the request arrived."""

    config: int
    state: int
    tokens: int


class ReadFailed(Exception):
    """The database failed or did not answer in time: `detail` is the 503's."""

    def __init__(self, detail: str, why: str) -> None:
        super().__init__(why)
        self.detail = detail


class LoopConnections:
    """Asynchronous PostgreSQL connections of one event loop (autocommit): at most
    `max_open` open, each running one statement at a time. `run(work, timeout,
    stuck_after)` runs `work(connection)` on an idle one; past `timeout` it raises
    ReadFailed(DETAIL) and leaves the work running. A work still running `stuck_after`
    seconds after it started (by default `timeout`) has its connection abandoned to it,
    as a stuck deadline thread is, and closed if the database ever answers; one that ends
    before that gives its connection back. With MAX_STUCK abandoned at once, or no
    connection free in time, ReadFailed(DETAIL) at once.

    A connection is opened **off the request path**: a work that finds none idle, with
    fewer than `max_open` open, starts one opening in the background and then waits for
    whichever connection is idle first, that one or one a running work gives back. The
    opening connection runs `warm(connection)` (the reader's statement, once) before it
    is handed out: on two saturated cores a new PostgreSQL backend's connection took up
    to 0.23 s and its first statement up to 0.52 s (docs/HOT_PATH.md), which a request
    bound to it waited out to its deadline. An opening that fails wakes the works
    waiting for it with ReadFailed(UNAVAILABLE_DETAIL)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        connect: Callable[[], Awaitable[Any]] | None = None,
        max_open: int = MAX_OPEN,
        warm: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> None:
        self.loop = loop
        self.connect = connect or _connect
        self.warm = warm
        self.max_open = max_open
        self.opened = 0  # connections opened so far
        self.runs = 0  # works run so far (one a spend report)
        self._idle: list[Any] = []
        self._open = 0  # open or opening
        self._failed_opens = 0
        self._open_failure = ""
        self._opening: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Condition()
        self._stuck: set[asyncio.Task[Any]] = set()
        # Works past their caller's timeout, not (yet) stuck: their timers to be.
        self._late: dict[asyncio.Task[Any], asyncio.TimerHandle | None] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.prepare = psycopg_params().get("prepare_threshold", 0) is not None

    async def run(
        self,
        work: Callable[[Any], Awaitable[T]],
        timeout: float | None,
        stuck_after: float | None = None,
    ) -> T:
        if len(self._stuck) >= MAX_STUCK:
            raise ReadFailed(DETAIL, "every loop connection is waiting on the database")
        started = self.loop.time()
        async with self._freed:
            if not self._idle:
                if self._open < self.max_open:
                    self._open_one()
                failures = self._failed_opens

                def ready() -> bool:
                    return bool(self._idle) or self._failed_opens > failures

                try:
                    await asyncio.wait_for(self._freed.wait_for(ready), timeout)
                except TimeoutError:
                    raise ReadFailed(DETAIL, "no loop connection was free in time") from None
                if not self._idle:
                    raise ReadFailed(UNAVAILABLE_DETAIL, self._open_failure)
            connection = self._idle.pop()
        left = None if timeout is None else max(timeout - (self.loop.time() - started), 0.0)
        self.runs += 1
        running = self.loop.time()
        task = self.loop.create_task(self._on(connection, work))
        done, _ = await asyncio.wait({task}, timeout=left)
        if not done:
            limit = timeout if stuck_after is None else stuck_after
            still = None if limit is None else limit - (self.loop.time() - running)
            if still is None or still > 0:
                self._late[task] = (
                    None if still is None else self.loop.call_later(still, self._stick, task)
                )
            else:
                self._stuck.add(task)
            task.add_done_callback(self._settle_late)
            raise ReadFailed(DETAIL, "the database did not answer")
        error = task.exception()
        if error is not None:
            if isinstance(error, ReadFailed):
                raise error
            raise ReadFailed(UNAVAILABLE_DETAIL, type(error).__name__) from error
        value, connection = task.result()
        await self._release(connection)
        return value

    def _open_one(self) -> None:
        """Start opening one more connection (the caller holds the condition's lock)."""
        self._open += 1
        task = self.loop.create_task(self._opened())
        self._opening.add(task)
        task.add_done_callback(self._opening.discard)

    async def _opened(self) -> None:
        connection = None
        try:
            connection = await self.connect()
            if self.warm is not None:
                await self.warm(connection)
        except Exception as error:
            if connection is not None:
                await _close_quietly(connection)
            async with self._freed:
                self._open -= 1
                self._failed_opens += 1
                self._open_failure = type(error).__name__
                self._freed.notify_all()
            return
        self.opened += 1
        await self._release(connection)

    async def _on(self, connection: Any, work: Callable[[Any], Awaitable[T]]) -> tuple[T, Any]:
        try:
            return await work(connection), connection
        except BaseException:
            await self._release(None)
            await _close_quietly(connection)
            raise

    async def _release(self, connection: Any) -> None:
        """Back to the idle list (None: one fewer open, it broke or was abandoned)."""
        async with self._freed:
            if connection is None:
                self._open -= 1
            else:
                self._idle.append(connection)
            self._freed.notify()

    def _stick(self, task: asyncio.Task[Any]) -> None:
        """A late work still running at its `stuck_after`: its connection is abandoned."""
        self._late.pop(task, None)
        if not task.done():
            self._stuck.add(task)

    def _settle_late(self, task: asyncio.Task[Any]) -> None:
        timer = self._late.pop(task, None)
        if timer is not None:
            timer.cancel()
        abandoned = task in self._stuck
        self._stuck.discard(task)
        if task.cancelled():
            self.loop.create_task(self._release(None))
            return
        if task.exception() is not None:
            return  # _on released and closed it
        _, connection = task.result()
        if not abandoned:  # answered before it was given up: the next work's
            self.loop.create_task(self._release(connection))
            return
        closing = self.loop.create_task(self._close_abandoned(connection))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _close_abandoned(self, connection: Any) -> None:
        await self._release(None)
        await _close_quietly(connection)

    async def aclose(self) -> None:
        """Close the idle connections (a test's loop, before it ends)."""
        await asyncio.gather(*self._closing, *self._opening)
        async with self._freed:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for connection in idle:
            await _close_quietly(connection)


class CounterReader:
    """The change counters (config, state, tokens), read on this loop's connections.
    `read()` is a future of a read that starts after the call: a request that arrives
    while one is in flight waits for the next, which then serves every request that
    arrived meanwhile. The next starts when the one in flight ends, or once that one has
    been running for `hedge` seconds (a slow connection holds up no one behind it), but
    never more than MAX_READERS at once: a further read would only queue for a
    connection. A read that starts later than `hedge` after its first request arrived
    fails by that request's deadline; its connection is given up only past the full
    `deadline - hedge` (LoopConnections.run's `stuck_after`). Before that bound, every
    hedged read queued for the two connections, each spending its time on the wait,
    then timing out a healthy connection: one slow moment (a pause of 100 ms or two)
    became seconds of 503s as connections were abandoned and reopened."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self.loop = loop
        self.deadline = deadline
        self.hedge = HEDGE_SECONDS
        self.reads = 0  # queries sent so far
        self.last: Current | None = None  # what the latest read to start answered
        # Its own connections: a read never waits behind the spend reports' writes. Both
        # kinds run the counters' statement once when opened (LoopConnections: warm).
        self.connections = LoopConnections(loop, max_open=MAX_READERS, warm=self._warm)
        # The spend reports'.
        self.writers = LoopConnections(loop, warm=self._warm)
        self._next: asyncio.Future[Counters3] | None = None
        self._next_since = 0.0  # when the next read's first request arrived
        self._in_flight = 0
        self._latest_start = 0.0
        self._last_start = -1.0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._sql = _counters_sql()

    def read(self) -> asyncio.Future[Counters3]:
        future = self._next
        if future is None:
            future = self._next = self.loop.create_future()
            self._next_since = self.loop.time()
            self._start_next()
        return future

    def _start_next(self) -> None:
        if self._next is None or self._in_flight >= MAX_READERS:
            return  # a read ending starts the next
        now = self.loop.time()
        if self._in_flight and now - self._latest_start < self.hedge:
            if self._timer is None:
                self._timer = self.loop.call_at(self._latest_start + self.hedge, self._on_timer)
            return
        future, self._next = self._next, None
        self._in_flight += 1
        self._latest_start = now
        waited = max(now - self._next_since, self.hedge)
        task = self.loop.create_task(self._serve(future, now, waited))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_timer(self) -> None:
        self._timer = None
        self._start_next()

    async def _serve(
        self, future: asyncio.Future[Counters3], started: float, waited: float
    ) -> None:
        try:
            value = await self._query(waited)
        except ReadFailed as error:
            _fail(future, error)
        else:
            if started > self._last_start:
                self._last_start, self.last = started, Current(*value)
            if not future.done():
                future.set_result(value)
        finally:
            self._in_flight -= 1
            self._start_next()

    async def _query(self, waited: float) -> Counters3:
        # The read's first request arrived `waited` ago (at least `hedge`, the most it
        # waits while reads keep up): it is answered within its deadline, and the
        # connection is given up only past the deadline less `hedge`.
        if self.deadline <= 0:
            return await self.connections.run(self._read_on, None)
        stuck_after = max(self.deadline - self.hedge, 0.0)
        timeout = max(self.deadline - waited, 0.0)
        return await self.connections.run(self._read_on, timeout, stuck_after)

    async def _read_on(self, connection: Any) -> Counters3:
        self.reads += 1
        return await self._counters_on(connection)

    async def _counters_on(self, connection: Any) -> Counters3:
        cursor = await connection.execute(
            self._sql,
            [ChangeCounter.CONFIG, ChangeCounter.STATE, ChangeCounter.TOKENS],
            prepare=self.connections.prepare,
        )
        row = await cursor.fetchone()
        assert row is not None
        config, state, tokens = row
        return config or 0, state or 0, tokens or 0

    async def _warm(self, connection: Any) -> None:
        """A new connection's first statement, before it serves a request (not a read)."""
        await self._counters_on(connection)

    async def aclose(self) -> None:
        """Close the connections (a test's loop, before it ends)."""
        await self.connections.aclose()
        await self.writers.aclose()


async def _close_quietly(connection: Any) -> None:
    """Close a connection that is done with, whatever state it is in."""
    with contextlib.suppress(Exception):
        await connection.close()


async def _connect() -> Any:
    import psycopg

    return await psycopg.AsyncConnection.connect(**psycopg_params(), autocommit=True)


def _fail(future: asyncio.Future[Counters3], error: ReadFailed) -> None:
    if not future.done():
        future.set_exception(error)
        # Every waiter may have given up already: retrieved here so it is never logged.
        future.exception()


def _counters_sql() -> str:
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    table, value, name = quote(ChangeCounter._meta.db_table), quote("value"), quote("name")
    one = f"(SELECT {value} FROM {table} WHERE {name} = %s)"
    return f"SELECT {one}, {one}, {one}"


_readers: dict[asyncio.AbstractEventLoop, CounterReader] = {}


def reader() -> CounterReader:
    """The running loop's reader (a test's new loop per request gets its own)."""
    loop = asyncio.get_running_loop()
    found = _readers.get(loop)
    if found is None:
        for old in [old for old in _readers if old.is_closed()]:
            del _readers[old]
        found = _readers[loop] = CounterReader(loop, float(settings.API_REQUEST_DEADLINE_SECONDS))
    return found


async def close_reader() -> None:
    """Close the running loop's connections, if it has any (the server's shutdown)."""
    found = _readers.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.aclose()


def applies() -> bool:
    """Whether this process answers on the loop: PostgreSQL (see the module)."""
    return connections[DEFAULT_DB_ALIAS].vendor == "postgresql"


async def answer(lane: PoolFastLane, environ: dict[str, Any]) -> Reply | None:
    """The fast lane's answer to this pool request, made on the loop; None when the
    fast lane (and Django) must answer it instead."""
    started = time.perf_counter()
    if not is_pool_request(environ):
        return None
    headers = lane.learned(environ)
    if headers is None:
        return None
    parsed = parse_pool_id(environ["PATH_INFO"][len(POOLS_PREFIX) :])
    token = known_token(environ["HTTP_AUTHORIZATION"][len(BEARER) :])
    if not isinstance(parsed, AutoId) or token is None or not token.allows(ApiToken.Scope.GATEWAY):
        return None
    post_key: Any = "registered"
    if environ["REQUEST_METHOD"] == "POST":
        post_key = body_key(environ.get("CONTENT_TYPE", ""), environ["wsgi.input"].getvalue())
    current = await _current(environ, headers, token, started)
    if not isinstance(current, Current):
        return current
    config, state, _ = current
    now = timezone.now()
    decision = services.cached_decision(parsed, post_key, now=now, counters=(config, state))
    if decision is None:
        return None
    reply = answer_decision(parsed, decision, now, environ.get("HTTP_IF_NONE_MATCH"), started)
    return _encoded(pool_reply(headers, reply))


async def spend_answer(lane: PoolFastLane, environ: dict[str, Any]) -> Reply | None:
    """The fast lane's answer to a good spend report (`POST /api/v1/spend`), recorded on
    the loop in one guarded statement on a loop connection: the ledger row and its day
    total, written only while the change counters are still the ones the entry was priced and
    its token checked under (spend_write.guarded_insert_statement). Those are the
    counters this loop read last, checked by the statement itself after the request
    arrived; should they have moved, nothing is written and the report is priced again
    under a read that starts now. On a budgeted rung the window's spend is then read on
    the same connection, after the commit (as services.record_spend reads it), and a
    crossing of the budget is recorded on a thread, as record_spend records it. None
    when the fast lane (and Django) must answer instead, having written nothing: not a
    report the fast lane takes, a body the schema or the service refuses, a request id
    seen before (answered as stored there), a snapshot or a connection's billing this
    process has not cached for the current counters."""
    started = time.perf_counter()
    if not is_spend_request(environ):
        return None
    headers = lane.learned_spend(environ)
    token = known_token(environ["HTTP_AUTHORIZATION"][len(BEARER) :])
    if headers is None or token is None or not token.allows(ApiToken.Scope.GATEWAY):
        return None
    try:
        payload = SpendIn.model_validate(json.loads(environ["wsgi.input"].getvalue()))
    except (ValueError, RecursionError, PydanticValidationError):  # nested too deep: Django's 400
        return None
    data = spend_input_of(payload)
    # First under the counters this loop read last (the statement checks they still
    # hold), then, should they have moved, under a read that starts now.
    last = reader().last
    if last is not None and token.is_current(last.tokens, timezone.now()):
        reply = await _record(environ, headers, data, last, started)
        if reply is not _MOVED:
            return reply
    current = await _current(environ, headers, token, started)
    if not isinstance(current, Current):
        return current
    reply = await _record(environ, headers, data, current, started)
    return None if reply is _MOVED else reply


# What `_record` returns when the counters it was given had moved: it wrote nothing.
_MOVED: Any = object()


async def _record(
    environ: dict[str, Any],
    headers: Headers,
    data: services.SpendInput,
    current: Current,
    started: float,
) -> Reply | None:
    """A prepared report written in one guarded statement (spend_write.
    guarded_insert_statement) on a loop connection; _MOVED when `current` no longer held
    (nothing written), None when the endpoint must answer (nothing written)."""
    now = timezone.now()
    try:
        prepared = services.prepare_cached_spend(
            data, now=now, counters=(current.config, current.state)
        )
    except DjangoValidationError:
        return None
    if prepared is None:
        return None
    entry = prepared.entry
    statement, params = guarded_insert_statement(entry, current)
    budget = prepared.budgeted.get(entry.rung)
    connections_ = reader().writers
    prepare = connections_.prepare

    async def write(connection: Any) -> tuple[Any, bool, Decimal | None]:
        cursor = await connection.execute(statement, params, prepare=prepare)
        entry_id, held = await cursor.fetchone()
        if entry_id is None or budget is None:
            return entry_id, held, None
        # Committed: this sum includes every report committed before this one, so of
        # concurrent reports the last to commit sees them all (spend_totals).
        window = [entry.rung, *prepared.window]
        cursor = await connection.execute(window_sum_statement(), window, prepare=prepare)
        (spent,) = await cursor.fetchone()
        return entry_id, held, Decimal(spent)

    try:
        entry_id, held, window_spend = await connections_.run(write, _left(started))
    except ReadFailed as failed:
        return _unavailable(environ, headers, failed)
    if not held:
        return _MOVED
    if entry_id is None:
        return None  # seen before: the endpoint answers it as stored
    entry.pk = entry_id
    entry._state.adding = False
    entry._state.db = DEFAULT_DB_ALIAS
    if (
        budget is not None
        and window_spend is not None
        and core.reaches_budget(budget, window_spend)
    ):
        await asyncio.to_thread(with_connections, services.settle_crossing, prepared, now)
    body = spend_body(entry)
    return _encoded((SPEND_STATUS[201], [*headers, ("Content-Length", str(len(body)))], body))


async def _current(
    environ: dict[str, Any], headers: Headers, token: KnownToken, started: float
) -> Current | Reply | None:
    """The counters read after the request arrived, when `token` still stands for its
    row; a 503 reply when the database failed or did not answer in time; None when the
    token must go through `authenticate` (every known token forgotten when the tokens
    counter moved)."""
    try:
        # No timer of its own: the read it waits for fails by the deadline of its first
        # request, which arrived no later than this one (CounterReader._query).
        current = await reader().read()
    except ReadFailed as failed:
        return _unavailable(environ, headers, failed)
    if not token.is_current(current[2], timezone.now()):
        if current[2] != token.tokens_version:
            forget_known_tokens()
        return None
    return Current(*current)


def _left(started: float) -> float | None:
    """What is left of the request deadline (None: off)."""
    deadline = float(settings.API_REQUEST_DEADLINE_SECONDS)
    return max(deadline - (time.perf_counter() - started), 0.0) if deadline > 0 else None


def _unavailable(environ: dict[str, Any], headers: Headers, failed: ReadFailed) -> Reply:
    method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
    if failed.detail == DETAIL:
        log_too_late(method, path, str(failed))
    else:
        logger.warning("database unavailable during %s %s: %s", method, path, failed)
    return _encoded(unavailable_reply(headers, failed.detail))


def _encoded(reply: tuple[str, list[tuple[str, str]], bytes]) -> Reply:
    status, headers, body = reply
    encoded = [(n.lower().encode("latin1"), v.encode("latin1")) for n, v in headers]
    return int(status.split(" ", 1)[0]), encoded, body
