"""A change-feed long poll's repeats are held without Django (omniroute_admin/asgi.py and
change_feed.ChangeHub's proofs): once Django accepted a long poll, the same request with
the version it was answered is held on the event loop at once, so a change answers every
waiter and none of them runs through Django again (issue #30: 1,000 waiters re-polling
through Django at every change took the pool endpoint's p99 from 11.7 ms to 1,378 ms)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import pytest
from django.db import connections, transaction

from billing import services as billing_services
from billing.models import ChangeCounter
from billing.services.counters import CHANGE_CHANNEL, TOKENS_PAYLOAD
from ladder.models import ApiToken
from ladder.tokens import create_token, revoke_token
from omniroute_admin import change_feed
from omniroute_admin.asgi import BufferedWSGI
from omniroute_admin.change_feed import PROOF_SECONDS, ChangeHub
from omniroute_admin.wsgi import lanes

pytestmark = pytest.mark.django_db(transaction=True)

FEED = "/api/v1/changes"


class CountingApp:
    """The project's WSGI application, counting the requests that reach it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.calls += 1
        return lanes(environ, start_response)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _pool_threads_close_their_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> Iterator[ChangeHub]:
    """A hub that keeps proofs and reads the real counters (a poll: the test decides
    when a revocation is heard, with `forget_proofs`)."""
    made = ChangeHub(
        listen=False,
        read_counters=billing_services.change_counters,
        poll_seconds=0.01,
        keep_proofs=True,
        clock=clock,
    )
    monkeypatch.setattr(change_feed, "get_hub", lambda: made)
    yield made
    made.stop()


@pytest.fixture
def django_app() -> CountingApp:
    return CountingApp()


@pytest.fixture
def token() -> str:
    return create_token("gateway", ApiToken.Scope.GATEWAY)[1]


def _version() -> str:
    config, state = billing_services.change_counters()
    return f"{config}.{state}"


def _write() -> None:
    """A write that moves the version (committed)."""
    with transaction.atomic():
        billing_services.bump(ChangeCounter.STATE)
    connections.close_all()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met")


def _feed(
    client: httpx.AsyncClient, token: str, after: str, **headers: str
) -> asyncio.Future[httpx.Response]:
    auth = {"Authorization": f"Bearer {token}", **headers}
    return asyncio.ensure_future(client.get(f"{FEED}?after={after}&wait=30", headers=auth))


def _serve(app: CountingApp, scenario: Callable[[httpx.AsyncClient], Any]) -> Any:
    server = BufferedWSGI(app, threads=4)

    async def run() -> Any:
        transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await scenario(c)

    try:
        return asyncio.run(run())
    finally:
        server.executor.shutdown()


async def _first_poll(client: httpx.AsyncClient, hub: ChangeHub, token: str) -> str:
    """One long poll through Django, answered by a write: the version it was told."""
    first = _feed(client, token, await asyncio.to_thread(_version))
    await _until(lambda: hub.waiters == 1)
    await asyncio.to_thread(_write)
    answer = await first
    assert answer.status_code == 200
    return str(answer.json()["version"])


def test_after_a_change_two_hundred_repeats_are_held_and_answered_without_django(
    hub: ChangeHub, django_app: CountingApp, token: str
) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        told = await _first_poll(client, hub, token)
        assert django_app.calls == 1

        repeats = [_feed(client, token, told) for _ in range(200)]
        await _until(lambda: hub.waiters == 200)
        assert django_app.calls == 1  # all held, none through Django
        await asyncio.to_thread(_write)
        answers = await asyncio.gather(*repeats)

        now = await asyncio.to_thread(_version)
        assert [(a.status_code, a.json()) for a in answers] == [(200, {"version": now})] * 200
        assert django_app.calls == 1
        # The headers Django answered the first with: its security headers, no-store.
        assert answers[0].headers["x-content-type-options"] == "nosniff"
        assert answers[0].headers["cache-control"] == "no-store"
        assert answers[0].headers["content-length"] == str(len(answers[0].content))

    _serve(django_app, scenario)


def test_a_repeat_with_an_older_version_goes_to_django_and_is_answered_at_once(
    hub: ChangeHub, django_app: CountingApp, token: str
) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        before = await asyncio.to_thread(_version)
        await _first_poll(client, hub, token)
        answer = await _feed(client, token, before)
        now = await asyncio.to_thread(_version)
        assert (answer.status_code, answer.json()) == (200, {"version": now})
        assert django_app.calls == 2

    _serve(django_app, scenario)


def test_another_token_or_header_is_not_a_repeat(
    hub: ChangeHub, django_app: CountingApp, token: str
) -> None:
    other = create_token("another", ApiToken.Scope.GATEWAY)[1]

    async def scenario(client: httpx.AsyncClient) -> None:
        told = await _first_poll(client, hub, token)
        waiting = [_feed(client, other, told), _feed(client, token, told, **{"X-Extra": "1"})]
        await _until(lambda: hub.waiters == 2)
        assert django_app.calls == 3  # each went through Django, and is held
        await asyncio.to_thread(_write)
        assert [a.status_code for a in await asyncio.gather(*waiting)] == [200, 200]

    _serve(django_app, scenario)


def test_a_bad_token_with_the_same_headers_otherwise_is_refused_by_django(
    hub: ChangeHub, django_app: CountingApp, token: str
) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        told = await _first_poll(client, hub, token)
        answer = await _feed(client, token + "x", told)
        assert answer.status_code == 401
        assert django_app.calls == 2

    _serve(django_app, scenario)


def test_once_a_token_is_revoked_its_repeat_goes_to_django_and_is_refused(
    hub: ChangeHub, django_app: CountingApp, token: str
) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        told = await _first_poll(client, hub, token)
        await asyncio.to_thread(lambda: revoke_token(ApiToken.objects.get().pk))
        hub.forget_proofs()  # what the listening hub does on the revocation's notice
        answer = await _feed(client, token, told)
        assert answer.status_code == 401
        assert django_app.calls == 2

    _serve(django_app, scenario)


def test_a_proof_lasts_proof_seconds_then_django_is_asked_again(
    hub: ChangeHub, django_app: CountingApp, token: str, clock: Clock
) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        told = await _first_poll(client, hub, token)
        clock.now += PROOF_SECONDS
        waiting = _feed(client, token, told)
        await _until(lambda: hub.waiters == 1)
        assert django_app.calls == 2  # asked Django (and proven again)
        await asyncio.to_thread(_write)
        assert (await waiting).status_code == 200

    _serve(django_app, scenario)


def test_a_proof_made_under_an_earlier_epoch_is_not_kept(hub: ChangeHub) -> None:
    hub.publish((1, 1))
    epoch = hub.epoch
    hub.forget_proofs()  # a revocation heard while Django was answering
    hub.prove(b"key", epoch, 30.0, [])
    assert hub.proven(b"key", "1.1") is None
    hub.prove(b"key", hub.epoch, 30.0, [])
    assert hub.proven(b"key", "1.1") == ((1, 1), 30.0, [])


def test_a_hub_that_does_not_listen_keeps_no_proofs() -> None:
    hub = ChangeHub(listen=False, read_counters=lambda: (1, 1))
    hub.publish((1, 1))
    hub.prove(b"key", hub.epoch, 30.0, [])
    assert hub.proven(b"key", "1.1") is None


def test_a_revocation_notifies_the_change_channel_when_it_commits(token: str) -> None:
    import psycopg

    params: dict[str, Any] = dict(connections["default"].get_connection_params())
    for key in ("cursor_factory", "context"):
        params.pop(key, None)
    if connections["default"].vendor != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL's")
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANGE_CHANNEL}")
        revoke_token(ApiToken.objects.get().pk)
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=10, stop_after=1)]
    assert got == [(CHANGE_CHANNEL, TOKENS_PAYLOAD)]


def test_a_listening_hub_forgets_its_proofs_when_a_token_is_revoked(
    token: str, settings: Any
) -> None:
    if connections["default"].vendor != "postgresql":
        pytest.skip("the hub listens on PostgreSQL only")
    settings.CHANGE_FEED_RESYNC_SECONDS = 0.2  # its listener ends soon after stop()
    connections.close_all()
    hub = ChangeHub(listen=True)
    try:
        hub.wait_for_change((0, 0), 0)  # starts its listener
        asyncio.run(_until(lambda: hub.reads > 0))  # listening: proofs count from now
        version = change_feed.format_version(hub.counters or (0, 0))
        hub.prove(b"key", hub.epoch, 30.0, [])
        assert hub.proven(b"key", version) is not None

        revoke_token(ApiToken.objects.get().pk)
        connections.close_all()

        asyncio.run(_until(lambda: hub.proven(b"key", version) is None))
    finally:
        hub.stop()
