"""Cached pool answers on the event loop (omniroute_admin/loop_lane.py): the counter
reader's one-read-after-arrival rule, its deadline and failures, the tokens it trusts,
and the ASGI application answering on the loop only what the fast lane would answer,
with the same bytes and headers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.db import connection, transaction
from django.utils import timezone

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder import services, tokens
from ladder.models import ApiToken, BudgetCrossing, LadderSettings, SpendDayTotal, SpendEntry
from ladder.services.config import load_config
from ladder.services.spend_totals import note_crossings
from ladder.services.spend_write import guarded_insert_statement
from omniroute_admin import loop_lane
from omniroute_admin.deadline import DETAIL, UNAVAILABLE_DETAIL
from omniroute_admin.loop_lane import (
    MAX_OPEN,
    MAX_READERS,
    MAX_STUCK,
    CounterReader,
    LoopConnections,
    ReadFailed,
)
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token
from tests.test_fast_lane_spend import DEEP_BODIES, report

POOL = "/api/v1/pools/auto/subscription"


# --- the counter reader ------------------------------------------------------------------


class ScriptedQuery:
    """Stands in for the reader's query: each call reads the value of the moment it
    starts (as a statement's snapshot does), waits for its own release, then answers it
    (or raises what it is given)."""

    def __init__(self) -> None:
        self.value = (1, 1, 1)
        self.started: list[asyncio.Event] = []
        self.releases: list[asyncio.Event] = []
        self.error: Exception | None = None
        self.waited: list[float] = []  # how long each read's first request had waited

    async def __call__(self, waited: float = 0.0) -> tuple[int, int, int]:
        self.waited.append(waited)
        started, release = asyncio.Event(), asyncio.Event()
        self.started.append(started)
        self.releases.append(release)
        value = self.value
        started.set()
        await release.wait()
        if self.error is not None:
            raise self.error
        return value


def _reader_run(scenario: Callable[[CounterReader, ScriptedQuery], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        reader = CounterReader(asyncio.get_running_loop(), deadline=0.5)
        query = ScriptedQuery()
        reader._query = query  # type: ignore[method-assign]
        return await scenario(reader, query)

    return asyncio.run(main())


def test_requests_during_a_read_share_the_next_read_which_starts_after_them() -> None:
    async def scenario(reader: CounterReader, query: ScriptedQuery) -> Any:
        first = reader.read()
        await _started(query, 0)
        # A write lands while the first read is in flight; three requests arrive.
        query.value = (1, 2, 1)
        later = [reader.read() for _ in range(3)]
        query.releases[0].set()
        await _started(query, 1)
        query.releases[1].set()
        return await first, [await f for f in later], len(query.started)

    first, later, reads = _reader_run(scenario)

    assert first == (1, 1, 1)  # it started before the write
    assert later == [(1, 2, 1)] * 3  # one read, started after they arrived, serves all three
    assert reads == 2


def test_a_failed_read_fails_every_request_waiting_for_it() -> None:
    async def scenario(reader: CounterReader, query: ScriptedQuery) -> Any:
        first = reader.read()
        await _started(query, 0)
        futures = [reader.read(), reader.read()]  # both wait for the next read
        query.error = ReadFailed(UNAVAILABLE_DETAIL, "OSError")
        query.releases[0].set()
        await _started(query, 1)
        query.releases[1].set()
        futures.append(first)
        details = []
        for future in futures:
            with pytest.raises(ReadFailed) as failed:
                await future
            details.append((failed.value.detail, str(failed.value)))
        return details

    assert _reader_run(scenario) == [(UNAVAILABLE_DETAIL, "OSError")] * 3


# --- the loop's connections ---------------------------------------------------------------


class FakeConnection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def _connections_run(scenario: Callable[[LoopConnections], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        made: list[FakeConnection] = []

        async def connect() -> FakeConnection:
            made.append(FakeConnection(len(made) + 1))
            return made[-1]

        pool = LoopConnections(asyncio.get_running_loop(), connect)
        return await scenario(pool), made

    return asyncio.run(main())


async def _number(connection: FakeConnection) -> int:
    return connection.number


async def _settled(pending: Callable[[], Any]) -> None:
    """Until `pending()` is empty, then a few more loop turns: the callbacks of the late
    works that left it (a release, a close) have run."""
    while pending():
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)


def _answers_once(answer: asyncio.Event) -> Callable[[FakeConnection], Awaitable[int]]:
    """A work that holds its connection until the database `answer`s."""

    async def work(connection: FakeConnection) -> int:
        await answer.wait()
        return connection.number

    return work


def test_a_connection_is_reused_while_it_answers() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        return [await pool.run(_number, 1.0) for _ in range(3)]

    numbers, made = _connections_run(scenario)

    assert numbers == [1, 1, 1]
    assert len(made) == 1


def test_work_past_its_timeout_fails_and_its_connection_is_abandoned_then_closed() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        answer = asyncio.Event()
        with pytest.raises(ReadFailed) as failed:
            await pool.run(_answers_once(answer), 0.01)
        after = await pool.run(_number, 1.0)
        answer.set()  # the database answers the abandoned work at last
        await _settled(lambda: pool._stuck)
        return failed.value.detail, str(failed.value), after

    (detail, why, after), made = _connections_run(scenario)

    assert (detail, why) == (DETAIL, "the database did not answer")
    assert after == 2  # a new connection, not the stuck one
    assert [c.closed for c in made] == [True, False]


def test_with_every_connection_stuck_work_fails_at_once_without_running() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        answer = asyncio.Event()
        ran: list[int] = []

        async def hangs(connection: FakeConnection) -> int:
            ran.append(connection.number)
            await answer.wait()
            return connection.number

        for _ in range(MAX_STUCK):
            with pytest.raises(ReadFailed):
                await pool.run(hangs, 0.01)
        with pytest.raises(ReadFailed) as failed:
            await pool.run(hangs, 0.01)
        stuck_ran = list(ran)
        answer.set()
        await _settled(lambda: pool._stuck)
        return str(failed.value), stuck_ran, await pool.run(_number, 1.0)

    (why, ran, again), made = _connections_run(scenario)

    assert why == "every loop connection is waiting on the database"
    assert ran == list(range(1, MAX_STUCK + 1))
    assert again == MAX_STUCK + 1  # the stuck ones ended and were closed: work runs again
    assert [c.closed for c in made] == [True] * MAX_STUCK + [False]


def test_failed_work_is_unavailable_and_closes_its_connection() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        async def fails(connection: FakeConnection) -> int:
            raise OSError("connection reset")

        with pytest.raises(ReadFailed) as failed:
            await pool.run(fails, 1.0)
        return failed.value.detail, str(failed.value), await pool.run(_number, 1.0)

    (detail, why, after), made = _connections_run(scenario)

    assert (detail, why, after) == (UNAVAILABLE_DETAIL, "OSError", 2)
    assert made[0].closed


def test_at_most_max_open_connections_and_the_next_work_waits_for_one() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        release = asyncio.Event()

        async def holds(connection: FakeConnection) -> int:
            await release.wait()
            return connection.number

        held = [asyncio.ensure_future(pool.run(holds, 1.0)) for _ in range(MAX_OPEN)]
        waiting = asyncio.ensure_future(pool.run(_number, 1.0))
        for _ in range(5):
            await asyncio.sleep(0)
        waited = not waiting.done()
        release.set()
        return waited, sorted(await asyncio.gather(*held)), await waiting

    (waited, held, number), made = _connections_run(scenario)

    assert waited
    assert held == list(range(1, MAX_OPEN + 1))
    assert number in held  # a freed one, not a new one
    assert len(made) == MAX_OPEN


class GatedConnect:
    """Opens FakeConnections, each only once the test lets it (`let(n)`), or fails the
    next opening with `error`."""

    def __init__(self) -> None:
        self.made: list[FakeConnection] = []
        self.gates: list[asyncio.Event] = []
        self.error: Exception | None = None

    async def __call__(self) -> FakeConnection:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if self.error is not None:
            raise self.error
        self.made.append(FakeConnection(len(self.made) + 1))
        return self.made[-1]

    def let(self, index: int) -> None:
        self.gates[index].set()


async def _turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def test_a_work_takes_the_first_connection_given_back_not_the_one_still_opening() -> None:
    """Opening a connection is off the request path: with one connection busy and a
    second opening slowly, a work takes the busy one as soon as it is given back."""

    async def main() -> Any:
        connect = GatedConnect()
        pool = LoopConnections(asyncio.get_running_loop(), connect)
        first = asyncio.ensure_future(pool.run(_number, 1.0))
        await _turns()
        connect.let(0)
        assert await first == 1
        release = asyncio.Event()
        busy = asyncio.ensure_future(pool.run(_answers_once(release), 1.0))
        await _turns()
        waiting = asyncio.ensure_future(pool.run(_number, 1.0))
        await _turns()
        opening = len(connect.gates)  # the waiting work started a second one opening
        release.set()
        answered = await waiting  # the busy connection, given back
        connect.let(1)
        await _turns()
        idle = sorted(c.number for c in pool._idle)
        return opening, await busy, answered, len(connect.made), idle

    opening, busy, answered, made, idle = asyncio.run(main())

    assert opening == 2
    assert (busy, answered) == (1, 1)
    assert made == 2
    assert idle == [1, 2]  # the late one joined the idle ones, for the next work


def test_a_connection_opening_past_the_callers_timeout_is_kept_for_the_next_work() -> None:
    async def main() -> Any:
        connect = GatedConnect()
        pool = LoopConnections(asyncio.get_running_loop(), connect)
        with pytest.raises(ReadFailed) as failed:
            await pool.run(_number, 0.01)
        connect.let(0)  # it opens at last, after its caller gave up
        await _turns()
        after = await pool.run(_number, 1.0)
        return failed.value.detail, str(failed.value), after, len(connect.gates), pool._stuck

    detail, why, after, openings, stuck = asyncio.run(main())

    assert (detail, why) == (DETAIL, "no loop connection was free in time")
    assert after == 1  # that connection: no second opening, nothing abandoned
    assert (openings, stuck) == (1, set())


def test_a_new_connection_is_warmed_before_it_serves_a_work() -> None:
    async def main() -> Any:
        connect = GatedConnect()
        order: list[str] = []

        async def warm(connection: FakeConnection) -> None:
            order.append(f"warm {connection.number}")

        async def work(connection: FakeConnection) -> int:
            order.append(f"work {connection.number}")
            return connection.number

        pool = LoopConnections(asyncio.get_running_loop(), connect, warm=warm)
        pending = asyncio.ensure_future(pool.run(work, 1.0))
        await _turns()
        connect.let(0)
        await pending
        await pool.run(work, 1.0)
        return order, pool.opened

    order, opened = asyncio.run(main())

    assert order == ["warm 1", "work 1", "work 1"]  # warmed once, when opened
    assert opened == 1


@pytest.mark.parametrize("fails_in", ["connect", "warm"])
def test_an_opening_that_fails_wakes_its_work_unavailable_and_leaves_nothing_open(
    fails_in: str,
) -> None:
    async def main() -> Any:
        connect = GatedConnect()

        async def warm(connection: FakeConnection) -> None:
            if fails_in == "warm" and connection.number == 1:
                raise OSError("server closed the connection")

        if fails_in == "connect":
            connect.error = OSError("connection refused")
        pool = LoopConnections(asyncio.get_running_loop(), connect, warm=warm)
        pending = asyncio.ensure_future(pool.run(_number, 1.0))
        await _turns()
        connect.let(0)
        with pytest.raises(ReadFailed) as failed:
            await pending
        idle = list(pool._idle)
        connect.error = None
        again = asyncio.ensure_future(pool.run(_number, 1.0))
        await _turns()
        connect.let(1)
        return failed.value.detail, str(failed.value), idle, await again, connect.made

    detail, why, idle, again, made = asyncio.run(main())

    assert (detail, why) == (UNAVAILABLE_DETAIL, "OSError")
    assert idle == []  # nothing half-open handed out
    if fails_in == "warm":
        assert (made[0].closed, again) == (True, 2)
    else:
        assert again == 1  # the next work opens again


async def _started(query: ScriptedQuery, index: int) -> None:
    while len(query.started) <= index:
        await asyncio.sleep(0)
    await query.started[index].wait()


# --- known tokens -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("seeded")
def test_a_token_authenticated_outside_a_transaction_is_known_with_the_tokens_counter() -> None:
    secret = make_token("gw", ApiToken.Scope.GATEWAY)
    (tokens_version,) = ChangeCounter.objects.filter(name=ChangeCounter.TOKENS).values_list(
        "value", flat=True
    )
    assert tokens.known_token(secret) is None

    token = tokens.authenticate(secret)

    assert token is not None
    known = tokens.known_token(secret)
    assert known is not None
    assert (known.id, known.scope, known.tokens_version) == (
        token.pk,
        "gateway",
        tokens_version,
    )
    assert known.is_current(tokens_version, timezone.now())
    assert not known.is_current(tokens_version + 1, timezone.now())
    assert not known.is_current(tokens_version, timezone.now() + timedelta(minutes=2))


@pytest.mark.django_db(transaction=True)
def test_a_token_read_inside_a_transaction_is_not_kept() -> None:
    secret = make_token("gw", ApiToken.Scope.GATEWAY)
    with transaction.atomic():
        assert tokens.authenticate(secret) is not None
    assert tokens.known_token(secret) is None


@pytest.mark.django_db
def test_revoking_a_token_moves_the_tokens_counter_and_nothing_else() -> None:
    make_token("gw", ApiToken.Scope.GATEWAY)
    before = dict(ChangeCounter.objects.values_list("name", "value"))

    assert tokens.revoke_token(ApiToken.objects.get(name="gw").pk)

    after = dict(ChangeCounter.objects.values_list("name", "value"))
    assert after == {**before, "tokens": before["tokens"] + 1}
    assert billing_services.change_counters() == (before["config"], before["state"])


# --- the ASGI application on PostgreSQL ------------------------------------------------


@pytest.fixture
def on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the loop lane runs on PostgreSQL only (SQLite has the fast lane)")


@pytest.fixture
def seeded() -> None:
    """What the migrations seed (the curated catalog, the change counters): a
    transactional test empties every table after it."""
    import importlib

    from django.apps import apps

    def migration(name: str) -> Any:
        return importlib.import_module(f"billing.migrations.{name}")

    migration("0002_seed_curated_catalog").seed(apps, None)
    migration("0004_seed_change_counters").create_counters(apps, None)
    migration("0009_seed_tokens_counter").create_counter(apps, None)


@pytest.fixture
def plan(on_postgresql: None, seeded: None, settings: Any) -> str:
    """One plan login with a fresh reading, pinned by one candidate; a gateway token."""
    from django.db import connections

    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    connections.settings["default"]["CONN_MAX_AGE"] = 0
    make_connection("claude-max-1")
    now = timezone.now()
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=60.0)
    make_candidate(connection_id="claude-max-1")
    return make_token("gw", ApiToken.Scope.GATEWAY)


class Counted:
    """Counts the requests the ASGI application hands to its WSGI thread pool."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from omniroute_admin import asgi

        self.threads = 0
        respond = asgi._wsgi.respond

        async def counting(environ: dict[str, Any], send: Any) -> None:
            self.threads += 1
            await respond(environ, send)

        monkeypatch.setattr(asgi._wsgi, "respond", counting)
        monkeypatch.setattr(asgi, "_on_loop", True)


def _session(steps: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    """Requests through the ASGI application in one event loop (one counter reader),
    closed at the end."""
    from omniroute_admin.asgi import application

    async def main() -> Any:
        transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
                return await steps(c)
        finally:
            await loop_lane.reader().aclose()

    return asyncio.run(main())


def _auth(secret: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", **extra}


@pytest.mark.django_db(transaction=True)
def test_a_cached_pool_is_answered_on_the_loop_with_the_lanes_bytes_and_headers(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        first = await client.get(POOL, headers=_auth(plan))
        threads = counted.threads
        reads = loop_lane.reader().reads
        second = await client.get(POOL, headers=_auth(plan))
        third = await client.get(POOL, headers=_auth(plan))
        return first, second, third, threads, reads, loop_lane.reader().reads

    first, second, third, threads, reads, reads_after = _session(steps)

    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 200)
    assert threads == 1
    assert counted.threads == 1
    assert reads_after - reads == 2  # one counter read each, no Django query
    assert second.content == first.content == third.content
    assert sorted(second.headers.multi_items()) == sorted(first.headers.multi_items())
    assert second.headers["x-frame-options"] == "DENY"
    assert [c["connection_id"] for c in second.json()["candidates"]] == ["claude-max-1"]


@pytest.mark.django_db(transaction=True)
def test_a_revalidation_of_the_current_tag_is_a_304_on_the_loop(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        first = await client.get(POOL, headers=_auth(plan))
        revalidation = _auth(plan, **{"If-None-Match": first.headers["etag"]})
        again = await client.get(POOL, headers=revalidation)
        return first, again

    first, again = _session(steps)

    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    assert again.headers["content-length"] == "0"
    assert "content-type" not in again.headers
    assert counted.threads == 1


@pytest.mark.django_db(transaction=True)
def test_a_write_committed_before_a_request_is_in_its_answer(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.get(POOL, headers=_auth(plan))
        before = await client.get(POOL, headers=_auth(plan))
        now = timezone.now()
        await asyncio.to_thread(
            make_reading, "claude-max-1", now=now, checked_at=now, remaining_percent=1.0
        )
        after = await client.get(POOL, headers=_auth(plan))
        again = await client.get(POOL, headers=_auth(plan))
        return before, after, again

    before, after, again = _session(steps)

    assert [c["connection_id"] for c in before.json()["candidates"]] == ["claude-max-1"]
    assert after.json()["candidates"] == []
    assert again.content == after.content
    assert counted.threads == 2  # the first request, and the first after the write


@pytest.mark.django_db(transaction=True)
def test_a_token_revoked_in_another_process_is_refused_on_its_next_request(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.get(POOL, headers=_auth(plan))
        served = await client.get(POOL, headers=_auth(plan))
        token_id = await asyncio.to_thread(lambda: ApiToken.objects.get(name="gw").pk)
        # What another process's revocation leaves this one: its known token, and the
        # moved counter in the database (its own write would forget nothing here).
        known = tokens.known_token(plan)
        await asyncio.to_thread(tokens.revoke_token, token_id)
        tokens._know(tokens.hash_secret(plan), known)  # type: ignore[arg-type]
        refused = [await client.get(POOL, headers=_auth(plan)) for _ in range(2)]
        return served, refused

    served, refused = _session(steps)

    assert served.status_code == 200
    assert [r.status_code for r in refused] == [401, 401]
    assert tokens.known_token(plan) is None
    assert counted.threads == 3


@pytest.mark.django_db(transaction=True)
def test_a_token_last_used_over_a_minute_ago_goes_through_authenticate(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    long_ago = timezone.now() - timedelta(minutes=5)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.get(POOL, headers=_auth(plan))
        await asyncio.to_thread(
            lambda: ApiToken.objects.filter(name="gw").update(last_used_at=long_ago)
        )
        known = tokens.known_token(plan)
        assert known is not None
        tokens._know(tokens.hash_secret(plan), known._replace(last_used_at=long_ago))
        answer = await client.get(POOL, headers=_auth(plan))
        used = await asyncio.to_thread(lambda: ApiToken.objects.get(name="gw").last_used_at)
        return answer, used

    answer, used = _session(steps)

    assert answer.status_code == 200
    assert counted.threads == 2
    assert used is not None
    assert used > long_ago + timedelta(minutes=4)


@pytest.mark.django_db(transaction=True)
def test_a_database_that_does_not_answer_gets_the_deadline_503_from_the_loop(
    plan: str, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.get(POOL, headers=_auth(plan))
        reader = loop_lane.reader()
        reader.deadline = settings.API_REQUEST_DEADLINE_SECONDS = 0.1
        hung = asyncio.Event()

        async def hanging(connection: Any) -> tuple[int, int, int]:
            await hung.wait()  # a database that stopped answering mid-query
            return (0, 0, 0)

        monkeypatch.setattr(reader, "_read_on", hanging)
        answer = await client.get(POOL, headers=_auth(plan))
        # Past its bound (deadline less the hedge) it is given up: at once or a moment
        # after the answer, by its timer.
        while reader.connections._late:
            await asyncio.sleep(0.005)
        stuck = len(reader.connections._stuck)
        hung.set()
        while reader.connections._stuck:
            await asyncio.sleep(0)
        return answer, stuck

    answer, stuck = _session(steps)

    assert answer.status_code == 503
    assert stuck == 1  # its connection left to the query, a new one next time
    assert answer.json() == {"detail": DETAIL}
    assert answer.headers["retry-after"] == "1"
    assert answer.headers["x-frame-options"] == "DENY"
    assert counted.threads == 1


@pytest.mark.django_db(transaction=True)
def test_what_the_loop_cannot_answer_goes_to_the_thread_pool(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.get(POOL, headers=_auth(plan))
        return [
            await client.get(POOL, headers=_auth("omr_unknown")),
            await client.get("/api/v1/pools/auto/nothing", headers=_auth(plan)),
            await client.get(f"{POOL}/history", headers=_auth(plan)),
            await client.get(POOL),
        ]

    answers = _session(steps)

    assert [a.status_code for a in answers] == [401, 404, 200, 401]
    assert counted.threads == 5


# --- spend reports on the loop (PostgreSQL) ------------------------------------------------

SPEND = "/api/v1/spend"


@pytest.fixture
def key(plan: str) -> str:
    """A metered key on the cheap rung, with its price; the plan fixture's token."""

    make_connection("openai-key", provider="openai", auth_type="apikey")
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )
    return plan


def _report(request_id: str, **fields: Any) -> dict[str, Any]:
    return report(request_id, **{"occurred_at": timezone.now().isoformat(), **fields})


def _ledger() -> list[tuple[str, str]]:

    return [
        (request_id, str(cost))
        for request_id, cost in SpendEntry.objects.order_by("request_id").values_list(
            "request_id", "cost_usd"
        )
    ]


@pytest.mark.django_db(transaction=True)
def test_a_good_report_is_recorded_on_the_loop_with_the_lanes_headers_and_body(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    counted = Counted(monkeypatch)
    at = timezone.now().isoformat()

    async def steps(client: httpx.AsyncClient) -> Any:
        first = await client.post(SPEND, headers=_auth(key), json=_report("r1", occurred_at=at))
        second = await client.post(SPEND, headers=_auth(key), json=_report("r2", occurred_at=at))
        threads = counted.threads
        again = await client.post(SPEND, headers=_auth(key), json=_report("r2", occurred_at=at))
        return first, second, threads, again

    first, second, threads, again = _session(steps)

    assert (first.status_code, second.status_code, again.status_code) == (201, 201, 200)
    assert threads == 1  # the first report learned the shape on a thread; the second, none
    assert counted.threads == 2  # a repeat is answered as stored, by the endpoint
    assert sorted(second.headers.keys()) == sorted(first.headers.keys())
    assert second.headers["content-length"] == str(len(second.content))
    assert second.json() == {**first.json(), "request_id": "r2"}
    assert again.content == second.content  # the endpoint's bytes, byte for byte
    assert _ledger() == [("r1", "0.15000000"), ("r2", "0.15000000")]
    # The day's total over its shards (the endpoint's session and the loop's).
    assert services.spend_summary().rungs["cheap"].spent_usd == Decimal("0.30000000")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prices", [10, 3000])
def test_a_report_on_the_loop_is_one_statement_whatever_the_price_catalog(
    key: str, monkeypatch: pytest.MonkeyPatch, prices: int
) -> None:
    from billing.models import ModelPrice

    ModelPrice.objects.bulk_create(
        ModelPrice(
            provider="filler",
            model=f"model-{index}",
            input_usd_per_mtok=Decimal(1),
            output_usd_per_mtok=Decimal(2),
        )
        for index in range(prices)
    )
    billing_services.bump(ChangeCounter.CONFIG)
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.post(SPEND, headers=_auth(key), json=_report("r1"))  # learns the shape
        await client.post(SPEND, headers=_auth(key), json=_report("r2"))  # reads the counters
        the_reader = loop_lane.reader()
        reads, statements = the_reader.reads, the_reader.writers.runs
        for number in range(3, 8):
            answer = await client.post(SPEND, headers=_auth(key), json=_report(f"r{number}"))
            assert answer.status_code == 201
        return the_reader.reads - reads, the_reader.writers.runs - statements

    reads, statements = _session(steps)

    assert (reads, statements) == (0, 5)  # one statement per report, no other query
    assert counted.threads == 1
    assert len(_ledger()) == 7


@pytest.mark.django_db(transaction=True)
def test_a_report_the_schema_or_the_service_refuses_is_the_endpoints_422_and_writes_nothing(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.post(SPEND, headers=_auth(key), json=_report("r1"))
        return [
            await client.post(SPEND, headers=_auth(key), json=_report("r2", input_tokens=-1)),
            await client.post(
                SPEND, headers=_auth(key), json=_report("r3", connection_id="Bad Id!")
            ),
            await client.post(
                SPEND, headers=_auth(key), json=_report("r4", occurred_at="2020-01-01T00:00:00Z")
            ),
        ]

    answers = _session(steps)

    assert [a.status_code for a in answers] == [422, 422, 422]
    assert counted.threads == 4
    assert _ledger() == [("r1", "0.15000000")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("body", DEEP_BODIES)
def test_a_deeply_nested_report_on_the_loop_is_the_endpoints_json_400_and_writes_nothing(
    key: str, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.post(SPEND, headers=_auth(key), json=_report("r1"))  # learns the shape
        return await client.post(
            SPEND, headers=_auth(key, **{"Content-Type": "application/json"}), content=body
        )

    answer = _session(steps)

    assert answer.status_code == 400
    assert answer.json() == {"detail": "Cannot parse request body"}
    assert counted.threads == 2  # the loop handed it to the endpoint
    assert _ledger() == [("r1", "0.15000000")]


@pytest.mark.django_db(transaction=True)
def test_a_report_that_takes_a_rung_to_its_budget_moves_the_version_once(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    counted = Counted(monkeypatch)
    services.get_settings_row()
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("0.40"))
    billing_services.bump(ChangeCounter.CONFIG)

    async def steps(client: httpx.AsyncClient) -> Any:
        versions = []
        for number in range(1, 5):
            answer = await client.post(SPEND, headers=_auth(key), json=_report(f"r{number}"))
            assert answer.status_code == 201
            versions.append(await asyncio.to_thread(billing_services.change_counters))
        return versions

    versions = _session(steps)

    states = [state for _, state in versions]
    # 0.15, 0.30 under the budget; 0.45 reaches it: the version moves; 0.60 is past it.
    assert states[1] == states[0]
    assert states[2] == states[1] + 1
    assert states[3] == states[2]
    # The first report learned the shape; the one after the crossing found the billing
    # of connections cached for the old state counter, and went to the endpoint once.
    assert counted.threads == 2
    assert list(BudgetCrossing.objects.values_list("rung", "budget_usd")) == [
        ("cheap", Decimal("0.40000000"))
    ]


@pytest.mark.django_db(transaction=True)
def test_a_report_does_not_wait_for_another_sessions_open_write_and_the_last_to_commit_sees_both(
    key: str,
) -> None:
    """The day total is sharded by database session (spend_write.SHARDS): a report on the
    loop is answered while another session holds its own write of the same day and rung
    open, and of the two the one that commits last reads the window's sum after its
    commit, sees both, and records the crossing."""
    import psycopg

    from omniroute_admin.change_feed import psycopg_params

    services.get_settings_row()
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("0.50"))
    billing_services.bump(ChangeCounter.CONFIG)
    other = psycopg.connect(**psycopg_params())  # a transaction, left open below
    today = timezone.now().date()

    def shards() -> set[int]:
        return set(SpendDayTotal.objects.values_list("shard", flat=True))

    async def steps(client: httpx.AsyncClient) -> Any:
        # The first on a thread (it learns the shape), the second on the loop.
        for request_id in ("r1", "r2"):
            answer = await client.post(SPEND, headers=_auth(key), json=_report(request_id))
            assert answer.status_code == 201
        used = await asyncio.to_thread(shards)
        free = min(set(range(16)) - used)
        other.execute(
            "INSERT INTO ladder_spenddaytotal (day, rung, shard, spent_usd, list_price_usd) "
            "VALUES (%s, 'cheap', %s, 0.20, 0.20)",
            [today, free],
        )
        before = await asyncio.to_thread(billing_services.change_counters)
        third = await client.post(SPEND, headers=_auth(key), json=_report("r3"))
        after = await asyncio.to_thread(billing_services.change_counters)
        return third, before, after, used

    try:
        third, before, after, used = _session(steps)
        other.commit()
    finally:
        other.close()

    assert third.status_code == 201
    assert after == before  # 0.45 seen by the loop's report, under the 0.50 budget
    assert not BudgetCrossing.objects.exists()
    crossed = note_crossings({"cheap": Decimal("0.50")}, load_config(), timezone.now())
    assert crossed  # the other session, last to commit, sees 0.65
    assert services.spend_summary().rungs["cheap"].spent_usd == Decimal("0.65000000")
    assert shards() == used | {min(set(range(16)) - used)}


@pytest.mark.django_db(transaction=True)
def test_a_report_with_a_revoked_token_is_the_endpoints_401_and_writes_nothing(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.post(SPEND, headers=_auth(key), json=_report("r1"))
        token_id = await asyncio.to_thread(lambda: ApiToken.objects.get(name="gw").pk)
        known = tokens.known_token(key)
        await asyncio.to_thread(tokens.revoke_token, token_id)
        tokens._know(tokens.hash_secret(key), known)  # type: ignore[arg-type]
        return await client.post(SPEND, headers=_auth(key), json=_report("r2"))

    answer = _session(steps)

    assert answer.status_code == 401
    assert counted.threads == 2
    assert _ledger() == [("r1", "0.15000000")]


@pytest.mark.django_db(transaction=True)
def test_a_report_after_a_price_change_is_priced_at_the_new_price_and_written_once(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:

    counted = Counted(monkeypatch)

    def new_price() -> None:
        billing_services.upsert_price(
            billing_services.PriceInput(
                "openai", "gpt-4o-mini", Decimal("0.5"), Decimal("0.6"), None
            ),
            actor="t",
        )

    async def steps(client: httpx.AsyncClient) -> Any:
        await client.post(SPEND, headers=_auth(key), json=_report("r1"))
        await client.post(SPEND, headers=_auth(key), json=_report("r2"))  # on the loop
        last = loop_lane.reader().last
        await asyncio.to_thread(new_price)  # moves the config counter past `last`
        third = await client.post(SPEND, headers=_auth(key), json=_report("r3"))
        return last, third

    last, third = _session(steps)

    assert last is not None
    assert third.status_code == 201
    assert third.json()["cost_usd"] == 0.5
    assert _ledger() == [("r1", "0.15000000"), ("r2", "0.15000000"), ("r3", "0.50000000")]
    assert counted.threads == 2  # the new snapshot was loaded on a thread, once


@pytest.mark.django_db(transaction=True)
def test_the_guarded_statement_writes_only_under_its_counters(key: str) -> None:

    def entry(request_id: str) -> SpendEntry:
        return SpendEntry(
            request_id=request_id,
            connection_id="openai-key",
            provider="openai",
            model="gpt-4o-mini",
            cost_usd=Decimal("0.25"),
            is_cost_computed=False,
            billed_usd=Decimal("0.25"),
            list_price_usd=Decimal("0.25"),
            rung="cheap",
            occurred_at=timezone.now(),
            recorded_at=timezone.now(),
        )

    values = dict(ChangeCounter.objects.values_list("name", "value"))
    current = (values["config"], values["state"], values["tokens"])
    moved = (current[0], current[1], current[2] + 1)

    def run(request_id: str, counters: tuple[int, int, int]) -> tuple[Any, ...]:
        sql, params = guarded_insert_statement(entry(request_id), counters)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return tuple(cursor.fetchone())

    first = run("g1", current)
    refused = run("g2", moved)
    second = run("g3", current)
    repeat = run("g3", current)

    assert first[1:] == (True,)
    assert isinstance(first[0], int)
    assert refused == (None, False)
    assert second[1:] == (True,)
    assert repeat == (None, True)
    assert _ledger() == [("g1", "0.25000000"), ("g3", "0.25000000")]
    assert services.spend_summary().rungs["cheap"].spent_usd == Decimal("0.50000000")


def test_a_read_in_flight_past_the_hedge_lets_the_next_start_on_another_connection() -> None:
    async def scenario(reader: CounterReader, query: ScriptedQuery) -> Any:
        reader.hedge = 0.01
        slow = reader.read()
        await _started(query, 0)
        query.value = (1, 2, 1)
        behind = reader.read()
        await _started(query, 1)  # started while the first is still in flight
        query.releases[1].set()
        answered = await behind
        in_flight = not slow.done()
        query.releases[0].set()
        return answered, in_flight, await slow, reader.last

    answered, in_flight, slow, last = _reader_run(scenario)

    assert answered == (1, 2, 1)
    assert in_flight
    assert slow == (1, 1, 1)
    assert last == (1, 2, 1)  # the latest read to start, not the latest to end


def test_no_more_reads_start_than_there_are_reader_connections() -> None:
    async def scenario(reader: CounterReader, query: ScriptedQuery) -> Any:
        reader.hedge = 0.01
        first = reader.read()
        await _started(query, 0)
        second = reader.read()
        await _started(query, 1)  # the hedge: a second read on the other connection
        third = reader.read()
        await asyncio.sleep(0.05)  # five hedges: with both in flight, none more starts
        before = len(query.started)
        query.releases[0].set()
        await first
        await _started(query, 2)  # the first to end lets the next start
        for release in query.releases:
            release.set()
        await asyncio.gather(second, third)
        return before, query.waited

    before, waited = _reader_run(scenario)

    assert before == MAX_READERS == 2
    assert waited[0] == 0.01  # at once: the hedge is the least a read is counted to wait
    # The hedge's timer: at its first request's hedge, however late the loop runs it (on a
    # busy machine 0.010125 s), and well before the third's.
    assert 0.01 <= waited[1] < 0.05
    assert waited[2] > 0.05  # started late, so it has that much less time


def test_a_read_that_starts_late_fails_by_its_first_requests_deadline() -> None:
    """Both reader connections held past the hedge: the third read starts when one ends,
    0.3 s after its request, and that request fails by its own deadline (0.4 s, not
    0.39 s after the read started) while that connection is not given up."""

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        reader = CounterReader(loop, deadline=0.4)
        reader.hedge = 0.01
        made: list[FakeConnection] = []

        async def connect() -> FakeConnection:
            made.append(FakeConnection(len(made) + 1))
            return made[-1]

        reader.connections = LoopConnections(loop, connect, max_open=MAX_READERS)
        releases: list[asyncio.Event] = []

        async def read_on(connection: FakeConnection) -> tuple[int, int, int]:
            releases.append(asyncio.Event())
            await releases[-1].wait()
            return (1, 1, connection.number)

        reader._read_on = read_on  # type: ignore[method-assign]
        held = [reader.read()]
        while len(releases) < 1:
            await asyncio.sleep(0)
        held.append(reader.read())
        while len(releases) < 2:
            await asyncio.sleep(0)
        arrived = loop.time()
        late = reader.read()
        await asyncio.sleep(0.3)  # the time the third request waits for a connection
        releases[0].set()  # the third read starts now, on the freed connection
        with pytest.raises(ReadFailed) as failed:
            await late
        elapsed = loop.time() - arrived
        late_not_stuck = len(reader.connections._late)
        stuck = len(reader.connections._stuck)
        for release in releases:
            release.set()
        await asyncio.gather(*held, return_exceptions=True)
        return str(failed.value), elapsed, late_not_stuck, stuck, made

    why, elapsed, late_not_stuck, stuck, made = asyncio.run(main())

    assert why == "the database did not answer"
    assert 0.39 <= elapsed < 0.6  # by the request's deadline, not at 0.3 + 0.39 s
    # Its connection is late, not given up (it has run 0.1 s of its 0.39 s); the second
    # held read, 0.4 s on its connection, is past its own bound and given up.
    assert (late_not_stuck, stuck) == (1, 1)
    assert len(made) == MAX_READERS


def test_work_past_its_callers_timeout_but_inside_stuck_after_keeps_its_connection() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        answer = asyncio.Event()
        with pytest.raises(ReadFailed) as failed:
            await pool.run(_answers_once(answer), 0.01, stuck_after=10.0)
        stuck_meanwhile = len(pool._stuck)
        answer.set()  # it answers well before it would be given up
        await _settled(lambda: pool._late)
        return str(failed.value), stuck_meanwhile, await pool.run(_number, 1.0)

    (why, stuck_meanwhile, after), made = _connections_run(scenario)

    assert why == "the database did not answer"  # the caller's time was up
    assert stuck_meanwhile == 0
    assert after == 1  # the same connection, given back, not closed
    assert [c.closed for c in made] == [False]


def test_work_still_running_at_stuck_after_is_abandoned_and_closed_when_it_answers() -> None:
    async def scenario(pool: LoopConnections) -> Any:
        answer = asyncio.Event()
        with pytest.raises(ReadFailed):
            await pool.run(_answers_once(answer), 0.01, stuck_after=0.03)
        not_yet = len(pool._stuck)
        while not pool._stuck:
            await asyncio.sleep(0.005)
        answer.set()
        await _settled(lambda: pool._stuck)
        return not_yet, await pool.run(_number, 1.0)

    (not_yet, after), made = _connections_run(scenario)

    assert not_yet == 0  # late, not stuck, until stuck_after
    assert after == 2
    assert [c.closed for c in made] == [True, False]


@pytest.mark.django_db(transaction=True)
def test_the_servers_shutdown_closes_the_loops_connections(
    plan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omniroute_admin.asgi import application

    Counted(monkeypatch)

    async def main() -> Any:
        transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            await c.get(POOL, headers=_auth(plan))
            await c.get(POOL, headers=_auth(plan))
        connection = loop_lane.reader().connections._idle[0]
        messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        sent: list[str] = []

        async def receive() -> Any:
            return next(messages)

        async def send(message: Any) -> None:
            sent.append(message["type"])

        await application({"type": "lifespan"}, receive, send)
        return connection.closed, sent

    closed, sent = asyncio.run(main())

    assert closed
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
