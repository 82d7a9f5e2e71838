"""The registry: connections and candidates, created, replaced and deleted, each write
bumping the state counter in its transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from billing import services as billing_services
from billing.classify import normalise_auth_type, normalise_provider
from billing.models import ChangeCounter
from ladder import core
from ladder.core.settings_bounds import REENTRY_BELOW_EXIT, SETTINGS_BOUNDS
from ladder.crypto import encrypt_credential
from ladder.models import Candidate, Connection, is_connection_id
from ladder.services.common import NotFound, known_id, logger, refuse_bad_ids
from ladder.services.loading import connections_with_readings


@dataclass(frozen=True, slots=True)
class ConnectionInput:
    provider: str
    auth_type: str
    label: str = ""
    active: bool = True
    quota_source: str = core.NO_QUOTA_SOURCE
    credential: str | None = None  # None keeps the stored one; "" clears it
    # This connection's own reserve (None: the settings').
    exit_cutoff_percent: float | None = None
    reentry_min_remaining_percent: float | None = None


RESERVE_FIELDS = ("exit_cutoff_percent", "reentry_min_remaining_percent")


def reserve_problems(data: ConnectionInput) -> dict[str, list[str]]:
    """The settings' rules applied to a connection's own reserve (fields left null take
    the settings'): each value within its bounds, the floor not below the cutoff (a
    problem that names both fields)."""
    problems: dict[str, list[str]] = {}
    for name in RESERVE_FIELDS:
        value = getattr(data, name)
        problem = None if value is None else SETTINGS_BOUNDS[name].problem(value)
        if problem is not None:
            problems[name] = [problem]
    cutoff, floor = data.exit_cutoff_percent, data.reentry_min_remaining_percent
    if not problems and cutoff is not None and floor is not None and floor < cutoff:
        problems = {name: [REENTRY_BELOW_EXIT] for name in RESERVE_FIELDS}
    return problems


# Who a write is recorded as when its caller names nobody (seeding, scripts).
SYSTEM_ACTOR = "system"


def connection_snapshot(connection: Connection) -> dict[str, object]:
    """The audited fields of a connection: whether it holds a credential, never the
    credential (nor its ciphertext)."""
    return {
        "provider": connection.provider,
        "registered_provider": connection.registered_provider,
        "auth_type": connection.auth_type,
        "label": connection.label,
        "active": connection.is_active,
        "quota_source": connection.quota_source,
        # Named so that the audit page shows it: whether one is stored, never its value.
        "authentication": "stored" if connection.credential_ciphertext else "none",
        "exit_cutoff_percent": connection.exit_cutoff_percent,
        "reentry_min_remaining_percent": connection.reentry_min_remaining_percent,
    }


def _changed(
    target_type: str,
    target_id: object,
    action: str,
    actor: str,
    before: dict[str, object] | None,
    after: dict[str, object] | None,
) -> None:
    """What every registry write does in its transaction: move the state counter (every
    cached decision is recomputed) and record the audit row."""
    billing_services.bump(ChangeCounter.STATE)
    billing_services.record_audit(
        target_type=target_type,
        target_id=target_id,
        action=action,
        actor=actor,
        before=before,
        after=after,
    )


class ConnectionExists(Exception):
    """A create-only write named an id that is registered already; nothing changed."""


def upsert_connection(
    connection_id: str,
    data: ConnectionInput,
    *,
    must_exist: bool | None = None,
    actor: str = SYSTEM_ACTOR,
) -> tuple[Connection, bool]:
    """Create or replace a connection's fields; the credential is encrypted before storing.
    `must_exist=True` only updates (NotFound), `False` only creates (ConnectionExists),
    decided under the row lock so a concurrent write cannot slip in between. Audited in
    the same transaction (the credential as "stored", "replaced" or "none", never its
    value)."""
    refuse_bad_ids("connection_id", [connection_id])
    problems = reserve_problems(data)
    if problems:
        raise ValidationError(problems)
    registered = normalise_provider(data.provider, {})
    ciphertext = None
    if data.credential:
        ciphertext = encrypt_credential(data.credential)
    with transaction.atomic():
        # First (the lock order of alias writes: the config counter, then the rows).
        provider = billing_services.resolve_for_write(registered)
        connection = (
            Connection.objects.select_for_update().filter(connection_id=connection_id).first()
        )
        created = connection is None
        if must_exist is True and connection is None:
            raise NotFound(f"No connection {connection_id!r}.")
        if must_exist is False and connection is not None:
            raise ConnectionExists(f"A connection with the id {connection_id} exists already.")
        before = None if connection is None else connection_snapshot(connection)
        if connection is None:
            connection = Connection(connection_id=connection_id)
        connection.provider = provider
        connection.registered_provider = registered
        connection.auth_type = normalise_auth_type(data.auth_type)
        connection.label = data.label
        connection.is_active = data.active
        connection.quota_source = data.quota_source
        connection.exit_cutoff_percent = data.exit_cutoff_percent
        connection.reentry_min_remaining_percent = data.reentry_min_remaining_percent
        if data.credential == "":
            connection.credential_ciphertext = ""
        elif ciphertext is not None:
            connection.credential_ciphertext = ciphertext
        try:
            with transaction.atomic():
                connection.save()
        except IntegrityError as error:  # created concurrently by another request
            raise ConnectionExists(
                f"A connection with the id {connection_id} exists already."
            ) from error
        after = connection_snapshot(connection)
        if ciphertext is not None and before is not None:
            after["authentication"] = "replaced"
        _changed(
            "connection", connection_id, "create" if created else "update", actor, before, after
        )
    logger.info(
        "connection %s %s (provider %s, auth %s, credential %s)",
        connection_id,
        "created" if created else "updated",
        provider,
        connection.auth_type,
        "replaced" if ciphertext else ("cleared" if data.credential == "" else "kept"),
    )
    return connection, created


def delete_connection(connection_id: str, *, actor: str = SYSTEM_ACTOR) -> bool:
    """Delete a connection and its readings; False when there was none. Audited in the
    same transaction."""
    if not is_connection_id(connection_id):
        return False
    with transaction.atomic():
        found = Connection.objects.select_for_update().filter(connection_id=connection_id).first()
        if found is None:
            return False
        before = connection_snapshot(found)
        found.delete()
        _changed("connection", connection_id, "delete", actor, before, None)
    return True


def get_connection(connection_id: str) -> Connection:
    """One connection with its current reading; NotFound otherwise."""
    connection = connections_with_readings().filter(connection_id=known_id(connection_id)).first()
    if connection is None:
        raise NotFound(f"No connection {connection_id!r}.")
    return connection


# The most characters of a candidate's `ref` (the gateway's own handle for it).
REF_MAX_LENGTH = 256


@dataclass(frozen=True, slots=True)
class CandidateInput:
    provider: str
    model: str
    categories: tuple[str, ...] = ()
    priority: int = 0
    connection_id: str | None = None
    allowed_connection_ids: tuple[str, ...] | None = None
    ref: str | None = None
    # True: keep the stored `ref` (the dashboard's form has none to send).
    keeps_ref: bool = False


def validate_candidate_target(connection_id: str | None, allowed: Sequence[str] | None) -> None:
    """Exactly one of a pinned connection and a non-empty allowlist."""
    if (connection_id is None) == (not allowed):
        raise ValidationError(
            {
                "connection_id": [
                    "Give exactly one of connection_id and a non-empty allowed_connection_ids."
                ]
            }
        )


def candidate_snapshot(candidate: Candidate) -> dict[str, object]:
    """The audited fields of a candidate."""
    return {
        "provider": candidate.provider,
        "model": candidate.model,
        "categories": list(candidate.categories or []),
        "priority": candidate.priority,
        "connection_id": candidate.connection_id,
        "allowed_connection_ids": list(candidate.allowed_connection_ids)
        if candidate.allowed_connection_ids
        else None,
        "ref": candidate.ref,
    }


def save_candidate(
    data: CandidateInput, candidate_id: int | None = None, *, actor: str = SYSTEM_ACTOR
) -> Candidate:
    """Create a candidate, or replace one's fields (NotFound when it does not exist),
    audited in the same transaction."""
    validate_candidate_target(data.connection_id, data.allowed_connection_ids)
    refuse_bad_ids("connection_id", [data.connection_id])
    refuse_bad_ids("allowed_connection_ids", data.allowed_connection_ids or ())
    if data.ref is not None and len(data.ref) > REF_MAX_LENGTH:
        raise ValidationError({"ref": [f"At most {REF_MAX_LENGTH} characters."]})
    registered = normalise_provider(data.provider, {})
    with transaction.atomic():
        provider = billing_services.resolve_for_write(registered)
        if candidate_id is None:
            candidate = Candidate()
        else:
            found = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
            if found is None:
                raise NotFound(f"No candidate {candidate_id}.")
            candidate = found
        before = candidate_snapshot(candidate) if candidate_id is not None else None
        candidate.provider = provider
        candidate.registered_provider = registered
        candidate.model = data.model
        candidate.categories = list(dict.fromkeys(data.categories))
        candidate.priority = data.priority
        candidate.connection_id = data.connection_id
        candidate.allowed_connection_ids = (
            list(data.allowed_connection_ids) if data.allowed_connection_ids else None
        )
        if not data.keeps_ref:
            candidate.ref = data.ref or None
        candidate.save()
        _changed(
            "candidate",
            candidate.pk,
            "create" if candidate_id is None else "update",
            actor,
            before,
            candidate_snapshot(candidate),
        )
    return candidate


def delete_candidate(candidate_id: int, *, actor: str = SYSTEM_ACTOR) -> bool:
    """Remove a registered candidate; False when there was none; audited in the same
    transaction."""
    with transaction.atomic():
        found = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
        if found is None:
            return False
        before = candidate_snapshot(found)
        found.delete()
        _changed("candidate", candidate_id, "delete", actor, before, None)
    return True
