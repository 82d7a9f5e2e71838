"""Factories for ladder rows: plain functions with sensible defaults."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.test import Client

from ladder import services
from ladder.models import ApiToken, Candidate, Connection, Webhook
from ladder.tokens import create_token

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def make_connection(connection_id: str = "claude-max-1", **fields: Any) -> Connection:
    """A registered connection (default: a curated Claude plan login)."""
    defaults: dict[str, Any] = {"provider": "claude", "auth_type": "oauth"}
    defaults.update(fields)
    connection, _ = services.upsert_connection(connection_id, services.ConnectionInput(**defaults))
    return connection


def make_reading(
    connection_id: str = "claude-max-1", *, now: datetime = NOW, **fields: Any
) -> services.StoredReading:
    """Store a reading through the service (status derived unless given)."""
    fields.setdefault("checked_at", now)
    return services.store_reading(connection_id, services.ReadingInput(**fields), now=now)


def make_candidate(
    provider: str = "claude",
    model: str = "claude-sonnet-4-5",
    *,
    connection_id: str | None = "claude-max-1",
    allowed_connection_ids: tuple[str, ...] | None = None,
    categories: tuple[str, ...] = (),
    priority: int = 0,
) -> Candidate:
    """A registered candidate, pinned by default."""
    if allowed_connection_ids is not None:
        connection_id = None
    return services.save_candidate(
        services.CandidateInput(
            provider, model, categories, priority, connection_id, allowed_connection_ids
        )
    )


def make_token(name: str = "gateway-1", scope: str = ApiToken.Scope.GATEWAY) -> str:
    """A live API token; returns the secret to send as `Authorization: Bearer ...`."""
    _, secret = create_token(name, scope)
    return secret


# --- HTTP helpers for the API tests (added; the factories above are unchanged) -----------


def bearer(secret: str) -> dict[str, str]:
    """Test-client keyword arguments that send `Authorization: Bearer <secret>`."""
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def api(
    method: str,
    path: str,
    token: str | None = None,
    body: Any = None,
    *,
    raw: str | None = None,
) -> Response:
    """One request through Django's test client: JSON `body` (or `raw` text sent as
    application/json) with an optional bearer token."""
    client = Client()
    headers = bearer(token) if token is not None else {}
    send = getattr(client, method.lower())
    if raw is not None or body is not None:
        data = raw if raw is not None else json.dumps(body)
        return send(path, data, content_type="application/json", **headers)
    return send(path, **headers)


def iso(moment: datetime | None) -> str | None:
    """An instant as the API writes it: UTC with a `Z`, to the millisecond (ninja's
    encoder is Django's JSON encoder)."""
    if moment is None:
        return None
    return str(DjangoJSONEncoder().default(moment.astimezone(UTC)))


# --- notifications (added) ------------------------------------------------------------------

WEBHOOK_SECRET = "whsec_test-secret-0123456789"


def make_webhook(
    name: str = "ops",
    url: str = "https://93.184.216.34/hooks/omniroute",
    *,
    kinds: tuple[str, ...] | None = None,
    body_format: str = "json",
    is_active: bool = True,
    secret: str | None = WEBHOOK_SECRET,
) -> Webhook:
    """A webhook saved through the service (default: every kind, a known secret)."""
    from ladder.core.notifications import SUBSCRIBABLE_KINDS
    from ladder.services import webhooks

    webhook, _ = webhooks.create_webhook(
        webhooks.WebhookInput(
            name=name,
            url=url,
            format=body_format,
            kinds=kinds if kinds is not None else tuple(k.value for k in SUBSCRIBABLE_KINDS),
            is_active=is_active,
            secret=secret,
        ),
        actor="tests",
    )
    return webhook
