"""The audit page: every recorded change (catalog, prices, settings, connections,
candidates, API tokens, webhooks, test notifications), newest first: who, when, what
(linked to the object while it exists) and the changed fields before and after.

Viewers read it: the snapshots hold no secret (tokens record name, scope, prefix and
revocation, never the secret or its hash; webhooks the URL's origin, never the signing
secret; connections whether a credential is stored, never the credential), and any
field named like a secret is shown as "hidden" all the same."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.core.audit_changes import (
    FIELD_LABELS,
    TARGET_KINDS,
    FieldChange,
    field_changes,
    kind_name,
    target_label,
)
from ladder.models import ApiToken, Candidate, Connection, Webhook
from ladder.web.presenters import duration_text
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, render, search_param, viewer_required

AUDIT_TEMPLATE: Final = "ladder/audit.html"
AUDIT_PER_PAGE: Final = 50
ACTIONS: Final = {"create": "created", "update": "changed", "delete": "deleted"}

# Target types whose objects have a place in the dashboard: the model that holds them
# and the URL of that place (an id the model no longer holds is shown, not linked).
_LINKED: Final[dict[str, tuple[Any, str]]] = {
    "catalog": (BillingCatalogEntry, "billing:catalog"),
    "price": (ModelPrice, "billing:prices"),
    "candidate": (Candidate, "ladder:candidates"),
    "token": (ApiToken, "ladder:tokens"),
    "webhook": (Webhook, "ladder:notifications"),
}
_ANCHORS: Final = {
    "catalog": "#entry-{id}",
    "price": "#price-{id}",
    "candidate": "{id}/",
    "token": "#token-{id}",
    "webhook": "#webhook-{id}",
}


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One change as the page shows it."""

    entry: AuditEntry
    action: str  # created, changed, deleted
    kind: str  # Catalog entry, Price, ...
    title: str  # "Price 4"; the settings, a single row, go by their name alone
    label: str  # the object's own name, "" when its snapshot names none
    url: str | None  # where the object is now; None when it is gone or has no page
    ago: str
    changes: list[FieldChange]


def _existing(entries: list[AuditEntry]) -> dict[str, set[str]]:
    """The target ids on this page that still exist, by type (a query per linked type)."""
    wanted: dict[str, set[int]] = {}
    for entry in entries:
        if entry.target_type in _LINKED and entry.target_id.isdigit():
            wanted.setdefault(entry.target_type, set()).add(int(entry.target_id))
    found: dict[str, set[str]] = {}
    connection_ids = {e.target_id for e in entries if e.target_type == "connection"}
    if connection_ids:
        found["connection"] = set(
            Connection.objects.filter(connection_id__in=connection_ids).values_list(
                "connection_id", flat=True
            )
        )
    for target_type, ids in wanted.items():
        model = _LINKED[target_type][0]
        found[target_type] = {
            str(pk) for pk in model.objects.filter(pk__in=ids).values_list("pk", flat=True)
        }
    return found


def _url(entry: AuditEntry, existing: dict[str, set[str]]) -> str | None:
    if entry.target_type == "settings":
        return reverse("ladder:settings")
    if entry.target_id not in existing.get(entry.target_type, ()):
        return None
    if entry.target_type == "connection":
        return reverse("ladder:connection", args=[entry.target_id])
    return reverse(_LINKED[entry.target_type][1]) + _ANCHORS[entry.target_type].format(
        id=entry.target_id
    )


def audit_rows(entries: list[AuditEntry], now: datetime) -> list[AuditRow]:
    """The page's rows, each object linked while it exists."""
    existing = _existing(entries)
    return [
        AuditRow(
            entry=entry,
            action=ACTIONS.get(entry.action, entry.action),
            kind=kind_name(entry.target_type),
            title=kind_name(entry.target_type)
            + ("" if entry.target_type == "settings" else f" {entry.target_id}"),
            label=target_label(entry.target_type, entry.before, entry.after),
            url=_url(entry, existing),
            ago=duration_text((now - entry.at).total_seconds()),
            changes=field_changes(entry.action, entry.before, entry.after),
        )
        for entry in entries
    ]


def _shown_text(entry: AuditEntry) -> str:
    """What a row shows, as one lowercase text: the id, the person, the kind, the
    object's name, and each changed field's label and values (secrets as "hidden")."""
    parts = [
        entry.target_id,
        entry.actor,
        kind_name(entry.target_type),
        target_label(entry.target_type, entry.before, entry.after),
    ]
    for change in field_changes(entry.action, entry.before, entry.after):
        parts.extend(part for part in (change.label, change.before, change.after) if part)
    return "\n".join(parts).casefold()


def _matching_ids(query: QuerySet[AuditEntry], search: str) -> list[int]:
    """The rows whose shown text holds the search: what the operator reads ("Input
    price", "gpt-4o", "Webhook"), never a snapshot's internal key ("input_usd_per_mtok",
    which every price row holds) nor a value the row does not show (one query: the
    database narrows to rows whose id, person, kind, keys or values hold the text, then
    the rows are read as the page shows them)."""
    wanted = search.casefold()
    kinds = [name for name in TARGET_KINDS if wanted in kind_name(name).casefold()]
    labelled = [name for name, label in FIELD_LABELS.items() if wanted in label.casefold()]
    narrowed = (
        Q(target_id__icontains=search)
        | Q(actor__icontains=search)
        | Q(target_type__in=kinds)
        | Q(before__icontains=search)
        | Q(after__icontains=search)
    )
    for name in labelled:
        narrowed |= Q(before__has_key=name) | Q(after__has_key=name)
    candidates = query.filter(narrowed).only(
        "id", "target_type", "target_id", "action", "actor", "before", "after"
    )
    return [entry.pk for entry in candidates if wanted in _shown_text(entry)]


def audit_context(request: HtmxHttpRequest, now: datetime) -> dict[str, Any]:
    """One page of the trail, filtered by type and actor and searched (all in the URL)."""
    types = list(
        AuditEntry.objects.order_by("target_type").values_list("target_type", flat=True).distinct()
    )
    actors = list(AuditEntry.objects.order_by("actor").values_list("actor", flat=True).distinct())
    wanted_type = request.GET.get("type", "")
    wanted_type = wanted_type if wanted_type in types else ""
    wanted_actor = request.GET.get("actor", "")
    wanted_actor = wanted_actor if wanted_actor in actors else ""
    search = search_param(request)
    query = AuditEntry.objects.order_by("-at", "-id")
    if wanted_type:
        query = query.filter(target_type=wanted_type)
    if wanted_actor:
        query = query.filter(actor=wanted_actor)
    if search:
        query = query.filter(pk__in=_matching_ids(query, search))
    page = Paginator(query, AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    filters = {
        key: value
        for key, value in (("type", wanted_type), ("actor", wanted_actor), ("q", search))
        if value
    }
    return {
        "now": now,
        "rows": audit_rows(list(page.object_list), now),
        "page": page,
        "types": [(value, kind_name(value)) for value in types],
        "actors": actors,
        "wanted_type": wanted_type,
        "wanted_actor": wanted_actor,
        "search": search,
        "filtered": bool(filters),
        "filter_params": urlencode(filters),
    }


@require_GET
@viewer_required
def audit(request: HtmxHttpRequest) -> TemplateResponse:
    """The audit trail, newest first (the `audit-table` fragment for HTMX)."""
    return render(
        request,
        AUDIT_TEMPLATE,
        audit_context(request, dashboard.current_time()),
        partials=("audit-table",),
    )
