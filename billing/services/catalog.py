"""The curated billing catalog: load it, and write entries with their audit rows."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from billing.classify import NO_AUTH, Billing, Catalog, CatalogRow, Overage, normalise_provider
from billing.models import (
    AUTH_TYPE_MAX_LENGTH,
    PROVIDER_MAX_LENGTH,
    REASON_MAX_LENGTH,
    AuditEntry,
    BillingCatalogEntry,
    ChangeCounter,
    ProviderAlias,
)
from billing.services.aliases import load_aliases
from billing.services.audit import catalog_snapshot, record_audit
from billing.services.common import CatalogEntryNotFound, Conflict, _clean_text
from billing.services.counters import bump


def _locked_entry(entry_id: int) -> BillingCatalogEntry:
    entry = BillingCatalogEntry.objects.select_for_update().filter(pk=entry_id).first()
    if entry is None:
        raise CatalogEntryNotFound(f"No catalog entry {entry_id}.")
    return entry


@dataclass(frozen=True, slots=True)
class CatalogInput:
    provider: str
    auth_type: str | None
    billing: str
    overage: str
    reason: str


def load_catalog() -> Catalog:
    """The whole curated catalog, indexed for classification, with the provider aliases:
    one query (a UNION ALL of both tables), so a snapshot reload on the hot path costs
    what it cost before aliases existed."""
    entries = connection.ops.quote_name(BillingCatalogEntry._meta.db_table)
    aliases = connection.ops.quote_name(ProviderAlias._meta.db_table)
    sql = (
        f"SELECT id, provider, auth_type, billing, overage, reason FROM {entries} "
        f"UNION ALL SELECT NULL, alias, provider, NULL, NULL, NULL FROM {aliases}"
    )
    rows: list[CatalogRow] = []
    alias_map: dict[str, str] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql)
        for entry_id, provider, auth_type, billing, overage, reason in cursor.fetchall():
            if entry_id is None:  # an alias: (alias, provider)
                alias_map[provider] = auth_type
                continue
            rows.append(
                CatalogRow(
                    entry_id, provider, auth_type, Billing(billing), Overage(overage), reason
                )
            )
    return Catalog(rows, alias_map)


def clean_catalog_input(data: CatalogInput) -> CatalogInput:
    """Normalise and validate a catalog write; raises ValidationError naming each field."""
    errors: dict[str, list[str]] = {}
    provider = _clean_text(data.provider, "provider", PROVIDER_MAX_LENGTH, errors)
    if provider:
        provider = normalise_provider(provider, load_aliases())
    auth_type = data.auth_type.strip().lower() if data.auth_type is not None else None
    if auth_type == "":
        auth_type = None
    if auth_type is not None:
        auth_type = _clean_text(auth_type, "auth_type", AUTH_TYPE_MAX_LENGTH, errors)
        if auth_type == NO_AUTH:
            errors.setdefault("auth_type", []).append(
                "The no-auth path ('none') is keyless by rule and never consults the catalog."
            )
    reason = _clean_text(data.reason, "reason", REASON_MAX_LENGTH, errors, multiline=True)
    if data.billing not in {b.value for b in Billing}:
        errors.setdefault("billing", []).append(f"Unknown billing class {data.billing!r}.")
    if data.overage not in {o.value for o in Overage}:
        errors.setdefault("overage", []).append(f"Unknown overage behaviour {data.overage!r}.")
    if errors:
        raise ValidationError(errors)
    return CatalogInput(provider, auth_type, data.billing, data.overage, reason)


def _duplicate_message(provider: str, auth_type: str | None) -> str:
    if auth_type is None:
        return f"A provider-wide entry for {provider!r} exists already."
    return f"An entry for provider {provider!r} with auth type {auth_type!r} exists already."


def _find_duplicate(data: CatalogInput, exclude_id: int | None = None) -> bool:
    duplicates = BillingCatalogEntry.objects.filter(
        provider=data.provider, auth_type=data.auth_type
    )
    if data.auth_type is None:
        duplicates = BillingCatalogEntry.objects.filter(
            provider=data.provider, auth_type__isnull=True
        )
    if exclude_id is not None:
        duplicates = duplicates.exclude(pk=exclude_id)
    return duplicates.exists()


def create_catalog_entry(data: CatalogInput, *, actor: str) -> BillingCatalogEntry:
    """Create an entry and its audit row together; Conflict on a duplicate."""
    data = clean_catalog_input(data)
    with transaction.atomic():
        if _find_duplicate(data):
            raise Conflict(_duplicate_message(data.provider, data.auth_type))
        try:
            with transaction.atomic():
                entry = BillingCatalogEntry.objects.create(
                    provider=data.provider,
                    auth_type=data.auth_type,
                    billing=data.billing,
                    overage=data.overage,
                    reason=data.reason,
                    updated_by=actor,
                )
        except IntegrityError as error:  # a concurrent insert won the race
            raise Conflict(_duplicate_message(data.provider, data.auth_type)) from error
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="catalog",
            target_id=entry.pk,
            action=AuditEntry.Action.CREATE,
            actor=actor,
            before=None,
            after=catalog_snapshot(entry),
        )
    return entry


def update_catalog_entry(
    entry_id: int, data: CatalogInput, *, actor: str, expected_version: int | None = None
) -> BillingCatalogEntry:
    """Replace an entry's fields and audit it; Conflict on a duplicate or a stale version.
    The edit and its audit row commit together or not at all."""
    data = clean_catalog_input(data)
    with transaction.atomic():
        entry = _locked_entry(entry_id)
        if expected_version is not None and entry.version != expected_version:
            raise Conflict(
                f"This entry was changed by {entry.updated_by or 'someone'} since you loaded "
                f"it (version {entry.version}, yours {expected_version}); reload and retry."
            )
        if _find_duplicate(data, exclude_id=entry.pk):
            raise Conflict(_duplicate_message(data.provider, data.auth_type))
        before = catalog_snapshot(entry)
        entry.provider = data.provider
        entry.auth_type = data.auth_type
        entry.billing = data.billing
        entry.overage = data.overage
        entry.reason = data.reason
        entry.updated_by = actor
        entry.version += 1
        try:
            with transaction.atomic():
                entry.save()
        except IntegrityError as error:  # a concurrent write took the (provider, auth) pair
            raise Conflict(_duplicate_message(data.provider, data.auth_type)) from error
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="catalog",
            target_id=entry.pk,
            action=AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=catalog_snapshot(entry),
        )
    return entry


def delete_catalog_entry(entry_id: int, *, actor: str) -> None:
    """Delete an entry and audit it; DoesNotExist when it is gone already."""
    with transaction.atomic():
        entry = _locked_entry(entry_id)
        before = catalog_snapshot(entry)
        entry.delete()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="catalog",
            target_id=entry_id,
            action=AuditEntry.Action.DELETE,
            actor=actor,
            before=before,
            after=None,
        )
