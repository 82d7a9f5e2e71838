"""The change feed `GET /api/v1/changes` (omniroute_admin/change_feed.py, ladder.api.feed):
its contract through the WSGI application as a server calls it, and the per-process hub
that wakes its waiters."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder.api.feed import HOLD_HEADER
from omniroute_admin import change_feed
from omniroute_admin.change_feed import ChangeFeedWait, ChangeHub
from tests.ladder.factories import make_token
from tests.test_fast_lane import Answer, CountingDjango, call, django_app  # noqa: F401

pytestmark = pytest.mark.django_db

FEED = "/api/v1/changes"


class FakeHub:
    """Stands in for the process's hub: answers every wait at once with `answer`,
    recording what it was asked (so a 30 s timeout costs no time in a test)."""

    def __init__(self, answer: tuple[int, int] | None = None) -> None:
        self.answer = answer
        self.asked: list[tuple[tuple[int, int], float]] = []
        self.epoch = 0

    def proven(self, key: bytes, after: str) -> None:
        return None  # every request goes to Django

    def prove(self, key: bytes, epoch: int, wait: float, headers: Any) -> None:
        return None

    def wait_for_change(self, after: tuple[int, int], timeout: float) -> tuple[int, int] | None:
        self.asked.append((after, timeout))
        return self.answer

    async def await_change(
        self, after: tuple[int, int], timeout: float, until: Any = None
    ) -> tuple[int, int] | None:
        return self.wait_for_change(after, timeout)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    fake = FakeHub()
    monkeypatch.setattr(change_feed, "get_hub", lambda: fake)
    return fake


@pytest.fixture
def app(django_app: CountingDjango) -> ChangeFeedWait:  # noqa: F811
    return ChangeFeedWait(django_app)


@pytest.fixture
def token() -> str:
    return make_token()


def _current() -> str:
    config, state = billing_services.change_counters()
    return f"{config}.{state}"


def _feed(app: ChangeFeedWait, query: str, token: str | None) -> Answer:
    return call(app, f"{FEED}?{query}" if query else FEED, token)


def test_without_a_token_the_feed_is_a_json_401(app: ChangeFeedWait, hub: FakeHub) -> None:
    answer = _feed(app, "wait=5", None)
    assert (answer.code, answer.header("Content-Type")) == (401, "application/json; charset=utf-8")
    assert json.loads(answer.body) == {"detail": "Unauthorized"}
    assert hub.asked == []


def test_an_unknown_token_is_a_401(app: ChangeFeedWait, hub: FakeHub) -> None:
    assert _feed(app, "", "omr_not-a-token").code == 401


@pytest.mark.parametrize(
    "query",
    ["wait=31", "wait=-1", "wait=abc", "wait=1.5", "after=abc", "after=1.2.3", "after=1."],
)
def test_a_bad_wait_or_after_is_a_422(
    app: ChangeFeedWait, hub: FakeHub, token: str, query: str
) -> None:
    answer = _feed(app, query, token)
    assert answer.code == 422
    [error] = json.loads(answer.body)["detail"]
    assert error["loc"][0] == "query"
    assert hub.asked == []


def test_without_after_the_feed_answers_the_current_version_at_once(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    answer = _feed(app, "wait=30", token)
    assert answer.code == 200
    assert json.loads(answer.body) == {"version": _current()}
    assert hub.asked == []


def test_an_other_version_is_answered_at_once(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    answer = _feed(app, "after=999.999&wait=30", token)
    assert json.loads(answer.body) == {"version": _current()}
    assert hub.asked == []


def test_wait_0_answers_the_current_version_at_once(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    current = _current()
    answer = _feed(app, f"after={current}&wait=0", token)
    assert json.loads(answer.body) == {"version": current}
    assert hub.asked == []


def test_the_current_version_waits_and_times_out_with_the_same_version(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    config, state = billing_services.change_counters()
    answer = _feed(app, f"after={config}.{state}&wait=30", token)
    assert hub.asked == [((config, state), 30.0)]
    assert answer.code == 200
    assert answer.body == json.dumps({"version": f"{config}.{state}"}).encode()
    assert answer.header("Content-Length") == str(len(answer.body))
    assert answer.header(HOLD_HEADER) is None  # internal: never sent
    assert answer.header("Cache-Control") == "no-store"


def test_a_change_during_the_wait_answers_the_new_version(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    config, state = billing_services.change_counters()
    hub.answer = (config, state + 1)
    answer = _feed(app, f"after={config}.{state}&wait=10", token)
    assert answer.body == json.dumps({"version": f"{config}.{state + 1}"}).encode()
    assert answer.header("Content-Length") == str(len(answer.body))


def test_the_version_is_the_config_and_state_counters(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    config, state = billing_services.change_counters()
    billing_services.bump(ChangeCounter.STATE)
    assert json.loads(_feed(app, "", token).body) == {"version": f"{config}.{state + 1}"}
    billing_services.bump(ChangeCounter.CONFIG)
    assert json.loads(_feed(app, "", token).body) == {"version": f"{config + 1}.{state + 1}"}


def test_the_feed_costs_the_token_query_alone(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    _feed(app, "", token)  # the token's first use records it (once a minute)
    current = _current()
    with CaptureQueriesContext(db_connection) as queries:
        answer = _feed(app, f"after={current}&wait=5", token)
    assert answer.code == 200
    assert len(queries) == 1


def test_the_held_answer_is_the_view_s_own_without_the_wrapper(
    django_app: CountingDjango,  # noqa: F811
    hub: FakeHub,
    token: str,
) -> None:
    """Without the server layer the view's answer carries the hold for it to act on."""
    current = _current()
    answer = call(django_app, f"{FEED}?after={current}&wait=7", token)
    assert answer.header(HOLD_HEADER) == f"{current} 7"


# --- the hub ------------------------------------------------------------------------------


class Counters:
    """A counter source the hub polls, moved by the test."""

    def __init__(self, value: tuple[int, int]) -> None:
        self.value = value

    def __call__(self) -> tuple[int, int]:
        return self.value


@pytest.fixture
def polled() -> Iterator[tuple[ChangeHub, Counters]]:
    source = Counters((3, 7))
    hub = ChangeHub(listen=False, read_counters=source, poll_seconds=0.01)
    yield hub, source
    hub.stop()


def test_a_waiting_thread_wakes_with_the_moved_version(
    polled: tuple[ChangeHub, Counters],
) -> None:
    hub, source = polled
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(hub.wait_for_change((3, 7), 30)))
    waiter.start()
    source.value = (3, 8)
    waiter.join(timeout=10)
    assert got == [(3, 8)]


def test_a_wait_without_a_change_times_out_with_none(
    polled: tuple[ChangeHub, Counters],
) -> None:
    hub, _ = polled
    assert hub.wait_for_change((3, 7), 0.02) is None


def test_a_reading_older_than_after_does_not_wake(polled: tuple[ChangeHub, Counters]) -> None:
    """A hub not caught up yet (its reading predates the request's) is no change."""
    hub, source = polled
    source.value = (3, 6)
    assert hub.wait_for_change((3, 7), 0.02) is None


def test_fifty_coroutines_wake_on_one_change_with_one_poller(
    polled: tuple[ChangeHub, Counters],
) -> None:
    hub, source = polled

    async def scenario() -> list[Any]:
        waiters = [asyncio.ensure_future(hub.await_change((3, 7), 30)) for _ in range(50)]
        await asyncio.sleep(0)  # let every waiter start waiting
        source.value = (4, 7)
        return await asyncio.wait_for(asyncio.gather(*waiters), timeout=10)

    assert asyncio.run(scenario()) == [(4, 7)] * 50
    assert [t.name for t in threading.enumerate()].count("change-feed") == 1


def test_a_coroutine_wait_times_out_with_none(polled: tuple[ChangeHub, Counters]) -> None:
    hub, _ = polled
    assert asyncio.run(hub.await_change((3, 7), 0.02)) is None


# --- the ASGI server layer (omniroute_admin/asgi.py) ----------------------------------------


def _asgi(path: str, token: str | None = None, root_path: str = "", **kwargs: Any) -> Any:
    """One request through the ASGI application, as uvicorn would make it."""
    import httpx

    from omniroute_admin.asgi import application

    async def send() -> Any:
        transport = httpx.ASGITransport(app=application, root_path=root_path)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return await c.request(kwargs.pop("method", "GET"), path, headers=headers, **kwargs)

    return asyncio.run(send())


@pytest.fixture(autouse=True)
def _pool_threads_close_their_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ASGI layer's threads end each request with Django's connection housekeeping:
    with CONN_MAX_AGE 0 they close, so no open connection outlives the test database."""
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


@pytest.mark.django_db(transaction=True)
def test_asgi_serves_every_other_path_through_the_wsgi_app(hub: FakeHub) -> None:
    answer = _asgi("/healthz")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})
    assert answer.headers["x-content-type-options"] == "nosniff"  # Django's middleware ran


@pytest.mark.django_db(transaction=True)
def test_asgi_holds_a_feed_answer_and_sends_the_new_version(hub: FakeHub) -> None:
    token = make_token()
    config, state = billing_services.change_counters()
    hub.answer = (config + 1, state)
    answer = _asgi(f"{FEED}?after={config}.{state}&wait=30", token)
    assert hub.asked == [((config, state), 30.0)]
    assert answer.status_code == 200
    assert answer.content == json.dumps({"version": f"{config + 1}.{state}"}).encode()
    assert answer.headers["content-length"] == str(len(answer.content))
    assert HOLD_HEADER.lower() not in answer.headers


@pytest.mark.usefixtures("restored_script_prefix")
def test_under_a_path_prefix_the_feed_is_held_and_its_hold_header_never_sent(
    app: ChangeFeedWait, hub: FakeHub, token: str
) -> None:
    config, state = billing_services.change_counters()
    hub.answer = (config, state + 1)
    answer = call(app, f"{FEED}?after={config}.{state}&wait=2", token, SCRIPT_NAME="/omr")
    assert hub.asked == [((config, state), 2.0)]
    assert (answer.code, json.loads(answer.body)) == (200, {"version": f"{config}.{state + 1}"})
    assert answer.header(HOLD_HEADER) is None


def test_an_answer_that_asks_no_hold_passes_through_untouched(app: ChangeFeedWait) -> None:
    answer = call(app, "/healthz")
    assert (answer.code, json.loads(answer.body)) == (200, {"status": "ok"})


@pytest.mark.django_db(transaction=True)
def test_asgi_under_a_root_path_holds_the_feed_without_leaking_its_hold_header(
    hub: FakeHub,
) -> None:
    token = make_token()
    config, state = billing_services.change_counters()
    hub.answer = (config, state + 1)
    answer = _asgi(f"/omr{FEED}?after={config}.{state}&wait=2", token, root_path="/omr")
    assert hub.asked == [((config, state), 2.0)]
    assert (answer.status_code, answer.json()) == (200, {"version": f"{config}.{state + 1}"})
    assert HOLD_HEADER.lower() not in answer.headers


@pytest.mark.django_db(transaction=True)
def test_asgi_feed_errors_are_the_api_s(hub: FakeHub) -> None:
    assert _asgi(f"{FEED}?wait=5").status_code == 401
    assert _asgi(f"{FEED}?wait=99", make_token()).status_code == 422
    assert hub.asked == []


@pytest.mark.django_db(transaction=True)
def test_asgi_refuses_a_declared_body_over_the_limit_without_reading_it(
    settings: Any, hub: FakeHub
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10
    answer = _asgi("/api/v1/spend", make_token(), method="POST", content=b"x" * 11)
    assert answer.status_code == 413
