"""The billing catalog's page: list, create, edit and delete inline, with validation
and conflict messages and each entry's audit history."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from django.core.exceptions import ValidationError
from django.http import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from billing import services
from billing.classify import Catalog
from billing.forms import CatalogEntryForm
from billing.models import AuditEntry, BillingCatalogEntry
from billing.names import KnownNames
from billing.views import EDIT_IDS, NEW_IDS, error_notice
from ladder.core.audit_changes import field_changes
from ladder.models import Connection
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    int_param,
    operator_required,
    render,
    viewer_required,
)

CATALOG_TEMPLATE = "billing/catalog.html"
# Newest first; enough for every entry's recent history without an unbounded read.
AUDIT_ROWS = 500
HISTORY_PER_ENTRY = 10
CONNECTIONS_SHOWN = 12


@dataclass(frozen=True, slots=True)
class AuditLine:
    """One change of an entry: who, when, what, and the fields that changed."""

    entry: AuditEntry
    changes: list[str]

    @property
    def verb(self) -> str:
        """What happened, as the audit trail says it: created, changed, deleted."""
        return _VERBS.get(self.entry.action, self.entry.action)


_VERBS: Final = {"create": "created", "update": "changed", "delete": "deleted"}


def audit_line(entry: AuditEntry) -> AuditLine:
    """The changed fields of an audit row as the audit trail writes them ("Billing:
    metered → subscription"): labels, not internal names; a created or deleted entry's
    fields without its reason; a value written differently is no change."""
    changes = []
    for change in field_changes(entry.action, entry.before, entry.after):
        if change.before is None or change.after is None:
            if change.field != "reason":
                changes.append(f"{change.label}: {change.after or change.before}")
        else:
            changes.append(f"{change.label}: {change.before} \u2192 {change.after}")
    return AuditLine(entry, changes)


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """An entry with the connections it decides and its recent history."""

    entry: BillingCatalogEntry
    connections: list[str]
    more_connections: int
    history: list[AuditLine]


def _decided(
    entries: Iterable[BillingCatalogEntry], names: set[tuple[str, str]] | None = None
) -> tuple[dict[int, list[str]], list[str]]:
    """Which registered connections each entry decides, and those no entry covers
    (`names` collects the connections' providers and auth types)."""
    catalog = Catalog(entry.as_row() for entry in entries)
    decided: dict[int, list[str]] = {}
    uncurated: list[str] = []
    for connection_id, provider, auth_type in Connection.objects.order_by(
        "connection_id"
    ).values_list("connection_id", "provider", "auth_type"):
        if names is not None:
            names.add((provider, auth_type))
        verdict = catalog.classify(provider, auth_type)
        if verdict.catalog_entry_id is not None:
            decided.setdefault(verdict.catalog_entry_id, []).append(connection_id)
        elif verdict.is_uncurated:
            uncurated.append(connection_id)
    return decided, uncurated


def catalog_context(
    *,
    editing: int | None = None,
    edit_form: CatalogEntryForm | None = None,
    deleting: int | None = None,
    create_form: CatalogEntryForm | None = None,
    notice: dict[str, str] | None = None,
    focus_row: int | None = None,
    prefill: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Entries with what they decide and their history (four queries whatever the size).
    An edit form opened here takes the focus (its first field); `focus_row`: the row just
    saved, where the focus goes back to; `prefill`: fields a link presets on the opened
    form (the create form when none is opened), never saved until the operator saves."""
    entries = list(BillingCatalogEntry.objects.all())
    in_use: set[tuple[str, str]] = set()
    decided, uncurated = _decided(entries, in_use)
    known = KnownNames.of([*((e.provider, e.auth_type) for e in entries), *in_use])
    history: dict[str, list[AuditLine]] = {}
    deleted: list[AuditLine] = []
    for audit in AuditEntry.objects.filter(target_type="catalog")[:AUDIT_ROWS]:
        lines = history.setdefault(audit.target_id, [])
        if len(lines) < HISTORY_PER_ENTRY:
            lines.append(audit_line(audit))
        if audit.action == AuditEntry.Action.DELETE and len(deleted) < HISTORY_PER_ENTRY:
            deleted.append(audit_line(audit))
    rows = []
    for entry in entries:
        ids = decided.get(entry.pk, [])
        rows.append(
            CatalogRow(
                entry=entry,
                connections=ids[:CONNECTIONS_SHOWN],
                more_connections=max(len(ids) - CONNECTIONS_SHOWN, 0),
                history=history.get(str(entry.pk), []),
            )
        )
    if editing is not None and edit_form is None:
        found = next((e for e in entries if e.pk == editing), None)
        if found is None:
            editing = None
            notice = notice or {"level": "error", "message": "That entry no longer exists."}
        else:
            edit_form = CatalogEntryForm(
                known=known,
                auto_id=EDIT_IDS,
                initial={
                    "provider": found.provider,
                    "auth_type": found.auth_type or "",
                    "billing": found.billing,
                    "overage": found.overage,
                    "reason": found.reason,
                    "version": found.version,
                    **{k: v for k, v in (prefill or {}).items() if k in _EDIT_PREFILL},
                },
            )
            edit_form.fields["provider"].widget.attrs["data-focus"] = ""
    if create_form is None and editing is None and prefill:
        create_form = CatalogEntryForm(known=known, auto_id=NEW_IDS, initial=prefill)
        create_form.fields["provider"].widget.attrs["data-focus"] = ""
    return {
        "rows": rows,
        "uncurated": uncurated[:CONNECTIONS_SHOWN],
        "uncurated_count": len(uncurated),
        "deleted": deleted,
        "editing": editing,
        "edit_form": edit_form,
        "deleting": deleting,
        "create_form": create_form or CatalogEntryForm(known=known, auto_id=NEW_IDS),
        "notice": notice,
        "focus_row": focus_row,
        "curated_providers": sorted({entry.provider for entry in entries}),
        "curated_auth_types": sorted({entry.auth_type for entry in entries if entry.auth_type}),
    }


def _known_names() -> KnownNames:
    """The providers and auth types of the catalog and the connections (two queries)."""
    return KnownNames.of(
        [
            *BillingCatalogEntry.objects.values_list("provider", "auth_type"),
            *Connection.objects.values_list("provider", "auth_type"),
        ]
    )


def _catalog(request: HtmxHttpRequest, status: int = 200, **context: Any) -> TemplateResponse:
    return render(
        request,
        CATALOG_TEMPLATE,
        catalog_context(**context),
        partials=("catalog-table",),
        status=status,
    )


# Fields a link may preset (the connection page's offer to curate a connection whose
# evidence says "hard stop" as hard-stop); an edit keeps its provider and auth type.
_PREFILL: Final = ("provider", "auth_type", "billing", "overage", "reason")
_EDIT_PREFILL: Final = frozenset({"billing", "overage", "reason"})
_PREFILL_MAX_LENGTH: Final = 500


@require_GET
@viewer_required
def catalog(request: HtmxHttpRequest) -> TemplateResponse:
    """The curated catalog; `?edit=<id>` opens an entry's form, `?delete=<id>` asks to
    confirm its deletion; `provider`, `auth_type`, `billing`, `overage` and `reason`
    preset the opened form's fields (the create form's when no entry is opened)."""
    prefill = {
        name: request.GET[name][:_PREFILL_MAX_LENGTH] for name in _PREFILL if request.GET.get(name)
    }
    return _catalog(
        request,
        editing=int_param(request, "edit"),
        deleting=int_param(request, "delete"),
        prefill=prefill,
    )


@require_POST
@operator_required
def catalog_create(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create an entry (audited); a duplicate is a 409 with the rule it breaks."""
    form = CatalogEntryForm(request.POST, known=_known_names(), auto_id=NEW_IDS)
    if not form.is_valid():
        return _catalog(request, 422, create_form=form)
    try:
        entry = services.create_catalog_entry(
            form.catalog_input(), actor=request.user.get_username()
        )
    except ValidationError as error:
        form.add_error(None, error)
        return _catalog(request, 422, create_form=form)
    except services.Conflict as error:
        return _catalog(request, 409, create_form=form, notice=error_notice(str(error)))
    message = f"Created {entry.provider}/{entry.auth_type or '*'}."
    return done(
        request,
        message,
        reverse("billing:catalog") + f"#entry-{entry.pk}",
        render_partial=lambda: _catalog(
            request, notice={"level": "success", "message": message}, focus_row=entry.pk
        ),
    )


@require_POST
@operator_required
def catalog_update(request: HtmxHttpRequest, entry_id: int) -> HttpResponseBase:
    """Save an entry over the version the operator loaded; a newer version or a
    duplicate is a 409 and nothing changes."""
    form = CatalogEntryForm(request.POST, known=_known_names(), auto_id=EDIT_IDS)
    if not form.is_valid():
        return _catalog(request, 422, editing=entry_id, edit_form=form)
    try:
        entry = services.update_catalog_entry(
            entry_id,
            form.catalog_input(),
            actor=request.user.get_username(),
            expected_version=form.cleaned_data["version"],
        )
    except BillingCatalogEntry.DoesNotExist:
        return _catalog(
            request,
            404,
            notice=error_notice("That entry was deleted meanwhile; nothing was saved."),
        )
    except ValidationError as error:
        form.add_error(None, error)
        return _catalog(request, 422, editing=entry_id, edit_form=form)
    except services.Conflict as error:
        return _catalog(
            request, 409, editing=entry_id, edit_form=form, notice=error_notice(str(error))
        )
    message = f"Saved {entry.provider}/{entry.auth_type or '*'} (version {entry.version})."
    return done(
        request,
        message,
        reverse("billing:catalog") + f"#entry-{entry.pk}",
        render_partial=lambda: _catalog(
            request, notice={"level": "success", "message": message}, focus_row=entry.pk
        ),
    )


@require_POST
@operator_required
def catalog_delete(request: HtmxHttpRequest, entry_id: int) -> HttpResponseBase:
    """Delete an entry (audited) after the confirmation step."""
    try:
        services.delete_catalog_entry(entry_id, actor=request.user.get_username())
    except BillingCatalogEntry.DoesNotExist:
        return _catalog(request, 404, notice=error_notice("That entry was deleted already."))
    message = (
        "Entry deleted. The connections it decided now fall back to a provider-wide entry "
        "or count as metered."
    )
    return done(
        request,
        message,
        reverse("billing:catalog"),
        render_partial=lambda: _catalog(request, notice={"level": "success", "message": message}),
    )
