"""API tokens: created once and shown once, stored as a SHA-256, revocable."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.db.models import Subquery
from django.utils import timezone

from billing.models import ChangeCounter
from ladder.models import ApiToken

TOKEN_PREFIX = "omr_"
# Writing last_used_at on every gateway request would add a write to the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(name: str, scope: str, *, created_by: str = "") -> tuple[ApiToken, str]:
    """Create a token; returns the row and the secret, which is never stored or shown again."""
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"scope must be one of {', '.join(ApiToken.Scope.values)}")
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("name must be 1 to 100 characters")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        name=name,
        scope=scope,
        prefix=secret[:12],
        secret_hash=hash_secret(secret),
        created_by=created_by,
    )
    return token, secret


def authenticate(secret: str, *, now: datetime | None = None) -> ApiToken | None:
    """The live token with this secret, or None (unknown or revoked). The returned token
    carries `counters`: the (config, state) change counters read in the same query."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    # The change counters ride along in the same round trip, so a cached pool decision
    # costs this one query in all (see ladder.services.decide_for).
    token = (
        ApiToken.objects.filter(secret_hash=hash_secret(secret))
        .annotate(
            config_version=Subquery(
                ChangeCounter.objects.filter(name=ChangeCounter.CONFIG).values("value")[:1]
            ),
            state_version=Subquery(
                ChangeCounter.objects.filter(name=ChangeCounter.STATE).values("value")[:1]
            ),
        )
        .first()
    )
    if token is None or token.is_revoked:
        return None
    token.counters = (token.config_version or 0, token.state_version or 0)  # type: ignore[attr-defined]
    now = now or timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke_token(token_id: int, *, now: datetime | None = None) -> bool:
    """Revoke a token; False when it does not exist or was revoked already."""
    updated = ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(
        revoked_at=now or timezone.now()
    )
    return updated > 0
