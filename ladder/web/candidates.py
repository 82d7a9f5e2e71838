"""The candidates pages: the list of registered candidates with the pools each one lands
in and why not where it does not, a candidate's own page, and the add, edit and delete
writes (operators; through the same services as the API, audited and counted)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from ladder import services
from ladder.core import Decision
from ladder.forms import CandidateForm
from ladder.models import Candidate, Connection, is_connection_id
from ladder.web.candidate_rows import (
    CandidateRow,
    candidate_matrix,
    candidate_rows,
    named_connection_ids,
)
from omniroute_admin import dashboard
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    done,
    operator_required,
    render,
    search_param,
    viewer_required,
)

CANDIDATES_TEMPLATE = "ladder/candidates.html"
CANDIDATE_TEMPLATE = "ladder/candidate_detail.html"
CANDIDATES_PER_PAGE = 100
CONFIRM_DELETE = "confirm-delete"
SAVED_EVENT = "candidate-saved"
ADD_IDS = "add-%s"


def _rows(
    candidates: list[Candidate], now: datetime, decisions: list[Decision] | None = None
) -> list[CandidateRow]:
    """Rows with their placements: the published decisions (six queries, unless given)
    and which of the named connections are registered (one query)."""
    if decisions is None:
        decisions = services.decide_published(now=now)
    named = {c for candidate in candidates for c in named_connection_ids(candidate)}
    registered = set(
        Connection.objects.filter(connection_id__in=named).values_list("connection_id", flat=True)
    )
    return candidate_rows(candidates, decisions, registered, now)


def candidates_context(request: HtmxHttpRequest, now: datetime) -> dict[str, Any]:
    """One page of the list (search and page from the query)."""
    search = search_param(request)
    query = Candidate.objects.order_by("priority", "id")
    if search:
        query = query.filter(
            Q(provider__icontains=search)
            | Q(model__icontains=search)
            | Q(connection_id__icontains=search)
        )
    page = Paginator(query, CANDIDATES_PER_PAGE).get_page(request.GET.get("page"))
    search_params = {"q": search} if search else {}
    decisions = services.decide_published(now=now)
    return {
        "now": now,
        "matrix": candidate_matrix(_rows(list(page.object_list), now, decisions), decisions),
        "page": page,
        "search": search,
        "search_params": urlencode(search_params),
        "query_string": urlencode({**search_params, "page": str(page.number)}),
        "candidate_base": reverse("ladder:candidates"),
        "connection_base": reverse("ladder:connections"),
    }


def registered_connections() -> list[tuple[str, str]]:
    """Every registered connection id with its provider, by id (one query): what the
    candidate form's connection fields offer."""
    return list(
        Connection.objects.order_by("connection_id").values_list("connection_id", "provider")
    )


def add_context(
    request: HtmxHttpRequest | None = None,
    *,
    form: CandidateForm | None = None,
    added: Candidate | None = None,
) -> dict[str, Any]:
    """The add form; `?connection=<id>` fills in a connection to pin (and its provider)."""
    prefill: dict[str, Any] = {"priority": 0}
    wanted = request.GET.get("connection", "") if request is not None else ""
    registered = registered_connections()
    if form is None and wanted and is_connection_id(wanted):
        prefill["connection_id"] = wanted
        provider = dict(registered).get(wanted)
        if provider:
            prefill["provider"] = provider
    return {
        "registered_connections": registered,
        "add_form": form or CandidateForm(auto_id=ADD_IDS, initial=prefill),
        "add_open": form is not None or "connection_id" in prefill,
        "added": added,
    }


@require_GET
@viewer_required
def candidates(request: HtmxHttpRequest) -> TemplateResponse:
    """Every registered candidate, with the pools it lands in and why not elsewhere."""
    context = {**candidates_context(request, dashboard.current_time()), **add_context(request)}
    return render(
        request, CANDIDATES_TEMPLATE, context, partials=("candidates-table", "candidate-add")
    )


def _add_panel(request: HtmxHttpRequest, *, status: int = 200, **add: Any) -> TemplateResponse:
    context = add_context(**add)
    if not request.htmx or request.htmx.history_restore_request:
        context = {**candidates_context(request, dashboard.current_time()), **context}
    return render(request, CANDIDATES_TEMPLATE, context, partials=("candidate-add",), status=status)


def _actor(request: HtmxHttpRequest) -> str:
    return str(request.user.get_username())


@require_POST
@operator_required
def candidate_add(request: HtmxHttpRequest) -> HttpResponseBase:
    """Register a candidate; field errors come back with a 422 and nothing changes."""
    form = CandidateForm(request.POST, auto_id=ADD_IDS, registered=dict(registered_connections()))
    if not form.is_valid():
        return _add_panel(request, status=422, form=form)
    candidate = services.save_candidate(form.candidate_input(), actor=_actor(request))

    def refreshed() -> TemplateResponse:
        response = _add_panel(request, added=candidate)
        response["HX-Trigger"] = SAVED_EVENT
        return response

    return done(
        request,
        f"Added candidate {candidate.pk}: {candidate.provider}/{candidate.model}.",
        reverse("ladder:candidate", args=[candidate.pk]),
        render_partial=refreshed,
    )


def candidate_or_404(candidate_id: int) -> Candidate:
    candidate = Candidate.objects.filter(pk=candidate_id).first()
    if candidate is None:
        raise Http404(f"No candidate {candidate_id}.")
    return candidate


def candidate_initial(candidate: Candidate) -> dict[str, Any]:
    return {
        "provider": candidate.provider,
        "model": candidate.model,
        "categories": ", ".join(candidate.categories or ()),
        "priority": candidate.priority,
        "connection_id": candidate.connection_id or "",
        "allowed_connection_ids": ", ".join(candidate.allowed_connection_ids or ()),
    }


def candidate_context(candidate: Candidate, now: datetime) -> dict[str, Any]:
    return {
        "now": now,
        "row": _rows([candidate], now)[0],
        "connection_base": reverse("ladder:connections"),
    }


def edit_context(
    candidate: Candidate,
    *,
    form: CandidateForm | None = None,
    is_confirming_delete: bool = False,
    notice: str | None = None,
) -> dict[str, Any]:
    return {
        "candidate": candidate,
        "registered_connections": registered_connections(),
        "edit_form": form or CandidateForm(initial=candidate_initial(candidate)),
        "is_confirming_delete": is_confirming_delete,
        "edit_notice": notice,
    }


@require_GET
@viewer_required
def candidate_detail(request: HtmxHttpRequest, candidate_id: int) -> TemplateResponse:
    """One candidate: where it lands and why not elsewhere; for operators its edit form
    (`?confirm-delete` asks to confirm its deletion)."""
    candidate = candidate_or_404(candidate_id)
    context = {
        **candidate_context(candidate, dashboard.current_time()),
        **edit_context(candidate, is_confirming_delete=CONFIRM_DELETE in request.GET),
    }
    return render(
        request, CANDIDATE_TEMPLATE, context, partials=("candidate-status", "candidate-edit")
    )


def _edit_panel(
    request: HtmxHttpRequest, candidate: Candidate, *, status: int = 200, **edit: Any
) -> TemplateResponse:
    context = edit_context(candidate, **edit)
    if not request.htmx or request.htmx.history_restore_request:
        context = {**candidate_context(candidate, dashboard.current_time()), **context}
    return render(request, CANDIDATE_TEMPLATE, context, partials=("candidate-edit",), status=status)


def _to_list(request: HtmxHttpRequest) -> HttpResponseBase:
    url = reverse("ladder:candidates")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@operator_required
def candidate_edit(request: HtmxHttpRequest, candidate_id: int) -> HttpResponseBase:
    """Replace a candidate's fields; field errors come back with a 422."""
    candidate = Candidate.objects.filter(pk=candidate_id).first()
    if candidate is None:
        messages.error(request, f"No candidate {candidate_id}: nothing was saved.")
        return _to_list(request)
    # The ids it names already were confirmed when first saved: only new ones are asked.
    known = {*dict(registered_connections()), *named_connection_ids(candidate)}
    form = CandidateForm(request.POST, registered=known)
    if not form.is_valid():
        return _edit_panel(request, candidate, status=422, form=form)
    try:
        saved = services.save_candidate(form.candidate_input(), candidate_id, actor=_actor(request))
    except services.NotFound:  # deleted meanwhile: never recreate it from an edit
        messages.error(request, f"No candidate {candidate_id}: nothing was saved.")
        return _to_list(request)
    message = f"Saved candidate {candidate_id}."

    def refreshed() -> TemplateResponse:
        response = _edit_panel(request, saved, notice=message)
        response["HX-Trigger"] = SAVED_EVENT
        return response

    return done(
        request, message, reverse("ladder:candidate", args=[candidate_id]), render_partial=refreshed
    )


@require_POST
@operator_required
def candidate_delete(request: HtmxHttpRequest, candidate_id: int) -> HttpResponseBase:
    """Remove a candidate (after the confirmation step); back to the list."""
    if services.delete_candidate(candidate_id, actor=_actor(request)):
        messages.success(
            request,
            f"Deleted candidate {candidate_id}: its pools no longer list it.",
        )
    else:
        messages.error(request, f"No candidate {candidate_id}: it was deleted already.")
    return _to_list(request)
