"""Notifications end to end: a real Celery worker with its beat on the real broker, the
test database, and a real HTTP receiver on 127.0.0.1 that verifies every signature. The
receiver goes down and comes back: the notification is delivered once, not lost, not
duplicated. Every wait polls for an observable outcome, with a timeout."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from billing import services as billing_services
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.core import webhooks as rules
from ladder.models import NotificationDelivery
from tests.integration.harness import Worker, happens_within, wait_until
from tests.ladder.factories import WEBHOOK_SECRET, make_webhook

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DELIVERED = NotificationDelivery.Status.DELIVERED


@dataclass(frozen=True)
class Request:
    """One POST as the receiver saw it, and whether its signature verified."""

    delivery_id: str
    kind: str
    attempt: int
    body: dict[str, Any]
    is_signed: bool


class Receiver:
    """A webhook receiver on 127.0.0.1 that checks each request's signature with the
    shared secret, as a real receiver would; it can be stopped and started again on the
    same port (a receiver that is down, then back)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.start()

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                is_signed = rules.verify_signature(
                    WEBHOOK_SECRET,
                    timestamp_header=self.headers.get("X-OmniRoute-Timestamp", ""),
                    signature_header=self.headers.get("X-OmniRoute-Signature", ""),
                    body=body,
                    now_unix=time.time(),
                )
                document = json.loads(body)
                with receiver.lock:
                    receiver.requests.append(
                        Request(
                            delivery_id=self.headers.get("X-OmniRoute-Delivery", ""),
                            kind=document["kind"],
                            attempt=int(self.headers.get("X-OmniRoute-Attempt", "0")),
                            body=document,
                            is_signed=is_signed,
                        )
                    )
                self.send_response(204 if is_signed else 401)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/omniroute"

    def received(self) -> list[Request]:
        with self.lock:
            return list(self.requests)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.stop()


@pytest.fixture
def notify_env(worker_env: dict[str, str]) -> dict[str, str]:
    """The worker's environment: evaluate every second, retry quickly, allow loopback."""
    return {
        **worker_env,
        "NOTIFY_EVALUATE_SECONDS": "1",
        "NOTIFY_RETRY_BASE_SECONDS": "0.5",
        "NOTIFY_RETRY_MAX_SECONDS": "1",
        "NOTIFY_MAX_ATTEMPTS": "20",
        "NOTIFY_ALLOW_PRIVATE_TARGETS": "true",
        # Nothing here is about an empty auto/subscription: keep it out of the way.
        "NOTIFY_SUBSCRIPTION_EMPTY_SECONDS": "86400",
    }


@pytest.fixture
def start_worker(notify_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    started: list[Worker] = []

    def start() -> Worker:
        connections.close_all()  # the worker must not wait on this test's transaction
        worker = Worker(notify_env, tmp_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def plan_reading(remaining_percent: float) -> None:
    services.store_reading(
        "claude-max-1",
        services.ReadingInput(
            remaining_percent=remaining_percent, checked_at=datetime.now(UTC) - timedelta(seconds=1)
        ),
    )


def a_plan_connection() -> None:
    # A transactional test empties the tables, the seeded catalog included: curate the
    # plan again when an earlier test took it away.
    if not BillingCatalogEntry.objects.filter(provider="claude", auth_type="oauth").exists():
        billing_services.create_catalog_entry(
            billing_services.CatalogInput(
                "claude", "oauth", "subscription", "hard-stop", "plan windows stop at the limit"
            ),
            actor="tests",
        )
    services.upsert_connection("claude-max-1", services.ConnectionInput("claude", "oauth"))


def evaluations(worker: Worker) -> int:
    return sum(
        1
        for line in list(worker.log)
        if "Task ladder.tasks.evaluate_notifications_task[" in line and " succeeded " in line
    )


def await_on(worker: Worker, predicate: Any, timeout: float = 30) -> Any:
    """`wait_until`, failing with the worker's log (what it did instead)."""
    try:
        return wait_until(predicate, timeout=timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}\n" + "\n".join(worker.log[-60:])) from None


def deliveries() -> list[NotificationDelivery]:
    return list(NotificationDelivery.objects.order_by("id"))


def test_a_drop_out_is_delivered_once_signed_and_not_repeated_while_it_holds(
    receiver: Receiver, start_worker: Any
) -> None:
    with override_settings(NOTIFY_ALLOW_PRIVATE_TARGETS=True):
        make_webhook(url=receiver.url(), kinds=("plan_exhausted", "plan_back"))
    a_plan_connection()
    plan_reading(1.0)
    worker = start_worker()

    (request,) = wait_until(receiver.received, timeout=30)
    delivered = wait_until(lambda: [d for d in deliveries() if d.status == DELIVERED], timeout=30)
    # The state holds: three more evaluations notify nothing new.
    seen = evaluations(worker)
    wait_until(lambda: evaluations(worker) >= seen + 3, timeout=30)

    assert request.is_signed is True
    assert (request.kind, request.attempt, request.body["event_id"]) == (
        "plan_exhausted",
        1,
        "plan:claude-max-1#1",
    )
    assert request.delivery_id == request.body["id"] == str(delivered[0].delivery_id)
    assert len(receiver.received()) == 1
    assert [(d.kind, d.attempts, d.status_code) for d in deliveries()] == [
        ("plan_exhausted", 1, 204)
    ]

    plan_reading(80.0)

    wait_until(lambda: len(receiver.received()) == 2, timeout=30)
    back = receiver.received()[1]
    assert (back.kind, back.body["event_id"], back.is_signed) == (
        "plan_back",
        "plan:claude-max-1#2",
        True,
    )


def test_a_receiver_that_is_down_then_back_gets_the_notification_once(
    receiver: Receiver, start_worker: Any
) -> None:
    with override_settings(NOTIFY_ALLOW_PRIVATE_TARGETS=True):
        make_webhook(url=receiver.url(), kinds=("plan_exhausted",))
    receiver.stop()  # down: nothing listens on its port
    a_plan_connection()
    plan_reading(1.0)
    worker = start_worker()

    # Attempts fail and are retried with backoff; the delivery is kept, not dropped.
    failing = await_on(
        worker, lambda: [d for d in deliveries() if d.attempts >= 2 and d.status == "pending"]
    )
    assert failing[0].error.startswith("ConnectError: ")
    assert failing[0].status_code is None

    receiver.start()  # back, on the same port

    wait_until(lambda: [d for d in deliveries() if d.status == DELIVERED], timeout=30)
    # Give any duplicate every chance to show up: more evaluations (which re-queue lost
    # deliveries), and a window longer than the longest backoff.
    seen = evaluations(worker)
    wait_until(lambda: evaluations(worker) >= seen + 3, timeout=30)
    assert not happens_within(lambda: len(receiver.received()) > 1, seconds=2.0)

    (request,) = receiver.received()
    (delivery,) = deliveries()
    assert request.is_signed is True
    assert request.delivery_id == str(delivery.delivery_id)
    assert (delivery.status, delivery.status_code, delivery.error) == (DELIVERED, 204, "")
    assert request.attempt == delivery.attempts
    assert delivery.attempts >= 3
