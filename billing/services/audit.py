"""Audit rows and the snapshots they record."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from billing.models import (
    AuditEntry,
    BillingCatalogEntry,
    ModelPrice,
)
from ladder.core.audit_changes import unchanged


def record_audit(
    *,
    target_type: str,
    target_id: object,
    action: str,
    actor: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    now: datetime | None = None,
) -> AuditEntry | None:
    """Write one audit row; callers do this inside the transaction of the change. An
    update that changed no value (a save of the same form, "20" for "20.000000") is no
    change and writes no row: None."""
    if action == AuditEntry.Action.UPDATE and unchanged(before, after):
        return None
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
        "source": price.source,
        "needs_review": price.needs_review,
    }
