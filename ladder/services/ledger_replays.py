"""Ledger replays, the shell ("what a different purchase would have saved",
docs/FORECASTS.md): a past period's recorded requests (the ledger) and each plan seat's
readings, measured into seats and replayed by the pure `ladder.simulator.ledger_replay`
as bought and with one change, run by a Celery worker with its progress kept in a
`LedgerReplayRun` row the What-if page polls.

One replay at a time: a second start while one is queued or running is refused
(`ReplayBusy`); a run silent for `STALE_AFTER` (its worker died) is given up. Constant
queries whatever the ledger holds: the period's entries, the plan seats, their readings."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.utils import timezone

from billing import services as billing_services
from billing.classify import Billing
from billing.tiers import Tier
from ladder.core import Rung
from ladder.core.forecast import ForecastReading
from ladder.models import Connection, LedgerReplayRun, QuotaReading, SpendEntry
from ladder.services.common import PAID_RUNGS, logger
from ladder.services.config import load_config
from ladder.services.spend_ledger import _text as csv_text
from ladder.simulator.ledger_replay import (
    Change,
    LedgerRequest,
    MeasuredSeat,
    ReplayResult,
    Seat,
    measure_seat,
    replay,
)

# The longest period a replay reads (the ledger's retention is longer; a replay is a
# question about a month or a quarter, not about all time).
MAX_PERIOD: Final = timedelta(days=92)
STALE_AFTER: Final = timedelta(minutes=10)
# Loading the ledger and measuring the seats: the steps before the two replays.
SETUP_STEPS: Final = 2
_CENT: Final = Decimal("0.01")
_BUDGET_MAX: Final = Decimal("1000000")


class ReplayError(ValueError):
    """The replay asked for cannot run (said in words: a 422, a form error)."""


class ReplayBusy(Exception):
    """Another replay is queued or running."""

    def __init__(self, run: LedgerReplayRun) -> None:
        super().__init__(f"Ledger replay {run.pk} is {run.state}.")
        self.run = run


@dataclass(frozen=True, slots=True)
class ReplayAsk:
    """What an operator asks: a period and one change (a seat more like one they have, a
    seat fewer, and/or a budget per rung; a rung not in `budgets` keeps the settings')."""

    period_start: datetime
    period_end: datetime
    add_seat_like: str | None = None
    remove_seat: str | None = None
    budgets: Mapping[str, object] | None = None  # an amount (or its text) per rung; None: no budget


def plan_seat_ids() -> list[str]:
    """The active plan connections (billing `subscription`), the seats a replay can add
    one more of or take away: one query, and the catalog's."""
    catalog = billing_services.load_catalog()
    rows = Connection.objects.filter(is_active=True).order_by("connection_id")
    return [
        connection_id
        for connection_id, provider, auth_type in rows.values_list(
            "connection_id", "provider", "auth_type"
        )
        if catalog.classify(provider, auth_type).billing == Billing.SUBSCRIPTION
    ]


def _budget(rung: str, value: object) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ReplayError(f"The {rung} budget must be an amount in USD.") from None
    if not amount.is_finite() or amount < 0 or amount > _BUDGET_MAX:
        raise ReplayError(f"The {rung} budget must be between 0 and {_BUDGET_MAX:,} USD.")
    return amount.quantize(_CENT)


def validate(ask: ReplayAsk, now: datetime) -> dict[str, Any]:
    """The change as stored, or ReplayError saying what is wrong (nothing is written)."""
    if ask.period_end <= ask.period_start:
        raise ReplayError("The period must end after it starts.")
    if ask.period_start >= now:
        raise ReplayError("The period must start in the past: a replay reads what was recorded.")
    if ask.period_end - ask.period_start > MAX_PERIOD:
        raise ReplayError(f"The period can span at most {MAX_PERIOD.days} days.")
    seats = set(plan_seat_ids())
    for field, seat in (("add_seat_like", ask.add_seat_like), ("remove_seat", ask.remove_seat)):
        if seat is not None and seat not in seats:
            raise ReplayError(
                f"{field}: {seat!r} is not an active plan connection "
                f"(those are: {', '.join(sorted(seats)) or 'none'})."
            )
    budgets: dict[str, str | None] = {}
    for rung, value in (ask.budgets or {}).items():
        if rung not in {r.label for r in PAID_RUNGS}:
            raise ReplayError(f"budgets: {rung!r} is not a paid rung (cheap or premium).")
        amount = _budget(rung, value)
        budgets[rung] = None if amount is None else format(amount, "f")
    if ask.add_seat_like is None and ask.remove_seat is None and not budgets:
        raise ReplayError(
            "Name a change to replay: one more seat like a plan connection, one seat fewer, "
            "or a budget per rung."
        )
    return {"add_seat_like": ask.add_seat_like, "remove_seat": ask.remove_seat, "budgets": budgets}


def _fail(run: LedgerReplayRun, error: str, now: datetime) -> None:
    run.state = LedgerReplayRun.State.FAILED
    run.active = None
    run.error = error[:500]
    run.finished_at = run.updated_at = now
    run.save(update_fields=["state", "active", "error", "finished_at", "updated_at"])


def start_replay(
    ask: ReplayAsk, actor: str, *, send: Callable[[int], None], now: datetime
) -> LedgerReplayRun:
    """Queue a replay and hand its id to `send` (which publishes the task). ReplayError
    for a bad ask, ReplayBusy while another is active; a run whose task could not be
    queued comes back failed, its error saying so."""
    change = validate(ask, now)
    with transaction.atomic():
        active = LedgerReplayRun.objects.select_for_update().filter(active=True).first()
        if active is not None and now - active.updated_at > STALE_AFTER:
            _fail(
                active, "The worker stopped reporting progress, so this replay was given up.", now
            )
        elif active is not None:
            raise ReplayBusy(active)
        try:
            with transaction.atomic():
                run = LedgerReplayRun.objects.create(
                    requested_by=actor,
                    created_at=now,
                    updated_at=now,
                    period_start=ask.period_start,
                    period_end=ask.period_end,
                    change=change,
                    stage="Waiting for a worker",
                )
        except IntegrityError:  # another start won the one active slot
            raise ReplayBusy(LedgerReplayRun.objects.get(active=True)) from None
    try:
        send(run.pk)
    except Exception as error:
        logger.warning("could not queue ledger replay %s: %s", run.pk, type(error).__name__)
        _fail(
            run,
            "The task queue could not be reached, so the replay was not started. Check "
            "that the broker and a worker are running, then try again.",
            timezone.now(),
        )
    return run


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Loaded:
    requests: list[LedgerRequest]
    served: dict[str, list[tuple[datetime, Decimal]]]
    recorded_paid: Decimal
    recorded_saved: Decimal
    skipped: int


def _load_ledger(start: datetime, end: datetime, cheap_max: Decimal) -> _Loaded:
    """The period's entries as the replay reads them (one query, and the price book):
    a paid entry as billed on its rung; a plan-served one at its list price on the rung
    its model's tier would take; keyless and free ones cost nothing either way (skipped)."""
    catalog = billing_services.load_catalog()
    prices = billing_services.load_price_book()
    rows = (
        SpendEntry.objects.filter(occurred_at__gte=start, occurred_at__lt=end)
        .order_by("occurred_at", "id")
        .values_list(
            "occurred_at",
            "connection_id",
            "provider",
            "model",
            "rung",
            "billed_usd",
            "list_price_usd",
        )
    )
    requests: list[LedgerRequest] = []
    served: dict[str, list[tuple[datetime, Decimal]]] = {}
    paid = saved = Decimal(0)
    skipped = 0
    for at, connection_id, provider, model, rung_label, billed, listed in rows.iterator():
        provider_id = catalog.provider_id(provider)
        rung = Rung.from_label(rung_label)
        if rung == Rung.SUBSCRIPTION:
            tier = prices.tier_of(provider_id, model, cheap_max)
            would = Rung.CHEAP if tier in (Tier.CHEAP, Tier.FREE) else Rung.PREMIUM
            requests.append(LedgerRequest(at, provider_id, listed, would, listed))
            served.setdefault(connection_id, []).append((at, listed))
            saved += listed
        elif rung in PAID_RUNGS:
            requests.append(LedgerRequest(at, provider_id, listed or billed, rung, billed))
            paid += billed
        else:
            skipped += 1
    return _Loaded(requests, served, paid, saved, skipped)


def _measure(
    seat_ids: list[str], start: datetime, end: datetime, served: Mapping[str, Any]
) -> list[MeasuredSeat]:
    """Each plan seat measured from its readings over the period (one query)."""
    rows = (
        QuotaReading.objects.filter(
            connection__connection_id__in=seat_ids, checked_at__gte=start, checked_at__lt=end
        )
        .order_by("checked_at", "id")
        .values_list("connection__connection_id", "checked_at", "remaining_percent", "reset_at")
    )
    readings: dict[str, list[ForecastReading]] = {seat: [] for seat in seat_ids}
    providers = dict(
        Connection.objects.filter(connection_id__in=seat_ids).values_list(
            "connection_id", "provider"
        )
    )
    for seat, checked, left, reset in rows.iterator():
        readings[seat].append(ForecastReading(checked, left, reset))
    catalog = billing_services.load_catalog()
    return [
        measure_seat(
            seat,
            catalog.provider_id(providers[seat]),
            readings[seat],
            served.get(seat, []),
            start=start,
        )
        for seat in seat_ids
    ]


def _money(value: Decimal) -> str:
    return format(value.quantize(_CENT), "f")


def _figures(result: ReplayResult) -> dict[str, Any]:
    return {
        "paid_usd": _money(result.paid_usd),
        "paid_cheap_usd": _money(result.paid_by_rung.get(Rung.CHEAP, Decimal(0))),
        "paid_premium_usd": _money(result.paid_by_rung.get(Rung.PREMIUM, Decimal(0))),
        "saved_usd": _money(result.saved_usd),
        "plan_requests": result.plan_requests,
        "paid_requests": result.paid_requests,
        "empty_subscription_requests": result.empty_subscription_requests,
        "unserved_requests": result.unserved_requests,
    }


def change_text(change: Mapping[str, Any]) -> str:
    """The change in words ("one more seat like claude-max-1, the cheap budget $20.00")."""
    parts = []
    if change.get("add_seat_like"):
        parts.append(f"one more seat like {change['add_seat_like']}")
    if change.get("remove_seat"):
        parts.append(f"without {change['remove_seat']}")
    for rung, budget in sorted((change.get("budgets") or {}).items()):
        parts.append(f"the {rung} budget {'unset' if budget is None else '$' + budget}")
    return ", ".join(parts) or "no change"


def _progress(
    run_id: int, clock: Callable[[], datetime], offset: int
) -> Callable[[int, int], None]:
    def step(done: int, total: int) -> None:
        LedgerReplayRun.objects.filter(pk=run_id).update(
            progress_done=offset + done,
            stage=("Replaying as bought" if offset == SETUP_STEPS else "Replaying with the change")
            + f": request {done:,} of {total:,}",
            updated_at=clock(),
        )

    return step


def _stage(run_id: int, done: int, total: int, stage: str, now: datetime) -> None:
    LedgerReplayRun.objects.filter(pk=run_id).update(
        progress_done=done, progress_total=total, stage=stage, updated_at=now
    )


def _change_of(stored: Mapping[str, Any], seats: list[MeasuredSeat]) -> Change:
    by_id = {measured.seat.seat_id: measured.seat for measured in seats}
    add: tuple[Seat, ...] = ()
    like = stored.get("add_seat_like")
    if like is not None and like in by_id:
        model = by_id[like]
        add = (
            Seat(f"{like} (added)", model.provider, model.capacity_usd, model.window, model.anchor),
        )
    removed = (stored["remove_seat"],) if stored.get("remove_seat") else ()
    budgets = {
        Rung.from_label(rung): None if value is None else Decimal(value)
        for rung, value in (stored.get("budgets") or {}).items()
    }
    return Change(add_seats=add, remove_seat_ids=removed, budgets=budgets)


def replay_result(run: LedgerReplayRun, clock: Callable[[], datetime]) -> dict[str, Any]:
    """Load, measure and replay twice (as bought, with the change), reporting progress:
    the result as stored (every amount a string to the cent)."""
    start, end = run.period_start, run.period_end
    config = load_config()
    _stage(run.pk, 0, SETUP_STEPS, "Reading the ledger", clock())
    loaded = _load_ledger(start, end, Decimal(str(config.cheap_max_input_usd_per_mtok)))
    total = SETUP_STEPS + 2 * len(loaded.requests)
    _stage(run.pk, 1, total, "Measuring the plan seats from their readings", clock())
    seats = _measure(plan_seat_ids(), start, end, loaded.served)
    budgets = {rung: config.budget_for(rung) for rung in PAID_RUNGS}
    as_bought = replay(
        loaded.requests,
        [m.seat for m in seats],
        budgets=budgets,
        on_progress=_progress(run.pk, clock, SETUP_STEPS),
    )
    changed = replay(
        loaded.requests,
        [m.seat for m in seats],
        _change_of(run.change, seats),
        budgets=budgets,
        on_progress=_progress(run.pk, clock, SETUP_STEPS + len(loaded.requests)),
    )
    return {
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "change": run.change,
        "change_text": change_text(run.change),
        "requests": len(loaded.requests),
        "skipped_requests": loaded.skipped,
        "recorded": {
            "paid_usd": _money(loaded.recorded_paid),
            "saved_usd": _money(loaded.recorded_saved),
        },
        "budgets": {
            rung.label: None if budget is None else _money(budget)
            for rung, budget in budgets.items()
        },
        "as_bought": _figures(as_bought),
        "changed": _figures(changed),
        "seats": [
            {
                "seat_id": m.seat.seat_id,
                "provider": m.seat.provider,
                "capacity_usd": _money(m.seat.capacity_usd),
                "window_hours": round(m.seat.window.total_seconds() / 3600, 2),
                "used_percent": round(m.used_percent, 1),
                "basis": m.basis,
            }
            for m in seats
        ],
    }


def run_replay(run_id: int, *, clock: Callable[[], datetime] = timezone.now) -> str:
    """Run a queued replay (the task calls this); idempotent: a run that is not queued
    any more is left alone. Returns the run's state."""
    now = clock()
    claimed = LedgerReplayRun.objects.filter(pk=run_id, state=LedgerReplayRun.State.QUEUED).update(
        state=LedgerReplayRun.State.RUNNING, started_at=now, updated_at=now, stage="Loading"
    )
    run = LedgerReplayRun.objects.filter(pk=run_id).first()
    if run is None or not claimed:
        return run.state if run is not None else "missing"
    try:
        result = replay_result(run, clock)
    except Exception as error:
        logger.exception("ledger replay %s failed", run_id)
        _fail(
            run,
            f"The replay stopped with an unexpected error ({type(error).__name__}); the "
            "worker's log has the details.",
            clock(),
        )
        return LedgerReplayRun.State.FAILED
    finished = clock()
    done = SETUP_STEPS + 2 * int(result["requests"])
    LedgerReplayRun.objects.filter(pk=run_id).update(
        state=LedgerReplayRun.State.SUCCEEDED,
        active=None,
        result=result,
        progress_done=done,
        progress_total=done,
        stage="Finished",
        finished_at=finished,
        updated_at=finished,
    )
    return LedgerReplayRun.State.SUCCEEDED


# --- reading runs back ----------------------------------------------------------------------


def latest_replay() -> LedgerReplayRun | None:
    """The newest replay, whatever its state."""
    return LedgerReplayRun.objects.order_by("-created_at", "-id").first()


FIGURES: Final = (
    ("paid_usd", "Paid (USD)"),
    ("paid_cheap_usd", "Paid on the cheap rung (USD)"),
    ("paid_premium_usd", "Paid on the premium rung (USD)"),
    ("saved_usd", "Saved by the plans (USD, list price)"),
    ("plan_requests", "Requests a plan served"),
    ("paid_requests", "Paid requests"),
    ("empty_subscription_requests", "Requests that met an empty auto/subscription"),
    ("unserved_requests", "Requests a budget left unserved"),
)


def _difference(a: str | int, b: str | int) -> str:
    if isinstance(a, int) and isinstance(b, int):
        return str(b - a)
    return _money(Decimal(str(b)) - Decimal(str(a)))


def figure_rows(result: Mapping[str, Any]) -> list[tuple[str, str, str | int, str | int, str]]:
    """The report's table: (key, label, as bought, with the change, difference)."""
    bought, changed = result["as_bought"], result["changed"]
    return [
        (key, label, bought[key], changed[key], _difference(bought[key], changed[key]))
        for key, label in FIGURES
    ]


def result_sentence(result: Mapping[str, Any]) -> str:
    """The answer in one sentence."""
    bought, changed = result["as_bought"], result["changed"]
    return (
        f"With {result['change_text']}, this period would have paid ${changed['paid_usd']} "
        f"instead of ${bought['paid_usd']}, the plans would have saved ${changed['saved_usd']} "
        f"instead of ${bought['saved_usd']}, and {changed['empty_subscription_requests']:,} "
        f"requests would have met an empty auto/subscription instead of "
        f"{bought['empty_subscription_requests']:,}."
    )


def result_csv(result: Mapping[str, Any]) -> str:
    """The report's table as CSV (CRLF, a header row)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(("figure", "as_bought", "with_change", "difference"))
    for key, _label, bought, changed, difference in figure_rows(result):
        writer.writerow((key, bought, changed, difference))
    writer.writerow(("change", csv_text(result["change_text"]), "", ""))
    return out.getvalue()


def replay_run(run_id: int) -> LedgerReplayRun | None:
    """One replay by id (None: no such run; an id past the column's range names none)."""
    if not 1 <= run_id < 2**63:
        return None
    return LedgerReplayRun.objects.filter(pk=run_id).first()
