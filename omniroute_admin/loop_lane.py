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
import logging
import time
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from billing.models import ChangeCounter
from ladder import services
from ladder.core import AutoId
from ladder.models import ApiToken
from ladder.pool_answers import answer_decision, body_key, parse_pool_id
from ladder.tokens import forget_known_tokens, known_token
from omniroute_admin.change_feed import psycopg_params
from omniroute_admin.deadline import DETAIL, UNAVAILABLE_DETAIL, log_too_late
from omniroute_admin.fast_lane import (
    BEARER,
    POOLS_PREFIX,
    PoolFastLane,
    is_pool_request,
    pool_reply,
    unavailable_reply,
)

logger = logging.getLogger(__name__)

# Reads abandoned to a database that stopped answering, at most, per process: past it a
# request answers the deadline's 503 at once (the fast lane's pool of threads likewise).
MAX_STUCK = 4
# (config, state, tokens)
Counters3 = tuple[int, int, int]
Reply = tuple[int, list[tuple[bytes, bytes]], bytes]


class ReadFailed(Exception):
    """The counters could not be read: `detail` is the 503's."""

    def __init__(self, detail: str, why: str) -> None:
        super().__init__(why)
        self.detail = detail


class CounterReader:
    """The change counters, read on one asynchronous PostgreSQL connection of this
    event loop. `read()` is a future of a read that starts after the call: a request
    that arrives while one is in flight waits for the next, which then serves every
    request that arrived meanwhile."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self.loop = loop
        self.deadline = deadline
        self.reads = 0  # queries sent so far
        self._next: asyncio.Future[Counters3] | None = None
        self._task: asyncio.Task[None] | None = None
        self._connection: Any = None
        self._stuck: set[asyncio.Task[Counters3]] = set()
        self._sql = _counters_sql()
        self._prepare = psycopg_params().get("prepare_threshold", 0) is not None

    def read(self) -> asyncio.Future[Counters3]:
        if self._next is None:
            self._next = self.loop.create_future()
            if self._task is None or self._task.done():
                self._task = self.loop.create_task(self._run())
        return self._next

    async def _run(self) -> None:
        while self._next is not None:
            future, self._next = self._next, None
            if len(self._stuck) >= MAX_STUCK:
                _fail(future, ReadFailed(DETAIL, "every counter read is waiting on the database"))
                continue
            query = self.loop.create_task(self._query())
            done, _ = await asyncio.wait({query}, timeout=self.deadline or None)
            if not done:
                # Left to its query, as a stuck deadline thread is; a new connection next.
                self._connection = None
                self._stuck.add(query)
                query.add_done_callback(self._unstuck)
                _fail(future, ReadFailed(DETAIL, "the database did not answer"))
            elif (error := query.exception()) is not None:
                await self._drop()
                _fail(future, ReadFailed(UNAVAILABLE_DETAIL, type(error).__name__))
            elif not future.done():
                future.set_result(query.result())

    async def _query(self) -> Counters3:
        import psycopg

        connection = self._connection
        if connection is None:
            connection = await psycopg.AsyncConnection.connect(**psycopg_params(), autocommit=True)
            self._connection = connection
        self.reads += 1
        cursor = await connection.execute(
            self._sql,
            [ChangeCounter.CONFIG, ChangeCounter.STATE, ChangeCounter.TOKENS],
            prepare=self._prepare,
        )
        row = await cursor.fetchone()
        assert row is not None
        config, state, tokens = row
        return config or 0, state or 0, tokens or 0

    def _unstuck(self, query: asyncio.Task[Counters3]) -> None:
        self._stuck.discard(query)
        if not query.cancelled():
            query.exception()  # retrieved: a stuck read's error is expected, not logged

    async def aclose(self) -> None:
        """Close the connection (a test's loop, before it ends)."""
        await self._drop()

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # already broken
                logger.debug("loop lane: closing a broken connection failed", exc_info=True)


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
    path = environ["PATH_INFO"]
    parsed = parse_pool_id(path[len(POOLS_PREFIX) :])
    token = known_token(environ["HTTP_AUTHORIZATION"][len(BEARER) :])
    if not isinstance(parsed, AutoId) or token is None or not token.allows(ApiToken.Scope.GATEWAY):
        return None
    post_key: Any = "registered"
    if environ["REQUEST_METHOD"] == "POST":
        post_key = body_key(environ.get("CONTENT_TYPE", ""), environ["wsgi.input"].getvalue())
    deadline = float(settings.API_REQUEST_DEADLINE_SECONDS)
    left = max(deadline - (time.perf_counter() - started), 0.0) if deadline > 0 else None
    try:
        try:
            config, state, tokens = await asyncio.wait_for(asyncio.shield(reader().read()), left)
        except TimeoutError:
            raise ReadFailed(DETAIL, "the database did not answer") from None
    except ReadFailed as failed:
        if failed.detail == DETAIL:
            log_too_late(environ["REQUEST_METHOD"], path, str(failed))
        else:
            logger.warning(
                "database unavailable during %s %s: %s", environ["REQUEST_METHOD"], path, failed
            )
        return _encoded(unavailable_reply(headers, failed.detail))
    now = timezone.now()
    if not token.is_current(tokens, now):
        if tokens != token.tokens_version:
            forget_known_tokens()
        return None
    decision = services.cached_decision(parsed, post_key, now=now, counters=(config, state))
    if decision is None:
        return None
    reply = answer_decision(parsed, decision, now, environ.get("HTTP_IF_NONE_MATCH"), started)
    return _encoded(pool_reply(headers, reply))


def _encoded(reply: tuple[str, list[tuple[str, str]], bytes]) -> Reply:
    status, headers, body = reply
    encoded = [(n.lower().encode("latin1"), v.encode("latin1")) for n, v in headers]
    return int(status.split(" ", 1)[0]), encoded, body
