"""Spend: one request's cost recorded once per request id, and each paid rung against
its budget in the current window."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.utils import timezone

from billing import services as billing_services
from billing.bounds import OutOfRange, bounds_of, fit_decimal
from billing.classify import UNCURATED_VERDICT
from billing.models import ChangeCounter
from ladder import core
from ladder.core import LadderConfig, Rung, RungSpend
from ladder.models import Connection, SpendEntry
from ladder.services.common import MAX_CLOCK_SKEW, PAID_RUNGS, refuse_bad_id
from ladder.services.config import load_config
from ladder.services.decisions import Snapshot, current_snapshot
from ladder.services.spend_totals import (
    add_to_totals,
    must_move_after_spend,
    spend_by_rung,
    window_days,
    window_spend_and_saved,
)
from ladder.services.spend_write import insert_entry

# The plan-included rungs: nothing is billed there, and their list price is "saved".
PLAN_RUNGS = frozenset((Rung.SUBSCRIPTION, Rung.KEYLESS))


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
    # The id of the API token that reported it (the spend page's breakdown by token).
    token_id: int | None = None


def current_spend_snapshot() -> Snapshot:
    """The cached snapshot of catalog, prices and settings (one query: the counters)."""
    return current_snapshot(billing_services.change_counters()[0])


def rung_of(billing: tuple[str, str] | None, provider: str, model: str, snapshot: Snapshot) -> Rung:
    """The rung a request landed on, from its connection's (provider, auth_type) (None:
    not registered) and the model's tier, on the snapshot (no query)."""
    verdict = snapshot.catalog.classify(*billing) if billing is not None else UNCURATED_VERDICT
    provider = snapshot.catalog.provider_id(provider)
    tier = snapshot.prices.tier_of(provider, model, snapshot.config.cheap_max_input_usd_per_mtok)
    return core.rung_for(verdict, tier)


def billing_of(connection_id: str) -> tuple[str, str] | None:
    """A connection's (provider, auth_type), None when it is not registered (one query)."""
    return (
        Connection.objects.filter(connection_id=connection_id)
        .values_list("provider", "auth_type")
        .first()
    )


# Connections' billing by connection id, as of one `state` counter value: every write of
# a connection moves that counter (ladder.services.registry), so an entry is never stale.
# Bounded: a stream of made-up connection ids clears it rather than growing it.
_billing: tuple[int, dict[str, tuple[str, str] | None]] = (-1, {})
BILLING_CACHE_SIZE = 4096


def billing_of_cached(
    connection_id: str, counters: tuple[int, int] | None
) -> tuple[str, str] | None:
    """`billing_of`, kept per process for the `state` counter value in `counters` (the
    counters read with the request's token); a query only on a miss or without them."""
    global _billing
    if counters is None:
        return billing_of(connection_id)
    version, known = _billing
    if version != counters[1]:
        known = {}
        _billing = (counters[1], known)
    if connection_id in known:
        return known[connection_id]
    billing = billing_of(connection_id)
    if len(known) >= BILLING_CACHE_SIZE:
        known.clear()
    known[connection_id] = billing
    return billing


def spend_rung(
    connection_id: str, provider: str, model: str, snapshot: Snapshot | None = None
) -> Rung:
    """The rung a request landed on: billing of its connection, then the model's tier
    (from the cached snapshot the decisions use: no reload of a large price table)."""
    return rung_of(billing_of(connection_id), provider, model, snapshot or current_spend_snapshot())


def earliest_spend_at(now: datetime, config: LadderConfig | None = None) -> datetime:
    """The oldest `occurred_at` a spend report may carry: the retention period back, or
    the start of the current budget window if that is earlier (`config`: the settings
    at hand, e.g. the snapshot's; loaded when not given)."""
    # Spend is refused beyond the product's one retention period (a year-1 date is a
    # broken clock, not a request), but never spend that still counts against a budget:
    # refusing it would let a paid rung overspend (a month outlasts 14 days' retention).
    retention_start = now - timedelta(days=settings.QUOTA_READING_RETENTION_DAYS)
    window_start, _ = core.budget_window_bounds((config or load_config()).budget_window, now)
    return min(retention_start, window_start)


def validate_occurred_at(
    occurred_at: datetime | None, now: datetime, config: LadderConfig | None = None
) -> None:
    """At most MAX_CLOCK_SKEW ahead of `now` and not before `earliest_spend_at`."""
    if occurred_at is None:
        return
    if occurred_at - now > MAX_CLOCK_SKEW:
        raise ValidationError(
            {"occurred_at": [f"More than {int(MAX_CLOCK_SKEW.total_seconds())} s in the future."]}
        )
    retention = timedelta(days=settings.QUOTA_READING_RETENTION_DAYS)
    if occurred_at < now - retention and occurred_at < earliest_spend_at(now, config):
        raise ValidationError(
            {
                "occurred_at": [
                    f"Older than the retention period ({retention.days} days) and before "
                    "the current budget window."
                ]
            }
        )


_COST_BOUNDS = bounds_of(SpendEntry, "cost_usd")


def _spend_cost(cost: Decimal) -> Decimal:
    """The cost rounded to its column (16 digits, 8 after the point), or ValidationError:
    checked after rounding, since 99,999,999.999999995 rounds past the column, which
    SQLite would store and then fail every read of the spend ledger."""
    try:
        if cost < 0:
            raise OutOfRange
        return fit_decimal(cost, _COST_BOUNDS)
    except (OutOfRange, ArithmeticError):
        raise ValidationError(
            {"cost_usd": [f"A request's cost must be between 0 and {_COST_BOUNDS.high:,f} USD."]}
        ) from None


def new_entry(data: SpendInput, rung: Rung, snapshot: Snapshot, now: datetime) -> SpendEntry:
    """The ledger row of a report not seen before, unsaved (no query), or
    ValidationError: the cost (computed on the snapshot's prices when null) and the
    date checked."""
    refuse_bad_id("connection_id", data.connection_id)
    validate_occurred_at(data.occurred_at, now, snapshot.config)
    provider = snapshot.catalog.provider_id(data.provider)
    cost = data.cost_usd
    is_computed = cost is None
    plan_included = rung in PLAN_RUNGS
    list_price = None
    if cost is None or plan_included:
        # The metered price of its tokens: the cost when none was sent, and on a
        # plan-included rung what the plan saved, whatever the gateway sent.
        list_price = _spend_cost(
            snapshot.prices.cost_usd(
                provider, data.model, data.input_tokens or 0, data.output_tokens or 0
            )
        )
    cost = _spend_cost(cost) if cost is not None else list_price
    assert cost is not None
    return unsaved_entry(
        {
            "request_id": data.request_id,
            "connection_id": data.connection_id,
            "provider": provider,
            "model": data.model,
            "cost_usd": cost,
            "is_cost_computed": is_computed,
            "billed_usd": Decimal(0) if plan_included else cost,
            "list_price_usd": list_price if plan_included and list_price is not None else cost,
            "input_tokens": data.input_tokens,
            "output_tokens": data.output_tokens,
            "rung": rung.label,
            "occurred_at": data.occurred_at or now,
            "token_id": data.token_id,
        }
    )


# Every field of a ledger row, unset (None) until given: an unsaved row's attributes.
_UNSET_ROW = {field.attname: None for field in SpendEntry._meta.concrete_fields}
_new_object = object.__new__


def unsaved_entry(values: dict[str, Any]) -> SpendEntry:
    """SpendEntry(**values) for `values` naming every field but `id` and `recorded_at`
    (None until saved), its attributes set directly (a test holds the two equal).
    Django's keyword path searches the keywords field by field and was a sixth of a
    batch entry's cost; the attributes set at once cost a ninth of even the positional
    path. That path is kept while anything listens to the model's init signals, which
    setting the attributes would not send (nothing does)."""
    if (pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(SpendEntry) or post_init.has_listeners(SpendEntry)
    ):
        build: Any = SpendEntry  # django-stubs types a model's keyword construction only
        built: SpendEntry = build(**values)
        return built
    entry: SpendEntry = _new_object(SpendEntry)
    attributes = entry.__dict__
    attributes.update(_UNSET_ROW)
    attributes.update(values)
    attributes["_state"] = ModelState()
    return entry


def record_spend(
    data: SpendInput, *, now: datetime | None = None, counters: tuple[int, int] | None = None
) -> tuple[SpendEntry, bool]:
    """Record one request's spend once per request_id; (entry, created). Everything comes
    from the cached snapshot (`counters`: the change counters read with the caller's
    token, which saves their query): on PostgreSQL the report is one statement in its own
    transaction, three queries in all on a budgeted rung and two on any other, whatever
    the price catalog holds, and the change version moves only when the entry takes a
    rung's window to its budget (decided after the commit: spend_totals.note_crossings)."""
    refuse_bad_id("connection_id", data.connection_id)
    now = now or timezone.now()
    snapshot = current_snapshot(counters[0]) if counters is not None else current_spend_snapshot()
    billing = billing_of_cached(data.connection_id, counters)
    rung = rung_of(billing, data.provider, data.model, snapshot)
    try:
        entry = new_entry(data, rung, snapshot, now)
    except ValidationError:
        # A report seen before is answered as stored, whatever it says now.
        existing = SpendEntry.objects.filter(request_id=data.request_id).first()
        if existing is None:
            raise
        return existing, False
    entry.recorded_at = timezone.now()
    stored = insert_entry if connection.vendor == "postgresql" else _insert_with_orm
    if not stored(entry):
        return SpendEntry.objects.get(request_id=data.request_id), False
    # The entry has committed (the API calls this outside any transaction: inside a
    # caller's, it looks before that commits, which is right only for a lone writer).
    if must_move_after_spend([entry], snapshot.config, snapshot.config_version, now):
        billing_services.bump(ChangeCounter.STATE)
    return entry, True


def _insert_with_orm(entry: SpendEntry) -> bool:
    """The ledger row and its day total in one transaction (SQLite, which serialises
    writers itself); False when the request id is in the ledger already."""
    try:
        with transaction.atomic():
            entry.save(force_insert=True)
            add_to_totals([entry])
    except IntegrityError:  # the same request_id reported twice at once
        return False
    return True


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
    # The list price of what the plan-included rungs served in the window.
    saved_usd: Decimal = Decimal(0)

    @property
    def last_day(self) -> datetime:
        """The window's last day (its end is the next window's first instant): pages say
        "2026-12-01 to 2026-12-31", as the spend page does, never "to 2027-01-01"."""
        return self.window_end - timedelta(microseconds=1)


def spend_summary(*, now: datetime | None = None) -> SpendSummary:
    """Spend of each paid rung against its budget in the current window, and what the
    plans saved in it (both from the day totals: O(days), never a ledger scan)."""
    now = now or timezone.now()
    config = load_config()
    spent, saved = window_spend_and_saved(*window_days(config, now))
    _, end = core.budget_window_bounds(config.budget_window, now)
    summary = summarise_spend(config, spend_by_rung(spent, end), now)
    return dataclasses.replace(summary, saved_usd=saved)


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
