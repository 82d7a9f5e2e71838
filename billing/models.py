"""The curated billing catalog, model prices, and the audit trail of their changes."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from billing.classify import Billing, CatalogRow, Overage
from billing.tiers import PriceRow, Tier

PROVIDER_MAX_LENGTH = 64
AUTH_TYPE_MAX_LENGTH = 64
MODEL_MAX_LENGTH = 200
REASON_MAX_LENGTH = 1000


class BillingCatalogEntry(models.Model):
    """How one provider (optionally one auth type of it) bills: set by hand, from its terms."""

    provider = models.CharField(max_length=PROVIDER_MAX_LENGTH)
    auth_type = models.CharField(
        max_length=AUTH_TYPE_MAX_LENGTH,
        null=True,
        blank=True,
        help_text="Empty: the provider-wide entry, used when no auth-specific entry matches.",
    )
    billing = models.CharField(max_length=16, choices=[(b.value, b.value) for b in Billing])
    overage = models.CharField(max_length=16, choices=[(o.value, o.value) for o in Overage])
    reason = models.TextField(
        max_length=REASON_MAX_LENGTH,
        help_text="Operator-visible justification, from the provider's published terms.",
    )
    version = models.PositiveIntegerField(default=1, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, null=True, blank=True)

    class Meta:
        ordering = ("provider", "auth_type")
        verbose_name_plural = "billing catalog entries"
        constraints = (
            models.UniqueConstraint(
                fields=("provider", "auth_type"),
                condition=Q(auth_type__isnull=False),
                name="catalog_one_entry_per_provider_auth_type",
                violation_error_message="An entry for this provider and auth type exists already.",
            ),
            models.UniqueConstraint(
                fields=("provider",),
                condition=Q(auth_type__isnull=True),
                name="catalog_one_provider_wide_entry",
                violation_error_message="A provider-wide entry for this provider exists already.",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="catalog_reason_not_empty"),
            models.CheckConstraint(condition=~Q(provider=""), name="catalog_provider_not_empty"),
            models.CheckConstraint(
                condition=~Q(auth_type=""), name="catalog_auth_type_null_or_not_empty"
            ),
        )

    def __str__(self) -> str:
        return f"{self.provider}/{self.auth_type or '*'}: {self.billing}, {self.overage}"

    def as_row(self) -> CatalogRow:
        """The plain row the pure classifier takes."""
        return CatalogRow(
            id=self.pk,
            provider=self.provider,
            auth_type=self.auth_type,
            billing=Billing(self.billing),
            overage=Overage(self.overage),
            reason=self.reason,
        )


class ModelPrice(models.Model):
    """USD per million tokens for one model of a provider; model `*` prices the rest."""

    class Source(models.TextChoices):
        MANUAL = "manual"  # entered by an operator (the API, the dashboard)
        IMPORT = "import"  # loaded from a price file

    provider = models.CharField(max_length=PROVIDER_MAX_LENGTH)
    model = models.CharField(max_length=MODEL_MAX_LENGTH, help_text="`*` = every other model.")
    input_usd_per_mtok = models.DecimalField(
        max_digits=14, decimal_places=6, validators=[MinValueValidator(Decimal(0))]
    )
    output_usd_per_mtok = models.DecimalField(
        max_digits=14, decimal_places=6, validators=[MinValueValidator(Decimal(0))]
    )
    tier_override = models.CharField(
        max_length=8, null=True, blank=True, choices=[(t.value, t.value) for t in Tier]
    )
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.MANUAL)
    needs_review = models.BooleanField(
        default=False,
        help_text="An imported zero price: not evidence of free, so it is tiered as unpriced "
        "until an operator confirms it (a `free` override, or entering it by hand).",
    )
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, null=True, blank=True)

    class Meta:
        ordering = ("provider", "model")
        indexes = (
            # The dashboard's "needs review" list, in page order, without a scan.
            models.Index(
                fields=("provider", "model"),
                condition=Q(needs_review=True),
                name="price_needs_review",
            ),
        )
        constraints = (
            models.UniqueConstraint(fields=("provider", "model"), name="price_one_row_per_model"),
            models.CheckConstraint(
                condition=Q(input_usd_per_mtok__gte=0) & Q(output_usd_per_mtok__gte=0),
                name="price_not_negative",
            ),
        )

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"

    def as_row(self) -> PriceRow:
        """The plain row the pure tier classifier takes."""
        return PriceRow(
            provider=self.provider,
            model=self.model,
            input_usd_per_mtok=self.input_usd_per_mtok,
            output_usd_per_mtok=self.output_usd_per_mtok,
            tier_override=Tier(self.tier_override) if self.tier_override else None,
            needs_review=self.needs_review,
        )


class AuditEntry(models.Model):
    """Who changed what, when, with the state before and after (written in the same
    transaction as the change)."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        DELETE = "delete"

    target_type = models.CharField(max_length=32)  # "catalog", "price", "settings"
    target_id = models.CharField(max_length=128)  # a connection id is up to 128 characters
    action = models.CharField(max_length=8, choices=Action.choices)
    actor = models.CharField(max_length=150)
    at = models.DateTimeField()
    before = models.JSONField(null=True)
    after = models.JSONField(null=True)

    class Meta:
        ordering = ("-at", "-id")
        indexes = (models.Index(fields=("target_type", "target_id", "-at")),)
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        when = f"{self.at:%Y-%m-%d %H:%M:%S}"
        return f"{when} {self.actor} {self.action} {self.target_type} {self.target_id}"


class ChangeCounter(models.Model):
    """Counters bumped in the same transaction as every write that can change a pool
    decision: `config` (catalog, prices, settings) and `state` (connections, readings,
    events, candidates, spend). Web processes cache snapshots and decisions keyed by
    them, so every process and host sees a write on its next decision. (A third row,
    `tokens`, seeded by migration 0009 for an in-memory token cache since removed, is
    read by nothing.)"""

    CONFIG = "config"
    STATE = "state"

    name = models.CharField(max_length=16, primary_key=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class ProviderAlias(models.Model):
    """Another name of a provider id (LiteLLM's `anthropic` for the catalog's `claude`):
    every write and lookup of a provider id maps an alias onto its provider."""

    alias = models.CharField(max_length=PROVIDER_MAX_LENGTH, unique=True)
    provider = models.CharField(max_length=PROVIDER_MAX_LENGTH)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, null=True, blank=True)

    class Meta:
        ordering = ("alias",)
        verbose_name_plural = "provider aliases"
        constraints = (
            models.CheckConstraint(condition=~Q(alias=""), name="alias_not_empty"),
            models.CheckConstraint(condition=~Q(provider=""), name="alias_provider_not_empty"),
            models.CheckConstraint(
                condition=~Q(alias=models.F("provider")), name="alias_not_its_provider"
            ),
        )

    def __str__(self) -> str:
        return f"{self.alias} -> {self.provider}"
