"""A worker killed in the middle of a refresh, and readings left to age once it is gone.

The usage endpoint holds the poll open while the test SIGKILLs the process making it
(found through /proc by its connection to the endpoint). Tasks acknowledge late and are
rejected on worker loss, and a refresh is idempotent: the lease on the connection row
and `requested_at` make sure the reading is neither lost nor taken twice."""

from __future__ import annotations

import os
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from ladder import services
from ladder.models import ApiToken, QuotaReading
from ladder.tokens import create_token
from omniroute_admin.celery import app as celery_app
from tests.integration.harness import (
    ApiServer,
    ScriptedUpstream,
    Worker,
    descendant_pids,
    drop_broker_queue,
    is_gone,
    log_count,
    pid_connected_to,
    unacked_messages,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Longer than a poll can take here (the usage endpoint times out after 2 s in these
# tests), short enough that a dead worker's lease lapses within the test.
LEASE_SECONDS = 3
ANSWERED = "a newer reading already exists"


@pytest.fixture(autouse=True)
def _needs_proc() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("finding the process that makes a poll reads /proc (Linux)")


@pytest.fixture
def queue(transactional_db: None) -> Iterator[str]:
    """A queue of this test's own, deleted afterwards with whatever is left in it."""
    name = f"faults-{uuid.uuid4().hex[:12]}"
    yield name
    if settings.CELERY_BROKER_URL.startswith("redis://"):
        drop_broker_queue(settings.CELERY_BROKER_URL, name)


@pytest.fixture
def env(worker_env: dict[str, str], queue: str) -> dict[str, str]:
    return dict(
        worker_env, CELERY_TASK_DEFAULT_QUEUE=queue, QUOTA_REFRESH_LEASE_SECONDS=str(LEASE_SECONDS)
    )


@pytest.fixture
def workers(env: dict[str, str], tmp_path: Path) -> Iterator[list[Worker]]:
    """Starts workers on demand (`start()`); every one is stopped after the test."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()
        records = [line for line in worker.log if line.startswith("[")]
        print("worker log (last records):", *records[-50:], sep="\n")  # shown on failure


def _start(workers: list[Worker], env: dict[str, str], tmp: Path) -> Worker:
    connections.close_all()  # the test's own connection holds nothing a worker waits on
    folder = tmp / f"worker-{len(workers)}"
    folder.mkdir()
    worker = Worker(env, folder)
    workers.append(worker)
    return worker


class HeldFirstCall:
    """A usage-endpoint script that holds the first call open until released and answers
    every call with a plan at 40 % used."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def __call__(self, path: str) -> tuple[int, Any]:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.arrived.set()
            self.release.wait(timeout=30)
        resets_at = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
        return 200, {
            "five_hour": {"utilization": 40.0, "resets_at": resets_at},
            "seven_day": {"utilization": 10.0, "resets_at": resets_at},
        }


def _due_connection() -> str:
    """A plan connection whose last reading is old enough to be refreshed now."""
    connection_id = f"claude-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        connection_id,
        services.ConnectionInput(
            "claude", "oauth", quota_source="claude", credential="sk-ant-oat01-test-token"
        ),
    )
    services.store_reading(
        connection_id,
        services.ReadingInput(
            remaining_percent=80.0, checked_at=datetime.now(UTC) - timedelta(minutes=10)
        ),
    )
    return connection_id


def _readings(connection_id: str) -> list[QuotaReading]:
    return list(
        QuotaReading.objects.filter(connection__connection_id=connection_id).order_by("checked_at")
    )


def _poller(worker: Worker, upstream: ScriptedUpstream) -> int:
    """The worker process whose poll is in flight (connected to the usage endpoint)."""
    port = upstream.server.server_address[1]
    return wait_until(
        lambda: pid_connected_to(port, descendant_pids(worker.process.pid)), timeout=5
    )


def _redelivered(worker: Worker) -> list[str]:
    """Ids of refresh tasks the worker received more than once (after a worker loss)."""
    received = [
        line.split("refresh_connection_task[", 1)[1].split("]", 1)[0]
        for line in list(worker.log)
        if "refresh_connection_task[" in line and line.endswith(" received")
    ]
    return sorted({task_id for task_id in received if received.count(task_id) > 1})


def _settle(worker: Worker) -> None:
    """Let two more beat runs finish: any refresh queued before them has been taken off
    the queue by then. This bounds the wait for a duplicate poll that must not come."""
    start = len(worker.log)
    wait_until(
        lambda: (
            sum(
                "enqueue_due_refreshes_task[" in line and " succeeded " in line
                for line in worker.log[start:]
            )
            >= 2
        ),
        timeout=15,
    )


def test_a_pool_process_killed_mid_poll_loses_no_reading_and_takes_none_twice(
    upstream: ScriptedUpstream, env: dict[str, str], workers: list[Worker], tmp_path: Path
) -> None:
    # Given a due connection whose poll the usage endpoint holds open,
    script = HeldFirstCall()
    upstream.script = script
    connection_id = _due_connection()
    worker = _start(workers, env, tmp_path)
    assert script.arrived.wait(20), "the beat did not poll the due connection"

    # when the pool process making that poll is killed,
    child = _poller(worker, upstream)
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: is_gone(child), timeout=5)
    script.release.set()

    # then its task comes back (acks late, rejected on worker loss) and runs to its end
    # with at most one poll between it and the beat: the dead poll's lease still holds
    # (it declines) and the beat's next run polls once the lease lapsed, or, on a slow
    # machine, it comes back after the lapse and polls itself, and the beat finds the
    # reading fresh. Either way exactly one reading and one poll are added.
    wait_until(lambda: len(_readings(connection_id)) == 2, timeout=20)
    redelivered = wait_until(lambda: _redelivered(worker), timeout=15)
    wait_until(
        lambda: all(
            log_count(worker.log, f"refresh_connection_task[{task_id}] succeeded")
            for task_id in redelivered
        ),
        timeout=15,
    )
    _settle(worker)
    readings = _readings(connection_id)
    assert len(readings) == 2
    assert (readings[1].status, readings[1].remaining_percent) == ("SAFE", 60.0)
    assert upstream.call_count() == 2  # the killed poll and the one that replaced it
    assert log_count(worker.log, f"refresh {connection_id}: polled") == 1


def test_a_worker_killed_mid_poll_and_restarted_loses_no_reading_and_takes_none_twice(
    upstream: ScriptedUpstream,
    env: dict[str, str],
    workers: list[Worker],
    tmp_path: Path,
    queue: str,
) -> None:
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("parking unacknowledged messages until a visibility timeout is Redis's")
    # Given a due connection whose poll the usage endpoint holds open,
    script = HeldFirstCall()
    upstream.script = script
    connection_id = _due_connection()
    first = _start(workers, env, tmp_path)
    assert script.arrived.wait(20), "the beat did not poll the due connection"

    # when the whole worker (main process, pool processes and beat) is killed at once,
    family = [first.process.pid, *descendant_pids(first.process.pid)]
    for pid in family:
        os.kill(pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    wait_until(lambda: all(is_gone(pid) for pid in family), timeout=10)
    script.release.set()
    # (its task stays parked, unacknowledged, until the broker's visibility timeout)
    parked = {
        tag: message
        for tag, message in unacked_messages(settings.CELERY_BROKER_URL, queue).items()
        if message["task"] == "ladder.tasks.refresh_connection_task" and message["eta"] is None
    }
    assert {m["kwargs"]["connection_id"] for m in parked.values()} == {connection_id}
    killed = min(parked, key=lambda tag: parked[tag]["kwargs"]["requested_at"])

    # and a new worker starts, then its beat refreshes the connection once the dead
    # worker's lease lapses: exactly one reading is added.
    second = _start(workers, env, tmp_path)
    wait_until(lambda: len(_readings(connection_id)) == 2, timeout=20)
    _settle(second)
    assert len(_readings(connection_id)) == 2
    assert upstream.call_count() == 2

    # When the broker hands the parked task back (after the visibility timeout; done here
    # at once with kombu's own restore), it finds the newer reading and does nothing.
    with celery_app.connection_for_write() as broker:
        channel: Any = broker.default_channel  # kombu's Redis channel
        channel.qos.restore_by_tag(killed, leftmost=True)
    wait_until(lambda: log_count(second.log, f"refresh {connection_id}: {ANSWERED}"), timeout=10)
    assert len(_readings(connection_id)) == 2
    assert upstream.call_count() == 2


# --- readings age while the worker is gone ------------------------------------------------

MAX_STATE_AGE_SECONDS = 8


def _curate(provider: str, auth_type: str, billing: str, overage: str) -> None:
    from billing import services as billing_services
    from billing.models import BillingCatalogEntry

    BillingCatalogEntry.objects.filter(provider=provider, auth_type=auth_type).delete()
    billing_services.create_catalog_entry(
        billing_services.CatalogInput(provider, auth_type, billing, overage, "integration test"),
        actor="test",
    )


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[ApiServer]:
    connections.close_all()
    running = ApiServer(env)
    yield running
    running.stop()


def test_with_the_worker_gone_subscription_drops_the_aged_reading_and_thrifty_keeps_order(
    upstream: ScriptedUpstream,
    env: dict[str, str],
    workers: list[Worker],
    tmp_path: Path,
    server: ApiServer,
) -> None:
    # Given a plan connection polled by the worker and a metered key,
    _curate("claude", "oauth", "subscription", "hard-stop")
    _curate("openai", "api_key", "metered", "meters-to-paid")
    _, operator = create_token("faults-operator", ApiToken.Scope.OPERATOR)
    _, gateway = create_token("faults-gateway", ApiToken.Scope.GATEWAY)
    tuning = server.call("GET", "/api/v1/settings/ladder", token=gateway).json()
    tuning["max_state_age_seconds"] = MAX_STATE_AGE_SECONDS
    assert server.call("PUT", "/api/v1/settings/ladder", token=operator, body=tuning).status == 200
    upstream.script = HeldFirstCall()
    upstream.script.release.set()
    plan = f"claude-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        plan,
        services.ConnectionInput(
            "claude", "oauth", quota_source="claude", credential="sk-ant-oat01-test-token"
        ),
    )
    services.upsert_connection("openai-key", services.ConnectionInput("openai", "api_key"))
    # the gateway's own ranking puts the metered key first
    pool = {
        "candidates": [
            {"id": 1, "provider": "openai", "model": "gpt-4o", "connection_id": "openai-key"},
            {"id": 2, "provider": "claude", "model": "claude-sonnet-4-5", "connection_id": plan},
        ]
    }
    worker = _start(workers, env, tmp_path)
    wait_until(lambda: _readings(plan), timeout=20)

    def decide(auto_id: str) -> dict[str, Any]:
        answer = server.call("POST", f"/api/v1/pools/{auto_id}", token=gateway, body=pool)
        assert answer.status == 200, answer
        decision: dict[str, Any] = answer.json()
        return decision

    assert [c["id"] for c in decide("auto/subscription")["candidates"]] == [2]

    # when the worker is gone and its last reading ages past max_state_age_seconds,
    worker.stop()
    last_checked = _readings(plan)[-1].checked_at
    stale = wait_until(
        lambda: (d := decide("auto/subscription"))["candidates"] == [] and d, timeout=20
    )

    # then auto/subscription excludes it as stale (fails closed) while auto/thrifty still
    # offers the plan first and the metered key after it (fails open, keeps the ladder).
    reasons = {e["connection_id"]: e["reason"] for e in stale["excluded"]}
    assert reasons == {plan: "quota_stale", "openai-key": "metered"}
    assert (datetime.now(UTC) - last_checked).total_seconds() > MAX_STATE_AGE_SECONDS
    thrifty = decide("auto/thrifty")
    assert [c["id"] for c in thrifty["candidates"]] == [2, 1]
    assert thrifty["candidates"][0]["rung"] == "subscription"
    assert thrifty["excluded"] == []
