"""The connections pages: the list with its add form, a connection's page with its
24-hour chart and edit form, and the refresh, edit, add and delete writes."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import wraps
from typing import Any, cast

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from ladder import services
from ladder.core.why import hysteresis_why
from ladder.crypto import CredentialKeyMissing
from ladder.forms import ConnectionAddForm, ConnectionEditForm
from ladder.models import Candidate, Connection, is_connection_id
from ladder.web.candidate_rows import candidates_naming
from ladder.web.charts import remaining_chart, settings_periods
from ladder.web.connection_states import (
    BILLING_CHOICES,
    RUNG_CHOICES,
    StandingRow,
    StandState,
    filtered_sorted,
    list_query,
    memberships,
    sort_links,
    stand_state,
)
from ladder.web.forecast_chart import forecast_drawing, forecast_until
from ladder.web.onboarding import push_instructions
from ladder.web.presenters import CONNECTIONS_PER_PAGE, connection_table
from omniroute_admin import dashboard
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    ViewFunction,
    done,
    operator_required,
    render,
    search_param,
    viewer_required,
)

HISTORY_HOURS = 24
# The table's column titles, in the order of connection_states.SORTS.
SORT_TITLES = ("Connection", "Billing", "Rung", "Quota", "State", "Cooldown", "Reading")
CONNECTIONS_TEMPLATE = "ladder/connections.html"


def connection_id_or_404(view: ViewFunction) -> ViewFunction:
    """A 404 for an id outside the connection id rule (`.`, `..`), before any lookup:
    clients normalise such ids out of URLs, so no page may depend on them."""

    @wraps(view)
    def checked(request: HttpRequest, connection_id: str, *args: Any, **kwargs: Any) -> Any:
        if not is_connection_id(connection_id):
            raise Http404("No such connection.")
        return view(request, connection_id, *args, **kwargs)

    return cast(ViewFunction, checked)


def connections_context(request: HttpRequest, now: datetime) -> dict[str, Any]:
    """The connections page: one page of the table, filtered and sorted (search, filters,
    sort and page from the query string, so every view of the list has its URL)."""
    search = search_param(request)
    query = list_query(request.GET)
    table = connection_table(
        now, search=search, page_number=request.GET.get("page"), is_whole=query.is_computed
    )
    # Where each connection stands in the published pools (six queries, any fleet size).
    standing = memberships(services.decide_published(now=now))
    rows = []
    for row in table.rows:
        membership = standing.get(row.connection.connection_id)
        rows.append(StandingRow(row, stand_state(row, membership), membership))
    page: Page[Any] | Page[StandingRow]
    if query.is_computed:
        page = Paginator(filtered_sorted(rows, query), CONNECTIONS_PER_PAGE).get_page(
            request.GET.get("page")
        )
        page_rows = list(page.object_list)
    else:
        assert table.page is not None
        page = table.page
        page_rows = rows
    filter_params = {**({"q": search} if search else {}), **query.params()}
    return {
        "now": now,
        "rows": page_rows,
        "page": page,
        "config": table.config,
        "search": search,
        "list_query": query,
        "search_params": urlencode(filter_params),
        "query_string": urlencode({**filter_params, "page": str(page.number)}),
        "sort_columns": [
            (title, link)
            for title, link in zip(SORT_TITLES, sort_links(query, search).values(), strict=True)
        ],
        "rung_choices": RUNG_CHOICES,
        "billing_choices": BILLING_CHOICES,
        "state_choices": [(state.slug, state.value) for state in StandState],
        "unnamed_count": sum(1 for r in rows if r.state is StandState.NO_CANDIDATE),
        # Built once: reversing a URL per row is measurable on 500 connections.
        "connection_base": reverse("ladder:connections"),
        "catalog_url": reverse("billing:catalog"),
        "candidate_add_url": reverse("ladder:candidates"),
    }


@require_GET
@viewer_required
def connections(request: HtmxHttpRequest) -> TemplateResponse:
    """Every connection: billing verdict, rung, quota, hysteresis, cooldown, reading."""
    context = {**connections_context(request, dashboard.current_time()), **connection_add_context()}
    return render(
        request,
        CONNECTIONS_TEMPLATE,
        context,
        partials=("connections-table", "refresh-notice", "connection-add"),
    )


@require_POST
@operator_required
@connection_id_or_404
def refresh_connection(request: HtmxHttpRequest, connection_id: str) -> HttpResponseBase:
    """Ask the worker to poll this connection's quota source now."""
    status = 202
    try:
        services.request_refresh(connection_id)
        level, message = (
            "success",
            f"Refresh of {connection_id} queued; the row updates when it lands.",
        )
    except services.NotFound as error:
        status, level, message = 404, "error", str(error)
    except services.NoQuotaSource as error:
        status, level, message = 409, "error", str(error)
    except services.BrokerUnavailable:
        status, level, message = (
            503,
            "error",
            "The task broker is down: nothing was queued. Readings will go stale until it is back.",
        )
    if request.htmx:
        context = {"notice": {"level": level, "message": message}}
        return render(
            request, "ladder/connections.html", context, partials=("refresh-notice",), status=status
        )
    messages.add_message(request, messages.SUCCESS if status == 202 else messages.ERROR, message)
    return redirect("ladder:connections")


CONNECTION_DETAIL_TEMPLATE = "ladder/connection_detail.html"


def whole_minute_after(now: datetime) -> datetime:
    """`now` on a whole minute, else the next whole minute."""
    floor = now.replace(second=0, microsecond=0)
    return floor if floor == now else floor + timedelta(minutes=1)


def connection_detail_context(
    now: datetime, connection_id: str, base_url: str = ""
) -> dict[str, Any]:
    """One connection's status, where it stands in the published pools, the candidates
    that name it, its last 24 hours of readings and its transitions, and its forecast."""
    table = connection_table(now, connection_id=connection_id)
    row = table.rows[0]
    # The chart's axis ends on the next whole minute (at most a minute, under a pixel,
    # ahead): a poll of an unchanged connection draws the same chart for a minute, the
    # same bytes, answered 304 (docs/DASHBOARD.md, "Live updates").
    drawn_until = whole_minute_after(now)
    since = drawn_until - timedelta(hours=HISTORY_HOURS)
    readings = services.reading_history(row.connection, since=since)
    transitions = services.transition_history(row.connection, since=since)
    # Each stored sentence presented under the current settings (ladder.core.why).
    explained = [
        (t, hysteresis_why(t.state, t.reason, table.config, is_current=False)) for t in transitions
    ]
    periods = settings_periods(services.settings_changes_since(since))
    forecast = services.forecast_of(
        row.connection, now=now, config=table.config, billing=row.verdict.billing
    )
    chart = remaining_chart(
        readings,
        explained,
        row.config or table.config,
        since,
        drawn_until,
        periods,
        until=forecast_until(forecast, drawn_until),
    )
    membership = memberships(services.decide_published(now=now)).get(connection_id)
    naming = candidates_naming(connection_id, Candidate.objects.order_by("priority", "id"))
    return {
        "now": now,
        "row": row,
        "state": stand_state(row, membership),
        "membership": membership,
        "naming": naming,
        "push": push_instructions(row.connection, table.config, base_url, now)
        if not row.can_refresh
        else None,
        "config": row.config or table.config,
        "chart": chart,
        "forecast": forecast,
        "forecast_outcomes": services.forecast_outcomes(connection_id),
        "forecast_drawing": forecast_drawing(
            chart,
            forecast,
            readings,
            (row.config or table.config).exit_cutoff_percent,
            drawn_until,
        ),
        "readings": readings,
        "readings_count": len(readings),
        "transitions": explained,
        "history_hours": HISTORY_HOURS,
        "candidate_base": reverse("ladder:candidates"),
    }


def origin(request: HttpRequest) -> str:
    """This server as the browser reached it ("https://admin.example"), for the requests
    a page tells an operator to send."""
    return request.build_absolute_uri("/").rstrip("/")


@require_GET
@viewer_required
@connection_id_or_404
def connection_detail(request: HtmxHttpRequest, connection_id: str) -> TemplateResponse:
    """One connection: its status and a chart of the last 24 hours with its transitions;
    for operators its edit form (`?confirm-delete` asks to confirm its deletion)."""
    context = connection_detail_context(dashboard.current_time(), connection_id, origin(request))
    context.update(
        connection_edit_context(
            context["row"].connection, is_confirming_delete=CONFIRM_DELETE in request.GET
        )
    )
    return render(
        request,
        CONNECTION_DETAIL_TEMPLATE,
        context,
        partials=("connection-status", "connection-edit"),
    )


# --- connection edit, add and delete -------------------------------------------------------

# The credential is write-only: never rendered (the form's input has no value, even when it
# comes back with errors), never logged, and masked in error reports.
NO_CREDENTIAL_KEY = (
    "No credential key is configured (OMNIROUTE_CREDENTIAL_KEY): the credential was not stored"
)
CONFIRM_DELETE = "confirm-delete"
# Sent with a saved connection: the live parts of the page reload at once, not on their poll.
SAVED_EVENT = "connection-saved"
# The add form's element ids, distinct from the search box's on the same page.
ADD_IDS = "add-%s"
ADD_INITIAL = {"active": True, "quota_source": "none"}


def connection_initial(connection: Connection) -> dict[str, Any]:
    """The edit form's values: every field but the credential, which is never shown."""
    return {
        "provider": connection.registered_provider or connection.provider,
        "auth_type": connection.auth_type,
        "label": connection.label,
        "active": connection.is_active,
        "quota_source": connection.quota_source,
        "exit_cutoff_percent": connection.exit_cutoff_percent,
        "reentry_min_remaining_percent": connection.reentry_min_remaining_percent,
    }


def connection_edit_context(
    connection: Connection,
    *,
    form: ConnectionEditForm | None = None,
    is_confirming_delete: bool = False,
    notice: dict[str, str] | None = None,
    is_saved: bool = False,
) -> dict[str, Any]:
    """The edit panel of a connection page."""
    return {
        "connection": connection,
        "edit_form": form or ConnectionEditForm(initial=connection_initial(connection)),
        "is_confirming_delete": is_confirming_delete,
        "edit_notice": notice,
        "is_saved": is_saved,
    }


def _edit_panel(
    request: HtmxHttpRequest, connection: Connection, *, status: int = 200, **edit: Any
) -> TemplateResponse:
    context = connection_edit_context(connection, **edit)
    if not request.htmx or request.htmx.history_restore_request:
        context = {
            **connection_detail_context(
                dashboard.current_time(), connection.connection_id, origin(request)
            ),
            **context,
        }
    return render(
        request, CONNECTION_DETAIL_TEMPLATE, context, partials=("connection-edit",), status=status
    )


def _to_connections(request: HtmxHttpRequest) -> HttpResponseBase:
    """To the connections list (its page shows the flashed message): the connection's own
    page is gone."""
    url = reverse("ladder:connections")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@sensitive_post_parameters("credential")
@require_POST
@operator_required
@connection_id_or_404
def connection_edit(request: HtmxHttpRequest, connection_id: str) -> HttpResponseBase:
    """Save a connection's fields: a typed credential replaces the stored one, an empty
    input keeps it, the checkbox clears it. Field errors come back with a 422."""
    connection = Connection.objects.filter(connection_id=connection_id).first()
    if connection is None:
        messages.error(request, f"No connection {connection_id!r}: nothing was saved.")
        return _to_connections(request)
    form = ConnectionEditForm(request.POST)
    if form.is_valid():
        try:
            connection, _ = services.upsert_connection(
                connection_id,
                form.connection_input(),
                must_exist=True,
                actor=request.user.get_username(),
            )
        except CredentialKeyMissing:
            # Raised before anything is written: nothing changed.
            form.add_error("credential", NO_CREDENTIAL_KEY)
        except services.NotFound:  # deleted meanwhile: never recreate it from an edit
            messages.error(request, f"No connection {connection_id!r}: nothing was saved.")
            return _to_connections(request)
    if not form.is_valid():
        return _edit_panel(request, connection, status=422, form=form)
    message = f"Saved {connection_id}."
    saved = connection

    def refreshed() -> TemplateResponse:
        response = _edit_panel(
            request, saved, notice={"level": "success", "message": message}, is_saved=True
        )
        response["HX-Trigger"] = SAVED_EVENT
        return response

    return done(
        request,
        message,
        reverse("ladder:connection", args=[connection_id]),
        render_partial=refreshed,
    )


def connection_add_context(
    *, form: ConnectionAddForm | None = None, added: str | None = None
) -> dict[str, Any]:
    """The add form of the connections page."""
    return {
        "add_form": form or ConnectionAddForm(auto_id=ADD_IDS, initial=ADD_INITIAL),
        "added": added,
    }


def _add_panel(request: HtmxHttpRequest, *, status: int = 200, **add: Any) -> TemplateResponse:
    context = connection_add_context(**add)
    if not request.htmx or request.htmx.history_restore_request:
        context = {**connections_context(request, dashboard.current_time()), **context}
    return render(
        request, CONNECTIONS_TEMPLATE, context, partials=("connection-add",), status=status
    )


@sensitive_post_parameters("credential")
@require_POST
@operator_required
def connection_add(request: HtmxHttpRequest) -> HttpResponseBase:
    """Register a connection under a new id; an id in use is a 409 and nothing changes."""
    form = ConnectionAddForm(request.POST, auto_id=ADD_IDS)
    if not form.is_valid():
        return _add_panel(request, status=422, form=form)
    connection_id: str = form.cleaned_data["connection_id"]
    try:
        services.upsert_connection(
            connection_id,
            form.connection_input(),
            must_exist=False,
            actor=request.user.get_username(),
        )
    except services.ConnectionExists:
        form.add_error(
            "connection_id",
            f"A connection with the id {connection_id} exists already: change it on its page.",
        )
        return _add_panel(request, status=409, form=form)
    except CredentialKeyMissing:
        form.add_error("credential", NO_CREDENTIAL_KEY)
        return _add_panel(request, status=422, form=form)

    def refreshed() -> TemplateResponse:
        response = _add_panel(request, added=connection_id)
        response["HX-Trigger"] = SAVED_EVENT
        return response

    return done(
        request,
        f"Added {connection_id}.",
        reverse("ladder:connections"),
        render_partial=refreshed,
    )


def connection_add_or_page(request: HtmxHttpRequest) -> HttpResponseBase:
    """`/connections/add/` is also the page of a connection whose id is "add" (a valid
    gateway id): a POST adds a connection, any other method is that page's."""
    if request.method == "POST":
        return connection_add(request)
    return connection_detail(request, connection_id="add")


@require_POST
@operator_required
@connection_id_or_404
def connection_delete(request: HtmxHttpRequest, connection_id: str) -> HttpResponseBase:
    """Delete a connection with its readings and transitions, after the confirmation
    step; back to the list with what happened."""
    if services.delete_connection(connection_id, actor=request.user.get_username()):
        messages.success(
            request,
            f"Deleted {connection_id} with its readings and transitions. Candidates that "
            "name it see an unregistered connection (counted as metered) until a gateway "
            "registers it again.",
        )
    else:
        messages.error(request, f"No connection {connection_id!r}: it was deleted already.")
    return _to_connections(request)
