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
from django.db.models import Q
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.core.audit_changes import (
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
        # The snapshots too ("gpt-4o", a token's name): they hold no secret to find.
        query = query.filter(
            Q(target_id__icontains=search)
            | Q(actor__icontains=search)
            | Q(before__icontains=search)
            | Q(after__icontains=search)
        )
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
