"""Django admin for the catalog and prices: writes go through the services, so every
change is validated and audited like any other."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice


@admin.register(BillingCatalogEntry)
class BillingCatalogEntryAdmin(admin.ModelAdmin):
    list_display = ("provider", "auth_type", "billing", "overage", "updated_at", "updated_by")
    list_filter = ("billing", "overage")
    search_fields = ("provider", "auth_type", "reason")
    readonly_fields = ("updated_at", "updated_by", "version")

    def save_model(
        self, request: HttpRequest, obj: BillingCatalogEntry, form: Any, change: bool
    ) -> None:
        data = services.CatalogInput(
            obj.provider, obj.auth_type, obj.billing, obj.overage, obj.reason
        )
        actor = request.user.get_username()
        if change:
            saved = services.update_catalog_entry(obj.pk, data, actor=actor)
        else:
            saved = services.create_catalog_entry(data, actor=actor)
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: BillingCatalogEntry) -> None:
        services.delete_catalog_entry(obj.pk, actor=request.user.get_username())


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = (
        "provider",
        "model",
        "input_usd_per_mtok",
        "output_usd_per_mtok",
        "tier_override",
        "updated_at",
    )
    list_filter = ("provider", "tier_override")
    search_fields = ("provider", "model")
    readonly_fields = ("updated_at", "updated_by")

    def save_model(self, request: HttpRequest, obj: ModelPrice, form: Any, change: bool) -> None:
        data = services.PriceInput(
            obj.provider,
            obj.model,
            obj.input_usd_per_mtok,
            obj.output_usd_per_mtok,
            obj.tier_override or None,
        )
        saved, _ = services.upsert_price(data, actor=request.user.get_username())
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: ModelPrice) -> None:
        services.delete_price(obj.pk, actor=request.user.get_username())


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "action", "target_type", "target_id")
    list_filter = ("target_type", "action")
    search_fields = ("actor", "target_id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
