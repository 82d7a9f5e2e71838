"""A provider alias written (billing.services.aliases checks it) and, in the same
transaction, every connection and candidate registered under its name resolved again,
as a registration made now would: each change audited with the alias write's actor, the
`config` counter moved by the alias and `state` by the registrations that changed."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from billing import services as billing_services
from billing.bounds import text_problem
from billing.classify import normalise_provider
from billing.models import PROVIDER_MAX_LENGTH, AuditEntry, ChangeCounter, ProviderAlias
from ladder.models import Candidate, Connection
from ladder.services.common import logger
from ladder.services.registry import candidate_snapshot, connection_snapshot


def put_alias(data: billing_services.AliasInput, *, actor: str) -> tuple[ProviderAlias, bool]:
    """Create or replace an alias with its audit row; (row, created). Conflict when the
    alias is itself a provider with catalog entries (it would hide them): checked after
    the text, before the rules between aliases."""
    billing_services.refuse_catalog_provider(billing_services.clean_alias_names(data).alias)
    data = billing_services.clean_alias_input(data)
    with transaction.atomic():
        billing_services.refuse_catalog_provider(data.alias)  # written meanwhile
        row = ProviderAlias.objects.select_for_update().filter(alias=data.alias).first()
        created = row is None
        before = None if row is None else billing_services.alias_snapshot(row)
        if row is None:
            row = ProviderAlias(alias=data.alias)
        elif row.provider == data.provider:
            return row, False  # the same alias again: nothing to record
        row.provider = data.provider
        row.updated_by = actor
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError as error:  # created concurrently
            raise billing_services.Conflict(
                f"The alias {data.alias!r} was just written; retry."
            ) from error
        billing_services.bump(ChangeCounter.CONFIG)
        resolve_registered_providers(row.alias, billing_services.load_aliases(), actor=actor)
        billing_services.record_audit(
            target_type="provider_alias",
            target_id=row.alias,
            action=AuditEntry.Action.CREATE if created else AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=billing_services.alias_snapshot(row),
        )
    return row, created


def delete_alias(alias: str, *, actor: str) -> None:
    """Delete an alias with its audit row; AliasNotFound when there is none (or when
    the name could not be one)."""
    name = alias.strip().lower()
    if text_problem(name, PROVIDER_MAX_LENGTH) is not None:
        raise billing_services.AliasNotFound(f"No provider alias {name!r}.")
    with transaction.atomic():
        row = ProviderAlias.objects.select_for_update().filter(alias=name).first()
        if row is None:
            raise billing_services.AliasNotFound(f"No provider alias {name!r}.")
        before = billing_services.alias_snapshot(row)
        row.delete()
        billing_services.bump(ChangeCounter.CONFIG)
        resolve_registered_providers(name, billing_services.load_aliases(), actor=actor)
        billing_services.record_audit(
            target_type="provider_alias",
            target_id=name,
            action=AuditEntry.Action.DELETE,
            actor=actor,
            before=before,
            after=None,
        )


def resolve_registered_providers(alias: str, aliases: dict[str, str], *, actor: str) -> int:
    """Inside an alias write's transaction, `aliases` being the map after it: every
    connection and candidate registered under the name `alias` resolves it again, as a
    registration made now would, each change audited with the alias write's actor;
    `state` moves once when any row changed (a connection's billing is cached per
    `state`). The number of rows that changed."""
    provider = normalise_provider(alias, aliases)
    changed = 0
    connections = Connection.objects.select_for_update().filter(registered_provider=alias)
    for connection in connections.exclude(provider=provider).order_by("pk"):
        before = connection_snapshot(connection)
        connection.provider = provider
        connection.save(update_fields=["provider", "updated_at"])
        billing_services.record_audit(
            target_type="connection",
            target_id=connection.connection_id,
            action="update",
            actor=actor,
            before=before,
            after=connection_snapshot(connection),
        )
        changed += 1
    candidates = Candidate.objects.select_for_update().filter(registered_provider=alias)
    for candidate in candidates.exclude(provider=provider).order_by("pk"):
        before = candidate_snapshot(candidate)
        candidate.provider = provider
        candidate.save(update_fields=["provider"])
        billing_services.record_audit(
            target_type="candidate",
            target_id=candidate.pk,
            action="update",
            actor=actor,
            before=before,
            after=candidate_snapshot(candidate),
        )
        changed += 1
    if changed:
        billing_services.bump(ChangeCounter.STATE)
        logger.info(
            "provider alias %s: %d registrations resolved again to %s", alias, changed, provider
        )
    return changed
