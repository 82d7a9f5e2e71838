"""The change feed across real server processes on PostgreSQL (omniroute_admin/
change_feed.py): one write committed in this process wakes every client long-polling
on every server, and fifty waiting clients leave the pool endpoint answering.

PostgreSQL only: the servers learn of the write from `LISTEN`/`NOTIFY` (SQLite has no
server to share; its poll of the counters is tested in tests/test_change_feed.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction

from billing import services as billing_services
from billing.services.counters import CHANGE_CHANNEL
from ladder import services
from ladder.models import ApiToken
from ladder.tokens import create_token, revoke_token
from tests.integration.harness import ROOT, Answer, http_call, server_env, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ASGI = ["omniroute_admin.asgi:application", "-k", "omniroute_admin.worker.Worker"]
GTHREAD = ["omniroute_admin.wsgi:application", "--threads", "6"]


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the change feed's cross-process wake-up is LISTEN/NOTIFY: PostgreSQL")


class FeedServer:
    """One gunicorn worker process (`ASGI` or `GTHREAD`) on a port the kernel picks,
    with these environment `settings`."""

    def __init__(self, kind: list[str], name: str, **settings: str) -> None:
        self.name = name
        self.url = ""
        self.log: list[str] = []
        self.listening = threading.Event()
        # Longer than any wait here: only the NOTIFY of the write can wake one.
        env = server_env(CHANGE_FEED_RESYNC_SECONDS="600", **settings)
        argv = [sys.executable, "-m", "gunicorn", *kind, "--bind", "127.0.0.1:0"]
        argv += ["--workers", "1", "--graceful-timeout", "2", "--log-level", "info"]
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if not self.listening.is_set() and "Listening at: " in line:
                self.url = line.split("Listening at: ", 1)[1].split()[0]
                self.listening.set()

    def wait_ready(self) -> None:
        def is_up() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n" + "\n".join(self.log[-40:]))
            if not self.listening.is_set():
                return False
            try:
                return http_call(self.url, "GET", "/healthz", timeout=1).status == 200
            except OSError:
                return False

        wait_until(is_up, timeout=60, interval=0.1)

    def waiters(self) -> float:
        """This process's `omniroute_change_feed_waiters` gauge."""
        text = http_call(self.url, "GET", "/metrics").body.decode()
        line = next(x for x in text.splitlines() if x.startswith("omniroute_change_feed_waiters "))
        return float(line.split()[1])

    def stop(self) -> None:
        import signal

        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def token() -> str:
    return create_token("gateway", ApiToken.Scope.GATEWAY)[1]


def _start(*kinds: tuple[list[str], str]) -> list[FeedServer]:
    connections.close_all()  # no transaction of this test holds up the servers
    servers = [FeedServer(kind, name) for kind, name in kinds]
    try:
        for server in servers:
            server.wait_ready()
    except BaseException:
        _stop(servers)
        raise
    return servers


def _stop(servers: list[FeedServer]) -> None:
    for server in servers:
        server.stop()
        print(f"--- {server.name} ---\n" + "\n".join(server.log[-30:]))


@pytest.fixture
def two_asgi_and_one_gthread() -> Iterator[list[FeedServer]]:
    servers = _start((ASGI, "asgi-a"), (ASGI, "asgi-b"), (GTHREAD, "gthread"))
    yield servers
    _stop(servers)


@pytest.fixture
def asgi() -> Iterator[FeedServer]:
    servers = _start((ASGI, "asgi"))
    yield servers[0]
    _stop(servers)


def _version() -> str:
    config, state = billing_services.change_counters()
    return f"{config}.{state}"


def _long_polls(server: FeedServer, count: int, token: str, after: str) -> list[threading.Thread]:
    """`count` clients long-polling `server` (30 s), their answers into `server.answers`."""
    server.answers = []  # type: ignore[attr-defined]

    def poll() -> None:
        answer = http_call(
            server.url, "GET", f"/api/v1/changes?after={after}&wait=30", token=token, timeout=40
        )
        server.answers.append(answer)  # type: ignore[attr-defined]

    threads = [threading.Thread(target=poll, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def _wait_for_waiters(server: FeedServer, count: int) -> None:
    wait_until(lambda: server.waiters() == count, timeout=30, interval=0.1)


def _a_write_through_the_services() -> None:
    with transaction.atomic():
        services.upsert_connection(
            "feed-key",
            services.ConnectionInput(
                provider="openai",
                auth_type="apikey",
                label="a key",
                active=True,
            ),
        )
    connections.close_all()


def test_one_committed_write_wakes_every_client_waiting_on_every_server(
    two_asgi_and_one_gthread: list[FeedServer], token: str
) -> None:
    before = _version()
    connections.close_all()
    counts = {"asgi-a": 10, "asgi-b": 10, "gthread": 3}
    threads = []
    for server in two_asgi_and_one_gthread:
        threads += _long_polls(server, counts[server.name], token, before)
    for server in two_asgi_and_one_gthread:  # every client is being held, not yet answered
        _wait_for_waiters(server, counts[server.name])

    _a_write_through_the_services()
    after = _version()
    connections.close_all()

    for thread in threads:
        thread.join(timeout=20)
    assert after != before
    for server in two_asgi_and_one_gthread:
        answers: list[Answer] = server.answers  # type: ignore[attr-defined]
        assert [(a.status, a.json()) for a in answers] == [(200, {"version": after})] * counts[
            server.name
        ], server.name


def test_with_fifty_clients_waiting_the_pool_endpoint_answers_every_request(
    asgi: FeedServer, token: str
) -> None:
    before = _version()
    connections.close_all()
    waiting = _long_polls(asgi, 50, token, before)
    _wait_for_waiters(asgi, 50)

    pools = [
        http_call(asgi.url, "GET", "/api/v1/pools/auto/thrifty", token=token) for _ in range(40)
    ]
    assert [answer.status for answer in pools] == [200] * 40
    assert asgi.waiters() == 50  # still all held while the pools were answered

    _a_write_through_the_services()
    for thread in waiting:
        thread.join(timeout=20)
    assert [a.status for a in asgi.answers] == [200] * 50  # type: ignore[attr-defined]


def test_a_bump_notifies_the_channel_when_its_transaction_commits() -> None:
    import psycopg

    params: dict[str, Any] = dict(connections["default"].get_connection_params())
    for key in ("cursor_factory", "context"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANGE_CHANNEL}")
        with transaction.atomic():
            billing_services.bump("state")
            billing_services.bump("config")
        got = [n.channel for n in listener.notifies(timeout=10, stop_after=1)]
    assert got == [CHANGE_CHANNEL]


def test_a_revoked_token_s_next_long_poll_is_refused_though_its_repeats_skip_django(
    asgi: FeedServer, token: str
) -> None:
    other = create_token("another gateway", ApiToken.Scope.GATEWAY)[1]
    revoked = ApiToken.objects.get(name="gateway").pk
    told = _version()
    connections.close_all()
    for _ in range(2):  # through Django, then its repeat (held without Django)
        waiting = _long_polls(asgi, 1, token, told)
        _wait_for_waiters(asgi, 1)
        _a_write_through_the_services()
        waiting[0].join(timeout=20)
        [answer] = asgi.answers  # type: ignore[attr-defined]
        assert answer.status == 200
        told = answer.json()["version"]

    watcher = _long_polls(asgi, 1, other, told)
    _wait_for_waiters(asgi, 1)
    revoke_token(revoked)
    _a_write_through_the_services()  # notified after the revocation, so heard after it
    watcher[0].join(timeout=20)
    [seen] = asgi.answers  # type: ignore[attr-defined]
    assert seen.status == 200

    refused = http_call(
        asgi.url, "GET", f"/api/v1/changes?after={seen.json()['version']}&wait=30", token=token
    )
    assert refused.status == 401
