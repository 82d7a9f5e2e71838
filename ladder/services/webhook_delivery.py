"""Delivering a notification to a webhook: signing it and sending each attempt, at most
one at a time, to the address its host was checked to resolve to (never following a
redirect), then recording the answer: delivered, due again after the backoff, or failed.
The deliveries are created by `ladder/services/notifications.py`; the targets' checks are
in `ladder/services/webhooks.py`. See docs/NOTIFICATIONS.md."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils.http import urlencode

from ladder.core import webhooks as rules
from ladder.core.notifications import Kind
from ladder.core.webhooks import TargetRefused
from ladder.crypto import (
    CredentialDecryptError,
    CredentialKeyMissing,
    decrypt_credential,
)
from ladder.models import NotificationDelivery
from ladder.services.deadline_http import deadline_transport
from ladder.services.webhooks import checked_target, clock

logger = logging.getLogger(__name__)

USER_AGENT = "OmniRoute-Admin-Webhooks/1"
# An attempt holds its delivery this long; it outlasts the task's hard time limit, so a
# live attempt is never taken over and a dead one is retried after it.
ATTEMPT_LEASE = timedelta(seconds=100)
# A retry message may arrive this early (clocks of two processes) and still count as due.
EARLY_TOLERANCE = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class SendResult:
    status_code: int | None
    error: str
    is_refused: bool = False


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    is_sent: bool  # whether this call made an HTTP attempt
    why: str
    retry_in: float | None = None  # seconds until the next attempt is due


def post(url: str, body: bytes, headers: dict[str, str]) -> SendResult:
    """One POST to a checked address, never following a redirect, ended by
    NOTIFY_ATTEMPT_DEADLINE_SECONDS whatever the receiver does (services.deadline_http);
    the answer's body is not read. Errors name neither the URL's path nor any header."""
    try:
        target, address = checked_target(url)
    except TargetRefused as error:
        return SendResult(None, str(error), is_refused=True)
    except OSError:
        return SendResult(None, "The host does not resolve.")
    seconds = settings.NOTIFY_HTTP_TIMEOUT_SECONDS
    timeout = httpx.Timeout(connect=seconds, read=seconds, write=seconds, pool=seconds)
    # Each read is bounded by the timeout, the whole attempt by its deadline.
    transport = deadline_transport(settings.NOTIFY_ATTEMPT_DEADLINE_SECONDS)
    # The request goes to the checked address; the name travels in Host and in TLS (SNI
    # and certificate check), so the certificate must still match the name.
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request_headers = {**headers, "Host": target.host_header, "User-Agent": USER_AGENT}
    try:
        # trust_env off: a proxy from the environment would reach the name, not the
        # checked address.
        with (
            httpx.Client(
                timeout=timeout, follow_redirects=False, trust_env=False, transport=transport
            ) as client,
            client.stream(
                "POST",
                target.url_for(address),
                content=body,
                headers=request_headers,
                extensions=extensions,
            ) as response,
        ):
            status = response.status_code
    except httpx.TimeoutException:
        return SendResult(None, "Timed out.")
    except (httpx.HTTPError, OSError) as error:
        text = " ".join(str(error).split())
        for private in {url, target.path}:
            if len(private) > 1:
                text = text.replace(private, "[url]")
        return SendResult(None, f"{type(error).__name__}: {text}"[:300])
    if 300 <= status < 400:
        return SendResult(status, f"Answered a redirect ({status}); redirects are not followed.")
    return SendResult(status, "" if 200 <= status < 300 else f"Answered {status}.")


def dashboard_path(kind: Kind, details: Mapping[str, Any]) -> str:
    """The dashboard page of a notification's subject: the connection's page, the pool,
    the spend page (budgets), the overview (readings), the notifications (a test)."""
    connection_id = details.get("connection_id")
    if isinstance(connection_id, str) and connection_id:
        return reverse("ladder:connection", args=[connection_id])
    auto_id = details.get("auto_id")
    if isinstance(auto_id, str) and auto_id:
        return f"{reverse('ladder:pools')}?{urlencode({'auto_id': auto_id})}"
    if kind is Kind.BUDGET_CROSSED:
        return reverse("ladder:spend")
    if kind is Kind.TEST:
        return reverse("ladder:notifications")
    return reverse("ladder:overview")


def message_of(delivery: NotificationDelivery) -> rules.Message:
    """The content of a delivery (the same on every attempt), linked to the dashboard
    page of its subject under DASHBOARD_BASE_URL."""
    kind = Kind(delivery.kind)
    return rules.Message(
        delivery_id=str(delivery.delivery_id),
        event_id=delivery.event_key,
        kind=kind,
        occurred_at=delivery.occurred_at,
        summary=delivery.summary,
        details=delivery.details,
        dashboard_url=settings.DASHBOARD_BASE_URL + dashboard_path(kind, delivery.details),
    )


def _finish(delivery: NotificationDelivery, status: str, error: str) -> None:
    delivery.status = status
    delivery.error = error[:300]
    delivery.next_attempt_at = None
    delivery.lease_until = None
    delivery.save(update_fields=["status", "error", "next_attempt_at", "lease_until"])


def deliver(delivery_id: str, *, now: datetime | None = None) -> DeliveryOutcome:
    """Make the next attempt of one delivery, if it is due and no other attempt is in
    flight (re-checked under the row's lock, so a repeated task message sends nothing);
    then record the answer: delivered, due again after the backoff, or failed."""
    now = now or clock()
    Status = NotificationDelivery.Status
    with transaction.atomic():
        delivery = (
            NotificationDelivery.objects.select_for_update(of=("self",))
            .select_related("webhook")
            .filter(delivery_id=delivery_id)
            .first()
        )
        if delivery is None:
            return DeliveryOutcome(False, "no such delivery")
        if delivery.status in (Status.DELIVERED, Status.FAILED):
            return DeliveryOutcome(False, f"already {delivery.status}")
        if delivery.status == Status.SENDING and (
            delivery.lease_until is not None and delivery.lease_until > now
        ):
            return DeliveryOutcome(False, "an attempt is in flight")
        if (
            delivery.status == Status.PENDING
            and delivery.next_attempt_at is not None
            and delivery.next_attempt_at > now + EARLY_TOLERANCE
        ):
            return DeliveryOutcome(False, "not due yet")
        webhook = delivery.webhook
        if webhook is None:
            _finish(delivery, Status.FAILED, "The webhook was deleted.")
            return DeliveryOutcome(False, "the webhook was deleted")
        if not webhook.is_active and delivery.kind != Kind.TEST:
            _finish(delivery, Status.FAILED, "The webhook is switched off.")
            return DeliveryOutcome(False, "the webhook is switched off")
        try:
            secret = decrypt_credential(webhook.secret_ciphertext)
        except (CredentialKeyMissing, CredentialDecryptError):
            _finish(delivery, Status.FAILED, "The webhook's secret cannot be decrypted.")
            return DeliveryOutcome(False, "the secret cannot be decrypted")
        delivery.status = Status.SENDING
        delivery.attempts += 1
        delivery.lease_until = now + ATTEMPT_LEASE
        delivery.last_attempt_at = now
        delivery.save(update_fields=["status", "attempts", "lease_until", "last_attempt_at"])
        attempt = delivery.attempts
        url, body_format, webhook_pk = webhook.url, webhook.format, webhook.pk
        message = message_of(delivery)
    body = rules.body_for(body_format, message)
    headers = rules.signed_headers(message, body, secret, int(clock().timestamp()), attempt)
    result = post(url, body, headers)
    finished = clock()
    verdict = rules.attempt_verdict(
        result.status_code,
        is_refused=result.is_refused,
        attempt=attempt,
        max_attempts=settings.NOTIFY_MAX_ATTEMPTS,
    )
    retry_in = None
    with transaction.atomic():
        delivery = (
            NotificationDelivery.objects.select_for_update().filter(delivery_id=delivery_id).first()
        )
        if delivery is None or delivery.status != Status.SENDING or delivery.attempts != attempt:
            return DeliveryOutcome(True, "another attempt took over meanwhile")
        delivery.status_code = result.status_code
        delivery.error = result.error[:300]
        delivery.lease_until = None
        if verdict is rules.Verdict.DELIVERED:
            delivery.status = Status.DELIVERED
            delivery.delivered_at = finished
            delivery.next_attempt_at = None
        elif verdict is rules.Verdict.RETRY:
            retry_in = rules.retry_delay_seconds(
                attempt,
                base_seconds=settings.NOTIFY_RETRY_BASE_SECONDS,
                max_seconds=settings.NOTIFY_RETRY_MAX_SECONDS,
            )
            delivery.status = Status.PENDING
            delivery.next_attempt_at = finished + timedelta(seconds=retry_in)
        else:
            delivery.status = Status.FAILED
            delivery.next_attempt_at = None
        delivery.save(
            update_fields=[
                "status",
                "status_code",
                "error",
                "lease_until",
                "delivered_at",
                "next_attempt_at",
            ]
        )
    logger.info(
        "notification %s to webhook %s, attempt %d: %s%s",
        delivery_id,
        webhook_pk,
        attempt,
        verdict.value,
        f" ({result.error})" if result.error else "",
    )
    return DeliveryOutcome(True, f"attempt {attempt}: {verdict.value}", retry_in)
