"""The billing shell: load rows for the pure core, and write catalog and price changes
together with their audit rows in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from billing.classify import NO_AUTH, Billing, Catalog, Overage
from billing.models import (
    AUTH_TYPE_MAX_LENGTH,
    MODEL_MAX_LENGTH,
    PROVIDER_MAX_LENGTH,
    REASON_MAX_LENGTH,
    AuditEntry,
    BillingCatalogEntry,
    ChangeCounter,
    ModelPrice,
)
from billing.price_import import ParsedPriceFile
from billing.tiers import PriceBook, Tier


class Conflict(Exception):
    """A write would break a uniqueness rule or overwrite a newer version; nothing changed."""


@dataclass(frozen=True, slots=True)
class CatalogInput:
    provider: str
    auth_type: str | None
    billing: str
    overage: str
    reason: str


@dataclass(frozen=True, slots=True)
class PriceInput:
    provider: str
    model: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    tier_override: str | None


@dataclass(frozen=True, slots=True)
class ImportCounts:
    created: int
    updated: int
    unchanged: int
    skipped: int


def bump(counter: str) -> None:
    """Bump a change counter; call it inside the transaction of the write it announces."""
    updated = ChangeCounter.objects.filter(name=counter).update(value=F("value") + 1)
    if not updated:  # a database that lost its seeded row
        ChangeCounter.objects.get_or_create(name=counter, defaults={"value": 1})


def change_counters() -> tuple[int, int]:
    """(config, state) change counters, in one query."""
    values = dict(ChangeCounter.objects.values_list("name", "value"))
    return values.get(ChangeCounter.CONFIG, 0), values.get(ChangeCounter.STATE, 0)


def load_catalog() -> Catalog:
    """The whole curated catalog, indexed for classification (one query)."""
    return Catalog(entry.as_row() for entry in BillingCatalogEntry.objects.all())


def load_price_book() -> PriceBook:
    """The whole price catalog, indexed for tiers and costs (one query)."""
    return PriceBook(price.as_row() for price in ModelPrice.objects.all())


def record_audit(
    *,
    target_type: str,
    target_id: object,
    action: str,
    actor: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    now: datetime | None = None,
) -> AuditEntry:
    """Write one audit row; callers do this inside the transaction of the change."""
    return AuditEntry.objects.create(
        target_type=target_type,
        target_id=str(target_id),
        action=action,
        actor=actor,
        at=now or timezone.now(),
        before=before,
        after=after,
    )


def catalog_snapshot(entry: BillingCatalogEntry) -> dict[str, Any]:
    """The audited fields of a catalog entry."""
    return {
        "provider": entry.provider,
        "auth_type": entry.auth_type,
        "billing": entry.billing,
        "overage": entry.overage,
        "reason": entry.reason,
    }


def price_snapshot(price: ModelPrice) -> dict[str, Any]:
    """The audited fields of a price row (decimals as strings: exact, JSON-safe)."""
    return {
        "provider": price.provider,
        "model": price.model,
        "input_usd_per_mtok": str(price.input_usd_per_mtok),
        "output_usd_per_mtok": str(price.output_usd_per_mtok),
        "tier_override": price.tier_override,
    }


def _clean_text(value: str, field: str, max_length: int, errors: dict[str, list[str]]) -> str:
    text = value.strip()
    if not text:
        errors.setdefault(field, []).append("This field must not be empty.")
    elif len(text) > max_length:
        errors.setdefault(field, []).append(f"At most {max_length} characters.")
    elif "\x00" in text:
        errors.setdefault(field, []).append("NUL characters are not allowed.")
    return text


def clean_catalog_input(data: CatalogInput) -> CatalogInput:
    """Normalise and validate a catalog write; raises ValidationError naming each field."""
    errors: dict[str, list[str]] = {}
    provider = _clean_text(data.provider, "provider", PROVIDER_MAX_LENGTH, errors)
    auth_type = data.auth_type.strip() if data.auth_type is not None else None
    if auth_type == "":
        auth_type = None
    if auth_type is not None:
        auth_type = _clean_text(auth_type, "auth_type", AUTH_TYPE_MAX_LENGTH, errors)
        if auth_type == NO_AUTH:
            errors.setdefault("auth_type", []).append(
                "The no-auth path ('none') is keyless by rule and never consults the catalog."
            )
    reason = _clean_text(data.reason, "reason", REASON_MAX_LENGTH, errors)
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
        entry = BillingCatalogEntry.objects.select_for_update().get(pk=entry_id)
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
        entry = BillingCatalogEntry.objects.select_for_update().get(pk=entry_id)
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


def clean_price_input(data: PriceInput) -> PriceInput:
    """Normalise and validate a price write; raises ValidationError naming each field."""
    errors: dict[str, list[str]] = {}
    provider = _clean_text(data.provider, "provider", PROVIDER_MAX_LENGTH, errors)
    model = _clean_text(data.model, "model", MODEL_MAX_LENGTH, errors)
    for field in ("input_usd_per_mtok", "output_usd_per_mtok"):
        value: Decimal = getattr(data, field)
        if not value.is_finite() or value < 0:
            errors.setdefault(field, []).append("Must be a finite number >= 0.")
        elif value >= Decimal("100000000"):
            errors.setdefault(field, []).append("Must be below 100,000,000 USD per million tokens.")
    if data.tier_override is not None and data.tier_override not in {t.value for t in Tier}:
        errors.setdefault("tier_override", []).append(f"Unknown tier {data.tier_override!r}.")
    if errors:
        raise ValidationError(errors)
    return PriceInput(
        provider,
        model,
        data.input_usd_per_mtok.quantize(Decimal("0.000001")),
        data.output_usd_per_mtok.quantize(Decimal("0.000001")),
        data.tier_override,
    )


def upsert_price(data: PriceInput, *, actor: str) -> tuple[ModelPrice, bool]:
    """Create or update the price of (provider, model) with its audit row; (price, created)."""
    data = clean_price_input(data)
    with transaction.atomic():
        price = (
            ModelPrice.objects.select_for_update()
            .filter(provider=data.provider, model=data.model)
            .first()
        )
        before = price_snapshot(price) if price is not None else None
        if price is None:
            price = ModelPrice(provider=data.provider, model=data.model)
        price.input_usd_per_mtok = data.input_usd_per_mtok
        price.output_usd_per_mtok = data.output_usd_per_mtok
        price.tier_override = data.tier_override
        price.updated_by = actor
        price.save()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="price",
            target_id=price.pk,
            action=AuditEntry.Action.CREATE if before is None else AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=price_snapshot(price),
        )
    return price, before is None


def delete_price(price_id: int, *, actor: str) -> None:
    """Delete a price row and audit it; DoesNotExist when it is gone already."""
    with transaction.atomic():
        price = ModelPrice.objects.select_for_update().get(pk=price_id)
        before = price_snapshot(price)
        price.delete()
        bump(ChangeCounter.CONFIG)
        record_audit(
            target_type="price",
            target_id=price_id,
            action=AuditEntry.Action.DELETE,
            actor=actor,
            before=before,
            after=None,
        )


def import_prices(parsed: ParsedPriceFile, *, actor: str) -> ImportCounts:
    """Upsert every parsed row in one transaction (all or nothing), auditing each change."""
    now = timezone.now()
    created = updated = unchanged = 0
    with transaction.atomic():
        existing = {
            (price.provider, price.model): price
            for price in ModelPrice.objects.select_for_update().all()
        }
        to_create: list[ModelPrice] = []
        to_update: list[ModelPrice] = []
        audits: list[AuditEntry] = []
        for row in parsed.rows:
            price = existing.get((row.provider, row.model))
            if price is None:
                to_create.append(
                    ModelPrice(
                        provider=row.provider,
                        model=row.model,
                        input_usd_per_mtok=row.input_usd_per_mtok,
                        output_usd_per_mtok=row.output_usd_per_mtok,
                        updated_by=actor,
                    )
                )
                continue
            if (price.input_usd_per_mtok, price.output_usd_per_mtok) == (
                row.input_usd_per_mtok,
                row.output_usd_per_mtok,
            ):
                unchanged += 1
                continue
            before = price_snapshot(price)
            price.input_usd_per_mtok = row.input_usd_per_mtok
            price.output_usd_per_mtok = row.output_usd_per_mtok
            price.updated_by = actor
            price.updated_at = now
            to_update.append(price)
            audits.append(
                AuditEntry(
                    target_type="price",
                    target_id=str(price.pk),
                    action=AuditEntry.Action.UPDATE,
                    actor=actor,
                    at=now,
                    before=before,
                    after=price_snapshot(price),
                )
            )
        for price in ModelPrice.objects.bulk_create(to_create, batch_size=500):
            created += 1
            audits.append(
                AuditEntry(
                    target_type="price",
                    target_id=str(price.pk),
                    action=AuditEntry.Action.CREATE,
                    actor=actor,
                    at=now,
                    before=None,
                    after=price_snapshot(price),
                )
            )
        ModelPrice.objects.bulk_update(
            to_update,
            ["input_usd_per_mtok", "output_usd_per_mtok", "updated_by", "updated_at"],
            batch_size=500,
        )
        updated = len(to_update)
        AuditEntry.objects.bulk_create(audits, batch_size=500)
        if audits:
            bump(ChangeCounter.CONFIG)
    return ImportCounts(
        created=created, updated=updated, unchanged=unchanged, skipped=parsed.skipped
    )
