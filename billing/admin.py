"""Django admin for the catalog and prices: every write (add, change, "save as new",
delete, and every bulk action, "delete selected" included) goes through the services,
so it is validated, audited and bumps the change counters like any other. The audit
trail is read-only. tests/billing/test_admin.py holds every registered admin to this."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from omniroute_admin.admin_guards import GuardedModelAdmin


def _actor(request: HttpRequest) -> str:
    return str(request.user.get_username())


class ServiceModelAdmin(GuardedModelAdmin):
    """A ModelAdmin whose writes are service calls: subclasses save and delete through
    `service_save` and `service_delete`; the ORM's own save and delete are never used."""

    def service_save(self, request: HttpRequest, obj: Any, change: bool) -> Model:
        """Create or update through the services; returns the stored row."""
        raise NotImplementedError

    def service_delete(self, request: HttpRequest, pk: int) -> None:
        """Delete through the services; DoesNotExist when the row is gone already."""
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        obj.pk = self.service_save(request, obj, change).pk

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.service_delete(request, obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # The bulk "delete selected" action: one audited service delete per row, all or
        # nothing (QuerySet.delete() would skip the audit trail and the counters).
        with transaction.atomic():
            for pk in list(queryset.values_list("pk", flat=True)):
                try:
                    self.service_delete(request, pk)
                except self.model.DoesNotExist:  # deleted meanwhile: nothing left to do
                    continue

    def _refused(self, request: HttpRequest, error: Exception) -> HttpResponse:
        # The form was valid but the service refused at save time (a concurrent write
        # took the name, or deleted the row): the admin's transaction rolled back.
        if isinstance(error, ValidationError):
            text = "; ".join(error.messages)
        elif isinstance(error, ObjectDoesNotExist):
            text = "It was deleted meanwhile."
        else:
            text = str(error)
        messages.error(request, f"Nothing was saved: {text}")
        return HttpResponseRedirect(request.get_full_path())

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except (services.Conflict, ValidationError, ObjectDoesNotExist) as error:
            return self._refused(request, error)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except ObjectDoesNotExist as error:
            return self._refused(request, error)


CATALOG_FIELDS = ("provider", "auth_type", "billing", "overage", "reason")
PRICE_FIELDS = ("provider", "model", "input_usd_per_mtok", "output_usd_per_mtok", "tier_override")


class CatalogEntryAdminForm(forms.ModelForm):
    """The catalog entry, validated by the service's own rules before anything is saved."""

    class Meta:
        model = BillingCatalogEntry
        fields = CATALOG_FIELDS

    def clean(self) -> dict[str, Any]:
        # (Not Meta.fields: the admin's form class lists its read-only fields there too.)
        super().clean()
        cleaned: dict[str, Any] = self.cleaned_data
        if not all(name in cleaned for name in CATALOG_FIELDS):
            return cleaned  # a field error is reported already
        try:
            data = services.clean_catalog_input(
                services.CatalogInput(
                    cleaned["provider"],
                    cleaned["auth_type"],
                    cleaned["billing"],
                    cleaned["overage"],
                    cleaned["reason"],
                )
            )
        except ValidationError as error:
            self.add_error(None, error)
            return cleaned
        cleaned.update(provider=data.provider, auth_type=data.auth_type, reason=data.reason)
        return cleaned


@admin.register(BillingCatalogEntry)
class BillingCatalogEntryAdmin(ServiceModelAdmin):
    form = CatalogEntryAdminForm
    list_display = ("provider", "auth_type", "billing", "overage", "updated_at", "updated_by")
    list_filter = ("billing", "overage")
    search_fields = ("provider", "auth_type", "reason")
    readonly_fields = ("updated_at", "updated_by", "version")

    def service_save(self, request: HttpRequest, obj: Any, change: bool) -> Model:
        data = services.CatalogInput(
            obj.provider, obj.auth_type, obj.billing, obj.overage, obj.reason
        )
        if change:
            return services.update_catalog_entry(obj.pk, data, actor=_actor(request))
        return services.create_catalog_entry(data, actor=_actor(request))

    def service_delete(self, request: HttpRequest, pk: int) -> None:
        services.delete_catalog_entry(pk, actor=_actor(request))


class ModelPriceAdminForm(forms.ModelForm):
    """A price row, validated by the service's own rules before anything is saved."""

    class Meta:
        model = ModelPrice
        fields = PRICE_FIELDS

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned: dict[str, Any] = self.cleaned_data
        # provider and model are read-only on a change page: they come from the row.
        values = {
            name: cleaned[name] if name in self.fields else getattr(self.instance, name)
            for name in PRICE_FIELDS
            if name in cleaned or name not in self.fields
        }
        if len(values) < len(PRICE_FIELDS):
            return cleaned  # a field error is reported already
        try:
            data = services.clean_price_input(
                services.PriceInput(
                    values["provider"],
                    values["model"],
                    values["input_usd_per_mtok"],
                    values["output_usd_per_mtok"],
                    values["tier_override"] or None,
                )
            )
        except ValidationError as error:
            self.add_error(None, error)
            return cleaned
        for name in ("provider", "model"):
            if name in self.fields:
                cleaned[name] = getattr(data, name)
        return cleaned


@admin.register(ModelPrice)
class ModelPriceAdmin(ServiceModelAdmin):
    form = ModelPriceAdminForm
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

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A row is named by (provider, model): renaming one would be an upsert of another
        # row that leaves this one in place. Add a new row and delete this one instead.
        fields = tuple(super().get_readonly_fields(request, obj))
        return ("provider", "model", *fields) if obj is not None else fields

    def service_save(self, request: HttpRequest, obj: Any, change: bool) -> Model:
        data = services.PriceInput(
            obj.provider,
            obj.model,
            obj.input_usd_per_mtok,
            obj.output_usd_per_mtok,
            obj.tier_override or None,
        )
        saved, _ = services.upsert_price(data, actor=_actor(request))
        return saved

    def service_delete(self, request: HttpRequest, pk: int) -> None:
        services.delete_price(pk, actor=_actor(request))


@admin.register(AuditEntry)
class AuditEntryAdmin(GuardedModelAdmin):
    """The audit trail: read-only, for everyone (superusers included)."""

    list_display = ("at", "actor", "action", "target_type", "target_id")
    list_filter = ("target_type", "action")
    search_fields = ("actor", "target_id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
