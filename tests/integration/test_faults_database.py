"""Database faults against the app served over real HTTP: a TCP proxy stands between the
server subprocess and the real PostgreSQL and refuses (a stopped database) or holds
every byte (a hung one). Gateways must get a JSON 503 within a second, never an HTML
page or a hang, and the first request after recovery must succeed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from ladder import services
from ladder.models import ApiToken, QuotaReading
from ladder.tokens import create_token
from omniroute_admin.deadline import MAX_THREADS
from tests.integration.harness import (
    Answer,
    ApiServer,
    concurrent_calls,
    database_url_via,
    happens_within,
    wait_until,
)
from tests.integration.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DEADLINE_SECONDS = 0.9
UNAVAILABLE = "The database is unavailable; retry shortly."
TOO_LATE = "The database did not answer in time; retry shortly."

CANDIDATE = {"provider": "claude", "model": "claude-sonnet-4-5", "connection_id": "claude-max-1"}
# Requests a gateway makes, reads and writes, each of which needs the database.
GATEWAY_REQUESTS: list[tuple[str, str, object]] = [
    ("GET", "/api/v1/pools/auto/subscription", None),
    ("POST", "/api/v1/pools/auto/thrifty", {"candidates": [CANDIDATE]}),
    ("GET", "/api/v1/connections/claude-max-1/status", None),
    ("POST", "/api/v1/connections/claude-max-1/readings", {"remaining_percent": 50}),
    ("GET", "/api/v1/models", None),
    ("GET", "/v1/models", None),
]


@pytest.fixture
def db_proxy(transactional_db: None) -> Iterator[TcpProxy]:
    """A proxy in front of the test database (stopped before the test's tables are
    flushed, so no connection it holds can block the flush)."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("a TCP proxy needs a database server; SQLite is a file in this process")
    proxy = TcpProxy(database.get("HOST") or "127.0.0.1", int(database.get("PORT") or 5432))
    yield proxy
    proxy.stop()


@pytest.fixture
def server(worker_env: dict[str, str], db_proxy: TcpProxy) -> Iterator[ApiServer]:
    """The app over HTTP, reaching its database only through the proxy."""
    env = dict(
        worker_env,
        DATABASE_URL=database_url_via(db_proxy.port),
        API_REQUEST_DEADLINE_SECONDS=str(DEADLINE_SECONDS),
    )
    connections.close_all()
    running = ApiServer(env)
    yield running
    db_proxy.refuse()  # requests still stuck on the hung database fail now: a quick stop
    running.stop()


@pytest.fixture
def token(transactional_db: None) -> str:
    """A gateway token and a connection with a reading, committed for the server to see."""
    services.upsert_connection("claude-max-1", services.ConnectionInput("claude", "oauth"))
    services.store_reading("claude-max-1", services.ReadingInput(remaining_percent=80.0))
    _, secret = create_token("faults-gateway", ApiToken.Scope.GATEWAY)
    return secret


def _call(server: ApiServer, token: str, method: str, path: str, body: object) -> Answer:
    return server.call(method, path, token=token, body=body, timeout=10)


def _warm_up(server: ApiServer, token: str) -> None:
    """A few requests, so the server holds open database connections before the fault."""
    for _ in range(3):
        answer = server.call("GET", "/api/v1/pools/auto/subscription", token=token)
        assert answer.status == 200, answer


def _assert_json_503(answer: Answer, detail: str) -> None:
    assert answer.status == 503, answer
    assert answer.content_type.startswith("application/json"), answer
    assert answer.json() == {"detail": detail}
    assert answer.headers.get("retry-after") == "1"


def test_a_stopped_database_answers_a_json_503_within_a_second(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    _warm_up(server, token)

    db_proxy.refuse()
    answers = {(m, p): _call(server, token, m, p, body) for m, p, body in GATEWAY_REQUESTS}

    for answer in answers.values():
        _assert_json_503(answer, UNAVAILABLE)
    print("stopped database:", {p: round(a.seconds, 3) for (_, p), a in answers.items()})


def test_the_first_request_after_a_stopped_database_returns_succeeds(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    _warm_up(server, token)
    db_proxy.refuse()
    _assert_json_503(
        _call(server, token, "GET", "/api/v1/pools/auto/subscription", None), UNAVAILABLE
    )

    db_proxy.forward()
    answer = _call(server, token, "GET", "/api/v1/pools/auto/subscription", None)

    assert answer.status == 200, answer
    assert answer.json()["auto_id"] == "auto/subscription"


def test_a_database_restarted_between_two_requests_costs_no_failed_request(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    # Given connections opened before the restart and not used while it was down,
    _warm_up(server, token)
    db_proxy.refuse()
    db_proxy.forward()

    # the first request after it finds its connection broken and opens a new one.
    answer = _call(server, token, "GET", "/api/v1/pools/auto/subscription", None)

    assert answer.status == 200, answer


def test_a_hung_database_answers_a_json_503_at_the_deadline(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    _warm_up(server, token)

    db_proxy.hang()
    answers = {(m, p): _call(server, token, m, p, body) for m, p, body in GATEWAY_REQUESTS}

    for answer in answers.values():
        _assert_json_503(answer, TOO_LATE)
        assert answer.seconds >= DEADLINE_SECONDS, answer
    print("hung database:", {p: round(a.seconds, 3) for (_, p), a in answers.items()})


def test_requests_beyond_the_stuck_threads_are_answered_at_once(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    _warm_up(server, token)
    db_proxy.hang()

    # More requests at once than there are threads to wait on the database: every one of
    # those gets stuck, and the rest find none free.
    burst = concurrent_calls(
        server.url, MAX_THREADS + 8, "GET", "/api/v1/pools/auto/subscription", token=token
    )
    after = _call(server, token, "GET", "/api/v1/connections", None)

    for answer in [*burst, after]:
        _assert_json_503(answer, TOO_LATE)

    # Which answers waited out the deadline and which were refused for want of a thread
    # is what the server logged for each (never a duration: a loaded machine is slow).
    def logged(why: str) -> int:
        return sum(why in line for line in server.log)

    wait_until(
        lambda: (
            logged("(the database did not answer)") == MAX_THREADS
            and logged("(every request thread is waiting on the database)")
            == len(burst) + 1 - MAX_THREADS
        ),
        timeout=10,
    )
    print(
        f"hung database, {len(burst)} at once: {MAX_THREADS} waited out the deadline, "
        f"{len(burst) - MAX_THREADS} and the next refused at once"
    )


@pytest.mark.parametrize("recovery", ["resumes", "restarts"])
def test_the_first_request_after_a_hung_database_recovers_succeeds(
    server: ApiServer, db_proxy: TcpProxy, token: str, recovery: str
) -> None:
    # Given requests stuck on a hung database, some on connections opened before the hang,
    _warm_up(server, token)
    db_proxy.hang()
    concurrent_calls(server.url, 4, "GET", "/api/v1/pools/auto/subscription", token=token)

    # when the database answers again (or restarts, breaking every connection),
    if recovery == "restarts":
        db_proxy.refuse()
    db_proxy.forward()
    answer = _call(server, token, "GET", "/api/v1/pools/auto/subscription", None)

    # the very next request is served.
    assert answer.status == 200, answer


def test_a_write_cut_off_by_the_deadline_still_lands_when_the_database_answers(
    server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    # A 503 at the deadline says "unknown", not "nothing happened": the write carries on
    # in its thread, so gateways retry only what is idempotent.
    _warm_up(server, token)
    db_proxy.hang()
    cut_off = _call(
        server,
        token,
        "POST",
        "/api/v1/connections/claude-max-1/readings",
        {"remaining_percent": 42.0},
    )
    _assert_json_503(cut_off, TOO_LATE)

    db_proxy.forward()

    landed = wait_until(
        lambda: QuotaReading.objects.filter(
            connection__connection_id="claude-max-1", remaining_percent=42.0
        ).count(),
        timeout=10,
    )
    assert landed == 1


# --- The dashboard cannot starve the API (issue 12) --------------------------------------

# The README's production server: gunicorn with 8 threads per process.
SERVER_THREADS = 8
# Open dashboard tabs, more than the server has threads: each polls a live part of a page
# as soon as its previous poll is answered (htmx waits 5 s; these do not).
TABS = SERVER_THREADS + 4
DASHBOARD_DEADLINE_SECONDS = 2.0
PASSWORD = "a-long-dashboard-password-1"
# The partial URLs the dashboard's pages poll, with the element each one swaps.
LIVE_PARTS = [
    ("/", "ladder-status"),
    ("/connections/", "connections-table"),
    ("/pools/", "pool-table"),
    ("/connections/claude-max-1/", "connection-status"),
]


@pytest.fixture
def production_server(worker_env: dict[str, str], db_proxy: TcpProxy) -> Iterator[ApiServer]:
    """The app as the README runs it (8 threads; every dashboard setting at its default
    but the deadline, shortened so the test is quick), behind the database proxy."""
    env = dict(
        worker_env,
        DATABASE_URL=database_url_via(db_proxy.port),
        API_REQUEST_DEADLINE_SECONDS=str(DEADLINE_SECONDS),
        DASHBOARD_REQUEST_DEADLINE_SECONDS=str(DASHBOARD_DEADLINE_SECONDS),
    )
    connections.close_all()
    running = ApiServer(env, threads=SERVER_THREADS)
    yield running
    db_proxy.refuse()
    running.stop()


def _signed_in_session(user: Any) -> str:
    """The Cookie header of a session signed in as `user`, stored in the database the
    server shares (as its login view would store it). Not through the login form: a
    successful sign-in re-hashes the password with the server's deliberately slow hasher,
    which on a loaded machine outran the dashboard's deadline, and sign-in is not what
    this test is about."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def _poll(base_url: str, cookie: str, path: str, target: str) -> Answer | None:
    """One htmx poll of a live part; None when no answer came within 10 s."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    headers = {"Cookie": cookie, "HX-Request": "true", "HX-Target": target}
    started = time.monotonic()
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
    except OSError:
        return None
    finally:
        connection.close()
    return Answer(
        response.status,
        {k.lower(): v for k, v in response.getheaders()},
        body,
        time.monotonic() - started,
    )


def test_pools_answer_a_json_503_within_a_second_while_dashboard_tabs_poll_a_hung_database(
    production_server: ApiServer, db_proxy: TcpProxy, token: str
) -> None:
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username="olga", password=PASSWORD)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    # Signed in from two browsers, each with its tabs.
    sessions = [_signed_in_session(user) for _ in range(2)]
    _warm_up(production_server, token)
    for index, (path, target) in enumerate(LIVE_PARTS):
        healthy = _poll(production_server.url, sessions[index % 2], path, target)
        assert healthy is not None
        assert healthy.status == 200, healthy

    # Given more open tabs than the server has threads, polling a hung database,
    db_proxy.hang()
    stop = threading.Event()
    answers: list[Answer | None] = []

    def tab(number: int) -> None:
        path, target = LIVE_PARTS[number % len(LIVE_PARTS)]
        while not stop.is_set():
            answers.append(_poll(production_server.url, sessions[number % 2], path, target))
            stop.wait(0.05)

    tabs = [threading.Thread(target=tab, args=(n,), daemon=True) for n in range(TABS)]
    for thread in tabs:
        thread.start()
    # (once the dashboard's threads are all stuck, the next polls are refused at once;
    # before the fix no poll was ever answered, and the tabs held every server thread)
    happens_within(lambda: any(a is not None and a.status == 503 for a in answers), 5)

    # pools (through the fast lane and through Django) still get their JSON 503 in time,
    pools: list[Answer | None] = []
    for method, path, body in GATEWAY_REQUESTS[:2] * 3:
        try:
            pools.append(_call(production_server, token, method, path, body))
        except OSError:  # the client's 10 s timeout
            pools.append(None)
            break
    stop.set()
    for thread in tabs:
        thread.join(timeout=15)

    assert all(a is not None for a in pools), f"a pool request got no answer in 10 s: {pools}"
    for answer in pools:
        assert answer is not None
        _assert_json_503(answer, TOO_LATE)
    # and every tab got the dashboard's error state: a line for the page's error box.
    assert answers
    assert all(a is not None for a in answers), "a tab got no answer in 10 s"
    for answer in answers:
        assert answer is not None
        assert answer.status == 503, answer
        assert answer.headers["hx-retarget"] == "#request-error"
        # Not answering (its deadline passed), or unavailable (a new connection's own
        # connect timeout, through the hung proxy, came first): both the error state.
        assert (
            b"The database is not answering." in answer.body
            or b"The database is unavailable." in answer.body
        ), answer
    print(
        f"hung database, {TABS} tabs on {SERVER_THREADS} threads: {len(answers)} polls "
        f"answered 503; pools in {max(a.seconds for a in pools):.3f} s or less"
    )
