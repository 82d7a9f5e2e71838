"""The ladder's shell: load what a decision needs in a constant number of queries, call
the pure core, and persist inside one transaction. Views, API endpoints and tasks call
these; nothing here imports the API or views."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from billing import services as billing_services
from billing.bounds import OutOfRange, bounds_of, check_float, fit_decimal
from billing.classify import UNCURATED_VERDICT, Catalog
from billing.models import ChangeCounter
from billing.tiers import PriceBook, Tier
from ladder import core
from ladder.core import (
    AutoId,
    BudgetWindow,
    CandidateIn,
    ConnectionView,
    Decision,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
    RungSpend,
    WindowReading,
    settings_bounds,
)
from ladder.crypto import encrypt_credential
from ladder.lru import ByteBoundedLRU
from ladder.models import (
    CONNECTION_ID_MESSAGE,
    Candidate,
    Connection,
    HysteresisTransition,
    LadderSettings,
    QuotaReading,
    SpendEntry,
    is_connection_id,
)

logger = logging.getLogger(__name__)

PAID_RUNGS = (Rung.CHEAP, Rung.PREMIUM)
# A reading's checked_at may be at most this far ahead of the server clock.
MAX_CLOCK_SKEW = timedelta(seconds=60)


class NotFound(Exception):
    """The named object does not exist."""


def _known_id(connection_id: str) -> str:
    """The id itself, or NotFound before any lookup: an id outside the rule (`.`, `..`,
    a space...) names no connection and is never sent to the database."""
    if not is_connection_id(connection_id):
        raise NotFound(f"No connection {connection_id!r}.")
    return connection_id


def _refuse_bad_ids(field: str, ids: Iterable[str | None]) -> None:
    """ValidationError naming `field` when any id breaks the connection id rule."""
    if any(i is not None and not is_connection_id(i) for i in ids):
        raise ValidationError({field: [CONNECTION_ID_MESSAGE]})


class UnknownCategory(Exception):
    """No registered candidate lists the category of a composite auto id."""

    def __init__(self, category: str, known: Sequence[str]) -> None:
        self.category = category
        self.known = tuple(known)
        names = ", ".join(self.known) or "none"
        super().__init__(f"No registered candidate has the category {category!r}; known: {names}.")


# --- settings ---------------------------------------------------------------------


def get_settings_row() -> LadderSettings:
    """The single settings row (created with the defaults if a database lost it)."""
    row, _ = LadderSettings.objects.get_or_create(pk=1)
    return row


def effective_settings_of(row: LadderSettings) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The tuning the ladder applies for the stored row, and the fields the row holds
    outside the rules (a row from an older release, or edited by hand: each such field
    takes its nearest legal value, so neither a decision nor a read of the settings
    fails on it). Logged, so an operator can save the settings again."""
    values, out_of_range = settings_bounds.effective_settings(
        {name: getattr(row, name) for name in SETTINGS_FIELDS}
    )
    if out_of_range and out_of_range not in _settings_warned:
        # Once per process and set of fields: the config is read on every write path.
        _settings_warned.add(out_of_range)
        logger.warning(
            "stored ladder settings outside the rules, applied as the nearest legal value: %s",
            ", ".join(out_of_range),
        )
    return values, out_of_range


_settings_warned: set[tuple[str, ...]] = set()


def config_from_row(row: LadderSettings) -> LadderConfig:
    """The frozen config the pure core takes (out-of-range fields as applied)."""
    values, _ = effective_settings_of(row)
    return LadderConfig(
        exit_cutoff_percent=values["exit_cutoff_percent"],
        reentry_min_remaining_percent=values["reentry_min_remaining_percent"],
        cheap_budget_usd=values["cheap_budget_usd"],
        premium_budget_usd=values["premium_budget_usd"],
        budget_window=BudgetWindow(values["budget_window"]),
        max_state_age_seconds=values["max_state_age_seconds"],
        base_cooldown_seconds=values["base_cooldown_seconds"],
        max_cooldown_seconds=values["max_cooldown_seconds"],
        cheap_max_input_usd_per_mtok=values["cheap_max_input_usd_per_mtok"],
    )


def load_config() -> LadderConfig:
    """The current tuning (one query)."""
    return config_from_row(get_settings_row())


SETTINGS_FIELDS = (
    "exit_cutoff_percent",
    "reentry_min_remaining_percent",
    "cheap_budget_usd",
    "premium_budget_usd",
    "budget_window",
    "max_state_age_seconds",
    "base_cooldown_seconds",
    "max_cooldown_seconds",
    "cheap_max_input_usd_per_mtok",
)


def settings_snapshot(row: LadderSettings) -> dict[str, Any]:
    """The audited tuning fields (decimals as strings)."""
    return {
        name: (str(value) if isinstance(value, Decimal) else value)
        for name in SETTINGS_FIELDS
        for value in [getattr(row, name)]
    }


def validate_settings(values: dict[str, Any]) -> None:
    """Every settings rule (ladder/core/settings_bounds.py, the one definition); raises
    ValidationError by field. The re-entry floor below the exit cutoff names both."""
    problems = settings_bounds.settings_problems(values)
    if problems:
        raise ValidationError(problems)


def update_settings(values: dict[str, Any], *, actor: str) -> LadderSettings:
    """Replace every tuning field at once, audited in the same transaction."""
    validate_settings(values)
    with transaction.atomic():
        row = LadderSettings.objects.select_for_update().get_or_create(pk=1)[0]
        before = settings_snapshot(row)
        for name in SETTINGS_FIELDS:
            setattr(row, name, values[name])
        row.updated_by = actor
        row.full_clean()
        row.save()
        billing_services.bump(ChangeCounter.CONFIG)
        billing_services.record_audit(
            target_type="settings",
            target_id=1,
            action="update",
            actor=actor,
            before=before,
            after=settings_snapshot(row),
        )
    return row


# --- views of connections for the core ----------------------------------------------


def reading_of(row: QuotaReading | None) -> Reading | None:
    """The core's view of a stored reading."""
    if row is None:
        return None
    return Reading(
        status=QuotaStatus(row.status),
        remaining_percent=row.remaining_percent,
        reset_at=row.reset_at,
        checked_at=row.checked_at,
    )


def hysteresis_of(connection: Connection) -> Hysteresis:
    """The core's view of a connection's stored hysteresis state."""
    return Hysteresis(
        state=HysteresisState(connection.hysteresis_state),
        since=connection.hysteresis_since,
        reason=connection.hysteresis_reason,
    )


def unregistered_view(connection_id: str, provider: str) -> ConnectionView:
    """An id the gateway named but never registered: uncurated (metered), never read."""
    return ConnectionView(
        connection_id=connection_id,
        provider=provider,
        auth_type=None,
        billing=UNCURATED_VERDICT,
        is_active=True,
        cooldown_until=None,
        reading=None,
        hysteresis=core.NEVER_READ,
    )


def connections_with_readings() -> Any:
    """Connections with their current reading joined in (one query when evaluated)."""
    return Connection.objects.select_related("current_reading")


def spend_in_window(config: LadderConfig, now: datetime) -> dict[Rung, RungSpend]:
    """Spend of each paid rung in the current calendar budget window (one query)."""
    start, end = core.budget_window_bounds(config.budget_window, now)
    totals = dict(
        SpendEntry.objects.filter(
            rung__in=[rung.label for rung in PAID_RUNGS],
            occurred_at__gte=start,
            occurred_at__lt=end,
        )
        .values("rung")
        .annotate(total=Sum("cost_usd"))
        .values_list("rung", "total")
    )
    return {
        rung: RungSpend(spent_usd=totals.get(rung.label) or Decimal(0), window_end=end)
        for rung in PAID_RUNGS
    }


# --- decisions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionInputs:
    """Everything a decision needs besides the candidates, loaded up front."""

    config: LadderConfig
    catalog: Catalog
    prices: PriceBook
    spend: dict[Rung, RungSpend]


def load_decision_inputs(now: datetime) -> DecisionInputs:
    """Settings, catalog, prices and window spend: four queries whatever the pool size."""
    config = load_config()
    return DecisionInputs(
        config=config,
        catalog=billing_services.load_catalog(),
        prices=billing_services.load_price_book(),
        spend=spend_in_window(config, now),
    )


def candidate_in(candidate: Candidate) -> CandidateIn:
    """The core's view of a registered candidate."""
    allowed = candidate.allowed_connection_ids
    return CandidateIn(
        id=candidate.pk,
        provider=candidate.provider,
        model=candidate.model,
        categories=tuple(candidate.categories or ()),
        connection_id=candidate.connection_id,
        allowed_connection_ids=tuple(allowed) if allowed else None,
    )


# The hot path. Each web process keeps a snapshot of catalog, prices and settings keyed
# by the `config` change counter, and recent decisions keyed by both counters and valid
# until the earliest instant an input changes on its own. One query (the counters) per
# cached decision; a miss adds a constant handful, whatever the pool size.
DECISION_CACHE_SIZE = 512
# Cached decisions are bounded by bytes too (DECISION_CACHE_MAX_BYTES, of which they get
# this share; the rendered bodies in ladder.api the rest): a pool POST may carry 5,000
# candidates, and 80 such decisions once took 2 GB. A decision's size is estimated in
# O(1) from lengths at hand, with constants measured with tracemalloc and rounded up:
# - per pool entry or exclusion: its tuple, id and rung, and an exclusion's detail text
#   (measured 160 to 290 bytes);
# - per byte of the request body the candidates came from (registered ones: about what
#   their body would be, `as_input_bytes`): their strings (providers, models,
#   connection ids), which the decision keeps; a short JSON string of 6 bytes
#   (`"abc",`) is a 52-byte str and an 8-byte pointer (measured up to 9.1 per byte);
# - a fixed part: the entry, its key, the Decision and its tuples.
DECISION_CACHE_SHARE = 3 / 4
DECISION_BASE_BYTES = 4096
DECISION_ITEM_BYTES = 400
DECISION_BYTES_PER_INPUT_BYTE = 10


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Catalog, prices and tuning as of one `config` counter value."""

    config_version: int
    config: LadderConfig
    catalog: Catalog
    prices: PriceBook


@dataclass(frozen=True, slots=True)
class _CachedDecision:
    decision: Decision
    valid_until: datetime | None


_cache_lock = threading.Lock()
# One entry each, replaced (never added to) when their counter moves: their size is what
# the database holds, not what requests send.
_snapshot: Snapshot | None = None
_registered: tuple[int, tuple[CandidateIn, ...], tuple[str, ...], int] | None = None
_decisions: ByteBoundedLRU[tuple[Any, ...], _CachedDecision] = ByteBoundedLRU(DECISION_CACHE_SIZE)
# Decisions being computed, by cache key: the threads that ask for one meanwhile wait.
_computing: dict[tuple[Any, ...], threading.Event] = {}
# How long such a thread waits before computing the decision itself.
FOLLOW_SECONDS = 5.0


def clear_caches() -> None:
    """Forget this process's snapshot and cached decisions (tests; a restored database)."""
    global _snapshot, _registered
    with _cache_lock:
        _snapshot = None
        _registered = None
        _decisions.clear()


def current_snapshot(config_version: int) -> Snapshot:
    """The snapshot for this config counter, reloaded (three queries) when it moved."""
    global _snapshot
    snapshot = _snapshot
    if snapshot is not None and snapshot.config_version == config_version:
        return snapshot
    snapshot = Snapshot(
        config_version=config_version,
        config=load_config(),
        catalog=billing_services.load_catalog(),
        prices=billing_services.load_price_book(),
    )
    with _cache_lock:
        _snapshot = snapshot
    return snapshot


_VIEW_FIELDS = (
    "connection_id",
    "provider",
    "auth_type",
    "is_active",
    "cooldown_until",
    "hysteresis_state",
    "hysteresis_since",
    "hysteresis_reason",
    "current_reading__status",
    "current_reading__remaining_percent",
    "current_reading__reset_at",
    "current_reading__checked_at",
)


def load_views(referenced: dict[str, str], catalog: Catalog) -> dict[str, ConnectionView]:
    """Views of the referenced connections (one query, plain tuples, no model objects);
    ids never registered become uncurated views."""
    rows = Connection.objects.filter(connection_id__in=list(referenced)).values_list(*_VIEW_FIELDS)
    views = views_of_rows(rows, catalog)
    for connection_id, provider in referenced.items():
        if connection_id not in views:
            views[connection_id] = unregistered_view(connection_id, provider)
    return views


def views_of_rows(rows: Iterable[Sequence[Any]], catalog: Catalog) -> dict[str, ConnectionView]:
    """Views of connection rows holding `_VIEW_FIELDS` in order, by connection id."""
    views: dict[str, ConnectionView] = {}
    verdicts: dict[tuple[str, str], Any] = {}
    for (
        connection_id,
        provider,
        auth_type,
        is_active,
        cooldown_until,
        state,
        since,
        reason,
        status,
        remaining,
        reset_at,
        checked_at,
    ) in rows:
        verdict = verdicts.get((provider, auth_type))
        if verdict is None:
            verdict = verdicts[(provider, auth_type)] = catalog.classify(provider, auth_type)
        views[connection_id] = ConnectionView(
            connection_id=connection_id,
            provider=provider,
            auth_type=auth_type,
            billing=verdict,
            is_active=is_active,
            cooldown_until=cooldown_until,
            reading=Reading(QuotaStatus(status), remaining, reset_at, checked_at)
            if checked_at is not None
            else None,
            hysteresis=Hysteresis(HysteresisState(state), since, reason),
        )
    return views


def tiers_of(
    candidates: Sequence[CandidateIn], prices: PriceBook, config: LadderConfig
) -> dict[tuple[str, str], Tier]:
    """The economic tier of every (provider, model) the candidates name, once each."""
    tiers: dict[tuple[str, str], Tier] = {}
    for candidate in candidates:
        pair = (candidate.provider, candidate.model)
        if pair not in tiers:
            tiers[pair] = prices.tier_of(
                candidate.provider, candidate.model, config.cheap_max_input_usd_per_mtok
            )
    return tiers


def _referenced(candidates: Sequence[CandidateIn]) -> dict[str, str]:
    referenced: dict[str, str] = {}
    for candidate in candidates:
        for connection_id in candidate.connection_ids:
            referenced.setdefault(connection_id, candidate.provider)
    return referenced


def decision_cache_max_bytes() -> int:
    """The byte bound of this process's cached decisions."""
    return int(settings.DECISION_CACHE_MAX_BYTES * DECISION_CACHE_SHARE)


def decision_bytes(decision: Decision, input_bytes: int) -> int:
    """What a cached decision is accounted as (O(1)): `input_bytes` is the length of the
    request its candidates were parsed from (for registered ones, `as_input_bytes`,
    computed once per load)."""
    items = len(decision.candidates) + len(decision.excluded)
    return (
        DECISION_BASE_BYTES
        + DECISION_ITEM_BYTES * items
        + DECISION_BYTES_PER_INPUT_BYTE * input_bytes
    )


def cached_decisions_bytes() -> int:
    """The accounted size of this process's cached decisions."""
    return _decisions.accounted_bytes


def _cached(key: tuple[Any, ...], now: datetime) -> Decision | None:
    """The cached decision under `key` if it still holds at `now`."""
    cached = _decisions.get(key)
    if (
        cached is not None
        and cached.decision.computed_at <= now
        and (cached.valid_until is None or now < cached.valid_until)
    ):
        return cached.decision
    return None


def decide_for(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    *,
    now: datetime,
    cache_key: Any = None,
    counters: tuple[int, int] | None = None,
    input_bytes: int = 0,
) -> Decision:
    """The decision for these candidates, from this process's cache when no write has
    landed and no input has changed on its own since it was computed (`input_bytes`:
    the length of the request body they came from, for the cache's accounting)."""
    config_version, state_version = counters or billing_services.change_counters()
    if cache_key is None:
        # The key holds the candidates themselves: account for them as for a body.
        input_bytes += DECISION_ITEM_BYTES * len(candidates)
    key = (
        auto_id,
        cache_key if cache_key is not None else tuple(candidates),
        config_version,
        state_version,
    )
    cached = _cached(key, now)
    if cached is not None:
        return cached
    with _cache_lock:
        running = _computing.get(key)
        if running is None:
            _computing[key] = threading.Event()
    if running is not None:
        # Another thread of this process is computing this very decision (a burst of
        # requests right after a write): wait for its answer rather than compute it again.
        running.wait(FOLLOW_SECONDS)
        cached = _cached(key, now)
        if cached is not None:
            return cached
        return _compute(auto_id, candidates, key, now, input_bytes)
    try:
        return _compute(auto_id, candidates, key, now, input_bytes)
    finally:
        with _cache_lock:
            _computing.pop(key).set()


def _compute(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    key: tuple[Any, ...],
    now: datetime,
    input_bytes: int = 0,
) -> Decision:
    """Load, decide and cache (`key` ends with the two change counters); a decision
    above the cache's entry size is answered, not kept."""
    config_version = key[-2]
    snapshot = current_snapshot(config_version)
    config = snapshot.config
    views = load_views(_referenced(candidates), snapshot.catalog)
    has_budget = config.cheap_budget_usd is not None or config.premium_budget_usd is not None
    # Without a budget no paid rung is gated: the spend query is skipped.
    spend = spend_in_window(config, now) if has_budget else {}
    tiers = tiers_of(candidates, snapshot.prices, config)
    decision = core.decide(auto_id, candidates, views, tiers, spend, config, now)
    valid_until = core.inputs_valid_until(views.values(), spend, config, now)
    _decisions.put(
        key,
        _CachedDecision(decision, valid_until),
        decision_bytes(decision, input_bytes),
        decision_cache_max_bytes(),
    )
    return decision


def registered_candidates() -> list[CandidateIn]:
    """Every registered candidate, by priority then id (one query)."""
    return [candidate_in(candidate) for candidate in Candidate.objects.order_by("priority", "id")]


def as_input_bytes(candidates: Sequence[CandidateIn]) -> int:
    """About the length of the JSON body these candidates would come in: what their
    strings cost a cached decision (see DECISION_BYTES_PER_INPUT_BYTE)."""
    total = 0
    for c in candidates:
        total += len(c.provider) + len(c.model) + len(c.connection_id or "") + 20
        total += sum(len(x) + 3 for x in c.allowed_connection_ids or ())
    return total


def _registered_for(state_version: int) -> tuple[tuple[CandidateIn, ...], tuple[str, ...], int]:
    """Registered candidates, their categories and `as_input_bytes`, cached per `state`
    counter (each load is a new set of objects, which the decisions made from it keep)."""
    global _registered
    cached = _registered
    if cached is not None and cached[0] == state_version:
        return cached[1], cached[2], cached[3]
    candidates = tuple(registered_candidates())
    known = tuple(sorted({category for c in candidates for category in c.categories}))
    input_bytes = as_input_bytes(candidates)
    with _cache_lock:
        _registered = (state_version, candidates, known, input_bytes)
    return candidates, known, input_bytes


def registered_categories() -> tuple[str, ...]:
    """The categories of the registered candidates as this process last loaded them
    (no query: empty until a registered pool has been decided)."""
    cached = _registered
    return cached[2] if cached is not None else ()


def decide_registered(
    auto_id: AutoId, *, now: datetime | None = None, counters: tuple[int, int] | None = None
) -> Decision:
    """The decision for an auto id over the registered candidates (`counters`: the
    change counters if the caller has just read them)."""
    now = now or timezone.now()
    counters = counters or billing_services.change_counters()
    candidates, known, input_bytes = _registered_for(counters[1])
    if auto_id.category is not None and auto_id.category not in known:
        raise UnknownCategory(auto_id.category, known)
    return decide_for(
        auto_id,
        candidates,
        now=now,
        cache_key="registered",
        counters=counters,
        input_bytes=input_bytes,
    )


def cached_decision(
    auto_id: AutoId, cache_key: Any, *, now: datetime, counters: tuple[int, int]
) -> Decision | None:
    """The decision `decide_for` (or `decide_registered`: key "registered") would return
    under `cache_key`, if this process has it cached for these change counters and it
    still holds at `now`; None otherwise. No query."""
    return _cached((auto_id, cache_key, *counters), now)


# --- readings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadingInput:
    status: str | None = None
    remaining_percent: float | None = None
    reset_at: datetime | None = None
    checked_at: datetime | None = None
    windows: tuple[WindowReading, ...] | None = None
    source: str = "push"
    detail: str = ""


def check_reading_percents(data: ReadingInput) -> None:
    """Every percent of a reading is a finite number within its column's 0..100, from
    whichever path it came (API, adapters, events); ValidationError naming the field."""
    bounds = bounds_of(QuotaReading, "remaining_percent")
    named = [("remaining_percent", data.remaining_percent)]
    named += [("windows", w.remaining_percent) for w in data.windows or ()]
    for name, value in named:
        if value is None:
            continue
        try:
            check_float(value, bounds)
        except OutOfRange as error:
            raise ValidationError({name: [f"A remaining percent: {error}"]}) from None


def normalise_reading(data: ReadingInput, now: datetime) -> ReadingInput:
    """Reduce windows to the binding window, derive the status, default checked_at and
    cap it at `now` (the receive time)."""
    check_reading_percents(data)
    remaining, reset_at = data.remaining_percent, data.reset_at
    if data.windows and remaining is None:
        remaining, window_reset = core.binding_window(data.windows)
        reset_at = window_reset if window_reset is not None else reset_at
    checked_at = data.checked_at or now
    if checked_at - now > MAX_CLOCK_SKEW:
        raise ValidationError(
            {"checked_at": [f"More than {int(MAX_CLOCK_SKEW.total_seconds())} s in the future."]}
        )
    checked_at = core.stored_checked_at(checked_at, now)
    status = data.status or core.derive_status(remaining)
    return ReadingInput(
        status=status,
        remaining_percent=remaining,
        reset_at=reset_at,
        checked_at=checked_at,
        windows=data.windows,
        source=data.source,
        detail=data.detail,
    )


@dataclass
class StoredReading:
    reading: QuotaReading
    is_current: bool
    transition: HysteresisTransition | None
    on_commit: list[Any] = field(default_factory=list)


def _windows_json(windows: tuple[WindowReading, ...] | None) -> list[dict[str, Any]]:
    return [
        {
            "name": w.name,
            "remaining_percent": w.remaining_percent,
            "reset_at": w.reset_at.isoformat() if w.reset_at else None,
        }
        for w in windows or ()
    ]


def server_clock() -> datetime:
    """The server's own clock (a seam: tests freeze it)."""
    return timezone.now()


def received_at(now: datetime) -> datetime:
    """The instant a reading is received: the caller's `now`, or the server's clock when
    that is later (a worker's `now` is the start of its poll, seconds earlier; a reading
    stored meanwhile must not look dated ahead of it)."""
    return max(now, server_clock())


def store_reading(
    connection_id: str, data: ReadingInput, *, now: datetime | None = None
) -> StoredReading:
    """Store a reading; if it is the newest it becomes current and updates hysteresis,
    all in one transaction. NotFound for an unknown connection."""
    _known_id(connection_id)
    now = now or timezone.now()
    data = normalise_reading(data, now)
    assert data.checked_at is not None
    assert data.status is not None
    config = load_config()
    with transaction.atomic():
        connection = (
            Connection.objects.select_for_update(of=("self",))
            .select_related("current_reading")
            .filter(connection_id=connection_id)
            .first()
        )
        if connection is None:
            raise NotFound(f"No connection {connection_id!r}.")
        reading = QuotaReading.objects.create(
            connection=connection,
            status=data.status,
            remaining_percent=data.remaining_percent,
            reset_at=data.reset_at,
            checked_at=data.checked_at,
            windows=_windows_json(data.windows),
            source=data.source,
            detail=data.detail[:500],
        )
        current = connection.current_reading
        # A late-arriving older reading is kept as history but does not change the state.
        is_current = core.supersedes(
            reading.checked_at,
            current.checked_at if current is not None else None,
            received_at(now),
        )
        transition = None
        if is_current:
            connection.current_reading = reading
            previous = hysteresis_of(connection)
            core_reading = reading_of(reading)
            assert core_reading is not None
            after = core.hysteresis_after(previous, core_reading, config)
            update_fields = ["current_reading", "updated_at"]
            if previous == core.NEVER_READ and after.state is HysteresisState.IN_PLAY:
                # The first reading starts the in-play period (no flip, so no transition row).
                connection.hysteresis_since = data.checked_at
                connection.hysteresis_reason = "in play since its first reading"
                update_fields += ["hysteresis_since", "hysteresis_reason"]
            if after.state is not previous.state:
                connection.hysteresis_state = after.state.value
                connection.hysteresis_since = after.since
                connection.hysteresis_reason = after.reason[:300]
                update_fields += ["hysteresis_state", "hysteresis_since", "hysteresis_reason"]
                transition = HysteresisTransition.objects.create(
                    connection=connection,
                    state=after.state.value,
                    at=after.since or data.checked_at,
                    reason=after.reason[:300],
                )
            connection.save(update_fields=update_fields)
        billing_services.bump(ChangeCounter.STATE)
        stored = StoredReading(reading=reading, is_current=is_current, transition=transition)
        if is_current and core.should_schedule_reset_refresh(
            reading.reset_at,
            current.reset_at if current is not None else None,
            current.checked_at if current is not None else None,
            now,
        ):
            transaction.on_commit(lambda: _schedule_refresh_at_reset(connection, reading.reset_at))
    return stored


def _schedule_refresh_at_reset(connection: Connection, reset_at: datetime | None) -> None:
    """Ask for a refresh right after the upstream's own reset instant (see tasks)."""
    if reset_at is None or not core.is_polled(connection.quota_source):
        return
    from ladder import tasks  # a late import: tasks import services

    try:
        tasks.schedule_refresh_at(connection.connection_id, reset_at)
    except Exception as error:  # the periodic beat still refreshes once the reset passes
        logger.warning(
            "could not schedule the reset refresh of %s: %s",
            connection.connection_id,
            type(error).__name__,
        )


# --- events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventResult:
    connection_id: str
    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


def apply_event(
    connection_id: str,
    *,
    kind: str,
    retry_after_seconds: float | None = None,
    reset_at: datetime | None = None,
    headers: dict[str, str] | None = None,
    now: datetime | None = None,
) -> EventResult:
    """Write the cooldown a gateway event implies (replacing any in force), clamped to
    the upstream's reset; `quota_exhausted` also stores an EXHAUSTED reading."""
    _known_id(connection_id)
    now = now or timezone.now()
    config = load_config()
    header_reading: ReadingInput | None = None
    if headers:
        from ladder.quota.headers import parse_rate_limit_headers

        info = parse_rate_limit_headers(headers, now)
        if retry_after_seconds is None:
            retry_after_seconds = info.retry_after_seconds
        if reset_at is None:
            reset_at = info.reset_at
        # Headers that carry no percentage and no exhaustion (a bare reset time) say
        # nothing about quota: storing them would replace a good reading with UNKNOWN.
        if info.is_exhausted or any(w.remaining_percent is not None for w in info.windows):
            header_reading = ReadingInput(
                status=QuotaStatus.EXHAUSTED.value if info.is_exhausted else None,
                windows=info.windows,
                reset_at=info.reset_at,
                checked_at=now,
                source="headers",
            )
    with transaction.atomic():
        connection = (
            Connection.objects.select_for_update().filter(connection_id=connection_id).first()
        )
        if connection is None:
            raise NotFound(f"No connection {connection_id!r}.")
        change = core.apply_event(
            kind,
            consecutive_failures=connection.consecutive_failures,
            retry_after_seconds=retry_after_seconds,
            reset_at=reset_at,
            config=config,
            now=now,
        )
        connection.cooldown_until = change.cooldown_until
        connection.consecutive_failures = change.consecutive_failures
        connection.save(update_fields=["cooldown_until", "consecutive_failures", "updated_at"])
        billing_services.bump(ChangeCounter.STATE)
        if kind == "quota_exhausted":
            store_reading(
                connection_id,
                ReadingInput(
                    status=QuotaStatus.EXHAUSTED.value,
                    remaining_percent=0.0,
                    reset_at=reset_at,
                    checked_at=now,
                    source="event",
                    detail="The gateway reported the quota exhausted.",
                ),
                now=now,
            )
        elif header_reading is not None:
            store_reading(connection_id, header_reading, now=now)
    return EventResult(
        connection_id=connection_id,
        cooldown_until=change.cooldown_until,
        cooldown_seconds=change.cooldown_seconds,
        clamped_to_reset=change.clamped_to_reset,
        consecutive_failures=change.consecutive_failures,
    )


# --- connections -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionInput:
    provider: str
    auth_type: str
    label: str = ""
    active: bool = True
    quota_source: str = core.NO_QUOTA_SOURCE
    credential: str | None = None  # None keeps the stored one; "" clears it


class ConnectionExists(Exception):
    """A create-only write named an id that is registered already; nothing changed."""


def upsert_connection(
    connection_id: str, data: ConnectionInput, *, must_exist: bool | None = None
) -> tuple[Connection, bool]:
    """Create or replace a connection's fields; the credential is encrypted before storing.
    `must_exist=True` only updates (NotFound), `False` only creates (ConnectionExists),
    decided under the row lock so a concurrent write cannot slip in between."""
    _refuse_bad_ids("connection_id", [connection_id])
    ciphertext = None
    if data.credential:
        ciphertext = encrypt_credential(data.credential)
    with transaction.atomic():
        connection = (
            Connection.objects.select_for_update().filter(connection_id=connection_id).first()
        )
        created = connection is None
        if must_exist is True and connection is None:
            raise NotFound(f"No connection {connection_id!r}.")
        if must_exist is False and connection is not None:
            raise ConnectionExists(f"A connection with the id {connection_id} exists already.")
        if connection is None:
            connection = Connection(connection_id=connection_id)
        connection.provider = data.provider
        connection.auth_type = data.auth_type
        connection.label = data.label
        connection.is_active = data.active
        connection.quota_source = data.quota_source
        if data.credential == "":
            connection.credential_ciphertext = ""
        elif ciphertext is not None:
            connection.credential_ciphertext = ciphertext
        try:
            with transaction.atomic():
                connection.save()
        except IntegrityError as error:  # created concurrently by another request
            raise ConnectionExists(
                f"A connection with the id {connection_id} exists already."
            ) from error
        billing_services.bump(ChangeCounter.STATE)
    logger.info(
        "connection %s %s (provider %s, auth %s, credential %s)",
        connection_id,
        "created" if created else "updated",
        data.provider,
        data.auth_type,
        "replaced" if ciphertext else ("cleared" if data.credential == "" else "kept"),
    )
    return connection, created


def delete_connection(connection_id: str) -> bool:
    """Delete a connection and its readings; False when there was none."""
    if not is_connection_id(connection_id):
        return False
    with transaction.atomic():
        deleted, _ = Connection.objects.filter(connection_id=connection_id).delete()
        if deleted:
            billing_services.bump(ChangeCounter.STATE)
    return deleted > 0


def get_connection(connection_id: str) -> Connection:
    """One connection with its current reading; NotFound otherwise."""
    connection = connections_with_readings().filter(connection_id=_known_id(connection_id)).first()
    if connection is None:
        raise NotFound(f"No connection {connection_id!r}.")
    return connection


# --- candidates ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CandidateInput:
    provider: str
    model: str
    categories: tuple[str, ...] = ()
    priority: int = 0
    connection_id: str | None = None
    allowed_connection_ids: tuple[str, ...] | None = None


def validate_candidate_target(connection_id: str | None, allowed: Sequence[str] | None) -> None:
    """Exactly one of a pinned connection and a non-empty allowlist."""
    if (connection_id is None) == (not allowed):
        raise ValidationError(
            {
                "connection_id": [
                    "Give exactly one of connection_id and a non-empty allowed_connection_ids."
                ]
            }
        )


def save_candidate(data: CandidateInput, candidate_id: int | None = None) -> Candidate:
    """Create a candidate, or replace one's fields (NotFound when it does not exist)."""
    validate_candidate_target(data.connection_id, data.allowed_connection_ids)
    _refuse_bad_ids("connection_id", [data.connection_id])
    _refuse_bad_ids("allowed_connection_ids", data.allowed_connection_ids or ())
    with transaction.atomic():
        if candidate_id is None:
            candidate = Candidate()
        else:
            found = Candidate.objects.select_for_update().filter(pk=candidate_id).first()
            if found is None:
                raise NotFound(f"No candidate {candidate_id}.")
            candidate = found
        candidate.provider = data.provider
        candidate.model = data.model
        candidate.categories = list(dict.fromkeys(data.categories))
        candidate.priority = data.priority
        candidate.connection_id = data.connection_id
        candidate.allowed_connection_ids = (
            list(data.allowed_connection_ids) if data.allowed_connection_ids else None
        )
        candidate.save()
        billing_services.bump(ChangeCounter.STATE)
    return candidate


def delete_candidate(candidate_id: int) -> bool:
    """Remove a registered candidate; False when there was none."""
    with transaction.atomic():
        deleted, _ = Candidate.objects.filter(pk=candidate_id).delete()
        if deleted:
            billing_services.bump(ChangeCounter.STATE)
    return deleted > 0


# --- spend ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpendInput:
    request_id: str
    connection_id: str
    provider: str
    model: str
    cost_usd: Decimal | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    occurred_at: datetime | None = None


def spend_rung(
    connection_id: str, provider: str, model: str, snapshot: Snapshot | None = None
) -> Rung:
    """The rung a request landed on: billing of its connection, then the model's tier
    (from the cached snapshot the decisions use: no reload of a large price table)."""
    if snapshot is None:
        snapshot = current_snapshot(billing_services.change_counters()[0])
    connection = Connection.objects.filter(connection_id=connection_id).first()
    verdict = (
        snapshot.catalog.classify(connection.provider, connection.auth_type)
        if connection is not None
        else UNCURATED_VERDICT
    )
    tier = snapshot.prices.tier_of(provider, model, snapshot.config.cheap_max_input_usd_per_mtok)
    return core.rung_for(verdict, tier)


def earliest_spend_at(now: datetime) -> datetime:
    """The oldest `occurred_at` a spend report may carry: the retention period back, or
    the start of the current budget window if that is earlier."""
    # Spend is refused beyond the product's one retention period (a year-1 date is a
    # broken clock, not a request), but never spend that still counts against a budget:
    # refusing it would let a paid rung overspend (a month outlasts 14 days' retention).
    retention_start = now - timedelta(days=settings.QUOTA_READING_RETENTION_DAYS)
    window_start, _ = core.budget_window_bounds(load_config().budget_window, now)
    return min(retention_start, window_start)


def validate_occurred_at(occurred_at: datetime | None, now: datetime) -> None:
    """At most MAX_CLOCK_SKEW ahead of `now` and not before `earliest_spend_at`."""
    if occurred_at is None:
        return
    if occurred_at - now > MAX_CLOCK_SKEW:
        raise ValidationError(
            {"occurred_at": [f"More than {int(MAX_CLOCK_SKEW.total_seconds())} s in the future."]}
        )
    # Cheap test first: the budget window (one query) is read only for an old date.
    retention = timedelta(days=settings.QUOTA_READING_RETENTION_DAYS)
    if occurred_at < now - retention and occurred_at < earliest_spend_at(now):
        raise ValidationError(
            {
                "occurred_at": [
                    f"Older than the retention period ({retention.days} days) and before "
                    "the current budget window."
                ]
            }
        )


def _spend_cost(cost: Decimal) -> Decimal:
    """The cost rounded to its column (16 digits, 8 after the point), or ValidationError:
    checked after rounding, since 99,999,999.999999995 rounds past the column, which
    SQLite would store and then fail every read of the spend ledger."""
    bounds = bounds_of(SpendEntry, "cost_usd")
    try:
        if cost < 0:
            raise OutOfRange
        return fit_decimal(cost, bounds)
    except (OutOfRange, ArithmeticError):
        raise ValidationError(
            {"cost_usd": [f"A request's cost must be between 0 and {bounds.high:,f} USD."]}
        ) from None


def record_spend(data: SpendInput, *, now: datetime | None = None) -> tuple[SpendEntry, bool]:
    """Record one request's spend once per request_id; (entry, created)."""
    _refuse_bad_ids("connection_id", [data.connection_id])
    now = now or timezone.now()
    existing = SpendEntry.objects.filter(request_id=data.request_id).first()
    if existing is not None:
        return existing, False
    validate_occurred_at(data.occurred_at, now)
    snapshot = current_snapshot(billing_services.change_counters()[0])
    cost = data.cost_usd
    is_computed = cost is None
    if cost is None:
        cost = snapshot.prices.cost_usd(
            data.provider, data.model, data.input_tokens or 0, data.output_tokens or 0
        )
    cost = _spend_cost(cost)
    rung = spend_rung(data.connection_id, data.provider, data.model, snapshot)
    try:
        with transaction.atomic():
            entry = SpendEntry.objects.create(
                request_id=data.request_id,
                connection_id=data.connection_id,
                provider=data.provider,
                model=data.model,
                cost_usd=cost,
                is_cost_computed=is_computed,
                input_tokens=data.input_tokens,
                output_tokens=data.output_tokens,
                rung=rung.label,
                occurred_at=data.occurred_at or now,
            )
            billing_services.bump(ChangeCounter.STATE)
    except IntegrityError:  # the same request_id reported twice at once
        return SpendEntry.objects.get(request_id=data.request_id), False
    return entry, True


@dataclass(frozen=True, slots=True)
class RungBudget:
    spent_usd: Decimal
    budget_usd: Decimal | None
    is_exhausted: bool


@dataclass(frozen=True, slots=True)
class SpendSummary:
    budget_window: str
    window_start: datetime
    window_end: datetime
    rungs: dict[str, RungBudget]


def spend_summary(*, now: datetime | None = None) -> SpendSummary:
    """Spend of each paid rung against its budget in the current window."""
    now = now or timezone.now()
    config = load_config()
    return summarise_spend(config, spend_in_window(config, now), now)


def summarise_spend(
    config: LadderConfig, spend: dict[Rung, RungSpend], now: datetime
) -> SpendSummary:
    """The spend summary of already-loaded window spend (no query)."""
    start, end = core.budget_window_bounds(config.budget_window, now)
    rungs = {}
    for rung in PAID_RUNGS:
        budget = config.budget_for(rung)
        spent = spend[rung].spent_usd
        rungs[rung.label] = RungBudget(
            spent_usd=spent,
            budget_usd=budget,
            is_exhausted=budget is not None and spent >= budget,
        )
    return SpendSummary(
        budget_window=config.budget_window.value, window_start=start, window_end=end, rungs=rungs
    )


# --- refresh requests and retention ------------------------------------------------------


class NoQuotaSource(Exception):
    """The connection has no quota source to poll."""


class BrokerUnavailable(Exception):
    """The task broker refused or timed out; nothing was queued."""


def request_refresh(connection_id: str) -> None:
    """Enqueue an immediate background poll; NotFound, NoQuotaSource or BrokerUnavailable."""
    connection = Connection.objects.filter(connection_id=_known_id(connection_id)).first()
    if connection is None:
        raise NotFound(f"No connection {connection_id!r}.")
    if not core.is_polled(connection.quota_source):
        raise NoQuotaSource(
            f"Connection {connection_id!r} has no quota source: set quota_source to poll it, "
            "or push readings to /readings."
        )
    from ladder import tasks

    try:
        tasks.refresh_connection_task.apply_async(
            kwargs={"connection_id": connection_id, "requested_at": timezone.now().isoformat()}
        )
    except Exception as error:  # kombu raises several types; all mean "not queued"
        logger.warning("could not enqueue a refresh of %s: %s", connection_id, type(error).__name__)
        raise BrokerUnavailable("The task broker is unavailable; nothing was queued.") from error


def prune_readings(*, older_than: datetime) -> int:
    """Delete readings checked before `older_than`, never a connection's current one."""
    current_ids = Connection.objects.filter(current_reading__isnull=False).values(
        "current_reading_id"
    )
    deleted, _ = (
        QuotaReading.objects.filter(checked_at__lt=older_than).exclude(pk__in=current_ids).delete()
    )
    return deleted


# --- dashboard queries --------------------------------------------------------------------
# Read helpers for the dashboard. Each runs a fixed number of queries, whatever the number
# of connections, so a page's query count does not grow with the world it shows.


def published_auto_ids(candidates: Sequence[CandidateIn]) -> list[AutoId]:
    """The flat auto ids, then both composites of each category a candidate lists."""
    categories = sorted({category for candidate in candidates for category in candidate.categories})
    auto_ids = list(core.ADVERTISED_AUTO_IDS)
    for category in categories:
        try:
            auto_ids += [AutoId(grouping, category) for grouping in core.Grouping]
        except core.InvalidAutoId:  # a category no auto id can name is not published
            continue
    return auto_ids


def decide_published(*, now: datetime | None = None) -> list[Decision]:
    """The decision of every published auto id over the registered candidates, at one
    `now`, loading candidates, inputs and connections once (six queries however many
    auto ids). Each decision equals `decide_registered`'s for that id (tests pin it)."""
    now = now or timezone.now()
    candidates = registered_candidates()
    inputs = load_decision_inputs(now)
    tiers = tiers_of(candidates, inputs.prices, inputs.config)
    views = load_views(_referenced(candidates), inputs.catalog)
    return [
        core.decide(auto_id, candidates, views, tiers, inputs.spend, inputs.config, now)
        for auto_id in published_auto_ids(candidates)
    ]


@dataclass(frozen=True, slots=True)
class ReadingHealth:
    """How fresh the polled readings are, and the next known reset (one query)."""

    polled_connections: int
    polled_with_reading: int
    newest_polled_reading_at: datetime | None
    next_reset_at: datetime | None


def reading_health(*, now: datetime) -> ReadingHealth:
    """Newest current reading of any polled connection (a worker or broker outage shows as
    this going stale) and the earliest future reset of any current reading (one query)."""
    from django.db.models import Count, Max, Min, Q

    polled = ~Q(quota_source__in=core.UNPOLLED_QUOTA_SOURCES)
    totals = Connection.objects.aggregate(
        polled=Count("pk", filter=polled),
        polled_read=Count("current_reading", filter=polled),
        newest=Max("current_reading__checked_at", filter=polled),
        next_reset=Min("current_reading__reset_at", filter=Q(current_reading__reset_at__gt=now)),
    )
    return ReadingHealth(
        polled_connections=totals["polled"],
        polled_with_reading=totals["polled_read"],
        newest_polled_reading_at=totals["newest"],
        next_reset_at=totals["next_reset"],
    )


def reading_history(connection: Connection, *, since: datetime) -> list[QuotaReading]:
    """The connection's readings checked since `since`, oldest first (one query)."""
    return list(
        QuotaReading.objects.filter(connection=connection, checked_at__gte=since).order_by(
            "checked_at", "id"
        )
    )


def transition_history(connection: Connection, *, since: datetime) -> list[HysteresisTransition]:
    """The connection's hysteresis transitions since `since`, newest first (one query)."""
    return list(HysteresisTransition.objects.filter(connection=connection, at__gte=since))


# --- operations (metrics) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """One registered connection as the operations metrics report it."""

    view: ConnectionView
    quota_source: str


@dataclass(frozen=True, slots=True)
class OperationsState:
    """What /metrics reports from the database, all as of one `now`."""

    now: datetime
    config: LadderConfig
    connections: tuple[ConnectionState, ...]
    spend: SpendSummary
    # The decisions of the flat auto ids over the registered candidates: every composite
    # is a category subset of one of them, so they see every usable connection.
    decisions: tuple[Decision, ...]


def operations_state(*, now: datetime) -> OperationsState:
    """Connections, window spend and the flat auto ids' decisions at `now`, in six queries
    whatever the number of connections and candidates."""
    config = load_config()
    catalog = billing_services.load_catalog()
    prices = billing_services.load_price_book()
    spend = spend_in_window(config, now)
    rows = list(Connection.objects.values_list(*_VIEW_FIELDS, "quota_source"))
    fields = len(_VIEW_FIELDS)
    views = views_of_rows((row[:fields] for row in rows), catalog)
    candidates = registered_candidates()
    tiers = tiers_of(candidates, prices, config)
    # The registered views stand for every referenced id; `core.decide` treats an id
    # never registered as uncurated, exactly as `load_views` does.
    decisions = tuple(
        core.decide(auto_id, candidates, views, tiers, spend, config, now)
        for auto_id in core.ADVERTISED_AUTO_IDS
    )
    return OperationsState(
        now=now,
        config=config,
        connections=tuple(
            ConnectionState(view=views[row[0]], quota_source=row[-1] or core.NO_QUOTA_SOURCE)
            for row in rows
        ),
        spend=summarise_spend(config, spend, now),
        decisions=decisions,
    )
