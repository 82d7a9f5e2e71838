"""The dashboard's request deadline (omniroute_admin/deadline.py): dashboard requests run
on a bounded pool of their own and answer an error state when the database does not
answer, so open tabs cannot take every server thread from the API (issue 12).

A hung database is simulated in-process: every database connection opened during the
test (the pool threads' own) blocks its queries until the test releases them."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError, connections
from django.db import connection as db_connection
from django.db.backends.signals import connection_created
from django.test import Client

from omniroute_admin import deadline
from tests.integration.harness import wait_until
from tests.worlds import htmx_headers, signed_in

DEADLINE = 0.5
# A hung query gives up after this long (so a regression fails instead of hanging).
HANG_LIMIT = 5.0
NOT_ANSWERING = "The database is not answering. Live parts of this page retry every 5 s."

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def hung_database(
    settings: Any, monkeypatch: pytest.MonkeyPatch, transactional_db: None
) -> Iterator[threading.Event]:
    """The dashboard deadline on, a fresh dashboard pool, and the database hung from now
    on, until the returned event is set: the test's connection and every one opened
    (the pool threads', closed after each request)."""
    settings.DASHBOARD_REQUEST_DEADLINE_SECONDS = DEADLINE
    monkeypatch.setattr(deadline, "_pools", {})
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    release = threading.Event()

    def hang(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        release.wait(HANG_LIMIT)
        return execute(sql, params, many, context)

    def hang_new_connections(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(hang)

    # The test's own connection too: a request run on the test's thread hangs as well.
    db_connection.execute_wrappers.append(hang)
    connection_created.connect(hang_new_connections)
    try:
        yield release
    finally:
        connection_created.disconnect(hang_new_connections)
        db_connection.execute_wrappers.remove(hang)
        release.set()


def warm(client: Client) -> Client:
    """A client whose handler has loaded the middleware (60 ms or more, once), so its
    requests' timings are the server's."""
    client.handler.load_middleware()
    return client


@pytest.fixture
def viewer(transactional_db: None) -> Client:
    return warm(signed_in(Client(), "victor", "viewer"))


@pytest.fixture
def operator(transactional_db: None) -> Client:
    return warm(signed_in(Client(), "olga", "operator"))


def _all_busy(size: int) -> bool:
    pool = deadline.pool("dashboard")
    return pool.threads == size and pool.idle == 0


def timed(send: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.monotonic()
    response = send(*args, **kwargs)
    return response, time.monotonic() - started


def test_a_dashboard_poll_against_a_hung_database_gets_the_error_line_at_the_deadline(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    response, seconds = timed(viewer.get, "/", headers=htmx_headers("ladder-status"))

    assert response.status_code == 503
    assert DEADLINE <= seconds < DEADLINE + 1.0
    assert response.content.decode() == f'<span class="request-error-text">{NOT_ANSWERING}</span>'
    # Into the page's error box: the polled part keeps its content and its poll.
    assert response["HX-Retarget"] == "#request-error"
    assert response["HX-Reswap"] == "innerHTML"
    assert response["Retry-After"] == "5"
    assert response["Cache-Control"] == "no-store"
    assert response["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_page_load_against_a_hung_database_gets_a_page_that_reloads_itself(
    viewer: Client, hung_database: threading.Event
) -> None:
    response = viewer.get("/connections/")

    assert response.status_code == 503
    page = response.content.decode()
    assert '<meta http-equiv="refresh" content="5">' in page
    assert NOT_ANSWERING in page
    assert "victor" not in page  # built without the session or the user


def test_a_dashboard_write_cut_off_by_the_deadline_says_it_may_have_been_saved(
    operator: Client, hung_database: threading.Event
) -> None:
    response = operator.post(
        "/settings/update/", {"exit_cutoff_percent": "3"}, headers=htmx_headers("settings-form")
    )

    assert response.status_code == 503
    assert "your change may or may not have been saved" in response.content.decode()
    assert "refresh" not in response.content.decode()


def test_with_every_dashboard_thread_stuck_and_no_queue_the_next_request_is_answered_at_once(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    settings.DASHBOARD_MAX_THREADS = 2
    settings.DASHBOARD_QUEUE_LENGTH = 0
    stuck: list[Any] = []

    tabs = [warm(Client()) for _ in range(2)]
    for tab in tabs:
        tab.cookies = viewer.cookies
    threads = [threading.Thread(target=lambda t=t: stuck.append(t.get("/pools/"))) for t in tabs]
    for thread in threads:
        thread.start()
    # Both pool threads are taken once both requests are handed to them.
    wait_until(lambda: _all_busy(2), timeout=10)

    response, seconds = timed(viewer.get, "/", headers=htmx_headers("ladder-status"))
    for thread in threads:
        thread.join()

    assert response.status_code == 503
    assert seconds < DEADLINE / 2
    assert [r.status_code for r in stuck] == [503, 503]


def _queued() -> int:
    return deadline.pool("dashboard").waiting


def _tabs(viewer: Client, count: int) -> list[Client]:
    tabs = [warm(Client()) for _ in range(count)]
    for tab in tabs:
        tab.cookies = viewer.cookies
    return tabs


def test_a_burst_of_eight_dashboard_requests_on_four_threads_is_queued_and_served_whole(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    # The "hung" database here is only held until the burst has arrived: the first four
    # requests hold every thread, the other four must queue (once: refused at once).
    settings.DASHBOARD_MAX_THREADS = 4
    settings.DASHBOARD_QUEUE_LENGTH = 4
    settings.DASHBOARD_QUEUE_WAIT_SECONDS = HANG_LIMIT * 2
    settings.DASHBOARD_REQUEST_DEADLINE_SECONDS = HANG_LIMIT * 2
    answers: dict[int, int] = {}

    def load(number: int, tab: Client) -> None:
        answers[number] = tab.get("/", headers=htmx_headers("ladder-status")).status_code

    threads = [
        threading.Thread(target=load, args=(number, tab))
        for number, tab in enumerate(_tabs(viewer, 8))
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: _all_busy(4) and _queued() == 4, timeout=HANG_LIMIT)
    hung_database.set()  # the database answers: the four running finish, the queue drains
    for thread in threads:
        thread.join()

    assert sorted(answers.values()) == [200] * 8


def test_a_request_beyond_the_full_queue_is_refused_without_waiting_and_the_queue_then_served(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    settings.DASHBOARD_MAX_THREADS = 1
    settings.DASHBOARD_QUEUE_LENGTH = 1
    settings.DASHBOARD_QUEUE_WAIT_SECONDS = HANG_LIMIT * 2
    settings.DASHBOARD_REQUEST_DEADLINE_SECONDS = HANG_LIMIT * 2
    answers: dict[str, int] = {}

    def load(name: str, tab: Client) -> None:
        answers[name] = tab.get("/pools/").status_code

    stuck, queued = _tabs(viewer, 2)
    threads = [
        threading.Thread(target=load, args=("stuck", stuck)),
        threading.Thread(target=load, args=("queued", queued)),
    ]
    threads[0].start()
    wait_until(lambda: _all_busy(1), timeout=HANG_LIMIT)
    threads[1].start()
    wait_until(lambda: _queued() == 1, timeout=HANG_LIMIT)

    beyond = viewer.get("/", headers=htmx_headers("ladder-status"))
    still_queued = _queued()  # so `beyond` did not wait its turn: it was refused
    hung_database.set()
    for thread in threads:
        thread.join()

    assert beyond.status_code == 503
    assert NOT_ANSWERING in beyond.content.decode()
    assert still_queued == 1
    assert answers == {"stuck": 200, "queued": 200}


def test_a_queued_request_gets_the_error_state_once_its_wait_passes_and_leaves_the_queue(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    settings.DASHBOARD_MAX_THREADS = 1
    settings.DASHBOARD_QUEUE_LENGTH = 1
    settings.DASHBOARD_QUEUE_WAIT_SECONDS = DEADLINE / 2
    assert deadline.pool("dashboard").submit(hung_database.wait) is not None
    assert _all_busy(1)

    response = viewer.get("/", headers=htmx_headers("ladder-status"))

    assert response.status_code == 503
    assert NOT_ANSWERING in response.content.decode()
    assert _queued() == 0


def test_static_files_and_healthz_never_wait_on_the_dashboard_threads(
    viewer: Client, hung_database: threading.Event, settings: Any
) -> None:
    settings.DASHBOARD_MAX_THREADS = 1
    assert deadline.pool("dashboard").submit(hung_database.wait) is not None
    assert _all_busy(1)

    # A balancer's health check, without a session (a session cookie would be read from
    # the database by the session middleware); static files are served before it.
    health, health_seconds = timed(warm(Client()).get, "/healthz")
    style, style_seconds = timed(viewer.get, "/static/omniroute.css")

    assert (health.status_code, style.status_code) == (200, 200)
    assert health_seconds < DEADLINE / 2
    assert style_seconds < DEADLINE / 2


def test_readyz_and_metrics_against_a_hung_database_answer_their_own_503(
    hung_database: threading.Event, transactional_db: None
) -> None:
    client = Client()

    ready = client.get("/readyz")
    metrics = client.get("/metrics")

    assert ready.status_code == 503
    assert ready.json() == {"status": "unavailable", "down": {"database": "DeadlinePassed"}}
    assert metrics.status_code == 503
    assert metrics.content == b"# metrics unavailable: DeadlinePassed\n"


@pytest.mark.django_db
def test_a_database_error_on_the_dashboard_is_the_error_state_not_a_500() -> None:
    viewer = signed_in(Client(raise_request_exception=False), "victor", "viewer")

    def refuse(*args: Any) -> None:
        raise OperationalError("connection refused")

    with db_connection.execute_wrapper(refuse):
        poll = viewer.get("/", headers=htmx_headers("ladder-status"))
        page = viewer.get("/")

    assert (poll.status_code, page.status_code) == (503, 503)
    assert poll.content.decode() == (
        '<span class="request-error-text">The database is unavailable. '
        "Live parts of this page retry every 5 s.</span>"
    )
    assert poll["HX-Retarget"] == "#request-error"
    assert "The database is unavailable." in page.content.decode()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DASHBOARD_MAX_THREADS", "0", "DASHBOARD_MAX_THREADS must be at least 1."),
        ("DASHBOARD_QUEUE_LENGTH", "-1", "DASHBOARD_QUEUE_LENGTH must be 0 (no queue) or more."),
        (
            "DASHBOARD_QUEUE_WAIT_SECONDS",
            "-1",
            "DASHBOARD_QUEUE_WAIT_SECONDS must be 0 (no wait) or more.",
        ),
        (
            "DASHBOARD_REQUEST_DEADLINE_SECONDS",
            "-1",
            "DASHBOARD_REQUEST_DEADLINE_SECONDS must be 0 (off) or more.",
        ),
        (
            "DECISION_CACHE_MAX_BYTES",
            "-1",
            "DECISION_CACHE_MAX_BYTES must be 0 (no cache) or more.",
        ),
    ],
)
def test_a_bad_bound_stops_start_up(name: str, value: str, message: str) -> None:
    setup = (
        "import django, os; "
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'omniroute_admin.settings'); "
        "django.setup()"
    )
    result = subprocess.run(
        [sys.executable, "-c", setup],
        cwd=ROOT,
        env={**_environ(), name: value},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert message in result.stderr


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


def test_a_pool_whose_threads_have_not_moved_for_a_whole_wait_queues_no_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    pool = deadline.Pool(1, "stuck", queue=4)
    assert pool.submit(release.wait) is not None
    moved = pool.moved
    later = type("Clock", (), {"monotonic": staticmethod(lambda: moved + 2.0)})
    monkeypatch.setattr(deadline, "time", later)

    refused = pool.submit(release.wait, wait=2.0)
    release.set()

    assert refused is None
    assert pool.waiting == 0
