"""Dashboard views: server-rendered pages whose live parts are inline partials that HTMX
polls and swaps. A partial is named after the id of the element it replaces; an HTMX
request gets the partial its `HX-Target` names, a plain request the whole page, so every
page works without JavaScript.

Access: every page needs a login and a role (the `viewer` or `operator` group, or a
superuser); writes need `operator`. Every dashboard response carries `Vary: HX-Request`
(the same URL answers with a page or a fragment, and no cache may mix them up), set here
by `patch_vary_headers` in the access decorators rather than by a middleware. The
templates use no inline script, no style attribute and no inline event handler, so the
strict Content-Security-Policy of the project's middleware holds; operator- and
gateway-supplied text is always autoescaped, never marked safe."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from functools import wraps
from typing import Any, TypeVar, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from billing import services as billing_services
from billing.bounds import without_bad_characters
from billing.classify import UNCURATED_VERDICT, BillingVerdict, Catalog
from billing.models import BillingCatalogEntry
from billing.tiers import PriceBook
from ladder import beat, services
from ladder.core import (
    SUBSCRIPTION_AUTO_ID,
    THRIFTY_AUTO_ID,
    CandidateIn,
    DecidedCandidate,
    Decision,
    Exclusion,
    HysteresisState,
    LadderConfig,
    Reason,
    Rung,
    Staleness,
    connection_rung,
    is_polled,
    parse_auto_id,
    reading_staleness,
    rung_for,
)
from ladder.core.notifications import SUBSCRIBABLE_KINDS, Kind
from ladder.crypto import CredentialKeyMissing
from ladder.forms import (
    ConnectionAddForm,
    ConnectionEditForm,
    SettingsForm,
    TokenForm,
    WebhookEditForm,
    WebhookForm,
)
from ladder.models import (
    ApiToken,
    Connection,
    HysteresisTransition,
    QuotaReading,
    Webhook,
    is_connection_id,
)
from ladder.services import notifications
from ladder.tokens import create_token, revoke_token
from omniroute_admin.login_throttle import ThrottledAuthenticationForm


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware."""

    htmx: HtmxDetails


ViewFunction = TypeVar("ViewFunction", bound=Callable[..., HttpResponseBase])

POLL_SECONDS = 5
CONNECTIONS_PER_PAGE = 100
HISTORY_HOURS = 24


def current_time() -> datetime:
    """The clock of every dashboard view (tests replace it to pin `now`)."""
    return timezone.now()


# --- roles and access ---------------------------------------------------------------------


class Role(StrEnum):
    """What a signed-in user may do in the dashboard."""

    SUPERUSER = "superuser"
    OPERATOR = "operator"
    VIEWER = "viewer"

    @property
    def can_edit(self) -> bool:
        """Operators and superusers edit; viewers read everything and edit nothing."""
        return self is not Role.VIEWER


ROLE_CACHE_KEY = "_dashboard_role"


def role_of(user: AbstractBaseUser | AnonymousUser) -> Role | None:
    """The user's dashboard role (one query, cached on the user); None: no access."""
    if not user.is_authenticated or not user.is_active:
        return None
    if ROLE_CACHE_KEY in user.__dict__:
        cached: Role | None = user.__dict__[ROLE_CACHE_KEY]
        return cached
    role: Role | None
    if getattr(user, "is_superuser", False):
        role = Role.SUPERUSER
    else:
        names = set(
            Group.objects.filter(
                user__pk=user.pk, name__in=(Role.OPERATOR, Role.VIEWER)
            ).values_list("name", flat=True)
        )
        role = Role.OPERATOR if Role.OPERATOR in names else Role.VIEWER if names else None
    user.__dict__[ROLE_CACHE_KEY] = role
    return role


def vary_on_htmx(response: HttpResponseBase) -> HttpResponseBase:
    """`Vary: HX-Request`: the same URL answers with a page or a fragment."""
    patch_vary_headers(response, ("HX-Request",))
    return response


def connection_id_or_404(view: ViewFunction) -> ViewFunction:
    """A 404 for an id outside the connection id rule (`.`, `..`), before any lookup:
    clients normalise such ids out of URLs, so no page may depend on them."""

    @wraps(view)
    def checked(request: HttpRequest, connection_id: str, *args: Any, **kwargs: Any) -> Any:
        if not is_connection_id(connection_id):
            raise Http404("No such connection.")
        return view(request, connection_id, *args, **kwargs)

    return cast(ViewFunction, checked)


def _guard(view: ViewFunction, *, needs_operator: bool) -> ViewFunction:
    @wraps(view)
    def guarded(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            if request.htmx:
                # A fragment request must not swap the login page into a page: send the
                # browser there instead, back to the page it was on afterwards.
                next_url = request.htmx.current_url_abs_path or "/"
                return vary_on_htmx(
                    HttpResponseClientRedirect(
                        f"{settings.LOGIN_URL}?{urlencode({'next': next_url})}"
                    )
                )
            return vary_on_htmx(redirect_to_login(request.get_full_path()))
        role = role_of(request.user)
        if role is None:
            raise PermissionDenied("This account has no dashboard role (viewer or operator).")
        if needs_operator and not role.can_edit:
            raise PermissionDenied("Only operators can change this.")
        return vary_on_htmx(view(request, *args, **kwargs))

    return guarded  # type: ignore[return-value]


def viewer_required(view: ViewFunction) -> ViewFunction:
    """Signed in with any dashboard role (anonymous: to the login page)."""
    return _guard(view, needs_operator=False)


def operator_required(view: ViewFunction) -> ViewFunction:
    """Signed in as an operator or a superuser; a viewer gets a 403 and nothing changes."""
    return _guard(view, needs_operator=True)


def render(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partials: Sequence[str],
    status: int = 200,
) -> TemplateResponse:
    """The whole page, or for an HTMX request the partial named by its target (else the
    page's first partial)."""
    name = template
    if request.htmx and not request.htmx.history_restore_request:
        target = request.htmx.target
        name = f"{template}#{target if target in partials else partials[0]}"
    role = role_of(request.user)
    page_context = {
        "role": role,
        "can_edit": role is not None and role.can_edit,
        "poll_seconds": POLL_SECONDS,
        **context,
    }
    return TemplateResponse(request, name, page_context, status=status)


def done(
    request: HtmxHttpRequest,
    message: str,
    url: str,
    *,
    render_partial: Callable[[], TemplateResponse],
) -> HttpResponseBase:
    """After a successful write: the refreshed partial for HTMX, else a redirect (PRG)
    with the message flashed for the next page."""
    if request.htmx:
        return render_partial()
    messages.success(request, message)
    return redirect(url)


# --- presentation helpers -----------------------------------------------------------------


def duration_text(seconds: float) -> str:
    """A short human duration: "42 s", "3 min 5 s", "2 h 5 min", "3 d 4 h"."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def number_text(value: float) -> str:
    """A threshold or percent without a trailing ".0" ("2", "2.5")."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class QuotaBar:
    """The drawing of one remaining-quota bar, with the hysteresis band marked."""

    remaining_percent: float
    level: str  # out (at or below the exit cutoff), band (below re-entry), ok
    exit_cutoff: float
    reentry_floor: float

    @property
    def width(self) -> str:
        """The fill width in the bar's 0..100 viewBox."""
        return number_text(round(min(max(self.remaining_percent, 0.0), 100.0), 2))


def quota_bar(
    remaining_percent: float | None, status: str, config: LadderConfig
) -> QuotaBar | None:
    """The bar of a reading; None when the reading does not say how much is left."""
    if remaining_percent is None:
        return None
    if status == "EXHAUSTED" or remaining_percent <= config.exit_cutoff_percent:
        level = "out"
    elif remaining_percent <= config.reentry_floor:
        level = "band"
    else:
        level = "ok"
    return QuotaBar(remaining_percent, level, config.exit_cutoff_percent, config.reentry_floor)


@dataclass(frozen=True, slots=True)
class ConnectionRow:
    """Everything the connections table shows about one connection."""

    connection: Connection
    verdict: BillingVerdict
    rungs: tuple[Rung, ...]
    is_rung_by_model: bool
    reading: QuotaReading | None
    staleness: str | None  # None: current; else why the reading does not count
    reading_age: str | None
    bar: QuotaBar | None
    reset_in: str | None
    cooldown_until: datetime | None
    cooldown_in: str | None
    is_dropped_out: bool
    hysteresis_since_ago: str | None
    can_refresh: bool
    entry_label: str | None  # the deciding catalog entry, "provider/auth_type" or "provider/*"


STALENESS_TEXT = {
    Staleness.TOO_OLD: "too old: counts as no reading",
    Staleness.RESET_PASSED: "its reset has passed: counts as no reading",
}


def model_rungs(
    candidates: Iterable[CandidateIn], prices: PriceBook, config: LadderConfig
) -> dict[str, set[Rung]]:
    """The tier rungs each connection serves through the candidates that name it."""
    rungs: dict[str, set[Rung]] = {}
    tiers: dict[tuple[str, str], Rung] = {}
    for candidate in candidates:
        key = (candidate.provider, candidate.model)
        if key not in tiers:
            tier = prices.tier_of(
                candidate.provider, candidate.model, config.cheap_max_input_usd_per_mtok
            )
            # Metered and uncurated connections take the rung of the model's tier.
            tiers[key] = rung_for(UNCURATED_VERDICT, tier)
        for connection_id in candidate.connection_ids:
            rungs.setdefault(connection_id, set()).add(tiers[key])
    return rungs


def connection_row(
    connection: Connection,
    catalog: Catalog,
    config: LadderConfig,
    rungs_by_model: dict[str, set[Rung]],
    now: datetime,
    entry_labels: dict[int, str] | None = None,
) -> ConnectionRow:
    """The table row of one connection (no queries: everything is preloaded)."""
    verdict = catalog.classify(connection.provider, connection.auth_type)
    fixed = connection_rung(verdict)
    rungs = (
        (fixed,)
        if fixed is not None
        else tuple(sorted(rungs_by_model.get(connection.connection_id, ())))
    )
    reading = connection.current_reading
    staleness = None
    reading_age = None
    bar = None
    reset_in = None
    if reading is not None:
        core = services.reading_of(reading)
        assert core is not None
        found = reading_staleness(core, config, now)
        staleness = STALENESS_TEXT[found] if found is not None else None
        reading_age = duration_text((now - reading.checked_at).total_seconds())
        bar = quota_bar(reading.remaining_percent, reading.status, config)
        if reading.reset_at is not None and reading.reset_at > now:
            reset_in = duration_text((reading.reset_at - now).total_seconds())
    cooldown_until = (
        connection.cooldown_until
        if connection.cooldown_until is not None and connection.cooldown_until > now
        else None
    )
    since = connection.hysteresis_since
    return ConnectionRow(
        connection=connection,
        verdict=verdict,
        rungs=rungs,
        is_rung_by_model=fixed is None,
        reading=reading,
        staleness=staleness,
        reading_age=reading_age,
        bar=bar,
        reset_in=reset_in,
        cooldown_until=cooldown_until,
        cooldown_in=duration_text((cooldown_until - now).total_seconds())
        if cooldown_until is not None
        else None,
        is_dropped_out=connection.hysteresis_state == HysteresisState.DROPPED_OUT,
        hysteresis_since_ago=duration_text((now - since).total_seconds()) if since else None,
        can_refresh=is_polled(connection.quota_source),
        entry_label=(entry_labels or {}).get(verdict.catalog_entry_id or 0),
    )


@dataclass(frozen=True, slots=True)
class ConnectionTable:
    rows: list[ConnectionRow]
    config: LadderConfig
    page: Page[Connection] | None = None


def connection_table(
    now: datetime,
    *,
    connection_id: str | None = None,
    search: str = "",
    page_number: str | None = None,
) -> ConnectionTable:
    """Rows for one page of connections (or one connection) in a fixed number of
    queries: count, connections with their readings, catalog, settings, candidates and
    prices."""
    query = services.connections_with_readings()
    page = None
    if connection_id is not None:
        connections = list(query.filter(connection_id=connection_id))
        if not connections:
            raise Http404(f"No connection {connection_id!r}.")
    else:
        if search:
            query = query.filter(
                Q(connection_id__icontains=search)
                | Q(provider__icontains=search)
                | Q(label__icontains=search)
            )
        # Pages keep a poll of a large fleet small: 100 rich rows every few seconds.
        page = Paginator(query, CONNECTIONS_PER_PAGE).get_page(page_number)
        connections = list(page.object_list)
    entries = list(BillingCatalogEntry.objects.all())
    catalog = Catalog(entry.as_row() for entry in entries)
    labels = {entry.pk: f"{entry.provider}/{entry.auth_type or '*'}" for entry in entries}
    config = services.load_config()
    # The decisions' cached price book (one counter query when warm): a poll every few
    # seconds must not reload 50,000 price rows.
    prices = services.current_snapshot(billing_services.change_counters()[0]).prices
    rungs_by_model = model_rungs(services.registered_candidates(), prices, config)
    rows = [connection_row(c, catalog, config, rungs_by_model, now, labels) for c in connections]
    return ConnectionTable(rows=rows, config=config, page=page)


# --- overview -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RungSummary:
    """One rung at a glance: connections usable and excluded in auto/thrifty."""

    rung: Rung
    usable: int
    excluded: int
    reasons: list[tuple[str, int]]
    budget: services.RungBudget | None


def rung_summaries(thrifty: Decision, spend: services.SpendSummary) -> list[RungSummary]:
    """Per rung: distinct connections usable and excluded, and the commonest reasons."""
    usable: dict[Rung, set[str]] = {rung: set() for rung in Rung}
    excluded: dict[Rung, dict[str, Reason]] = {rung: {} for rung in Rung}
    for entry in thrifty.candidates:
        usable[entry.rung].update(entry.connection_ids)
    for exclusion in thrifty.excluded:
        if exclusion.rung is not None:
            excluded[exclusion.rung].setdefault(exclusion.connection_id, exclusion.reason)
    summaries = []
    for rung in Rung:
        left_out = {k: v for k, v in excluded[rung].items() if k not in usable[rung]}
        reasons = Counter(reason.summary for reason in left_out.values()).most_common(3)
        summaries.append(
            RungSummary(
                rung=rung,
                usable=len(usable[rung]),
                excluded=len(left_out),
                reasons=reasons,
                budget=spend.rungs.get(rung.label),
            )
        )
    return summaries


@dataclass(frozen=True, slots=True)
class Freshness:
    health: services.ReadingHealth
    stale_since: datetime | None
    newest_age: str | None
    next_reset_in: str | None


def freshness(health: services.ReadingHealth, config: LadderConfig, now: datetime) -> Freshness:
    """Whether polled readings keep arriving: stale once the newest is older than the
    maximum state age (the worker or the broker is likely down)."""
    newest = health.newest_polled_reading_at
    stale_since = None
    if newest is not None:
        limit = newest + timedelta(seconds=config.max_state_age_seconds)
        if limit < now:
            stale_since = limit
    return Freshness(
        health=health,
        stale_since=stale_since,
        newest_age=duration_text((now - newest).total_seconds()) if newest else None,
        next_reset_in=duration_text((health.next_reset_at - now).total_seconds())
        if health.next_reset_at
        else None,
    )


@dataclass(frozen=True, slots=True)
class BeatBanner:
    """The overview's warning that the scheduler stopped (absent while it runs)."""

    last_run_at: datetime | None
    age: str | None  # None: no heartbeat yet
    max_age_seconds: float


def beat_banner(health: beat.BeatHealth) -> BeatBanner | None:
    """The beat banner, when the heartbeat says the beat is late (ladder/beat.py)."""
    if not health.is_late:
        return None
    age = duration_text(health.age_seconds) if health.age_seconds is not None else None
    return BeatBanner(health.last_run_at, age, health.max_age_seconds)


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One paid rung's spend against its budget, drawn as a bar."""

    rung: str
    spent_usd: str
    budget_usd: str | None
    state: str  # none, disabled, ok, exhausted
    percent: str


def budget_lines(spend: services.SpendSummary) -> list[BudgetLine]:
    """The spend bars of the paid rungs."""
    lines = []
    for name, budget in spend.rungs.items():
        spent = f"{budget.spent_usd:.2f}"
        if budget.budget_usd is None:
            lines.append(BudgetLine(name, spent, None, "none", "0"))
        elif budget.budget_usd == 0:
            lines.append(BudgetLine(name, spent, "0", "disabled", "0"))
        else:
            ratio = min(float(budget.spent_usd / budget.budget_usd) * 100, 100.0)
            state = "exhausted" if budget.is_exhausted else "ok"
            lines.append(
                BudgetLine(
                    name, spent, f"{budget.budget_usd:.2f}", state, number_text(round(ratio, 1))
                )
            )
    return lines


@require_GET
@viewer_required
def overview(request: HtmxHttpRequest) -> TemplateResponse:
    """The ladder at a glance: rungs, spend, reading freshness and the next reset."""
    now = current_time()
    config = services.load_config()
    subscription = services.decide_registered(SUBSCRIPTION_AUTO_ID, now=now)
    thrifty = services.decide_registered(THRIFTY_AUTO_ID, now=now)
    spend = services.spend_summary(now=now)
    health = services.reading_health(now=now)
    subscription_connections = {c for e in subscription.candidates for c in e.connection_ids}
    context = {
        "now": now,
        "rungs": rung_summaries(thrifty, spend),
        "subscription": subscription,
        "subscription_connections": len(subscription_connections),
        "thrifty": thrifty,
        "spend": spend,
        "budgets": budget_lines(spend),
        "freshness": freshness(health, config, now),
        "beat": beat_banner(beat.current_health(now)),
        "config": config,
        "next_change_in": duration_text((thrifty.next_change_at - now).total_seconds())
        if thrifty.next_change_at
        else None,
    }
    return render(request, "ladder/overview.html", context, partials=("ladder-status",))


# --- connections --------------------------------------------------------------------------


CONNECTIONS_TEMPLATE = "ladder/connections.html"


def search_param(request: HttpRequest, name: str = "q") -> str:
    """A search string from the query: control characters dropped (PostgreSQL refuses a
    NUL in a parameter: `?q=%00` must search, never crash), at most 100 characters."""
    return without_bad_characters(request.GET.get(name, "")).strip()[:100]


def connections_context(request: HttpRequest, now: datetime) -> dict[str, Any]:
    """The connections page: one page of the table (search and page from the query)."""
    search = search_param(request)
    table = connection_table(now, search=search, page_number=request.GET.get("page"))
    page_number = table.page.number if table.page is not None else 1
    search_params = {"q": search} if search else {}
    return {
        "now": now,
        "table": table,
        "config": table.config,
        "search": search,
        "search_params": urlencode(search_params),
        "query_string": urlencode({**search_params, "page": str(page_number)}),
        # Built once: reversing a URL per row is measurable on 500 connections.
        "connection_base": reverse("ladder:connections"),
        "catalog_url": reverse("billing:catalog"),
    }


@require_GET
@viewer_required
def connections(request: HtmxHttpRequest) -> TemplateResponse:
    """Every connection: billing verdict, rung, quota, hysteresis, cooldown, reading."""
    context = {**connections_context(request, current_time()), **connection_add_context()}
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


# --- connection detail: 24 h chart --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChartPoint:
    x: str
    y: str
    status: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartMark:
    x: str
    state: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartTick:
    x: str
    label: str


@dataclass
class Chart:
    """Geometry of the remaining-quota chart (all numbers are SVG user units)."""

    width: int = 720
    height: int = 220
    left: int = 40
    right: int = 12
    top: int = 12
    bottom: int = 28
    line: str = ""
    points: list[ChartPoint] = field(default_factory=list)
    marks: list[ChartMark] = field(default_factory=list)
    ticks: list[ChartTick] = field(default_factory=list)
    exit_y: str = ""
    reentry_y: str = ""
    band_height: str = ""
    y_ticks: list[tuple[str, str]] = field(default_factory=list)

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    @property
    def plot_right(self) -> int:
        return self.width - self.right

    @property
    def plot_width(self) -> int:
        return self.plot_right - self.left

    @property
    def plot_height(self) -> int:
        return self.plot_bottom - self.top


def _coordinate(value: float) -> str:
    return f"{value:.1f}"


def remaining_chart(
    readings: Sequence[QuotaReading],
    transitions: Sequence[HysteresisTransition],
    config: LadderConfig,
    since: datetime,
    now: datetime,
) -> Chart:
    """Remaining % over [since, now] as a step line, with the exit cutoff and the re-entry
    floor drawn across and each hysteresis transition marked where it happened."""
    chart = Chart()
    span = max((now - since).total_seconds(), 1.0)
    plot_width = chart.plot_width
    plot_height = chart.plot_height

    def x_of(at: datetime) -> float:
        offset = min(max((at - since).total_seconds(), 0.0), span)
        return chart.left + plot_width * offset / span

    def y_of(percent: float) -> float:
        return chart.top + plot_height * (1 - min(max(percent, 0.0), 100.0) / 100)

    steps: list[str] = []
    previous_y: float | None = None
    for reading in readings:
        x = x_of(reading.checked_at)
        when = f"{reading.checked_at:%H:%M:%S} UTC"
        if reading.remaining_percent is None:
            chart.points.append(
                ChartPoint(
                    _coordinate(x), _coordinate(chart.plot_bottom), "UNKNOWN", f"{when}: unknown"
                )
            )
            previous_y = None
            continue
        y = y_of(reading.remaining_percent)
        if previous_y is not None:
            steps.append(f"{_coordinate(x)},{_coordinate(previous_y)}")
        elif steps:
            steps.append("M")
        steps.append(f"{_coordinate(x)},{_coordinate(y)}")
        previous_y = y
        chart.points.append(
            ChartPoint(
                _coordinate(x),
                _coordinate(y),
                reading.status,
                f"{when}: {number_text(reading.remaining_percent)} % left ({reading.status})",
            )
        )
    if previous_y is not None and readings:
        steps.append(f"{_coordinate(x_of(now))},{_coordinate(previous_y)}")
    chart.line = _path(steps)
    for transition in transitions:
        chart.marks.append(
            ChartMark(
                _coordinate(x_of(transition.at)),
                transition.state,
                f"{transition.at:%H:%M:%S} UTC: {transition.get_state_display()} "
                f"({transition.reason})",
            )
        )
    exit_y = y_of(config.exit_cutoff_percent)
    reentry_y = y_of(config.reentry_floor)
    chart.exit_y = _coordinate(exit_y)
    chart.reentry_y = _coordinate(reentry_y)
    chart.band_height = _coordinate(max(exit_y - reentry_y, 0.0))
    chart.y_ticks = [(_coordinate(y_of(p)), str(p)) for p in (0, 25, 50, 75, 100)]
    first_tick = since.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    tick = first_tick
    while tick <= now:
        if tick.hour % 4 == 0:
            chart.ticks.append(ChartTick(_coordinate(x_of(tick)), f"{tick:%H:%M}"))
        tick += timedelta(hours=1)
    return chart


def _path(steps: list[str]) -> str:
    """An SVG path through the points; "M" entries start a new segment after a gap."""
    parts: list[str] = []
    move = True
    for step in steps:
        if step == "M":
            move = True
            continue
        parts.append(("M" if move else "L") + step)
        move = False
    return " ".join(parts)


CONNECTION_DETAIL_TEMPLATE = "ladder/connection_detail.html"


def connection_detail_context(now: datetime, connection_id: str) -> dict[str, Any]:
    """One connection's status, its last 24 hours of readings and its transitions."""
    table = connection_table(now, connection_id=connection_id)
    row = table.rows[0]
    since = now - timedelta(hours=HISTORY_HOURS)
    readings = services.reading_history(row.connection, since=since)
    transitions = services.transition_history(row.connection, since=since)
    return {
        "now": now,
        "row": row,
        "config": table.config,
        "chart": remaining_chart(readings, transitions, table.config, since, now),
        "readings": readings,
        "readings_count": len(readings),
        "transitions": transitions,
        "history_hours": HISTORY_HOURS,
    }


@require_GET
@viewer_required
@connection_id_or_404
def connection_detail(request: HtmxHttpRequest, connection_id: str) -> TemplateResponse:
    """One connection: its status and a chart of the last 24 hours with its transitions;
    for operators its edit form (`?confirm-delete` asks to confirm its deletion)."""
    context = connection_detail_context(current_time(), connection_id)
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
        "provider": connection.provider,
        "auth_type": connection.auth_type,
        "label": connection.label,
        "active": connection.is_active,
        "quota_source": connection.quota_source,
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
        context = {**connection_detail_context(current_time(), connection.connection_id), **context}
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
                connection_id, form.connection_input(), must_exist=True
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
        context = {**connections_context(request, current_time()), **context}
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
        services.upsert_connection(connection_id, form.connection_input(), must_exist=False)
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
    if services.delete_connection(connection_id):
        messages.success(
            request,
            f"Deleted {connection_id} with its readings and transitions. Candidates that "
            "name it see an unregistered connection (counted as metered) until a gateway "
            "registers it again.",
        )
    else:
        messages.error(request, f"No connection {connection_id!r}: it was deleted already.")
    return _to_connections(request)


# --- pools --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoolTab:
    auto_id: str
    entries: int
    excluded: int
    is_selected: bool


@dataclass(frozen=True, slots=True)
class PoolRung:
    rung: Rung
    entries: list[DecidedCandidate]


@dataclass(frozen=True, slots=True)
class PoolView:
    decision: Decision
    rungs: list[PoolRung]
    excluded: Sequence[Exclusion]
    next_change_in: str | None


def pool_view(decision: Decision, now: datetime) -> PoolView:
    """A decision grouped by rung, in ladder order."""
    by_rung: dict[Rung, list[DecidedCandidate]] = {}
    for entry in decision.candidates:
        by_rung.setdefault(entry.rung, []).append(entry)
    return PoolView(
        decision=decision,
        rungs=[PoolRung(rung, by_rung[rung]) for rung in Rung if rung in by_rung],
        excluded=decision.excluded,
        next_change_in=duration_text((decision.next_change_at - now).total_seconds())
        if decision.next_change_at
        else None,
    )


@require_GET
@viewer_required
def pools(request: HtmxHttpRequest) -> TemplateResponse:
    """Every published auto id's pool, ordered and grouped by rung, with each excluded
    connection and why; one selected in full."""
    now = current_time()
    decisions = services.decide_published(now=now)
    by_id = {decision.auto_id.auto_id: decision for decision in decisions}
    wanted = request.GET.get("auto_id", "")
    notice = None
    if wanted and wanted not in by_id:
        try:
            parse_auto_id(wanted)
            notice = f"{wanted} is not published: no registered candidate lists its category."
        except ValueError as error:
            notice = str(error)
    selected = by_id.get(wanted) or decisions[0]
    tabs = [
        PoolTab(
            decision.auto_id.auto_id,
            len(decision.candidates),
            len(decision.excluded),
            decision is selected,
        )
        for decision in decisions
    ]
    context = {
        "now": now,
        "tabs": tabs,
        "pool": pool_view(selected, now),
        "notice": notice,
        "selected_query": urlencode({"auto_id": selected.auto_id.auto_id}),
        "pools_url": reverse("ladder:pools"),
        "connection_base": reverse("ladder:connections"),
    }
    return render(request, "ladder/pools.html", context, partials=("pool-table",))


# --- settings -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BandDrawing:
    """The hysteresis band on 0..100, plus a zoom on its low end where the band lives."""

    exit_cutoff: float
    reentry_configured: float
    reentry_floor: float
    is_floor_raised: bool
    zoom_max: int

    def x(self, percent: float, scale_max: float, width: float = 560.0) -> str:
        """The x coordinate of a percent on a scale drawn from 20 to 20 + width."""
        return _coordinate(20 + width * min(max(percent, 0.0), scale_max) / scale_max)

    @property
    def full(self) -> dict[str, str]:
        return self._marks(100)

    @property
    def zoom(self) -> dict[str, str]:
        return self._marks(self.zoom_max)

    def _marks(self, scale_max: float) -> dict[str, str]:
        exit_x = float(self.x(self.exit_cutoff, scale_max))
        floor_x = float(self.x(self.reentry_floor, scale_max))
        return {
            "exit": _coordinate(exit_x),
            "floor": _coordinate(floor_x),
            "configured": self.x(self.reentry_configured, scale_max),
            "band_width": _coordinate(max(floor_x - exit_x, 0.0)),
            "out_width": _coordinate(exit_x - 20),
            "ok_width": _coordinate(580 - floor_x),
            "max": str(int(scale_max)),
            "mid": str(int(scale_max / 2)) if scale_max % 2 == 0 else f"{scale_max / 2:g}",
        }


def band_drawing(exit_cutoff: float, reentry_configured: float) -> BandDrawing:
    """The drawing of a band; a re-entry floor below the exit cutoff is raised to it."""
    floor = max(exit_cutoff, reentry_configured)
    zoom_max = min(100, max(10, int(math.ceil(max(floor, reentry_configured) * 2 / 10) * 10)))
    return BandDrawing(
        exit_cutoff=exit_cutoff,
        reentry_configured=reentry_configured,
        reentry_floor=floor,
        is_floor_raised=reentry_configured < exit_cutoff,
        zoom_max=zoom_max,
    )


def settings_context(form: SettingsForm, now: datetime) -> dict[str, Any]:
    """The form, the band of the saved settings and the spend against the budgets."""
    row = services.get_settings_row()
    spend = services.spend_summary(now=now)
    _, out_of_range = services.effective_settings_of(row)
    return {
        "form": form,
        "row": row,
        "out_of_range": out_of_range,
        "band": band_drawing(row.exit_cutoff_percent, row.reentry_min_remaining_percent),
        "budgets": budget_lines(spend),
        "spend": spend,
        "now": now,
    }


def _settings_initial() -> dict[str, Any]:
    # The values the ladder applies: a stored field outside the rules shows its nearest
    # legal value, so saving the form as shown stores a legal row.
    initial, _ = services.effective_settings_of(services.get_settings_row())
    # Decimals as typed ("5", "0.15"), not as stored ("5.000000").
    return {
        name: format(value.normalize(), "f") if isinstance(value, Decimal) else value
        for name, value in initial.items()
    }


@require_GET
@viewer_required
def settings_page(request: HtmxHttpRequest) -> TemplateResponse:
    """The ladder's tuning (no enabled flag, deliberately), the band and the budgets."""
    form = SettingsForm(initial=_settings_initial())
    return render(
        request,
        "ladder/settings.html",
        settings_context(form, current_time()),
        partials=("settings-form",),
    )


@require_POST
@operator_required
def settings_update(request: HtmxHttpRequest) -> HttpResponseBase:
    """Replace every tuning field at once (audited); field errors come back with a 422."""
    form = SettingsForm(request.POST)
    if form.is_valid():
        try:
            services.update_settings(form.cleaned_data, actor=request.user.get_username())
        except ValidationError as error:
            form.add_error(None, error)
    if not form.is_valid():
        return render(
            request,
            "ladder/settings.html",
            settings_context(form, current_time()),
            partials=("settings-form",),
            status=422,
        )

    def saved() -> TemplateResponse:
        context = settings_context(SettingsForm(initial=_settings_initial()), current_time())
        context["saved"] = True
        return render(request, "ladder/settings.html", context, partials=("settings-form",))

    return done(request, "Settings saved.", reverse("ladder:settings"), render_partial=saved)


# --- API tokens ---------------------------------------------------------------------------


def tokens_context(form: TokenForm, **extra: Any) -> dict[str, Any]:
    """Every token, newest first, and the create form."""
    return {"tokens": list(ApiToken.objects.all()), "form": form, **extra}


@require_GET
@viewer_required
def tokens(request: HtmxHttpRequest) -> TemplateResponse:
    """API tokens: name, scope, prefix, created, last used, revoked."""
    revoking = _int_param(request, "revoke")
    return render(
        request,
        "ladder/tokens.html",
        tokens_context(TokenForm(), revoking=revoking),
        partials=("token-table",),
    )


def _int_param(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() and len(value) < 19 else None


@require_POST
@operator_required
def token_create(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create a token and show its secret this once (never stored, never shown again)."""
    form = TokenForm(request.POST)
    if not form.is_valid():
        return render(
            request,
            "ladder/tokens.html",
            tokens_context(form),
            partials=("token-table",),
            status=422,
        )
    token, secret = create_token(
        form.cleaned_data["name"],
        form.cleaned_data["scope"],
        created_by=request.user.get_username(),
    )
    response = render(
        request,
        "ladder/tokens.html",
        tokens_context(TokenForm(), created=token, secret=secret),
        partials=("token-table",),
        status=201 if request.htmx else 200,
    )
    # The secret is in this response alone: no cache may keep it.
    patch_cache_control(response, no_store=True, private=True)
    return response


@require_POST
@operator_required
def token_revoke(request: HtmxHttpRequest, token_id: int) -> HttpResponseBase:
    """Revoke a token: it authenticates nothing from now on."""
    if not ApiToken.objects.filter(pk=token_id).exists():
        raise Http404("No such token.")
    revoked = revoke_token(token_id)
    message = "Token revoked." if revoked else "That token was revoked already."

    def refreshed() -> TemplateResponse:
        return render(
            request,
            "ladder/tokens.html",
            tokens_context(TokenForm(), message=message),
            partials=("token-table",),
        )

    return done(request, message, reverse("ladder:tokens"), render_partial=refreshed)


# --- notifications ------------------------------------------------------------------------

NOTIFICATIONS_TEMPLATE = "ladder/notifications.html"
NOTIFICATION_PARTIALS = ("webhook-table", "delivery-log")
DELIVERIES_PER_PAGE = 50
# A write that changes the log tells the page's delivery log to refresh at once.
DELIVERIES_EVENT = "deliveries-changed"
KIND_HEADLINES = {kind.value: kind.headline for kind in Kind}
NO_SECRET_KEY = (
    "No credential key is configured (OMNIROUTE_CREDENTIAL_KEY): webhook secrets cannot be "
    "stored, so nothing was saved."
)
# The webhook form's ids, apart from the create form's on the same page.
WEBHOOK_EDIT_IDS = "edit-%s"
WEBHOOK_NEW_IDS = "new-%s"


@dataclass(frozen=True, slots=True)
class WebhookRow:
    """A webhook as the table shows it: the URL's origin only, the kinds by name."""

    webhook: Webhook
    target: str
    kinds: list[str]


def notifications_context(
    request: HttpRequest,
    *,
    editing: int | None = None,
    edit_form: WebhookEditForm | None = None,
    deleting: int | None = None,
    rotating: int | None = None,
    create_form: WebhookForm | None = None,
    notice: dict[str, str] | None = None,
    secret_for: Webhook | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    """Webhooks and one page of the delivery log (four queries however long the log)."""
    rows = [
        WebhookRow(
            webhook,
            notifications.target_label(webhook.url),
            [KIND_HEADLINES.get(kind, kind) for kind in webhook.kinds],
        )
        for webhook in notifications.webhooks()
    ]
    if editing is not None and edit_form is None:
        found = next((row.webhook for row in rows if row.webhook.pk == editing), None)
        if found is None:
            editing = None
            notice = notice or {"level": "error", "message": "That webhook no longer exists."}
        else:
            edit_form = WebhookEditForm(
                auto_id=WEBHOOK_EDIT_IDS,
                initial={
                    "name": found.name,
                    "format": found.format,
                    "kinds": list(found.kinds),
                    "is_active": found.is_active,
                },
            )
    page = Paginator(notifications.delivery_log(), DELIVERIES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return {
        "rows": rows,
        "editing": editing,
        "edit_form": edit_form,
        "deleting": deleting,
        "rotating": rotating,
        "create_form": create_form
        or WebhookForm(
            auto_id=WEBHOOK_NEW_IDS,
            initial={"is_active": True, "kinds": [k.value for k in SUBSCRIBABLE_KINDS]},
        ),
        "notice": notice,
        "secret_for": secret_for,
        "secret": secret,
        "page": page,
        "deliveries": [(d, KIND_HEADLINES.get(d.kind, d.kind)) for d in page.object_list],
        "allow_private": settings.NOTIFY_ALLOW_PRIVATE_TARGETS,
        "max_attempts": settings.NOTIFY_MAX_ATTEMPTS,
        "empty_after": duration_text(settings.NOTIFY_SUBSCRIPTION_EMPTY_SECONDS),
    }


def _notifications(request: HtmxHttpRequest, status: int = 200, **context: Any) -> TemplateResponse:
    return render(
        request,
        NOTIFICATIONS_TEMPLATE,
        notifications_context(request, **context),
        partials=NOTIFICATION_PARTIALS,
        status=status,
    )


@require_GET
@viewer_required
def notifications_page(request: HtmxHttpRequest) -> TemplateResponse:
    """Webhooks and the delivery log; `?edit=`, `?delete=` and `?rotate=<id>` open a
    webhook's form or confirmation, `?page=` pages the log."""
    return _notifications(
        request,
        editing=_int_param(request, "edit"),
        deleting=_int_param(request, "delete"),
        rotating=_int_param(request, "rotate"),
    )


def _secret_shown_once(
    request: HtmxHttpRequest, webhook: Webhook, secret: str, message: str
) -> TemplateResponse:
    """The page with a new secret, this once; no cache may keep the response."""
    response = _notifications(
        request,
        status=201 if request.htmx else 200,
        notice={"level": "success", "message": message},
        secret_for=webhook,
        secret=secret,
    )
    patch_cache_control(response, no_store=True, private=True)
    return response


def _success(request: HtmxHttpRequest, message: str) -> HttpResponseBase:
    def refreshed() -> TemplateResponse:
        response = _notifications(request, notice={"level": "success", "message": message})
        response["HX-Trigger"] = DELIVERIES_EVENT
        return response

    return done(request, message, reverse("ladder:notifications"), render_partial=refreshed)


def _webhook_errors(form: WebhookForm, error: Exception) -> None:
    if isinstance(error, ValidationError):
        form.add_error(None, error)
    else:  # CredentialKeyMissing: raised before anything is written
        form.add_error("secret", NO_SECRET_KEY)


@sensitive_post_parameters("secret")
@require_POST
@operator_required
def webhook_create(request: HtmxHttpRequest) -> HttpResponseBase:
    """Create a webhook (audited); a generated secret is shown in this response alone."""
    form = WebhookForm(request.POST, auto_id=WEBHOOK_NEW_IDS)
    if form.is_valid():
        try:
            webhook, secret = notifications.create_webhook(
                form.webhook_input(), actor=request.user.get_username()
            )
        except (ValidationError, CredentialKeyMissing) as error:
            _webhook_errors(form, error)
        except billing_services.Conflict as error:
            return _notifications(
                request, 409, create_form=form, notice={"level": "error", "message": str(error)}
            )
    if not form.is_valid():
        return _notifications(request, 422, create_form=form)
    message = f"Created webhook {webhook.name}."
    if secret is not None:
        return _secret_shown_once(request, webhook, secret, message)
    return _success(request, message)


@sensitive_post_parameters("secret")
@require_POST
@operator_required
def webhook_update(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Save a webhook's settings (audited); an empty URL or secret keeps the stored one."""
    form = WebhookEditForm(request.POST, auto_id=WEBHOOK_EDIT_IDS)
    if form.is_valid():
        try:
            webhook = notifications.update_webhook(
                webhook_id, form.webhook_input(), actor=request.user.get_username()
            )
        except notifications.NotFound:
            return _notifications(
                request,
                404,
                notice={"level": "error", "message": "That webhook was deleted; nothing saved."},
            )
        except (ValidationError, CredentialKeyMissing) as error:
            _webhook_errors(form, error)
        except billing_services.Conflict as error:
            return _notifications(
                request,
                409,
                editing=webhook_id,
                edit_form=form,
                notice={"level": "error", "message": str(error)},
            )
    if not form.is_valid():
        return _notifications(request, 422, editing=webhook_id, edit_form=form)
    return _success(request, f"Saved webhook {webhook.name}.")


@require_POST
@operator_required
def webhook_delete(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Delete a webhook (audited) after the confirmation step; its log rows stay."""
    try:
        webhook = notifications.delete_webhook(webhook_id, actor=request.user.get_username())
    except notifications.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook was deleted already."}
        )
    return _success(request, f"Deleted webhook {webhook.name}.")


@require_POST
@operator_required
def webhook_test(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Queue a test notification to the webhook (audited); the log shows how it went."""
    try:
        notifications.send_test(webhook_id, actor=request.user.get_username())
    except notifications.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook no longer exists."}
        )
    return _success(request, "Test notification queued: the delivery log shows how it goes.")


@require_POST
@operator_required
def webhook_rotate_secret(request: HtmxHttpRequest, webhook_id: int) -> HttpResponseBase:
    """Replace the webhook's secret with a new random one, shown in this response alone."""
    try:
        webhook, secret = notifications.rotate_webhook_secret(
            webhook_id, actor=request.user.get_username()
        )
    except notifications.NotFound:
        return _notifications(
            request, 404, notice={"level": "error", "message": "That webhook no longer exists."}
        )
    except CredentialKeyMissing:
        return _notifications(request, 503, notice={"level": "error", "message": NO_SECRET_KEY})
    message = f"New secret for {webhook.name}: receivers need it from now on."
    return _secret_shown_once(request, webhook, secret, message)


# --- sign in ------------------------------------------------------------------------------


def _with_headers(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return vary_on_htmx(view(request, *args, **kwargs))

    return wrapped


login = _with_headers(
    auth_views.LoginView.as_view(
        template_name="registration/login.html",
        redirect_authenticated_user=True,
        authentication_form=ThrottledAuthenticationForm,
    )
)
logout = _with_headers(auth_views.LogoutView.as_view())


# --- what-if report -----------------------------------------------------------------------

# The report is a self-contained file with inline styles and SVG and no script at all; it
# is served under a CSP that allows exactly that.
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"


@require_GET
@viewer_required
def simulation_report(request: HtmxHttpRequest) -> HttpResponseBase:
    """The latest `manage.py simulate` report, or a page saying how to make one."""
    from django.http import HttpResponse

    from ladder.simulator.report import latest_report_path

    path = latest_report_path()
    if path is None:
        return render(request, "ladder/no_report.html", {}, partials=())
    response = HttpResponse(path.read_bytes(), content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = REPORT_CSP
    return response
