"""The broker down for a while, then back: a TCP proxy stands between the real Redis and
both the API server and a real worker with beat, and refuses every connection for a
while. Pools never touch the broker, a refresh request fails fast and says nothing was
queued, readiness names the broker, and after it returns the worker resumes polling
without a burst of catch-up polls."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.db import connections

from ladder import services
from ladder.models import ApiToken, QuotaReading
from ladder.tokens import create_token
from tests.integration.harness import (
    ApiServer,
    ScriptedUpstream,
    Worker,
    drop_broker_queue,
    log_count,
    wait_until,
)
from tests.integration.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The worker polls a connection once its reading is this old; the beat looks every second.
REFRESH_INTERVAL_SECONDS = 3
# Between the beat noticing a reading is due and the upstream call: a task hand-off and
# a few queries on this machine (a duplicate poll would come milliseconds after).
HANDOFF_SECONDS = 0.25
# The embedded beat logs this for each run it could not send.
BEAT_SEND_FAILED = "Message Error"


def _broker_address() -> tuple[str, int]:
    parts = urlsplit(settings.CELERY_BROKER_URL)
    return parts.hostname or "127.0.0.1", parts.port or 6379


def _broker_url_via(port: int) -> str:
    parts = urlsplit(settings.CELERY_BROKER_URL)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{port}" if credentials else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture
def broker_proxy(transactional_db: None) -> Iterator[TcpProxy]:
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("a TCP proxy needs a broker server (Redis); the filesystem broker is a folder")
    proxy = TcpProxy(*_broker_address())
    yield proxy
    proxy.stop()


@pytest.fixture
def queue(broker_proxy: TcpProxy) -> Iterator[str]:
    """A queue of this test's own, deleted afterwards with whatever is left in it."""
    name = f"faults-{uuid.uuid4().hex[:12]}"
    yield name
    drop_broker_queue(settings.CELERY_BROKER_URL, name)


@pytest.fixture
def proxied_env(worker_env: dict[str, str], broker_proxy: TcpProxy, queue: str) -> dict[str, str]:
    """The worker's environment, reaching the broker only through the proxy."""
    return dict(
        worker_env,
        CELERY_BROKER_URL=_broker_url_via(broker_proxy.port),
        CELERY_TASK_DEFAULT_QUEUE=queue,
        QUOTA_REFRESH_INTERVAL_SECONDS=str(REFRESH_INTERVAL_SECONDS),
    )


@pytest.fixture
def server(proxied_env: dict[str, str]) -> Iterator[ApiServer]:
    connections.close_all()
    running = ApiServer(proxied_env)
    yield running
    running.stop()


@pytest.fixture
def proxied_worker(proxied_env: dict[str, str], tmp_path: Path) -> Iterator[Worker]:
    connections.close_all()
    running = Worker(proxied_env, tmp_path)
    yield running
    running.stop()
    records = [line for line in running.log if line.startswith("[")]  # no tracebacks
    print("worker log (last records):", *records[-60:], sep="\n")  # shown when a test fails


@pytest.fixture
def token(transactional_db: None) -> str:
    _, secret = create_token("faults-gateway", ApiToken.Scope.GATEWAY)
    return secret


def _claude_payload(utilization: float) -> dict[str, Any]:
    resets_at = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
    return {
        "five_hour": {"utilization": utilization, "resets_at": resets_at},
        "seven_day": {"utilization": 10.0, "resets_at": resets_at},
    }


def _plan_connection() -> str:
    connection_id = f"claude-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        connection_id,
        services.ConnectionInput(
            "claude", "oauth", quota_source="claude", credential="sk-ant-oat01-test-token"
        ),
    )
    services.save_candidate(
        services.CandidateInput("claude", "claude-sonnet-4-5", (), 0, connection_id, None)
    )
    return connection_id


def _checked_at(connection_id: str, since: datetime) -> list[datetime]:
    return list(
        QuotaReading.objects.filter(connection__connection_id=connection_id, checked_at__gt=since)
        .order_by("checked_at")
        .values_list("checked_at", flat=True)
    )


def test_pools_keep_answering_while_the_broker_is_down(
    server: ApiServer, broker_proxy: TcpProxy, token: str
) -> None:
    connection_id = _plan_connection()
    pool = {"candidates": [{"provider": "claude", "model": "m", "connection_id": connection_id}]}

    broker_proxy.refuse()
    get = server.call("GET", "/api/v1/pools/auto/subscription", token=token)
    post = server.call("POST", "/api/v1/pools/auto/thrifty", token=token, body=pool)

    assert (get.status, post.status) == (200, 200), (get, post)
    assert [c["connection_id"] for c in post.json()["candidates"]] == [connection_id]
    print(f"broker down: GET pool {get.seconds:.3f} s, POST pool {post.seconds:.3f} s")


def test_a_refresh_request_answers_a_json_503_quickly_while_the_broker_is_down(
    server: ApiServer, broker_proxy: TcpProxy, token: str, queue: str
) -> None:
    queued = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    connection_id = _plan_connection()
    path = f"/api/v1/connections/{connection_id}/refresh"
    before = server.call("POST", path, token=token)  # the server now holds a broker connection
    assert before.status == 202, before
    assert queued.llen(queue) == 1

    broker_proxy.refuse()
    during = [server.call("POST", path, token=token) for _ in range(3)]
    assert queued.llen(queue) == 1  # nothing half-queued
    broker_proxy.forward()
    after = server.call("POST", path, token=token)

    for answer in during:
        assert answer.status == 503, answer
        assert answer.content_type.startswith("application/json"), answer
        # The broker's own 503, not the request deadline's: the refusal came before the
        # deadline (no retry loop waited on the dead broker), whatever the machine's speed.
        assert answer.json() == {"detail": "The task broker is unavailable; nothing was queued."}
    assert after.status == 202, after
    assert queued.llen(queue) == 2
    print("broker down: refresh", [round(a.seconds, 3) for a in during], "s")


def test_readiness_names_the_broker_while_it_is_down(
    server: ApiServer, broker_proxy: TcpProxy
) -> None:
    assert server.call("GET", "/readyz").status == 200

    broker_proxy.refuse()
    during = server.call("GET", "/readyz")
    broker_proxy.forward()
    after = server.call("GET", "/readyz")

    assert during.status == 503, during
    body = during.json()
    assert body["status"] == "unavailable"
    assert list(body["down"]) == ["broker"]
    assert after.status == 200, after
    print(f"broker down: /readyz {during.seconds:.3f} s: {body}")


def _past_line(log: list[str], start: int, *needles: str) -> int | None:
    """Where the log goes on after the first line from `start` on that contains every
    needle (the index after it), or None while there is no such line."""
    for index in range(start, len(log)):
        if all(needle in log[index] for needle in needles):
            return index + 1
    return None


def _wait_for_a_quiet_moment(worker: Worker, connection_id: str) -> None:
    """Wait for a poll of the connection, then for the next beat run (which finds nothing
    due): right after it, no task runs for about a second."""
    polled = wait_until(
        lambda: _past_line(worker.log, 0, f"refresh {connection_id}: polled"), timeout=20
    )
    wait_until(
        lambda: _past_line(worker.log, polled, "enqueue_due_refreshes_task[", "succeeded"),
        timeout=10,
    )


def test_after_the_broker_returns_the_worker_resumes_without_a_burst_of_catch_up_polls(
    upstream: ScriptedUpstream, proxied_worker: Worker, broker_proxy: TcpProxy
) -> None:
    # Given a connection the worker polls every few seconds through the proxied broker,
    upstream.script = lambda path: (200, _claude_payload(40.0))
    connection_id = _plan_connection()
    _wait_for_a_quiet_moment(proxied_worker, connection_id)

    # when the broker refuses every connection for longer than the refresh interval
    # (the beat fails to send more runs than that),
    log_start = len(proxied_worker.log)
    broker_proxy.refuse()

    def failed_beat_runs() -> int:
        return log_count(proxied_worker.log, BEAT_SEND_FAILED, start=log_start)

    wait_until(lambda: failed_beat_runs() >= 1, timeout=30)
    calls_while_down = upstream.call_count()
    wait_until(lambda: failed_beat_runs() >= REFRESH_INTERVAL_SECONDS + 2, timeout=30)
    assert upstream.call_count() == calls_while_down  # nothing polled while the broker was down

    # and then comes back,
    up_at = datetime.now(UTC)
    broker_proxy.forward()

    # then the worker resumes: a new reading lands, and the next one an interval later,
    readings = wait_until(
        lambda: len(r := _checked_at(connection_id, up_at)) >= 2 and r, timeout=40
    )
    with upstream.lock:
        calls = [at for at, _ in upstream.calls if at > up_at.timestamp()]
    # never two polls of the connection closer together than the refresh interval.
    call_gaps = [later - earlier for earlier, later in pairwise(calls)]
    reading_gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(readings)]
    assert len(calls) >= 2
    assert min(call_gaps) >= REFRESH_INTERVAL_SECONDS - HANDOFF_SECONDS, call_gaps
    assert min(reading_gaps) >= REFRESH_INTERVAL_SECONDS - HANDOFF_SECONDS, readings
    print(
        f"broker back: first reading {(readings[0] - up_at).total_seconds():.2f} s after; "
        f"gaps between polls {[round(g, 2) for g in call_gaps]} s"
    )


def test_a_broker_lost_while_a_refresh_runs_does_not_stop_the_worker(
    upstream: ScriptedUpstream, proxied_worker: Worker, broker_proxy: TcpProxy
) -> None:
    # Given a poll held open by the usage endpoint,
    arrived = threading.Event()
    release = threading.Event()

    def script(path: str) -> tuple[int, Any]:
        arrived.set()
        release.wait(timeout=20)
        return 200, _claude_payload(40.0)

    upstream.script = script
    connection_id = _plan_connection()
    wait_until(arrived.is_set, timeout=20)

    # when the broker goes away while it runs, and comes back,
    broker_proxy.refuse()
    release.set()
    wait_until(lambda: _checked_at(connection_id, datetime.min.replace(tzinfo=UTC)), timeout=10)
    up_at = datetime.now(UTC)
    broker_proxy.forward()

    # then the worker is still there (omniroute_admin/celery.py works around kombu 5.7
    # crashing it here), and it polls again.
    wait_until(
        lambda: proxied_worker.process.poll() is not None or _checked_at(connection_id, up_at),
        timeout=30,
    )
    assert proxied_worker.process.poll() is None, "the worker exited"
