"""The catalog's database rules, its seed, and audited writes."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry
from billing.services import CatalogInput, Conflict

SEEDED = [
    ("antigravity", "oauth", "subscription", "hard-stop"),
    ("claude", "oauth", "subscription", "hard-stop"),
    ("codex", "oauth", "subscription", "hard-stop"),
    ("copilot", "apikey", "subscription", "unknown"),
    ("cursor", "oauth", "subscription", "unknown"),
    ("devin-desktop", "oauth", "subscription", "meters-to-paid"),
]


@pytest.mark.django_db
def test_migrations_seed_the_six_curated_entries() -> None:
    rows = list(
        BillingCatalogEntry.objects.order_by("provider").values_list(
            "provider", "auth_type", "billing", "overage"
        )
    )

    assert rows == SEEDED
    assert all(BillingCatalogEntry.objects.values_list("reason", flat=True))


@pytest.mark.django_db
def test_constraint_refuses_a_second_entry_for_provider_and_auth_type() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        BillingCatalogEntry.objects.create(
            provider="claude", auth_type="oauth", billing="metered", overage="unknown", reason="x"
        )


@pytest.mark.django_db
def test_constraint_refuses_a_second_provider_wide_entry() -> None:
    BillingCatalogEntry.objects.create(
        provider="openai", auth_type=None, billing="metered", overage="meters-to-paid", reason="a"
    )

    with pytest.raises(IntegrityError), transaction.atomic():
        BillingCatalogEntry.objects.create(
            provider="openai", auth_type=None, billing="metered", overage="unknown", reason="b"
        )


@pytest.mark.django_db
def test_constraint_refuses_an_empty_reason() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        BillingCatalogEntry.objects.create(
            provider="openai", auth_type=None, billing="metered", overage="unknown", reason=""
        )


@pytest.mark.django_db
def test_create_writes_the_entry_and_its_audit_row_together() -> None:
    entry = services.create_catalog_entry(
        CatalogInput("openai", None, "metered", "meters-to-paid", "  per token  "), actor="ana"
    )

    audit = AuditEntry.objects.get()
    assert (entry.reason, entry.updated_by) == ("per token", "ana")
    assert (audit.target_type, audit.target_id, audit.action, audit.actor) == (
        "catalog",
        str(entry.pk),
        "create",
        "ana",
    )
    assert audit.before is None
    assert audit.after == {
        "provider": "openai",
        "auth_type": None,
        "billing": "metered",
        "overage": "meters-to-paid",
        "reason": "per token",
    }


@pytest.mark.django_db
def test_create_duplicate_is_a_conflict_and_writes_nothing() -> None:
    count = BillingCatalogEntry.objects.count()

    with pytest.raises(Conflict, match="provider 'claude' with auth type 'oauth' exists"):
        services.create_catalog_entry(
            CatalogInput("claude", "oauth", "metered", "unknown", "dup"), actor="ana"
        )

    assert BillingCatalogEntry.objects.count() == count
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param(
            CatalogInput("openai", None, "metered", "unknown", "   "), "reason", id="blank"
        ),
        pytest.param(CatalogInput("", None, "metered", "unknown", "r"), "provider", id="provider"),
        pytest.param(CatalogInput("x", "none", "metered", "unknown", "r"), "auth_type", id="none"),
        pytest.param(CatalogInput("x", None, "free", "unknown", "r"), "billing", id="billing"),
        pytest.param(CatalogInput("x", None, "metered", "maybe", "r"), "overage", id="overage"),
    ],
)
@pytest.mark.django_db
def test_invalid_catalog_input_is_refused_by_field(data: CatalogInput, field: str) -> None:
    count = BillingCatalogEntry.objects.count()

    with pytest.raises(ValidationError) as caught:
        services.create_catalog_entry(data, actor="ana")

    assert list(caught.value.message_dict) == [field]
    assert BillingCatalogEntry.objects.count() == count


@pytest.mark.django_db
def test_update_records_before_and_after_and_bumps_the_version() -> None:
    entry = BillingCatalogEntry.objects.get(provider="cursor")

    updated = services.update_catalog_entry(
        entry.pk,
        CatalogInput("cursor", "oauth", "subscription", "hard-stop", "verified"),
        actor="bo",
    )

    audit = AuditEntry.objects.get()
    assert (updated.overage, updated.version) == ("hard-stop", 2)
    assert (audit.before["overage"], audit.after["overage"]) == ("unknown", "hard-stop")


@pytest.mark.django_db
def test_update_with_a_stale_version_is_a_conflict() -> None:
    entry = BillingCatalogEntry.objects.get(provider="cursor")

    with pytest.raises(Conflict, match="reload and retry"):
        services.update_catalog_entry(
            entry.pk,
            CatalogInput("cursor", "oauth", "subscription", "hard-stop", "x"),
            actor="bo",
            expected_version=7,
        )

    entry.refresh_from_db()
    assert (entry.overage, entry.version) == ("unknown", 1)


@pytest.mark.django_db
def test_delete_is_audited() -> None:
    entry = BillingCatalogEntry.objects.get(provider="cursor")

    services.delete_catalog_entry(entry.pk, actor="cy")

    audit = AuditEntry.objects.get()
    assert not BillingCatalogEntry.objects.filter(pk=entry.pk).exists()
    assert (audit.action, audit.before["provider"], audit.after) == ("delete", "cursor", None)


@pytest.mark.django_db
def test_load_catalog_classifies_from_rows() -> None:
    catalog = services.load_catalog()

    verdict = catalog.classify("codex", "oauth")

    assert (verdict.billing, verdict.overage) == ("subscription", "hard-stop")
    assert verdict.catalog_entry_id == BillingCatalogEntry.objects.get(provider="codex").pk


@pytest.mark.django_db
def test_an_edit_whose_audit_row_fails_is_rolled_back_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = BillingCatalogEntry.objects.get(provider="cursor")

    def broken_audit(**kwargs: object) -> None:
        raise IntegrityError("the audit table refused the row")

    monkeypatch.setattr("billing.services.catalog.record_audit", broken_audit)

    with pytest.raises(IntegrityError):
        services.update_catalog_entry(
            entry.pk,
            CatalogInput("cursor", "oauth", "subscription", "hard-stop", "verified"),
            actor="bo",
        )

    entry.refresh_from_db()
    assert (entry.overage, entry.reason, entry.version) == (
        "unknown",
        "Usage-based pricing past the plan can be enabled per account, unobservable",
        1,
    )
    assert not AuditEntry.objects.exists()
