"""Database faults against the app served over real HTTP: a TCP proxy stands between the
server subprocess and the real PostgreSQL and refuses (a stopped database) or holds
every byte (a hung one). Gateways must get a JSON 503 within a second, never an HTML
page or a hang, and the first request after recovery must succeed."""

from __future__ import annotations

from collections.abc import Iterator

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
    wait_until,
)
from tests.integration.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DEADLINE_SECONDS = 0.9
# What a gateway may wait for an answer while the database is sick.
BOUND_SECONDS = 1.0
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
    assert answer.seconds < BOUND_SECONDS, answer


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
    at_deadline = sorted(a.seconds for a in burst if a.seconds >= DEADLINE_SECONDS)
    at_once = sorted(a.seconds for a in burst if a.seconds < DEADLINE_SECONDS)
    assert len(at_deadline) == MAX_THREADS
    assert max(at_once) < DEADLINE_SECONDS / 2
    assert after.seconds < DEADLINE_SECONDS / 2  # the stuck threads are still stuck
    print(
        f"hung database, {len(burst)} at once: {len(at_deadline)} in {at_deadline[-1]:.3f} s "
        f"or less, {len(at_once)} in {at_once[-1]:.3f} s or less; the next in {after.seconds:.3f} s"
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
    assert answer.seconds < BOUND_SECONDS, answer


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
