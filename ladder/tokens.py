"""API tokens: created once and shown once, stored as a SHA-256, revocable."""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.utils import timezone

from billing.models import ChangeCounter
from billing.services.audit import record_audit
from billing.services.counters import notify_token_revoked
from ladder.models import ApiToken
from ladder.prepared import prepared_cursor

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "omr_"
# Writing last_used_at on every gateway request would add a write to the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def token_snapshot(token: ApiToken) -> dict[str, Any]:
    """The audited fields of a token: never the secret nor its hash (the prefix is what
    the tokens page shows every viewer to recognise a token by)."""
    return {
        "name": token.name,
        "scope": token.scope,
        "prefix": token.prefix,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


def create_token(name: str, scope: str, *, created_by: str = "") -> tuple[ApiToken, str]:
    """Create a token; returns the row and the secret, which is never stored or shown
    again. With `created_by` (a dashboard user, "cli") the creation is audited in the
    same transaction."""
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"scope must be one of {', '.join(ApiToken.Scope.values)}")
    name = name.strip()
    if not name or len(name) > 100:
        raise ValueError("name must be 1 to 100 characters")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            name=name,
            scope=scope,
            prefix=secret[:12],
            secret_hash=hash_secret(secret),
            created_by=created_by,
        )
        if created_by:
            record_audit(
                target_type="token",
                target_id=token.pk,
                action="create",
                actor=created_by,
                before=None,
                after=token_snapshot(token),
            )
    return token, secret


_AUTH_FIELDS = ("id", "name", "scope", "prefix", "last_used_at", "revoked_at")
_auth_sql: str | None = None


def _column(field_name: str) -> str:
    field = ApiToken._meta.get_field(field_name)
    assert isinstance(field, Field)
    return str(field.column)


def _auth_query(db: BaseDatabaseWrapper) -> str:
    """One round trip: the token's row and the two change counters (config, state).
    Plain SQL, built once, so a gateway request pays no ORM query compilation."""
    global _auth_sql
    if _auth_sql is None:
        quote = db.ops.quote_name
        counters = quote(ChangeCounter._meta.db_table)
        value, name = quote("value"), quote("name")
        columns = ", ".join(f"t.{quote(_column(f))}" for f in _AUTH_FIELDS)
        _auth_sql = (
            f"SELECT {columns}, "
            f"(SELECT {value} FROM {counters} WHERE {name} = %s), "
            f"(SELECT {value} FROM {counters} WHERE {name} = %s) "
            f"FROM {quote(ApiToken._meta.db_table)} t "
            f"WHERE t.{quote(_column('secret_hash'))} = %s"
        )
    return _auth_sql


def _read_token_row(db: BaseDatabaseWrapper, params: list[str]) -> tuple[Any, ...] | None:
    """Run the token query as its own connection health check: usually the request's
    first query, it replaces the `SELECT 1` that CONN_HEALTH_CHECKS would send first
    (a round trip per request). A persistent connection that broke since its last
    request fails here, is closed, and the read is retried once on a new one."""
    checked = db.health_check_done or db.connection is None  # type: ignore[attr-defined]
    db.health_check_done = True  # type: ignore[attr-defined]
    try:
        return _execute(db, params)
    except (OperationalError, InterfaceError):
        if checked or db.in_atomic_block:
            raise
        logger.info("a database connection broke while idle: reconnecting")
        db.close()
        return _execute(db, params)


def _execute(db: BaseDatabaseWrapper, params: list[str]) -> tuple[Any, ...] | None:
    with prepared_cursor(db) as cursor:
        cursor.execute(_auth_query(db), params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def authenticate(secret: str, *, now: datetime | None = None) -> ApiToken | None:
    """The live token with this secret, or None (unknown or revoked). The returned token
    carries `counters`: the (config, state) change counters read in the same query, so a
    cached pool decision costs this one query in all (see ladder.services.decide_for)."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    # The connection once, not through django.db.connection's per-access lookup.
    db = connections[DEFAULT_DB_ALIAS]
    digest = hash_secret(secret)
    row = _read_token_row(db, [ChangeCounter.CONFIG, ChangeCounter.STATE, digest])
    if row is None:
        return None
    *values, config_version, state_version = row
    if db.vendor != "postgresql":
        # SQLite hands back naive datetimes (stored in UTC) where the ORM would convert them.
        values = [_aware(value) if isinstance(value, datetime) else value for value in values]
    token = ApiToken.from_db(db.alias, list(_AUTH_FIELDS), values)
    if token.is_revoked:
        return None
    token.counters = (config_version or 0, state_version or 0)  # type: ignore[attr-defined]
    now = now or timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke_token(token_id: int, *, now: datetime | None = None, actor: str = "") -> bool:
    """Revoke a token; False when it does not exist or was revoked already. With an
    `actor` (a dashboard user) the revocation is audited in the same transaction."""
    now = now or timezone.now()
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(pk=token_id).first()
        if token is None or token.revoked_at is not None:
            return False
        before = token_snapshot(token)
        token.revoked_at = now
        token.save(update_fields=["revoked_at"])
        notify_token_revoked()
        if actor:
            record_audit(
                target_type="token",
                target_id=token.pk,
                action="update",
                actor=actor,
                before=before,
                after=token_snapshot(token),
                now=now,
            )
    return True
