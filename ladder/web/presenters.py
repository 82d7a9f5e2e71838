"""What the dashboard's templates show, shaped from models and decisions: rows, bars,
summaries and the short texts of durations and numbers (no view, no request)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.core.paginator import Page, Paginator
from django.db.models import Q
from django.http import Http404

from billing import services as billing_services
from billing.classify import UNCURATED_VERDICT, BillingVerdict, Catalog
from billing.models import BillingCatalogEntry
from billing.tiers import PriceBook
from ladder import services
from ladder.core import (
    CandidateIn,
    DecidedCandidate,
    Decision,
    Exclusion,
    HysteresisState,
    LadderConfig,
    Rung,
    Staleness,
    connection_rung,
    is_polled,
    reading_staleness,
    rung_for,
)
from ladder.core.preference import preference_sentence
from ladder.core.prose import money_text, percent_text
from ladder.core.scopes import effective_overage
from ladder.core.types import OverageEvidence
from ladder.core.why import hysteresis_why
from ladder.models import Connection, QuotaReading, Webhook

CONNECTIONS_PER_PAGE = 100


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

    @property
    def text(self) -> str:
        """The remaining percent for people: one decimal, on the true side of the nearer
        threshold ("99.6", "4.96" beside a floor of 5)."""
        nearer = min(
            (self.exit_cutoff, self.reentry_floor), key=lambda t: abs(self.remaining_percent - t)
        )
        return percent_text(self.remaining_percent, beside=nearer)


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
    bar: QuotaBar | None
    # Instants, never distances: the browser tells how far they are (a poll of an
    # unchanged page is the same bytes, docs/DASHBOARD.md "Live updates").
    reset_at: datetime | None  # the reading's reset, while it is ahead
    cooldown_until: datetime | None
    is_dropped_out: bool
    can_refresh: bool
    entry_label: str | None  # the deciding catalog entry, "provider/auth_type" or "provider/*"
    hysteresis_why: str  # the stored reason under the current settings (ladder.core.why)
    # The settings with this connection's own reserve applied, and whether it has one.
    config: LadderConfig | None = None
    has_own_reserve: bool = False
    # What the pools use (the catalog's, unless live evidence says it can meter).
    effective_overage: str = ""
    evidence: OverageEvidence | None = None
    # One per model scope: its window's bar, reset, hysteresis and cooldown.
    scoped: tuple[ScopedRow, ...] = ()


@dataclass(frozen=True, slots=True)
class ScopedRow:
    """One model scope of a connection, for its page and the table."""

    model_scope: str
    bar: QuotaBar | None
    reset_at: datetime | None
    is_dropped_out: bool
    reason: str
    cooldown_until: datetime | None

    @property
    def sentence(self) -> str:
        """ "opus weekly cap: 0 % left until Tue 09:00 UTC" for the operator."""
        left = "remaining unknown" if self.bar is None else f"{self.bar.text} % left"
        until = "" if self.reset_at is None else f", resets {self.reset_at:%a %H:%M} UTC"
        state = (
            "out of the plan rungs"
            if self.is_dropped_out or (self.bar is not None and self.bar.level == "out")
            else "on the plan"
        )
        cooling = (
            ""
            if self.cooldown_until is None
            else f"; cooling down until {self.cooldown_until:%H:%M:%S} UTC"
        )
        return f"{self.model_scope}: {left}{until}, {state}{cooling}"


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
    config = services.own_config(connection, config)
    verdict = catalog.classify(connection.provider, connection.auth_type)
    fixed = connection_rung(verdict)
    rungs = (
        (fixed,)
        if fixed is not None
        else tuple(sorted(rungs_by_model.get(connection.connection_id, ())))
    )
    reading = connection.current_reading
    staleness = None
    bar = None
    reset_at = None
    if reading is not None:
        core = services.reading_of(reading)
        assert core is not None
        found = reading_staleness(core, config, now)
        staleness = STALENESS_TEXT[found] if found is not None else None
        bar = quota_bar(reading.remaining_percent, reading.status, config)
        if reading.reset_at is not None and reading.reset_at > now:
            reset_at = reading.reset_at
    cooldown_until = (
        connection.cooldown_until
        if connection.cooldown_until is not None and connection.cooldown_until > now
        else None
    )
    evidence = services.evidence_of(connection.overage_evidence)
    return ConnectionRow(
        connection=connection,
        verdict=verdict,
        rungs=rungs,
        is_rung_by_model=fixed is None,
        reading=reading,
        staleness=staleness,
        bar=bar,
        reset_at=reset_at,
        cooldown_until=cooldown_until,
        is_dropped_out=connection.hysteresis_state == HysteresisState.DROPPED_OUT,
        can_refresh=is_polled(connection.quota_source),
        entry_label=(entry_labels or {}).get(verdict.catalog_entry_id or 0),
        hysteresis_why=hysteresis_why(
            connection.hysteresis_state, connection.hysteresis_reason, config, is_current=True
        ),
        config=config,
        has_own_reserve=connection.exit_cutoff_percent is not None
        or connection.reentry_min_remaining_percent is not None,
        effective_overage=effective_overage(verdict, evidence).value,
        evidence=evidence,
        scoped=scoped_rows(connection, config, now),
    )


def scoped_rows(
    connection: Connection, config: LadderConfig, now: datetime
) -> tuple[ScopedRow, ...]:
    """The model scopes of a connection as rows (none for most: no query either way)."""
    if not connection.scoped_state:
        return ()
    rows = []
    for entry in services.scoped_status(connection, now):
        remaining = entry["remaining_percent"]
        status = "EXHAUSTED" if remaining is not None and remaining <= 0 else "SAFE"
        rows.append(
            ScopedRow(
                model_scope=entry["model_scope"],
                bar=quota_bar(remaining, status, config),
                reset_at=entry["reset_at"],
                is_dropped_out=entry["hysteresis"]["state"] == HysteresisState.DROPPED_OUT,
                reason=entry["hysteresis"]["reason"],
                cooldown_until=entry["cooldown_until"],
            )
        )
    return tuple(rows)


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
    is_whole: bool = False,
) -> ConnectionTable:
    """Rows for one page of connections (or one connection) in a fixed number of
    queries: count, connections with their readings, catalog, settings, candidates and
    prices. `is_whole`: every matching connection, unpaged (for filters and sorts on
    what the rows compute)."""
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
        if is_whole:
            connections = list(query)
        else:
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


@dataclass(frozen=True, slots=True)
class Freshness:
    health: services.ReadingHealth
    stale_since: datetime | None
    # The next reset while the readings are fresh (a stale reading's reset is only its
    # last word: no countdown to it).
    next_reset_at: datetime | None


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
        next_reset_at=health.next_reset_at if stale_since is None else None,
    )


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
        spent = money_text(budget.spent_usd)
        if budget.budget_usd is None:
            lines.append(BudgetLine(name, spent, None, "none", "0"))
        elif budget.budget_usd == 0:
            lines.append(BudgetLine(name, spent, money_text(Decimal(0)), "disabled", "0"))
        else:
            ratio = min(float(budget.spent_usd / budget.budget_usd) * 100, 100.0)
            state = "exhausted" if budget.is_exhausted else "ok"
            lines.append(
                BudgetLine(
                    name,
                    spent,
                    money_text(budget.budget_usd),
                    state,
                    number_text(round(ratio, 1)),
                )
            )
    return lines


@dataclass(frozen=True, slots=True)
class PoolTab:
    auto_id: str
    entries: int
    excluded: int
    is_selected: bool


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """One entry of a pool as the page shows it, with why its first plan connection
    comes first (None: fewer than two plan connections to order)."""

    entry: DecidedCandidate
    why_first: str | None

    @property
    def provider(self) -> str:
        return self.entry.provider

    @property
    def model(self) -> str:
        return self.entry.model

    @property
    def connection_id(self) -> str | None:
        return self.entry.connection_id

    @property
    def allowed_connection_ids(self) -> tuple[str, ...] | None:
        return self.entry.allowed_connection_ids


def why_first(entry: DecidedCandidate, decision: Decision, now: datetime) -> str | None:
    """Why an entry's first plan connection comes first ("claude-max-2 first: resets in
    19 h with 40 % left; claude-max-1 resets in 6 d with 90 % left"), from the keys the
    decision ordered them by; None off the plan rung or for fewer than two."""
    allowed = entry.allowed_connection_ids
    if entry.rung is not Rung.SUBSCRIPTION or allowed is None:
        return None
    model_keys = decision.model_preference
    keys = {
        cid: model_keys[(cid, entry.model)]
        if (cid, entry.model) in model_keys
        else decision.preference.get(cid)
        for cid in allowed
    }
    return preference_sentence(allowed, keys, now)


@dataclass(frozen=True, slots=True)
class PoolRung:
    rung: Rung
    entries: list[PoolEntry]


@dataclass(frozen=True, slots=True)
class PoolView:
    decision: Decision
    rungs: list[PoolRung]
    excluded: Sequence[Exclusion]


def pool_view(decision: Decision, now: datetime) -> PoolView:
    """A decision grouped by rung, in ladder order."""
    by_rung: dict[Rung, list[PoolEntry]] = {}
    for entry in decision.candidates:
        by_rung.setdefault(entry.rung, []).append(PoolEntry(entry, why_first(entry, decision, now)))
    return PoolView(
        decision=decision,
        rungs=[PoolRung(rung, by_rung[rung]) for rung in Rung if rung in by_rung],
        excluded=decision.excluded,
    )


@dataclass(frozen=True, slots=True)
class WebhookRow:
    """A webhook as the table shows it: the URL's origin only, the kinds by name."""

    webhook: Webhook
    target: str
    kinds: list[str]
