"""Webhooks, the shell: validated, audited webhook writes, their targets' checks, the test
notification and the dashboard's reads. The pure rules live in `ladder/core/webhooks.py`;
the deliveries are created by `ladder/services/notifications.py` and sent by
`ladder/services/webhook_delivery.py`.

Webhook targets are checked when saved and again before every attempt: the host is
resolved, every address it resolves to is checked, and the request connects to the
checked address itself (so a DNS answer that changes in between cannot redirect it), with
redirects never followed. See docs/NOTIFICATIONS.md."""

from __future__ import annotations

import logging
import secrets
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from ipaddress import ip_address
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from billing import services as billing_services
from ladder.core import webhooks as rules
from ladder.core.notifications import SUBSCRIBABLE_KINDS, Kind
from ladder.core.webhooks import IPAddress, TargetRefused
from ladder.crypto import (
    encrypt_credential,
)
from ladder.models import NotificationDelivery, Webhook
from ladder.services import notifications

logger = logging.getLogger(__name__)

NAME_MAX_LENGTH = 100
SECRET_MIN_LENGTH = 16
SECRET_MAX_LENGTH = 200


class NotFound(Exception):
    """No webhook with that id."""


def clock() -> datetime:
    """The shell's clock: the notifications shell's (one seam, pinned by tests)."""
    return notifications.clock()


def generate_secret() -> str:
    """A new random signing secret (shown once, then only its ciphertext is kept)."""
    return "whsec_" + secrets.token_urlsafe(32)


# --- targets ------------------------------------------------------------------------------


def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address the host resolves to, in the resolver's order (a seam for tests)."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def checked_target(url: str) -> tuple[rules.Target, IPAddress]:
    """The target and the one address to connect to; TargetRefused when the URL or any
    address its host resolves to is refused, OSError when it does not resolve."""
    target = rules.parse_target(url)
    addresses = resolve_host(target.host, target.port)
    refusal = rules.addresses_refusal(
        addresses, allow_private=settings.NOTIFY_ALLOW_PRIVATE_TARGETS
    )
    if refusal is not None:
        raise TargetRefused(f"The host {target.host} is refused: {refusal}.")
    return target, addresses[0]


def target_label(url: str) -> str:
    """What pages, logs and the audit trail show of a URL: its origin, never the path
    (a Slack webhook's path is its secret)."""
    try:
        target = rules.parse_target(url)
    except TargetRefused:
        return "(unreadable URL)"
    return target.origin + ("/…" if target.path != "/" else "/")


# --- webhooks: validated, audited writes --------------------------------------------------


@dataclass(frozen=True, slots=True)
class WebhookInput:
    name: str
    url: str | None  # None on an update: keep the stored URL
    format: str
    kinds: tuple[str, ...]
    is_active: bool
    secret: str | None  # None: generate one (create) or keep it (update)


def webhook_snapshot(webhook: Webhook) -> dict[str, Any]:
    """The audited fields of a webhook: never the secret, and the URL's origin only."""
    return {
        "name": webhook.name,
        "target": target_label(webhook.url),
        "format": webhook.format,
        "kinds": list(webhook.kinds),
        "is_active": webhook.is_active,
    }


def validate_webhook(data: WebhookInput) -> None:
    """Field errors as a ValidationError (the URL is resolved and checked here)."""
    errors: dict[str, list[str]] = {}
    name = data.name.strip()
    if not name or len(name) > NAME_MAX_LENGTH:
        errors["name"] = [f"Give a name of 1 to {NAME_MAX_LENGTH} characters."]
    if data.format not in Webhook.Format.values:
        errors["format"] = ["Choose json or slack."]
    known = {kind.value for kind in SUBSCRIBABLE_KINDS}
    if not data.kinds or any(kind not in known for kind in data.kinds):
        errors["kinds"] = ["Choose at least one kind of notification."]
    if data.secret is not None and not (SECRET_MIN_LENGTH <= len(data.secret) <= SECRET_MAX_LENGTH):
        errors["secret"] = [
            f"A secret has {SECRET_MIN_LENGTH} to {SECRET_MAX_LENGTH} characters "
            "(or leave it empty)."
        ]
    if data.url is not None:
        try:
            checked_target(data.url.strip())
        except TargetRefused as error:
            errors["url"] = [str(error)]
        except OSError:
            errors["url"] = ["The host does not resolve: check the name."]
    if errors:
        raise ValidationError(errors)


def _ordered_kinds(kinds: Iterable[str]) -> list[str]:
    wanted = set(kinds)
    return [kind.value for kind in SUBSCRIBABLE_KINDS if kind.value in wanted]


def create_webhook(data: WebhookInput, *, actor: str) -> tuple[Webhook, str | None]:
    """Create a webhook (audited); returns it and the generated secret, to show once
    (None when the operator entered one). ValidationError, Conflict, CredentialKeyMissing."""
    validate_webhook(data)
    assert data.url is not None
    secret = data.secret if data.secret is not None else generate_secret()
    ciphertext = encrypt_credential(secret)
    try:
        with transaction.atomic():
            webhook = Webhook.objects.create(
                name=data.name.strip(),
                url=data.url.strip(),
                format=data.format,
                kinds=_ordered_kinds(data.kinds),
                is_active=data.is_active,
                secret_ciphertext=ciphertext,
                updated_by=actor,
            )
            billing_services.record_audit(
                target_type="webhook",
                target_id=webhook.pk,
                action="create",
                actor=actor,
                before=None,
                after=webhook_snapshot(webhook),
            )
    except IntegrityError:
        raise billing_services.Conflict(
            f"A webhook named {data.name.strip()!r} exists already; nothing was saved."
        ) from None
    logger.info("webhook %s created by %s", webhook.pk, actor)
    return webhook, None if data.secret is not None else secret


def update_webhook(webhook_id: int, data: WebhookInput, *, actor: str) -> Webhook:
    """Replace a webhook's settings (audited); a None URL or secret keeps the stored one."""
    validate_webhook(data)
    ciphertext = encrypt_credential(data.secret) if data.secret is not None else None
    try:
        with transaction.atomic():
            webhook = Webhook.objects.select_for_update().filter(pk=webhook_id).first()
            if webhook is None:
                raise NotFound(f"No webhook {webhook_id}.")
            before = webhook_snapshot(webhook)
            webhook.name = data.name.strip()
            if data.url is not None:
                webhook.url = data.url.strip()
            webhook.format = data.format
            webhook.kinds = _ordered_kinds(data.kinds)
            webhook.is_active = data.is_active
            if ciphertext is not None:
                webhook.secret_ciphertext = ciphertext
            webhook.updated_by = actor
            webhook.save()
            after = webhook_snapshot(webhook)
            if ciphertext is not None:
                before["secret"], after["secret"] = "[previous]", "[replaced]"
            billing_services.record_audit(
                target_type="webhook",
                target_id=webhook.pk,
                action="update",
                actor=actor,
                before=before,
                after=after,
            )
    except IntegrityError:
        raise billing_services.Conflict(
            f"A webhook named {data.name.strip()!r} exists already; nothing was saved."
        ) from None
    return webhook


def rotate_webhook_secret(webhook_id: int, *, actor: str) -> tuple[Webhook, str]:
    """Replace the secret with a new random one (audited); returns it, to show once."""
    secret = generate_secret()
    ciphertext = encrypt_credential(secret)
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().filter(pk=webhook_id).first()
        if webhook is None:
            raise NotFound(f"No webhook {webhook_id}.")
        webhook.secret_ciphertext = ciphertext
        webhook.updated_by = actor
        webhook.save(update_fields=["secret_ciphertext", "updated_by", "updated_at"])
        billing_services.record_audit(
            target_type="webhook",
            target_id=webhook.pk,
            action="update",
            actor=actor,
            before={"secret": "[previous]"},
            after={"secret": "[rotated]"},
        )
    return webhook, secret


def delete_webhook(webhook_id: int, *, actor: str) -> Webhook:
    """Delete a webhook (audited); its log rows stay, and its pending deliveries fail."""
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().filter(pk=webhook_id).first()
        if webhook is None:
            raise NotFound(f"No webhook {webhook_id}.")
        before = webhook_snapshot(webhook)
        pk = webhook.pk
        webhook.delete()
        billing_services.record_audit(
            target_type="webhook",
            target_id=pk,
            action="delete",
            actor=actor,
            before=before,
            after=None,
        )
    return webhook


def send_test(webhook_id: int, *, actor: str, now: datetime | None = None) -> NotificationDelivery:
    """Queue a test notification to one webhook (audited), even one switched off."""
    now = now or clock()
    with transaction.atomic():
        webhook = Webhook.objects.filter(pk=webhook_id).first()
        if webhook is None:
            raise NotFound(f"No webhook {webhook_id}.")
        delivery = NotificationDelivery.objects.create(
            delivery_id=uuid.uuid4(),
            webhook=webhook,
            webhook_name=webhook.name,
            event_key=f"test:{uuid.uuid4()}",
            kind=Kind.TEST.value,
            summary=f"A test notification from OmniRoute Admin, sent by {actor}.",
            details={"requested_by": actor},
            occurred_at=now,
            created_at=now,
            next_attempt_at=now,
        )
        billing_services.record_audit(
            target_type="notification",
            target_id=delivery.delivery_id,
            action="create",
            actor=actor,
            before=None,
            after={"webhook": webhook.name, "kind": Kind.TEST.value},
        )
        notifications._enqueue_on_commit([str(delivery.delivery_id)])
    return delivery


# --- dashboard reads ----------------------------------------------------------------------


def webhooks() -> list[Webhook]:
    """Every webhook, by name (one query)."""
    return list(Webhook.objects.all())


def delivery_log() -> QuerySet[NotificationDelivery]:
    """The delivery log, newest first (no join: each row keeps its webhook's name)."""
    return NotificationDelivery.objects.defer("details").order_by("-created_at", "-id")
