"""Dashboard page of the provider aliases: list them (viewers too), add or replace one
and delete one (operators; a viewer's POST is a 403). Every write goes through the
audited service, so the config counter moves and warm processes reclassify at once."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from billing import services
from billing.models import PROVIDER_MAX_LENGTH, AuditEntry, ProviderAlias
from ladder.services import aliases as ladder_aliases
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    operator_required,
    render,
    viewer_required,
)

ALIASES_TEMPLATE = "billing/aliases.html"
HISTORY_ROWS = 50


class AliasForm(forms.Form):
    alias = forms.CharField(max_length=PROVIDER_MAX_LENGTH, help_text="e.g. anthropic")
    provider = forms.CharField(max_length=PROVIDER_MAX_LENGTH, help_text="e.g. claude")


def _page(request: HtmxHttpRequest, status: int = 200, **context: Any) -> TemplateResponse:
    history = AuditEntry.objects.filter(target_type="provider_alias")[:HISTORY_ROWS]
    return render(
        request,
        ALIASES_TEMPLATE,
        {
            "here": "catalog",
            "aliases": list(ProviderAlias.objects.all()),
            "history": list(history),
            "form": context.pop("form", None) or AliasForm(),
            **context,
        },
        partials=("aliases-table",),
        status=status,
    )


@require_GET
@viewer_required
def aliases(request: HtmxHttpRequest) -> TemplateResponse:
    """Every alias and the provider it names."""
    return _page(request)


@require_POST
@operator_required
def alias_save(request: HtmxHttpRequest) -> HttpResponseBase:
    """Add or replace an alias: 422 on bad input, 409 when the alias is a provider with
    catalog entries."""
    form = AliasForm(request.POST)
    if not form.is_valid():
        return _page(request, 422, form=form)
    data = services.AliasInput(form.cleaned_data["alias"], form.cleaned_data["provider"])
    try:
        row, _ = ladder_aliases.put_alias(data, actor=request.user.get_username())
    except ValidationError as error:
        form.add_error(None, error)
        return _page(request, 422, form=form)
    except services.Conflict as error:
        return _page(request, 409, form=form, notice={"level": "error", "message": str(error)})
    message = f"Saved the alias {row.alias} -> {row.provider}."
    return done(
        request,
        message,
        reverse("billing:aliases"),
        render_partial=lambda: _page(request, notice={"level": "success", "message": message}),
    )


@require_POST
@operator_required
def alias_delete(request: HtmxHttpRequest, alias: str) -> HttpResponseBase:
    """Delete an alias (audited): the name is its own provider id again."""
    try:
        ladder_aliases.delete_alias(alias, actor=request.user.get_username())
    except services.AliasNotFound:
        return _page(
            request, 404, notice={"level": "error", "message": "That alias was deleted already."}
        )
    message = f"Deleted the alias {alias}."
    return done(
        request,
        message,
        reverse("billing:aliases"),
        render_partial=lambda: _page(request, notice={"level": "success", "message": message}),
    )
